// Locker: one blocking, non-reentrant hold at a time, over the lock manager.
#include "simba/locker.h"
#include "base/thread_annotations.h"

#include <condition_variable>
#include <mutex>
#include <optional>

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
  // lease_token() after a hold: of the last hold if it was asked for or lost, else none (that
  // hold's stop state went to the next hold of the entry: Hold::end's recycle_lost).
  std::stop_token lease GUARDED_BY(mutex);
  bool lease_asked GUARDED_BY(mutex) = false;  // lease_token() was asked for during the hold
  // An acquire in progress (on one thread), and how close() interrupts it.
  bool acquiring GUARDED_BY(mutex) = false;
  std::stop_source interrupt GUARDED_BY(mutex);
  std::condition_variable acquired_or_not;  // acquiring went false
};

}  // namespace internal

Locker::Locker(std::string mutex, Client client, std::string contender_id) {
  validate_mutex_name(mutex);
  if (!contender_id.empty()) validate_contender_id(contender_id);
  // A Locker never caches (its close releases at once) and has no max_hold.
  auto options = client.lock_options();
  options.max_hold = std::chrono::milliseconds(0);
  options.linger = std::chrono::milliseconds(0);
  Mutex handle = client.with_lock_options(options).mutex_as(mutex, contender_id);
  handle.for_locker_ = true;  // Lockers may pass each other's sleeping waiters for a while (locks/offer.h)
  state_ = std::make_shared<internal::LockerState>(std::move(handle));
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
  if (!state_->hold) return state_->lease;
  state_->lease_asked = true;
  return state_->hold.lost();
}

namespace {
[[noreturn]] void throw_interrupted(const std::string& mutex) {
  throw Error(std::make_error_code(std::errc::operation_canceled),
              "acquiring mutex '" + mutex + "' was interrupted (close() or its stop token)");
}
}  // namespace

void Locker::acquire() { acquire(std::stop_token()); }

void Locker::acquire(std::stop_token interrupt) {
  if (!acquire_until(std::chrono::steady_clock::time_point::max(), interrupt)) throw_interrupted(mutex());
}

void Locker::acquire(std::chrono::milliseconds timeout) { acquire(timeout, std::stop_token()); }

void Locker::acquire(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (acquire_until(deadline, interrupt)) return;
  if (interrupt.stop_requested() || std::chrono::steady_clock::now() < deadline) throw_interrupted(mutex());
  throw Error(errc::timeout, state_->handle.entry_->timeout_message(timeout, /*name_contender=*/true));
}

bool Locker::try_lock() { return acquire_until(std::chrono::steady_clock::now()); }

bool Locker::acquire_until(std::chrono::steady_clock::time_point deadline, const std::stop_token& stop) {
  auto& state = *state_;
  std::stop_token interrupt;
  std::stop_source relayed{std::nostopstate};  // this acquire's interrupt, for `stop`'s callback
  bool closed_first = false;
  {
    internal::MutexLock lock(state.mutex);
    if (state.busy) {
      throw Error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                  "this Locker already holds or is acquiring mutex '" + mutex() + "' (contender '" + contender_id() +
                      "'); a Locker is not reentrant");
    }
    // Checked under the lock that close() takes: a close() after this sees the acquire.
    if (stop.stop_requested()) return false;
    state.busy = true;
    state.acquiring = true;
    // A fresh interrupt only after one was used: making a stop state allocates.
    if (state.interrupt.stop_requested()) state.interrupt = std::stop_source();
  }
  auto relay = [&relayed]() noexcept { relayed.request_stop(); };
  std::optional<std::stop_callback<decltype(relay)>> relaying;
  // Whatever ends the acquire, a close() waiting for it learns so (after the hold is settled).
  auto done = [&state]() {
    {
      internal::MutexLock lock(state.mutex);
      state.acquiring = false;
    }
    state.acquired_or_not.notify_all();
  };
  Hold hold;
  try {
    // A free mutex first: one bounded call on this thread, which nothing interrupts (a close()
    // meanwhile waits for it, then finds busy cleared: the hold goes back, below).
    hold = state.handle.direct_hold();
    if (!hold) {
      {
        internal::MutexLock lock(state.mutex);
        closed_first = !state.busy;  // a close() meanwhile interrupted this acquire already
        interrupt = state.interrupt.get_token();
        if (stop.stop_possible()) relayed = state.interrupt;
      }
      if (stop.stop_possible()) relaying.emplace(stop, relay);
      if (!closed_first) hold = state.handle.hold_until(deadline, interrupt);
    }
  } catch (...) {
    {
      internal::MutexLock lock(state.mutex);
      state.busy = false;
    }
    done();
    throw;
  }
  internal::UniqueMutexLock lock(state.mutex);
  // Timed out, interrupted, or closed meanwhile (from another thread); a hold won as `stop`
  // came goes back too.
  if (!hold || !state.busy || stop.stop_requested()) {
    state.busy = false;
    lock.unlock();
    hold.unlock();  // a hold closed meanwhile ends here, outside the lock, before close() returns
    done();
    return false;
  }
  state.lease_asked = false;
  state.hold = std::move(hold);
  state.acquiring = false;
  lock.unlock();
  state.acquired_or_not.notify_all();
  return true;
}

void Locker::close() noexcept {
  Hold hold;
  bool recycle = false;  // nobody but the hold saw its stop state
  {
    internal::UniqueMutexLock lock(state_->mutex);
    state_->busy = false;
    hold = std::move(state_->hold);
    if (hold) {
      recycle = !state_->lease_asked && !hold.lost_.stop_requested();
      state_->lease = recycle ? std::stop_token() : hold.lost_;
    }
    if (state_->acquiring) {
      // Another thread waits in acquire: interrupt it, and wait until what it won (if anything)
      // went back and its contender stopped.
      state_->interrupt.request_stop();
      state_->acquired_or_not.wait(lock.native(), [this]() REQUIRES(state_->mutex) { return !state_->acquiring; });
    }
  }
  // Hands the lease to the next local request, or releases it; logs a failure.
  if (hold) hold.end(recycle);
}

}  // namespace simba
