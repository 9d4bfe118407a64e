// The Scheduler's run times on a simulated timer: exact, whatever the machine's load.
#include <gtest/gtest.h>

#include "core/scheduler_impl.h"
#include "kit.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using TimePoint = internal::ScheduleTimer::TimePoint;

// Time moves only when the test steps it (to the deadline the worker waits for) or the work
// advances it (to stand for how long it runs).
class SteppedTimer final : public internal::ScheduleTimer {
 public:
  TimePoint now() override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  void advance(std::chrono::milliseconds by) {
    std::lock_guard lock(mutex_);
    now_ += by;
  }
  bool waiting() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }
  // Waits (up to 5 s of real time) until the worker waits for a deadline, then moves the time
  // to it. False if the worker never waited.
  bool step() {
    std::unique_lock lock(mutex_);
    if (!waiting_changed_.wait_for(lock, 5s, [&] { return waiting_; })) return false;
    now_ = std::max(now_, deadline_);
    waiting_ = false;
    return true;
  }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& wake, TimePoint at,
                  const std::function<bool()>& done) override {
    for (;;) {
      if (done()) return true;
      {
        std::lock_guard own(mutex_);
        if (now_ >= at) {
          waiting_ = false;
          return false;
        }
        deadline_ = at;
        waiting_ = true;
      }
      waiting_changed_.notify_all();
      wake.wait_for(lock, 1ms);  // real time: look again at the simulated one
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable waiting_changed_;
  TimePoint now_{std::chrono::hours(1)};
  TimePoint deadline_{};
  bool waiting_ = false;
};

// Start times (from the moment the worker first looked at the timer, i.e. leadership) of the
// first `runs` runs of work that takes `work_time` of simulated time.
std::vector<std::chrono::milliseconds> simulated_starts(ScheduleOptions config, std::chrono::milliseconds work_time,
                                                        int runs) {
  auto timer = std::make_shared<SteppedTimer>();
  const TimePoint origin = timer->now();
  Client client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>());
  std::mutex mutex;
  std::vector<std::chrono::milliseconds> starts;
  internal::SchedulerImpl scheduler(
      tck::unique_mutex("timer"), client, config,
      [&](std::stop_token, std::uint64_t) {
        {
          std::lock_guard lock(mutex);
          starts.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(timer->now() - origin));
        }
        timer->advance(work_time);
      },
      timer);
  scheduler.start();
  const auto started = [&](int i) {
    std::lock_guard lock(mutex);
    return static_cast<int>(starts.size()) > i;
  };
  for (int i = 0; i < runs; ++i) {
    // A run that is due already starts at once; else the worker waits for it: step to it.
    EXPECT_TRUE(tck::wait_until([&] { return started(i) || timer->waiting(); }, 5s)) << "run " << i;
    if (!started(i)) {
      EXPECT_TRUE(timer->step()) << "the worker never waited for run " << i;
    }
    EXPECT_TRUE(tck::wait_until([&] { return started(i); }, 5s)) << "run " << i << " never started";
  }
  scheduler.stop();
  std::lock_guard lock(mutex);
  starts.resize(std::min<std::size_t>(starts.size(), runs));  // back-to-back runs go on until stop()
  return starts;
}

using Ms = std::vector<std::chrono::milliseconds>;

TEST(SchedulerTimerTest, FixedRateStartsEveryPeriodFromTheInitialDelay) {
  ScheduleOptions config{.strategy = ScheduleOptions::Strategy::fixed_rate, .initial_delay = 50ms, .period = 100ms};
  EXPECT_EQ(simulated_starts(config, 30ms, 4), (Ms{50ms, 150ms, 250ms, 350ms}));
}

TEST(SchedulerTimerTest, FixedRateWorkLongerThanThePeriodStartsTheNextAsItEnds) {
  ScheduleOptions config{.strategy = ScheduleOptions::Strategy::fixed_rate, .initial_delay = 0ms, .period = 100ms};
  EXPECT_EQ(simulated_starts(config, 150ms, 3), (Ms{0ms, 150ms, 300ms}));
}

TEST(SchedulerTimerTest, FixedDelayStartsAPeriodAfterTheLastRunEnded) {
  ScheduleOptions config{.strategy = ScheduleOptions::Strategy::fixed_delay, .initial_delay = 50ms, .period = 100ms};
  EXPECT_EQ(simulated_starts(config, 30ms, 4), (Ms{50ms, 180ms, 310ms, 440ms}));
}

}  // namespace
}  // namespace simba
