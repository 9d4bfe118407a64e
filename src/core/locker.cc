// Locker: one blocking, non-reentrant hold at a time, over the lock manager.
#include "simba/locker.h"
#include "base/thread_annotations.h"

#include <mutex>

#include "locks/lock_entry.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {
namespace internal {

struct LockerState {
  explicit LockerState(Mutex handle) : handle(std::move(handle)) {}

  const Mutex handle;  // no caching, no max_hold
  mutable internal::AnnotatedMutex mutex;
  bool busy GUARDED_BY(mutex) = false;  // acquiring or holding
  Hold hold GUARDED_BY(mutex);
  std::stop_token lease GUARDED_BY(mutex);  // of the last hold
};

}  // namespace internal

Locker::Locker(std::string mutex, Client client, std::string contender_id) {
  validate_mutex_name(mutex);
  if (!contender_id.empty()) validate_contender_id(contender_id);
  // A Locker never caches (its close releases at once) and has no max_hold.
  auto options = client.lock_options();
  options.max_hold = std::chrono::milliseconds(0);
  options.linger = std::chrono::milliseconds(0);
  state_ = std::make_shared<internal::LockerState>(client.with_lock_options(options).mutex_as(mutex, contender_id));
}

Locker::~Locker() { close(); }

const std::string& Locker::mutex() const { return state_->handle.name(); }
const std::string& Locker::contender_id() const { return state_->handle.entry_->contender_id(); }

bool Locker::is_owner() const {
  internal::MutexLock lock(state_->mutex);
  return state_->hold.is_owner();
}

std::uint64_t Locker::fencing_token() const {
  internal::MutexLock lock(state_->mutex);
  return state_->hold.is_owner() ? state_->hold.fencing_token() : 0;
}

std::stop_token Locker::lease_token() const {
  internal::MutexLock lock(state_->mutex);
  return state_->lease;
}

void Locker::acquire() { acquire_until(std::chrono::steady_clock::time_point::max()); }

void Locker::acquire(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  if (acquire_until(std::chrono::steady_clock::now() + timeout)) return;
  throw Error(errc::timeout, state_->handle.entry_->timeout_message(timeout, /*name_contender=*/true));
}

bool Locker::try_lock() { return acquire_until(std::chrono::steady_clock::now()); }

bool Locker::acquire_until(std::chrono::steady_clock::time_point deadline) {
  auto& state = *state_;
  {
    internal::MutexLock lock(state.mutex);
    if (state.busy) {
      throw Error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                  "this Locker already holds or is acquiring mutex '" + mutex() + "' (contender '" + contender_id() +
                      "'); a Locker is not reentrant");
    }
    state.busy = true;
  }
  Hold hold;
  try {
    hold = state.handle.hold_until(deadline);
  } catch (...) {
    internal::MutexLock lock(state.mutex);
    state.busy = false;
    throw;
  }
  internal::UniqueMutexLock lock(state.mutex);
  if (!hold || !state.busy) {  // timed out, or closed meanwhile (from another thread)
    state.busy = false;
    lock.unlock();
    return false;  // a hold closed meanwhile ends here, outside the lock
  }
  state.lease = hold.lost();
  state.hold = std::move(hold);
  return true;
}

void Locker::close() noexcept {
  Hold hold;
  {
    internal::MutexLock lock(state_->mutex);
    state_->busy = false;
    hold = std::move(state_->hold);
  }
  hold.unlock();  // hands the lease to the next local request, or releases it; logs a failure
}

}  // namespace simba
