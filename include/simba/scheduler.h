// simba/scheduler.h: a periodic task that runs only on the owner of a mutex.
//
//   simba::Scheduler scheduler("report", client, {.period = std::chrono::seconds(30)},
//                              [](std::stop_token stop) { send_report(stop); });
//   scheduler.start();
//
// When this process wins the mutex, work runs after `initial_delay` and then every `period`
// (fixed rate: start to start; fixed delay: end to start). When leadership is lost or the
// scheduler stops, the stop_token given to work() is requested; work should return soon.
// An exception from work() is logged and the schedule goes on. One worker thread per running
// scheduler, named after `worker`; stop() joins it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "simba/client.h"

namespace simba {

struct ScheduleOptions {
  enum class Strategy { fixed_rate, fixed_delay };
  Strategy strategy = Strategy::fixed_delay;   // Default: fixed delay.
  std::chrono::milliseconds initial_delay{0};  // After winning, before the first run. Default: 0.
  std::chrono::milliseconds period{1000};      // Must be > 0. Default: 1s.
  std::string worker = "simba-scheduler";      // Thread name (first 15 bytes) and log name.
};

namespace internal {
class SchedulerImpl;
}

class Scheduler {
 public:
  using Work = std::function<void(std::stop_token)>;
  // Work that fences its writes: it also gets the fencing token of the leadership it runs
  // under (pass it to the storage it writes, which refuses tokens older than one it has seen).
  using FencedWork = std::function<void(std::stop_token, std::uint64_t fencing_token)>;

  // Throws Error(errc::invalid_argument) for a blank mutex, a period <= 0, a negative
  // initial delay or an empty work function.
  Scheduler(std::string mutex, Client client, ScheduleOptions config, Work work);
  Scheduler(std::string mutex, Client client, ScheduleOptions config, FencedWork work);
  ~Scheduler();  // stop() if running; never throws.
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts contending. Error(errc::failed_precondition) if running.
  void start();
  // Stops work (requesting its stop_token, waiting for it to return), releases the mutex and
  // joins the worker thread. Error(errc::failed_precondition) if not running.
  void stop();
  bool running() const;
  // This process owns the mutex (time-aware).
  bool is_leader() const;
  // The fencing token of this process's leadership while is_leader(); else 0.
  std::uint64_t fencing_token() const;
  const std::string& contender_id() const;

 private:
  std::unique_ptr<internal::SchedulerImpl> impl_;
};

}  // namespace simba
