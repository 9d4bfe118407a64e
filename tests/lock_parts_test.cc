// The lock manager's parts, each on its own: no runtime, no backend (src/locks/*.h).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "locks/derived_records.h"
#include "locks/entry_state.h"
#include "locks/fast_path.h"
#include "locks/idle_marker.h"
#include "locks/offer.h"
#include "locks/request_queue.h"
#include "locks/single_attempt.h"
#include "locks/thread_holds.h"
#include "locks/yield_window.h"

namespace simba::internal {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// ---- FastPath

// lock() from another thread, whose outcome comes back here.
FastPath::Lock lock_elsewhere(FastPath& path) {
  FastPath::Lock result{};
  std::thread([&] { result = path.lock(true); }).join();
  return result;
}

TEST(FastPathTest, AClosedPathTakesNothing) {
  FastPath path;
  EXPECT_EQ(path.lock(true), FastPath::Lock::none);
  EXPECT_EQ(path.unlock(), FastPath::Unlock::not_held);
  EXPECT_FALSE(path.thread_token().has_value());
}

TEST(FastPathTest, AnOpenPathIsTakenByOneThreadAtATimeAndCountsReentry) {
  FastPath path;
  path.open(7, SteadyClock::now() + 10s);
  ASSERT_EQ(path.lock(true), FastPath::Lock::acquired);
  EXPECT_EQ(path.state(), FastPath::State::held);
  EXPECT_EQ(path.thread_token(), 7u);
  EXPECT_EQ(lock_elsewhere(path), FastPath::Lock::none) << "a second thread took a held fast path";
  EXPECT_EQ(path.lock(true), FastPath::Lock::counted);
  EXPECT_EQ(path.lock(false), FastPath::Lock::counted);
  EXPECT_EQ(path.unlock(), FastPath::Unlock::counted_down);
  EXPECT_EQ(path.unlock(), FastPath::Unlock::counted_down);
  EXPECT_EQ(path.unlock(), FastPath::Unlock::released);
  EXPECT_EQ(path.state(), FastPath::State::open);
  EXPECT_FALSE(path.thread_token().has_value());
  EXPECT_EQ(lock_elsewhere(path), FastPath::Lock::acquired) << "a released fast path stayed taken";
  EXPECT_EQ(path.uses(), 2u);
}

TEST(FastPathTest, MayAcquireFalseOnlyCounts) {
  FastPath path;
  path.open(1, SteadyClock::now() + 10s);
  EXPECT_EQ(path.lock(false), FastPath::Lock::none);
  EXPECT_EQ(path.state(), FastPath::State::open);
}

TEST(FastPathTest, SettlingAnOpenPathClosesIt) {
  FastPath path;
  path.open(1, SteadyClock::now() + 10s);
  EXPECT_FALSE(path.settle());
  EXPECT_EQ(path.state(), FastPath::State::closed);
  EXPECT_EQ(path.lock(true), FastPath::Lock::none);
  EXPECT_FALSE(path.settle()) << "a closed path has no hold to settle";
}

TEST(FastPathTest, SettlingAHeldPathHandsTheHoldToTheSlowPath) {
  FastPath path;
  path.open(3, SteadyClock::now() + 10s);
  ASSERT_EQ(path.lock(true), FastPath::Lock::acquired);
  EXPECT_TRUE(path.settle());
  EXPECT_EQ(path.state(), FastPath::State::closing);
  EXPECT_EQ(lock_elsewhere(path), FastPath::Lock::none);
  EXPECT_EQ(path.unlock(), FastPath::Unlock::settled) << "the end of a settled hold must reach the slow path";
  path.closed();
  EXPECT_EQ(path.state(), FastPath::State::closed);
}

TEST(FastPathTest, ALeaseNearItsEndIsLeftToTheOrdinaryPath) {
  FastPath path;
  path.open(1, SteadyClock::now() + 5ms);  // inside the margin kept for the coarse clock
  EXPECT_EQ(path.lock(true), FastPath::Lock::none);
  EXPECT_EQ(path.state(), FastPath::State::open) << "a missed deadline must leave the path open";
  path.extend(SteadyClock::now() + 10s);  // a renewal
  EXPECT_EQ(path.lock(true), FastPath::Lock::acquired);
}

TEST(FastPathTest, ALostLeaseRevokesTheFastHold) {
  FastPath path;
  path.open(9, SteadyClock::now() + 10s);
  ASSERT_EQ(path.lock(true), FastPath::Lock::acquired);
  auto lease = path.thread_lease();
  ASSERT_TRUE(lease.has_value());
  path.lost_source().request_stop();
  EXPECT_TRUE(lease->stop_requested());
  EXPECT_EQ(path.lock(true), FastPath::Lock::lost);
  EXPECT_EQ(path.thread_token(), 0u) << "a revoked fast hold still showed its token";
  EXPECT_EQ(path.unlock(), FastPath::Unlock::released);
  path.open(10, SteadyClock::now() + 10s);
  EXPECT_FALSE(path.lost_source().stop_requested()) << "a new cached lease inherited the lost one's stop";
}

// ---- ThreadHolds

TEST(ThreadHoldsTest, EachThreadCountsItsOwnEntries) {
  ThreadHolds holds;
  const auto me = std::this_thread::get_id();
  EXPECT_EQ(holds.reenter(me), ThreadHolds::Reentry::not_held);
  holds.adopt(me, Hold());
  EXPECT_EQ(holds.reenter(me), ThreadHolds::Reentry::counted);
  std::thread([&] { EXPECT_EQ(holds.reenter(std::this_thread::get_id()), ThreadHolds::Reentry::not_held); }).join();
  auto first = holds.leave(me);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(holds.reenter(me), ThreadHolds::Reentry::counted) << "one leave of two let the hold go";
  ASSERT_TRUE(holds.leave(me).has_value());
  auto last = holds.leave(me);
  ASSERT_TRUE(last.has_value()) << "the last leave must give the hold back";
  EXPECT_FALSE(holds.leave(me).has_value()) << "a thread that left still counted";
  EXPECT_EQ(holds.reenter(me), ThreadHolds::Reentry::not_held);
  EXPECT_EQ(holds.token(me), 0u);
}

// ---- RequestQueue and Handovers

Request request(std::uint64_t ticket) {
  Request r;
  r.ticket = ticket;
  return r;
}

TEST(RequestQueueTest, ServesInOrderAndTakesARequestFromAnywhere) {
  RequestQueue queue;
  for (std::uint64_t t = 1; t <= 4; ++t) queue.push(request(t));
  EXPECT_TRUE(queue.is_front(1));
  EXPECT_FALSE(queue.is_front(2));
  auto taken = queue.take(3);  // cancelled, timed out or given up from the middle
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->ticket, 3u);
  EXPECT_FALSE(queue.take(3).has_value()) << "a request left twice";
  EXPECT_EQ(queue.find(3), nullptr);
  ASSERT_NE(queue.find(4), nullptr);
  std::vector<std::uint64_t> order;
  while (!queue.empty()) order.push_back(queue.pop_front().ticket);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{1, 2, 4}));
  EXPECT_FALSE(queue.is_front(1));
}

