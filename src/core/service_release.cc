// Giving a lease back: stop() and the release of a stopping contender, and the end of a core.
#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "core/service_core.h"
#include "runtime/runtime_internal.h"
#include "simba/error.h"

namespace simba::internal {
namespace {

// The longest stop() waits for a round in flight: a backend call is bounded by its engine's
// command and connect timeouts (a few seconds).
constexpr auto kRoundInFlightBound = std::chrono::seconds(10);

}  // namespace

void ServiceCore::stop(std::optional<Clock::time_point> released_at) {
  ServiceStatus expected = ServiceStatus::running;
  if (!status_.compare_exchange_strong(expected, ServiceStatus::stopping)) {
    throw Error(errc::failed_precondition,
                "stop() of the service for mutex '" + mutex() + "' needs status RUNNING, it is " + to_string(expected));
  }
  std::shared_ptr<Subscription> subscription;
  std::uint64_t generation;
  bool gave_back = false;  // telemetry: a service's lease ends here
  std::uint64_t token = 0;
  Clock::duration held{};
  {
    internal::UniqueMutexLock lock(mutex_);
    generation = ++generation_;
    if (owned_) {
      gave_back = true;
      token = token_;
      if (context_->telemetry && !one_shot_) held = Clock::now() - owned_since_;  // a lock entry times its holds
    }
    disarm_timer_locked();
    cancel_deadline_locked();
    subscription = std::move(subscription_);
    watch_unconfirmed_ = false;
    owned_ = dormant_ = again_ = false;
    standing_by_locked(false);
    // A round in flight may still win or renew the lease after our release: a renewal that
    // finds its lease gone joins again. Let it end first (its end gives back what it got, see
    // finish_round), so that nothing of ours is left once stop() returns. A runtime thread does
    // not wait: it may be the one that has to run that round, which then releases by itself.
    const auto settled = [&]() REQUIRES(mutex_) { return !in_flight_ && stale_releases_ == 0; };
    if (!settled() && !on_runtime_thread()) {
      await_settled_locked(lock, Clock::now() + kRoundInFlightBound, settled);
      released_at.reset();  // that took a while: the release reads the clock itself
    }
  }
  subscription.reset();
  context_->liveness.leave(*this);
  if (contender_) release_lease("stop()", released_at);
  if (gave_back && context_->telemetry && !one_shot_) {
    context_->telemetry->ended(*slot_, held);
    context_->telemetry->released(*slot_, mutex(), contender_id(), token, held);
  }
  // Deliver on_released (if we owned) before returning: a release is applied even though
  // this generation is no longer running. (A lock entry's core delivers nothing: no lock.)
  if (!one_shot_) {
    {
      internal::MutexLock lock(mutex_);
      post_apply_locked(generation, MutexOwner::none());
    }
    flush();
  }
  status_.store(ServiceStatus::initial, std::memory_order_release);  // (not an xchg: see first_round_locked)
}

void ServiceCore::close(std::optional<Clock::time_point> released_at) noexcept {
  try {
    if (status_.load(std::memory_order_acquire) == ServiceStatus::running) stop(released_at);
  } catch (const std::exception& e) {
    log_warn("closing the service for mutex '" + mutex() + "': " + e.what());
  }
}

void ServiceCore::release_lease(const char* why, std::optional<Clock::time_point> first_sent) noexcept {
  // A release is idempotent (only the owner's own lease goes), so one that failed on a broken
  // connection (reset, timed out) is sent again on a new one, kReleaseAttempts times in all.
  for (int attempt = 1;; ++attempt) {
    const auto sent = attempt == 1 && first_sent ? *first_sent : Clock::now();
    try {
      context_->backend->release(mutex(), contender_->contender_id());
      if (context_->telemetry) context_->telemetry->round_trip(BackendOp::release, Clock::now() - sent);
      return;
    } catch (const std::system_error& e) {
      if (context_->telemetry) context_->telemetry->backend_error(BackendOp::release, mutex(), e.what());
      if (attempt < kReleaseAttempts && e.code() == make_error_code(errc::unavailable)) continue;
      log_warn("mutex '" + mutex() + "': could not release the lease of " + contender_id() + " on " + why + " (" +
               e.what() + "); it expires by itself after ttl + transition");
      return;
    } catch (const std::exception& e) {
      if (context_->telemetry) context_->telemetry->backend_error(BackendOp::release, mutex(), e.what());
      log_warn("mutex '" + mutex() + "': releasing the lease of " + contender_id() + ": " + e.what());
      return;
    }
  }
}

void release_core(std::shared_ptr<ServiceCore>& core) noexcept {
  if (!core) return;
  core->close();
  if (!on_runtime_thread()) {
    try {
      if (core->delivers_notifications()) core->flush();  // queued notifications drop their references
    } catch (const std::exception& e) {
      // flush() waits on a promise: only a broken one (out of memory, a runtime gone) throws.
      // Said, then the wait below still bounds how long this takes.
      log_error("mutex '" + core->mutex() + "': waiting for its notifications to drain: " + e.what());
    } catch (...) {
      log_error("mutex '" + core->mutex() + "': waiting for its notifications to drain: a non-standard exception");
    }
    // A reference left is mostly a runtime thread that just ran the core's last task and has not
    // dropped it yet (microseconds; flush() returns from within that task), else a round in a
    // batch waiting for its answer: look again soon, then less and less often. (Sleeping a
    // millisecond at once cost most cores one: destroying 20,000 services took 14 s.)
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto pause = std::chrono::microseconds(10);
    while (core.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  core.reset();
}

}  // namespace simba::internal
