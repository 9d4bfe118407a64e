// The Scheduler's implementation, in a header so tests can run it on a simulated timer.
// Internal to simba.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "core/schedule_timer.h"
#include "core/service_core.h"
#include "simba/error.h"
#include "simba/scheduler.h"

namespace simba::internal {

class SchedulerImpl {
 public:
  // `timer`: the clock the worker waits on; null: the steady clock.
  SchedulerImpl(std::string mutex, const Client& client, ScheduleOptions config, Scheduler::FencedWork work,
                std::shared_ptr<ScheduleTimer> timer = nullptr)
      : config_(std::move(config)), work_(std::move(work)), timer_(timer ? std::move(timer) : steady_schedule_timer()) {
    if (!work_) throw Error(errc::invalid_argument, "Scheduler needs a work function");
    if (config_.period.count() <= 0) {
      throw Error(errc::invalid_argument, "Scheduler period must be > 0");
    }
    if (config_.initial_delay.count() < 0) {
      throw Error(errc::invalid_argument, "Scheduler initial_delay must be >= 0");
    }
    auto contender = make_contender(
        std::move(mutex), [this](const MutexState&) { on_acquired(); }, [this](const MutexState&) { on_released(); });
    // Its renewals go alone, not batched: a context of its own, without the Client's batcher.
    core_ = std::make_shared<ServiceCore>(contender, contender,
                                          std::make_shared<const CoreContext>(client.backend(), client.runtime(),
                                                                              client.options(), telemetry_of(client)));
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
    internal::MutexLock start_lock(lifecycle_);
    if (worker_.joinable()) {
      throw Error(errc::failed_precondition, "scheduler '" + config_.worker + "' is already running");
    }
    {
      internal::MutexLock lock(mutex_);
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
    internal::MutexLock start_lock(lifecycle_);
    if (!worker_.joinable()) {
      throw Error(errc::failed_precondition, "scheduler '" + config_.worker + "' is not running");
    }
    core_->stop();  // delivers on_released, which requests stop of running work
    halt_worker();
  }

  bool running() const {
    internal::MutexLock start_lock(lifecycle_);
    return worker_.joinable();
  }
  bool is_leader() const { return core_->is_owner(); }
  std::uint64_t fencing_token() const { return core_->fencing_token(); }
  const std::string& contender_id() const { return core_->contender_id(); }

 private:
  void halt_worker() REQUIRES(lifecycle_) {
    std::stop_source to_stop;
    {
      internal::MutexLock lock(mutex_);
      stopping_ = true;
      to_stop = term_stop_;
    }
    to_stop.request_stop();
    wake_.notify_all();
    worker_.join();
  }

  void on_acquired() {
    {
      internal::MutexLock lock(mutex_);
      leader_ = true;
      ++term_;
      term_stop_ = std::stop_source();
    }
    wake_.notify_all();
  }

  void on_released() {
    std::stop_source to_stop;
    {
      internal::MutexLock lock(mutex_);
      leader_ = false;
      to_stop = term_stop_;
    }
    to_stop.request_stop();
    wake_.notify_all();
  }

  void loop() {
    pthread_setname_np(pthread_self(), config_.worker.substr(0, 15).c_str());
    internal::UniqueMutexLock lock(mutex_);
    while (!stopping_) {
      wake_.wait(lock.native(), [&]() REQUIRES(mutex_) { return stopping_ || leader_; });
      if (stopping_) break;
      const auto term = term_;
      const auto token = term_stop_.get_token();
      auto next = timer_->now() + config_.initial_delay;
      const std::function<bool()> interrupted = [&]()
                                                    REQUIRES(mutex_) { return stopping_ || !leader_ || term_ != term; };
      while (!timer_->wait_until(lock.native(), wake_, next, interrupted)) {
        lock.unlock();
        if (const auto fencing = core_->fencing_token(); fencing != 0 && core_->is_owner()) run_once(token, fencing);
        lock.lock();
        next = next_run(config_, next, timer_->now());
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
  const std::shared_ptr<ScheduleTimer> timer_;
  std::shared_ptr<ServiceCore> core_;

  mutable internal::AnnotatedMutex lifecycle_ ACQUIRED_BEFORE(mutex_);  // start/stop against each other
  std::thread worker_ GUARDED_BY(lifecycle_);

  internal::AnnotatedMutex mutex_;
  std::condition_variable wake_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool leader_ GUARDED_BY(mutex_) = false;
  std::uint64_t term_ GUARDED_BY(mutex_) = 0;
  std::stop_source term_stop_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