TEST(RequestQueueTest, KeepsItsOrderAcrossWrapsAndGrowthAndKeepsNothingOfALeftRequest) {
  RequestQueue queue;
  auto held = std::make_shared<int>(0);  // what a request's completion holds
  auto holding = [&](std::uint64_t ticket) {
    Request r = request(ticket);
    r.done = [held](std::error_code, Hold) {};
    return r;
  };
  for (std::uint64_t t = 1; t <= 3; ++t) queue.push(holding(t));
  EXPECT_EQ(queue.pop_front().ticket, 1u);
  queue.push(holding(4));
  queue.push(holding(5));  // past the end of its first room: wraps around
  queue.push(holding(6));  // full: grows
  queue.push_front(holding(0));
  EXPECT_EQ(queue.size(), 6u);
  EXPECT_EQ(queue.take(4)->ticket, 4u);
  EXPECT_EQ(queue.find(4), nullptr);
  ASSERT_NE(queue.find(6), nullptr);
  EXPECT_EQ(held.use_count(), 1 + 5) << "a request taken out left nothing of itself in the queue";
  std::vector<std::uint64_t> order;
  while (!queue.empty()) order.push_back(queue.pop_front().ticket);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(held.use_count(), 1) << "the drained queue holds no completion";
  for (std::uint64_t t = 10; t < 200; ++t) queue.push(request(t));  // room for many, let go once drained
  for (std::uint64_t t = 10; t < 200; ++t) ASSERT_EQ(queue.pop_front().ticket, t);
  queue.push(request(7));
  EXPECT_TRUE(queue.is_front(7));
}

