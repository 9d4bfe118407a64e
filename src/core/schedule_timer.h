// The Scheduler's clock: what time it is and how its worker waits, so tests can run the
// Scheduler on a simulated timer and check its run times exactly. Internal to simba.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "simba/scheduler.h"

namespace simba::internal {

class ScheduleTimer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~ScheduleTimer() = default;
  virtual TimePoint now() = 0;
  // Waits on `wake` (`lock` held) until `at` or until done() holds; returns done().
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& wake, TimePoint at,
                          const std::function<bool()>& done) = 0;
};

// The steady clock.
std::shared_ptr<ScheduleTimer> steady_schedule_timer();

// When the run after one that was due at `due` and ended at `ended` starts: fixed rate, one
// period after `due` (never before `ended`: runs do not overlap); fixed delay, one period after
// `ended`.
ScheduleTimer::TimePoint next_run(const ScheduleOptions& config, ScheduleTimer::TimePoint due,
                                  ScheduleTimer::TimePoint ended);

}  // namespace simba::internal
