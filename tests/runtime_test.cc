// The runtime's parts: its timer queue (against a reference model) and timers whose target
// is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "runtime/runtime_internal.h"
#include "runtime/timer_queue.h"
#include "simba/runtime.h"

namespace simba::internal {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// A task that records `value` into `out` when run.
TimerQueue::Task recording(std::vector<int>& out, int value) {
  return std::function<void()>([&out, value] { out.push_back(value); });
}

void run(TimerQueue::Task task) { runnable(std::move(task))(); }

TEST(TimerQueueTest, TimersComeOutEarliestFirstAndTiesInTheOrderAdded) {
  TimerQueue queue;
  std::vector<int> out;
  const auto t0 = SteadyClock::now();
  queue.add(t0 + 3ms, recording(out, 3));
  queue.add(t0 + 1ms, recording(out, 1));
  queue.add(t0 + 2ms, recording(out, 20));
  queue.add(t0 + 2ms, recording(out, 21));
  queue.add(t0 + 2ms, recording(out, 22));
  EXPECT_EQ(queue.next_deadline(), t0 + 1ms);
  while (!queue.empty()) run(queue.pop());
  EXPECT_EQ(out, (std::vector<int>{1, 20, 21, 22, 3}));
}

TEST(TimerQueueTest, ACancelTakesOutThatTimerOnceAndASpentIdNeverCancelsItsSlotsNextTimer) {
  TimerQueue queue;
  std::vector<int> out;
  const auto t0 = SteadyClock::now();
  const auto a = queue.add(t0 + 1ms, recording(out, 1));
  const auto b = queue.add(t0 + 2ms, recording(out, 2));
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  TimerQueue::Task dropped;
  EXPECT_TRUE(queue.cancel(a, &dropped));
  run(std::move(dropped));  // the task came back to the caller
  EXPECT_EQ(out, std::vector<int>{1});
  EXPECT_FALSE(queue.cancel(a, &dropped)) << "cancelled twice";
  // The freed slot takes the next timer; the old id must not reach it.
  const auto c = queue.add(t0 + 3ms, recording(out, 3));
  EXPECT_NE(c, a);
  EXPECT_FALSE(queue.cancel(a, &dropped));
  EXPECT_EQ(queue.size(), 2u);
  run(queue.pop());
  EXPECT_FALSE(queue.cancel(b, &dropped)) << "b fired already";
  EXPECT_FALSE(queue.cancel(0, &dropped));
  EXPECT_FALSE(queue.cancel(~TimerQueue::Id{0}, &dropped));
  EXPECT_TRUE(queue.cancel(c, &dropped));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(out, (std::vector<int>{1, 2}));
}

// Random adds, cancels and pops against a std::map keyed by (deadline, order added).
TEST(TimerQueueTest, ManyRandomAddsCancelsAndPopsMatchAnOrderedMap) {
  std::mt19937_64 rng(42);
  TimerQueue queue;
  std::map<std::pair<int, int>, int> model;                            // (deadline ms, order) -> value
  std::map<int, std::pair<TimerQueue::Id, std::pair<int, int>>> live;  // value -> id, key
  std::vector<TimerQueue::Id> spent;
  std::vector<int> out;
  const auto t0 = SteadyClock::now();
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto dice = rng() % 10;
    if (dice < 5 || model.empty()) {
      const int deadline = static_cast<int>(rng() % 50);
      const int value = next++;
      const auto id = queue.add(t0 + std::chrono::milliseconds(deadline), recording(out, value));
      model[{deadline, value}] = value;
      live[value] = {id, {deadline, value}};
    } else if (dice < 8) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      TimerQueue::Task dropped;
      ASSERT_TRUE(queue.cancel(it->second.first, &dropped));
      spent.push_back(it->second.first);
      model.erase(it->second.second);
      live.erase(it);
      // An id spent (cancelled or fired) cancels nothing, though its slot has a new timer.
      ASSERT_FALSE(queue.cancel(spent[rng() % spent.size()], &dropped));
    } else {
      const auto expected = model.begin();
      ASSERT_EQ(queue.next_deadline(), t0 + std::chrono::milliseconds(expected->first.first));
      out.clear();
      run(queue.pop());
      ASSERT_EQ(out, std::vector<int>{expected->second}) << "at step " << step;
      spent.push_back(live.at(expected->second).first);
      live.erase(expected->second);
      model.erase(expected);
    }
    ASSERT_EQ(queue.size(), model.size());
  }
  // What is left comes out in the model's order; clear() takes out every timer.
  auto rest = queue.clear();
  EXPECT_EQ(rest.size(), model.size());
  EXPECT_TRUE(queue.empty());
}

TEST(TimerQueueTest, AWeakCallRunsWhileItsTargetLivesAndNotAfter) {
  struct Target {
    std::uint64_t fired = 0;
  };
  auto target = std::make_shared<Target>();
  const auto fire = [](void* self, std::uint64_t arg) { static_cast<Target*>(self)->fired = arg; };
  run(TimerQueue::WeakCall{target, fire, 7});
  EXPECT_EQ(target->fired, 7u);
  auto call = runnable(TimerQueue::WeakCall{target, fire, 9});
  std::weak_ptr<Target> gone = target;
  target.reset();
  EXPECT_TRUE(gone.expired()) << "a pending weak call keeps its target alive";
  call();  // nothing to call: must not touch the freed target
}

TEST(RuntimeTimersTest, AWeakTimerFiresOnTheIoPoolAndACancelledOneNever) {
  Runtime runtime;
  struct Target {
    std::promise<std::uint64_t> fired;
  };
  const auto fire = [](void* self, std::uint64_t arg) { static_cast<Target*>(self)->fired.set_value(arg); };
  // A cancel can only win before the deadline. A busy machine can keep this thread from running
  // past any fixed deadline, so an attempt whose cancel came late, by this thread's own clock,
  // proves nothing and is tried again further out with a target of its own; one that came in
  // time must succeed.
  auto target = std::make_shared<Target>();
  auto lead = 20ms;
  SteadyClock::time_point deadline;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 8) << "no cancel came before its deadline, even " << lead.count() / 2 << " ms out";
    deadline = SteadyClock::now() + lead;
    const auto cancelled = RuntimeAccess::schedule_weak_at(runtime, deadline, target, fire, 1);
    const bool withdrawn = runtime.cancel(cancelled);
    const bool in_time = SteadyClock::now() < deadline;
    if (withdrawn) {
      EXPECT_FALSE(runtime.cancel(cancelled)) << "a cancelled timer cancels only once";
      break;
    }
    ASSERT_FALSE(in_time) << "a cancel before the deadline did not withdraw the timer";
    target = std::make_shared<Target>();  // the late one fires into the old target
    lead *= 2;
  }
  // Timers come out earliest first, so when this one fires the cancelled one's deadline has passed.
  auto fired = target->fired.get_future();
  RuntimeAccess::schedule_weak_at(runtime, deadline + 5ms, target, fire, 2);
  ASSERT_EQ(fired.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fired.get(), 2u) << "the cancelled timer fired";
}

}  // namespace
}  // namespace simba::internal