TEST(HandoversTest, StopAtTheEndingHoldsLimitOrAtADemand) {
  Handovers handovers;
  const Terms two{0ms, 0ms, 2};
  EXPECT_TRUE(handovers.may_hand_over(two, false));
  handovers.handed_over();
  EXPECT_TRUE(handovers.may_hand_over(two, false));
  EXPECT_FALSE(handovers.may_hand_over(two, true)) << "a pending demand must end local handovers";
  handovers.handed_over();
  EXPECT_FALSE(handovers.may_hand_over(two, false)) << "a third handover went past a limit of two";
  EXPECT_FALSE(handovers.may_hand_over(Terms{0ms, 0ms, 0}, false));
  handovers.reset();  // a fresh remote lease
  EXPECT_TRUE(handovers.may_hand_over(two, false));
}

// ---- Offer: a handover to a sleeping Locker thread, and who may pass it

struct CountingWaker final : Waker {
  void wake() noexcept override { ++wakes; }
  int wakes = 0;
};

Request locker_request(std::uint64_t ticket) {
  Request r = request(ticket);
  static CountingWaker waker;
  r.waker = &waker;
  return r;
}

TEST(OfferTest, AMutexHandlesRequestIsGrantedAndNeverPassed) {
  Offer offer;
  RequestQueue queue;
  queue.push(request(1));
  queue.push(locker_request(2));
  const auto now = SteadyClock::now();
  EXPECT_EQ(offer.hand_over(queue.front(), Terms{}, now), Offer::Next::grant);
  EXPECT_FALSE(offer.on_offer());
  EXPECT_FALSE(offer.may_pass(locker_request(3), queue)) << "nothing is on offer";
  queue.pop_front();
  // A Locker's request is at the front and woken, but a Mutex handle's waits behind it:
  // nobody may pass.
  queue.push(request(4));
  EXPECT_EQ(offer.hand_over(queue.front(), Terms{}, now), Offer::Next::wake);
  EXPECT_FALSE(offer.may_pass(locker_request(5), queue)) << "a Locker passed a Mutex handle's request";
  queue.take(4);
  EXPECT_TRUE(offer.may_pass(locker_request(5), queue));
  EXPECT_FALSE(offer.may_pass(request(6), queue)) << "only a Locker's request passes";
}

