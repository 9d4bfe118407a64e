// Scheduler: a worker thread that runs work only while this process owns the mutex (the
// worker's loop is in core/scheduler_impl.h).
#include "simba/scheduler.h"

#include "core/scheduler_impl.h"

namespace simba {
namespace internal {

namespace {

class SteadyTimer final : public ScheduleTimer {
 public:
  TimePoint now() override { return std::chrono::steady_clock::now(); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& wake, TimePoint at,
                  const std::function<bool()>& done) override {
    return wake.wait_until(lock, at, done);
  }
};

}  // namespace

std::shared_ptr<ScheduleTimer> steady_schedule_timer() {
  static const auto timer = std::make_shared<SteadyTimer>();
  return timer;
}

ScheduleTimer::TimePoint next_run(const ScheduleOptions& config, ScheduleTimer::TimePoint due,
                                  ScheduleTimer::TimePoint ended) {
  if (config.strategy == ScheduleOptions::Strategy::fixed_rate) return std::max(due + config.period, ended);
  return ended + config.period;
}

}  // namespace internal

Scheduler::Scheduler(std::string mutex, Client client, ScheduleOptions config, FencedWork work)
    : impl_(std::make_unique<internal::SchedulerImpl>(std::move(mutex), client, std::move(config), std::move(work))) {}
Scheduler::Scheduler(std::string mutex, Client client, ScheduleOptions config, Work work)
    : Scheduler(std::move(mutex), std::move(client), std::move(config),
                work ? FencedWork([work = std::move(work)](std::stop_token stop, std::uint64_t) { work(stop); })
                     : FencedWork()) {}
Scheduler::~Scheduler() = default;
void Scheduler::start() { impl_->start(); }
void Scheduler::stop() { impl_->stop(); }
bool Scheduler::running() const { return impl_->running(); }
bool Scheduler::is_leader() const { return impl_->is_leader(); }
std::uint64_t Scheduler::fencing_token() const { return impl_->fencing_token(); }
const std::string& Scheduler::contender_id() const { return impl_->contender_id(); }

}  // namespace simba
