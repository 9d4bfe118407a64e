// The lease cache of a lock manager entry: a lease kept after the last local hold, taken
// again through the lock-free FastPath, and given back when another process asks for it (its
// demand, pushed or read at the poll interval), when it lingered unused, or on request; the
// owner record's idle mark says whether it is in use. Internal.
//
// A cached entry keeps its lease with no holder and no request, and opens the fast path.
// Whatever else wants the entry under `mutex_` first settles it (settle_cache_locked): closes
// the fast path, and turns a fast hold it finds into the entry's ordinary holder
// (adopt_fast_hold_locked), whose end then comes through the entry.
//
// Its states, under the entry's lock (with FastPath's own word for the fast side):
//   not cached --enter_cache_locked--> cached --settle_cache_locked--> not cached (a holder)
//                                      cached --leave_cache_locked---> not cached (released,
//                                               or taken by a request: the entry decides)
// A cached lease lasts as the remote lease does (lease_renewed_locked extends the fast path).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>

#include "base/thread_annotations.h"
#include "locks/fast_path.h"
#include "locks/idle_marker.h"
#include "locks/remote_contender.h"
#include "locks/request_queue.h"

namespace simba::internal {

// An entry is its LeaseCache (privately), which is its RemoteContender: one lock (mutex_)
// guards the contender, the cache and the entry.
class LeaseCache : protected RemoteContender {
 public:
  // Gives the lease back now if it is cached (Client::release_cached()); true if it was.
  bool release_cached() noexcept;

 protected:
  LeaseCache(std::string name, const std::shared_ptr<const CoreContext>& context);
  ~LeaseCache() = default;

  // The entry's side: the fast hold settle_cache_locked() found becomes its ordinary holder.
  virtual void adopt_fast_hold_locked(std::uint64_t token, std::uint64_t generation, std::stop_source lost,
                                      const Terms& terms) REQUIRES(mutex_) = 0;
  // This cache, held as the entry is (timers and posts hold it weakly).
  virtual std::weak_ptr<LeaseCache> weak_cache() = 0;

  // Whether the backend carries demands: only then may leases be cached.
  bool may_ever_cache() const noexcept { return demand_; }
  bool cached() const REQUIRES(mutex_) { return cached_; }
  // Another process asked for the mutex since this remote lease began.
  bool demanded() const REQUIRES(mutex_) { return demanded_; }
  FastPath& fast_path() noexcept { return fast_; }
  const FastPath& fast_path() const noexcept { return fast_; }

  // Whether a hold with `terms` that just ended may keep the lease. `requests_waiting`: local
  // requests still wait (they take it instead).
  bool may_cache_locked(const Terms& terms, bool requests_waiting) const REQUIRES(mutex_);
  void enter_cache_locked(const Terms& terms) REQUIRES(mutex_);
  // Ends the cached state. true if a fast hold was found (now the entry's holder); false if
  // the lease was cached unused (the caller takes it or gives it back) or not cached at all.
  bool settle_cache_locked() REQUIRES(mutex_);
  void leave_cache_locked() REQUIRES(mutex_);
  // Neither cached nor fast-held any more (the lease was lost, or a request takes it): true if
  // it was cached unused (the caller decides what becomes of the lease).
  bool uncache_locked() REQUIRES(mutex_) {
    if (!cached_ || settle_cache_locked()) return false;
    leave_cache_locked();
    return true;
  }

  // A fresh remote lease: no demand heard for it yet. `caching`: its hold may cache, so listen
  // for demands from now on (kept across leases while uncontended).
  void lease_won_locked(bool caching) REQUIRES(mutex_);
  // Another contender owned the mutex: leases are not cached while contended
  // (may_cache_locked), so stop listening for demands. End the watch returned outside the lock.
  std::unique_ptr<Subscription> rival_seen_locked() REQUIRES(mutex_);
  // A renewal: a cached lease lasts as long as the remote one.
  void lease_renewed_locked(Clock::time_point deadline) REQUIRES(mutex_) {
    if (cached_) fast_.extend(deadline);
  }
  // The core's on_demand hook: a renewal said another contender wants the mutex.
  void on_demand();

  const std::shared_ptr<Runtime> runtime_;
  const std::shared_ptr<Backend> backend_;

 private:
  std::chrono::milliseconds demand_poll() const;
  void demand_arrived();
  void demand_pushed();
  void watch_demand();
  void poll_demand(std::uint64_t epoch);
  bool read_demand();
  void sync_idle_mark() noexcept;
  void linger_passed(std::uint64_t epoch, std::uint64_t uses);
  Runtime::TimerId after_on_io(std::chrono::milliseconds delay, std::function<void(LeaseCache&)> work);
  void on_io(std::function<void(LeaseCache&)> work);

  const bool demand_;            // the backend has a demand signal: caching allowed
  IdleMarks* const idle_marks_;  // the backend's idle mark on the owner record, if it keeps one

  FastPath fast_;  // its own atomics, read unlocked by the fast path
  bool cached_ GUARDED_BY(mutex_) = false;
  bool demanded_ GUARDED_BY(mutex_) = false;
  std::uint64_t cache_epoch_ GUARDED_BY(mutex_) = 0;  // one per entry into the cached state
  bool demand_watched_ GUARDED_BY(mutex_) = false;    // watch_demand() was started (once per quiet spell)
  std::unique_ptr<Subscription> demand_watch_ GUARDED_BY(mutex_);
  Clock::time_point last_poll_ GUARDED_BY(mutex_){};  // when the demand was last read
  std::optional<Runtime::TimerId> linger_timer_ GUARDED_BY(mutex_);
  std::optional<Runtime::TimerId> poll_timer_ GUARDED_BY(mutex_);
  Terms cache_terms_ GUARDED_BY(mutex_){};  // of the hold whose end cached the lease
  std::uint64_t cache_generation_ GUARDED_BY(mutex_) = 0;
  bool idle_seen_ GUARDED_BY(mutex_) = false;         // the last poll found the cached lease unused
  std::uint64_t polled_uses_ GUARDED_BY(mutex_) = 0;  // fast uses at the last poll
  FailureNotice poll_failures_;                       // reading the demand
  IdleMarker idle_marker_;                            // the owner record's idle mark
};

}  // namespace simba::internal