TEST(OfferTest, ALockerWaiterIsWokenOnceAndPassedOnlyUntilItsBound) {
  Offer offer;
  RequestQueue queue;
  queue.push(locker_request(1));
  const Terms ending{0ms, 0ms, 8};
  const auto t0 = SteadyClock::now();
  EXPECT_EQ(offer.hand_over(queue.front(), ending, t0), Offer::Next::wake);
  EXPECT_TRUE(offer.on_offer());
  EXPECT_EQ(offer.terms().max_local_handovers, 8u);
  EXPECT_TRUE(offer.may_pass(locker_request(2), queue));
  offer.granted(2);  // request 2 passed: it holds now
  EXPECT_FALSE(offer.on_offer());
  // Its hold ends before request 1 claimed: 1 is not woken twice.
  EXPECT_EQ(offer.hand_over(queue.front(), ending, t0 + 100us), Offer::Next::woken);
  offer.granted(3);  // another one passed
  offer.claimed(1);  // 1 came, found it held, and sleeps again
  EXPECT_EQ(offer.hand_over(queue.front(), ending, t0 + 200us), Offer::Next::wake) << "1 sleeps: wake it";
  offer.claimed(1);
  // From kMaxPassOver after its first wake-up, a hold's end grants it.
  EXPECT_EQ(offer.hand_over(queue.front(), ending, t0 + Offer::kMaxPassOver), Offer::Next::grant);
  offer.granted(1);
  EXPECT_FALSE(offer.on_offer());
}

TEST(OfferTest, AWokenRequestThatLeavesLeavesTheLeaseVacantForTheNext) {
  Offer offer;
  RequestQueue queue;
  queue.push(locker_request(1));
  queue.push(locker_request(2));
  const auto now = SteadyClock::now();
  EXPECT_EQ(offer.hand_over(queue.front(), Terms{}, now), Offer::Next::wake);
  EXPECT_FALSE(offer.left(2)) << "a request that was not woken left: 1 still comes";
  EXPECT_FALSE(offer.vacant());
  queue.take(1);
  EXPECT_TRUE(offer.left(1)) << "the woken request left: the lease must go to the next";
  EXPECT_EQ(offer.hand_over(queue.front(), Terms{}, now), Offer::Next::wake);
  EXPECT_FALSE(offer.vacant());
  offer.closed();  // given back instead
  EXPECT_FALSE(offer.on_offer());
  EXPECT_FALSE(offer.left(2));
}

TEST(RequestQueueTest, KnowsWhetherEveryWaitingRequestMayBePassed) {
  RequestQueue queue;
  EXPECT_TRUE(queue.all_may_be_passed());
  queue.push(locker_request(1));
  EXPECT_TRUE(queue.all_may_be_passed());
  queue.push(request(2));
  EXPECT_FALSE(queue.all_may_be_passed());
  queue.push_front(locker_request(3));
  EXPECT_TRUE(queue.is_front(3));
  EXPECT_EQ(queue.pop_front().ticket, 3u);
  EXPECT_FALSE(queue.all_may_be_passed());
  queue.take(2);
  EXPECT_TRUE(queue.all_may_be_passed());
  queue.pop_front();
  queue.push(request(4));
  queue.pop_front();
  EXPECT_TRUE(queue.all_may_be_passed()) << "a Mutex handle's request left by pop_front is still counted";
}

// ---- The single-attempt rule

AttemptFacts attempt_under_way() {
  AttemptFacts facts;
  facts.attempting = true;
  facts.attempt_bound = 1500ms;
  facts.handback_bound = 450ms;
  return facts;
}

TEST(SingleAttemptTest, AWaitBehindALocalHolderOrNotContendingEndsAtOnce) {
  EXPECT_EQ(single_attempt(AttemptFacts{}), AttemptVerdict::ends);
  auto facts = attempt_under_way();
  facts.attempting = false;
  facts.won_ungranted = true;  // whatever else it says
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::ends);
}

TEST(SingleAttemptTest, ItWaitsForOneRoundWithinTheBoundThenEndsSayingSo) {
  auto facts = attempt_under_way();
  facts.since_queued = 1499ms;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::wait_for_round) << "a single attempt ended before any round";
  facts.since_queued = 1500ms;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::ends_without_round);
  facts.round_since_queued = true;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::ends) << "a round came and met a plain owner";
}

