// Locker: one blocking hold of a mutex at a time, on a one-shot contention loop.
#include "simba/locker.h"

#include <algorithm>

#include <condition_variable>
#include <mutex>

#include "core/service_core.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {
namespace internal {

struct LockerState {
  std::mutex mutex;
  std::condition_variable changed;
  std::shared_ptr<ServiceCore> core;
  bool busy = false;  // acquiring or holding
  bool held = false;
  long rounds = 0;               // contention rounds finished since this acquire began
  std::uint64_t generation = 0;  // the core's generation of the current hold
  std::stop_source lease;

  bool lost_while_acquiring = false;  // the core won and lost before acquire() saw it

  // The core lost the mutex it won in `lost_generation`.
  void lost(std::uint64_t lost_generation) {
    std::stop_source to_stop;
    {
      std::lock_guard lock(mutex);
      if (busy && !held) {
        // Still acquiring: the one-shot core went dormant; acquire() starts it again.
        lost_while_acquiring = true;
        changed.notify_all();
        return;
      }
      if (!held || lost_generation != generation) return;
      to_stop = lease;
    }
    to_stop.request_stop();  // Outside the lock: stop callbacks may call unlock().
  }
};

}  // namespace internal

Locker::Locker(std::string mutex, Client client, std::string contender_id)
    : state_(std::make_shared<internal::LockerState>()) {
  // The Locker's own contender needs no callbacks: it learns of a loss through on_lost.
  auto contender = make_contender(std::move(mutex), {}, {}, std::move(contender_id));
  std::weak_ptr<internal::LockerState> weak = state_;
  internal::CoreHooks hooks;
  hooks.rejoin_after_loss = false;
  hooks.deliver_notifications = false;
  hooks.on_lost = [weak](std::uint64_t generation) {
    if (auto state = weak.lock()) state->lost(generation);
  };
  hooks.on_round = [weak] {
    if (auto state = weak.lock()) {
      {
        std::lock_guard lock(state->mutex);
        ++state->rounds;
      }
      state->changed.notify_all();
    }
  };
  state_->core = std::make_shared<internal::ServiceCore>(contender, contender, client.backend(), client.runtime(),
                                                         client.options(), hooks);
}

Locker::~Locker() {
  close();
  internal::release_core(state_->core);
}

const std::string& Locker::mutex() const { return state_->core->mutex(); }
const std::string& Locker::contender_id() const { return state_->core->contender_id(); }
bool Locker::is_owner() const { return state_->core->is_owner(); }

std::uint64_t Locker::fencing_token() const {
  std::lock_guard lock(state_->mutex);
  return state_->held ? state_->core->fencing_token() : 0;
}

std::stop_token Locker::lease_token() const {
  std::lock_guard lock(state_->mutex);
  return state_->lease.get_token();
}

void Locker::acquire() { acquire_until(std::chrono::steady_clock::time_point::max()); }

void Locker::acquire(std::chrono::milliseconds timeout) {
  if (acquire_until(std::chrono::steady_clock::now() + timeout)) return;
  auto owner = state_->core->last_owner_id();
  throw Error(errc::timeout, "timed out after " + format_duration(timeout) + " waiting for mutex '" + mutex() +
                                 "' as contender '" + contender_id() + "'" +
                                 (owner.empty() ? "" : " (owned by '" + owner + "')"));
}

bool Locker::try_lock() { return acquire_until(std::chrono::steady_clock::now()); }

bool Locker::acquire_until(std::chrono::steady_clock::time_point deadline) {
  auto& state = *state_;
  {
    std::lock_guard lock(state.mutex);
    if (state.busy) {
      throw Error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                  "this Locker already holds or is acquiring mutex '" + mutex() + "' (contender '" + contender_id() +
                      "'); a Locker is not reentrant");
    }
    state.busy = true;
    state.held = false;
    state.rounds = 0;
    state.lost_while_acquiring = false;
  }
  try {
    state.core->start(/*first_round_inline=*/true);
  } catch (...) {
    std::lock_guard lock(state.mutex);
    state.busy = false;
    throw;
  }
  std::unique_lock lock(state.mutex);
  const auto started = std::chrono::steady_clock::now();
  bool waited_for_handback = false;
  // At least one attempt always completes, even with a deadline in the past.
  while (!state.core->is_owner()) {
    if (state.lost_while_acquiring) {
      state.lost_while_acquiring = false;
      lock.unlock();
      try {
        state.core->close();
        state.core->start();
      } catch (...) {
        lock.lock();
        state.busy = false;
        throw;
      }
      lock.lock();
      continue;
    }
    if (state.rounds == 0) {
      state.changed.wait(lock);
    } else if (deadline == std::chrono::steady_clock::time_point::max()) {
      state.changed.wait(lock);
    } else if (std::chrono::steady_clock::now() >= deadline) {
      // An owner that caches gives its lease back on the demand our attempt left: a single
      // attempt waits for that hand-back, boundedly, as it would find a free mutex.
      if (waited_for_handback || !state.core->met_caching_owner()) break;
      waited_for_handback = true;
      deadline = std::max(deadline, started + state.core->handback_bound());
    } else {
      state.changed.wait_until(lock, deadline);
    }
  }
  if (state.core->is_owner()) {
    state.held = true;
    state.generation = state.core->generation();
    state.lease = std::stop_source();
    return true;
  }
  state.busy = false;
  lock.unlock();
  state.core->close();
  return false;
}

void Locker::close() noexcept {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->busy) return;
    state_->busy = false;
    state_->held = false;  // An orderly release is not a lost lease.
  }
  state_->core->close();
}

}  // namespace simba
