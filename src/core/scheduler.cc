// Scheduler: a worker thread that runs work only while this process owns the mutex.
#include "simba/scheduler.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "core/service_core.h"
#include "simba/error.h"

namespace simba {
namespace internal {

class SchedulerImpl {
 public:
  SchedulerImpl(std::string mutex, const Client& client, ScheduleOptions config, Scheduler::FencedWork work)
      : config_(std::move(config)), work_(std::move(work)) {
    if (!work_) throw Error(errc::invalid_argument, "Scheduler needs a work function");
    if (config_.period.count() <= 0) {
      throw Error(errc::invalid_argument, "Scheduler period must be > 0");
    }
    if (config_.initial_delay.count() < 0) {
      throw Error(errc::invalid_argument, "Scheduler initial_delay must be >= 0");
    }
    auto contender = make_contender(
        std::move(mutex), [this](const MutexState&) { on_acquired(); },
        [this](const MutexState&) { on_released(); });
    core_ = std::make_shared<ServiceCore>(contender, contender, client.backend(), client.runtime(),
                                          client.options());
  }

  ~SchedulerImpl() {
    try {
      if (running()) stop();
    } catch (const std::exception& e) {
      log_warn("stopping scheduler '" + config_.worker + "': " + e.what());
    }
    release_core(core_);
  }

  void start() {
    std::lock_guard start_lock(lifecycle_);
    if (worker_.joinable()) {
      throw Error(errc::failed_precondition, "scheduler '" + config_.worker + "' is already running");
    }
    {
      std::lock_guard lock(mutex_);
      stopping_ = false;
      leader_ = false;
    }
    worker_ = std::thread([this] { loop(); });
    try {
      core_->start();
    } catch (...) {
      halt_worker();
      throw;
    }
  }

  void stop() {
    std::lock_guard start_lock(lifecycle_);
    if (!worker_.joinable()) {
      throw Error(errc::failed_precondition, "scheduler '" + config_.worker + "' is not running");
    }
    core_->stop();  // delivers on_released, which requests stop of running work
    halt_worker();
  }

  bool running() const {
    std::lock_guard start_lock(lifecycle_);
    return worker_.joinable();
  }
  bool is_leader() const { return core_->is_owner(); }
  std::uint64_t fencing_token() const { return core_->fencing_token(); }
  const std::string& contender_id() const { return core_->contender_id(); }

 private:
  void halt_worker() {
    std::stop_source to_stop;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      to_stop = term_stop_;
    }
    to_stop.request_stop();
    wake_.notify_all();
    worker_.join();
  }

  void on_acquired() {
    {
      std::lock_guard lock(mutex_);
      leader_ = true;
      ++term_;
      term_stop_ = std::stop_source();
    }
    wake_.notify_all();
  }

  void on_released() {
    std::stop_source to_stop;
    {
      std::lock_guard lock(mutex_);
      leader_ = false;
      to_stop = term_stop_;
    }
    to_stop.request_stop();
    wake_.notify_all();
  }

  void loop() {
    pthread_setname_np(pthread_self(), config_.worker.substr(0, 15).c_str());
    using Clock = std::chrono::steady_clock;
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait(lock, [&] { return stopping_ || leader_; });
      if (stopping_) break;
      const auto term = term_;
      const auto token = term_stop_.get_token();
      auto next = Clock::now() + config_.initial_delay;
      auto interrupted = [&] { return stopping_ || !leader_ || term_ != term; };
      while (!wake_.wait_until(lock, next, interrupted)) {
        lock.unlock();
        if (const auto fencing = core_->fencing_token(); fencing != 0 && core_->is_owner()) run_once(token, fencing);
        lock.lock();
        auto now = Clock::now();
        next = config_.strategy == ScheduleOptions::Strategy::fixed_rate ? std::max(next + config_.period, now)
                                                                        : now + config_.period;
      }
    }
  }

  void run_once(const std::stop_token& token, std::uint64_t fencing) {
    try {
      work_(token, fencing);
    } catch (const std::exception& e) {
      log_error("scheduler '" + config_.worker + "': work() threw: " + e.what() + "; the schedule goes on");
    } catch (...) {
      log_error("scheduler '" + config_.worker + "': work() threw a non-standard exception");
    }
  }

  const ScheduleOptions config_;
  const Scheduler::FencedWork work_;
  std::shared_ptr<ServiceCore> core_;

  mutable std::mutex lifecycle_;  // start/stop against each other
  std::thread worker_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool leader_ = false;
  std::uint64_t term_ = 0;
  std::stop_source term_stop_;
};

}  // namespace internal

Scheduler::Scheduler(std::string mutex, Client client, ScheduleOptions config, FencedWork work)
    : impl_(std::make_unique<internal::SchedulerImpl>(std::move(mutex), client, std::move(config),
                                                      std::move(work))) {}
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