TEST(SingleAttemptTest, ALeaseWonButNotYetGrantedIsWaitedFor) {
  auto facts = attempt_under_way();
  facts.round_since_queued = true;
  facts.since_queued = 10s;
  facts.won_ungranted = true;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::wait_for_round);
}

TEST(SingleAttemptTest, ACachingOwnersHandBackIsWaitedForFromTheRoundThatMetIt) {
  auto facts = attempt_under_way();
  facts.round_since_queued = true;
  facts.met_caching_owner = true;
  facts.since_queued = 5s;  // queued long ago: the bound counts from the meeting
  facts.since_met_owner = 449ms;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::wait_for_round);
  facts.since_met_owner = 450ms;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::ends) << "no hand-back within its bound";
  facts.since_met_owner = 0ms;
  facts.met_caching_owner = false;
  EXPECT_EQ(single_attempt(facts), AttemptVerdict::ends) << "a plain owner never hands back";
}

TEST(SingleAttemptTest, ATimeoutNamesWhatItKnows) {
  TimeoutFacts facts;
  facts.mutex = "orders";
  EXPECT_EQ(timeout_message(facts), "timed out waiting for mutex 'orders'");
  facts.timeout = 200ms;
  facts.contender = "c1";
  facts.owner = "other@host";
  facts.self = "c1";
  facts.last_error = "connection refused";
  EXPECT_EQ(timeout_message(facts),
            "timed out after 200ms waiting for mutex 'orders' as contender 'c1' (owned by 'other@host'); last "
            "backend error: connection refused");
  facts.owner = "c1";  // its own id: a lease it held before, not a rival
  EXPECT_EQ(timeout_message(facts).find("owned by"), std::string::npos);
  facts.held_here = true;
  EXPECT_NE(timeout_message(facts).find("(held in this process)"), std::string::npos);
}

// ---- YieldWindow

TEST(YieldWindowTest, AWindowIsSizedByTheEngine) {
  YieldWindow window;
  window.won(1ms);
  EXPECT_EQ(window.length(true, 500ms), SteadyClock::duration(4ms)) << "four round trips on a push engine";
  window.won(100ms);
  EXPECT_EQ(window.length(true, 500ms), SteadyClock::duration(50ms)) << "at most 50 ms";
  window.won(0ms);
  EXPECT_EQ(window.length(true, 500ms), SteadyClock::duration(2ms)) << "at least 2 ms";
  EXPECT_EQ(window.length(false, 500ms), SteadyClock::duration(510ms)) << "a poll and a little without push";
}

TEST(YieldWindowTest, ContendedItYieldsEveryTimeElseAtASpacingFromFourWindows) {
  YieldWindow window;
  const auto t0 = SteadyClock::now();
  window.yield(t0, false, 100ms);  // 110 ms windows
  EXPECT_EQ(window.not_before(), t0 + 110ms);
  window.yield(t0 + 200ms, false, 100ms);
  EXPECT_EQ(window.not_before(), t0 + 110ms) << "uncontended, a second window within four windows' time";
  window.yield(t0 + 110ms + 440ms, false, 100ms);
  EXPECT_EQ(window.not_before(), t0 + 110ms) << "nobody used the first window: the spacing doubled";
  window.yield(t0 + 110ms + 880ms, false, 100ms);
  EXPECT_EQ(window.not_before(), t0 + 1100ms);
  window.rival_seen(t0 + 1150ms);
  EXPECT_TRUE(window.contended(t0 + 1200ms));
  window.yield(t0 + 1160ms, false, 100ms);
  EXPECT_EQ(window.not_before(), t0 + 1270ms) << "contended, every give-back leaves a window";
  EXPECT_FALSE(window.contended(t0 + 1150ms + 1s));
}

TEST(YieldWindowTest, UncontendedWindowsSpreadOutUpToASecondAndARivalStartsThemOver) {
  YieldWindow window;
  window.won(0ms);  // 2 ms windows (push)
  const auto t0 = SteadyClock::now();
  auto t = t0;
  std::vector<SteadyClock::duration> gaps;  // from the end of one window to the start of the next
  auto last_end = t0 - 1h;
  while (t < t0 + 6s) {
    window.yield(t, true, 100ms);
    if (window.not_before() > t && window.not_before() != last_end) {
      if (last_end > t0) gaps.push_back(t - last_end);
      last_end = window.not_before();
    }
    t += 1ms;  // a give-back every millisecond of busy use
  }
  ASSERT_GE(gaps.size(), 6u);
  EXPECT_EQ(gaps[0], SteadyClock::duration(16ms)) << "the second window comes after twice four windows";
  for (std::size_t i = 1; i < gaps.size(); ++i) {
    EXPECT_GE(gaps[i], gaps[i - 1]) << "window " << i;
    EXPECT_LE(gaps[i], YieldWindow::kMaxSpacing + 1ms) << "a silent waiter elsewhere waited longer than the bound";
  }
  EXPECT_GE(gaps.back(), YieldWindow::kMaxSpacing) << "the spacing never reached its bound";
  // Another process seen: a window at every give-back while contended, then from the shortest
  // spacing again.
  window.rival_seen(t);
  window.yield(t + 1ms, true, 100ms);
  EXPECT_EQ(window.not_before(), t + 3ms);
  const auto quiet = t + 1s + 10ms;  // no longer contended
  window.yield(quiet, true, 100ms);
  EXPECT_EQ(window.not_before(), quiet + 2ms);
  window.yield(quiet + 2ms + 15ms, true, 100ms);
  EXPECT_EQ(window.not_before(), quiet + 2ms) << "within the spacing";
  window.yield(quiet + 2ms + 16ms, true, 100ms);
  EXPECT_EQ(window.not_before(), quiet + 20ms) << "the spacing started over (twice four windows), not at a second";
}

TEST(YieldWindowTest, AwayUntilTheWindowEndsReadingTheClockOnlyWhileOneWasLeft) {
  YieldWindow window;
  int reads = 0;
  auto at = [&](SteadyClock::time_point now) {
    return [&reads, now] {
      ++reads;
      return now;
    };
  };
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE(window.away(at(t0)));
  EXPECT_EQ(reads, 0) << "no window was ever left: no clock read";
  window.yield(t0, false, 100ms);
  EXPECT_TRUE(window.away(at(t0 + 109ms)));
  EXPECT_FALSE(window.away(at(t0 + 110ms)));
  EXPECT_EQ(reads, 2);
  EXPECT_FALSE(window.away(at(t0)));
  EXPECT_EQ(reads, 2) << "a window that is over is not looked at again";
  window.yield(t0 + 200ms, false, 100ms);
  EXPECT_FALSE(window.away(at(t0 + 200ms))) << "a second window within four windows' time was left";
}

// ---- EntryState: the table in simba/mutex.h

TEST(EntryStateTest, TheTableOfStatesAndWhatTheContenderDoes) {
  struct Row {
    EntryFacts facts;
    EntryState state;
    ContenderMove move;
  };
  const Row rows[] = {
      {{}, EntryState::idle, ContenderMove::none},
      {{.requests = true}, EntryState::queued, ContenderMove::start},
      {{.contending = true, .requests = true}, EntryState::waiting, ContenderMove::none},
      {{.contending = true, .holder = true}, EntryState::held, ContenderMove::none},
      {{.contending = true, .holder = true, .requests = true}, EntryState::held, ContenderMove::none},
      {{.contending = true, .cached = true}, EntryState::cached, ContenderMove::none},
      {{.contending = true}, EntryState::cancelled, ContenderMove::stop},
      {{.contending = true, .release_wanted = true}, EntryState::releasing, ContenderMove::stop},
      {{.contending = true, .release_wanted = true, .requests = true}, EntryState::releasing, ContenderMove::stop},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(entry_state(row.facts), row.state) << to_string(row.state);
    EXPECT_EQ(contender_move(entry_state(row.facts)), row.move) << to_string(row.state);
  }
}

// ---- IdleMarker

TEST(IdleMarkerTest, WritesOnlyChangesAndForgetsALeaseThatWent) {
  IdleMarker marker("mutex 'm'");
  std::optional<std::uint64_t> want = 5;
  std::vector<bool> writes;
  auto wanted = [&] { return want; };
  auto write = [&](bool idle) {
    writes.push_back(idle);
    return true;
  };
  marker.sync(wanted, write);
  marker.sync(wanted, write);
  EXPECT_EQ(writes, (std::vector<bool>{true})) << "an unchanged mark was written again";
  EXPECT_TRUE(marker.may_be_marked());
  want = 0;
  marker.sync(wanted, write);
  EXPECT_EQ(writes, (std::vector<bool>{true, false}));
  EXPECT_FALSE(marker.may_be_marked());
  want = 6;
  marker.sync(wanted, write);
  want = std::nullopt;  // the lease went, and its mark with it: nothing to write
  marker.sync(wanted, write);
  EXPECT_EQ(writes, (std::vector<bool>{true, false, true}));
  EXPECT_FALSE(marker.may_be_marked());
}

TEST(IdleMarkerTest, AFailedWriteIsTriedAgainAtTheNextSync) {
  IdleMarker marker("mutex 'm'");
  int calls = 0;
  auto wanted = [] { return std::optional<std::uint64_t>(1); };
  marker.sync(wanted, [&](bool) -> bool {
    ++calls;
    throw std::runtime_error("connection refused");
  });
  EXPECT_FALSE(marker.may_be_marked());
  marker.sync(wanted, [&](bool) {
    ++calls;
    return true;
  });
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(marker.may_be_marked());
}

TEST(IdleMarkerTest, ASyncDuringAPassLeavesItToThatPassWhichEndsWhereTheEntryIs) {
  IdleMarker marker("mutex 'm'");
  std::uint64_t want = 4;
  std::vector<bool> writes;
  auto wanted = [&] { return std::optional<std::uint64_t>(want); };
  std::function<bool(bool)> write = [&](bool idle) {
    writes.push_back(idle);
    if (writes.size() == 1) {
      want = 0;                    // the entry left the cached state meanwhile...
      marker.sync(wanted, write);  // ...and asked, while this pass writes
      EXPECT_EQ(writes.size(), 1u) << "two passes wrote at once";
    }
    return true;
  };
  marker.sync(wanted, write);
  EXPECT_EQ(writes, (std::vector<bool>{true, false})) << "the last pass must leave the mark where the entry is";
  EXPECT_FALSE(marker.may_be_marked());
}

}  // namespace
}  // namespace simba::internal

TEST(DerivedRecordsTest, NamesAreReadBackAndOthersAreNone) {
  using simba::internal::derived_record;
  using Kind = simba::internal::DerivedRecord::Kind;
  const auto slot = derived_record("pay", "pay#2of3");
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->kind, Kind::slot);
  EXPECT_EQ(slot->slot, 2u);
  EXPECT_EQ(slot->permits, 3u);
  EXPECT_EQ(derived_record("cfg", simba::internal::reader_prefix("cfg") + "0a1b2c3d")->kind, Kind::reader);
  EXPECT_EQ(derived_record("pay", simba::internal::line_name("pay"))->kind, Kind::line);
  for (const char* other : {"pay", "pay#", "pay#3of3", "pay#0of", "pay#of3", "pay#-1of3", "pay#1of3x", "payx#0of1",
                            "pa#0of1", "pay#rabc", "pay#r0a1b2c3g", "pay#write", "pay#waits"}) {
    EXPECT_FALSE(derived_record("pay", other)) << other;
  }
}
