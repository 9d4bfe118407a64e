// One mutex of the lock manager in this process, as its handles (Mutex, Locker) see it: made
// in the LockTable, it takes requests in and out (a request comes, passes, waits, times out,
// is cancelled, or gives up after its single attempt) and keeps the per-thread holds of the
// Lockable interface and its fast path. Internal.
//
// It is built of parts with one job each, stacked privately (each is the next one's base):
//   RemoteContender (remote_contender.h) the one remote contender (a ServiceCore), started
//                 and stopped as the entry's state says (entry_state.h); it stays away for a
//                 YieldWindow (yield_window.h) after giving a busy lease back; a Locker on an
//                 idle entry takes a direct lease without it; its mutex_ is the entry's lock
//   LeaseCache    (lease_cache.h)    a lease kept after the last hold: its FastPath
//                 (fast_path.h), demand, linger, and IdleMarker (idle_marker.h)
//   LocalLine     (local_line.h)     who holds it here and who is next: the RequestQueue
//                 (request_queue.h) and its Handovers limit, the Offer (offer.h) to a sleeping
//                 Locker, grants, handovers and revocations
//   LockEntry     (this file)        requests in and out: deadlines, cancellation, the single
//                 attempt (single_attempt.h); ThreadHolds (thread_holds.h), per-thread
//                 reentrancy of the Lockable interface
//
// `mutex_` (RemoteContender's) guards the queue, the holder, the cache and the contender's
// state. Completions (futures, callbacks, Asio posts) run outside `mutex_`. Lock order: mutex_
// before the core's own lock; ThreadHolds' lock is never held with mutex_.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/thread_annotations.h"
#include "locks/fast_path.h"
#include "locks/local_line.h"
#include "locks/thread_holds.h"
#include "simba/mutex.h"

namespace simba::internal {

class LockTable;

class LockEntry final : public std::enable_shared_from_this<LockEntry>, private LocalLine {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kNoTimeout = std::chrono::milliseconds::max();

  // Throws Error(errc::invalid_argument) for a name the backend cannot hold.
  // `key`: its slot in `table`. `caches`: whether the handle that makes it caches leases (its
  // contender id says so). `given_id`: empty for a host id (LockTable::entry).
  static std::shared_ptr<LockEntry> create(std::shared_ptr<LockTable> table, std::string key, std::string name,
                                           bool caches, std::string given_id);
  ~LockEntry();

  using RemoteContender::name;
  const std::string& contender_id() const noexcept { return core().contender_id(); }
  // ServiceCore::no_derived_held_since_won: a hold of the lease of `token` may skip a shared
  // mutex writer's look at the readers.
  bool no_derived_held_since_won(std::uint64_t token) const { return core().no_derived_held_since_won(token); }
  // ServiceCore::parent_seen_since: a shared mutex's first reader may take the gate's state from it.
  std::optional<OwnerSnapshot::Parent> parent_seen_since(Clock::time_point since, std::uint64_t token) const {
    return core().parent_seen_since(since, token);
  }

  // Queues a request with its handle's terms. `inline_round`: the caller may block for the
  // first remote round (a thread that waits anyway). `waker`: a Locker's request,
  // whose thread is woken to claim() a handover (offer.h). Returns the ticket.
  std::uint64_t request(std::chrono::milliseconds timeout, Terms terms, Mutex::Callback done, bool inline_round,
                        Waker* waker = nullptr);
  // A Locker's request on an idle entry, on a thread that may block for a round trip: the
  // direct lease (remote_contender.h) taken by one call on this thread and held with `terms`
  // (no max_hold). An empty Hold if the entry is not idle or the call did not win it: then
  // request() as usual.
  Hold direct_hold(const Terms& terms);
  using LocalLine::Claim;
  using LocalLine::claim;
  bool cancel(std::uint64_t ticket, std::error_code reason);
  // A waiting thread's deadline passed: gives up its request unless no remote round has
  // finished since it queued (then it must wait a little longer: at least one attempt).
  enum class GiveUp { gave_up, granted, wait_for_round };
  GiveUp give_up(std::uint64_t ticket);
  // The message of a timed-out wait.
  std::string timeout_message(std::chrono::milliseconds timeout, bool name_contender = false) const;

  using LocalLine::end_hold;
  using LocalLine::hold_is_owner;

  // Holds taken through Mutex's Lockable interface, per thread.
  ThreadHolds& threads() noexcept { return threads_; }

  // Where Mutex::lock_async's callbacks run: one at a time per mutex.
  Strand callback_strand();
  // Runs `work` on one of the runtime's I/O threads soon: where a backend call may be made (a
  // timer's thread may not make one).
  void post_io(std::function<void()> work);

  // The fast path of Mutex's Lockable interface over a cached lease (fast_path.h); a hold the
  // slow path took over meanwhile is ended here (its lock() then says none).
  FastPath::Lock fast_lock(bool may_acquire) noexcept {
    const auto result = fast_path().lock(may_acquire);
    if (result != FastPath::Lock::settled) return result;
    end_fast_hold();
    return FastPath::Lock::none;
  }
  // true if this thread held the mutex fast (and now one count less).
  bool fast_unlock() noexcept {
    switch (fast_path().unlock()) {
      case FastPath::Unlock::not_held: return false;
      case FastPath::Unlock::settled: end_fast_hold(); return true;
      default: return true;
    }
  }
  const FastPath& fast() const noexcept { return fast_path(); }
  using LeaseCache::release_cached;

 private:
  friend class RemoteContender;  // its core's hooks call on_round, on_lost and on_demand

  LockEntry(std::shared_ptr<LockTable> table, std::string key, std::string name);

  void expire(std::uint64_t ticket);
  // Takes a request out that leaves without a hold (cancelled, timed out, given up), with its
  // deadline's timer; nullopt if it left already. `vacant`: it was woken for a lease on offer,
  // which now waits for the next request (call reoffer() once mutex_ is released).
  std::optional<Request> leave_locked(std::uint64_t ticket, bool& vacant) REQUIRES(mutex_);
  // The parts' questions: how they are held (weakly, by timers and posts), and a delayed drive.
  void drive_after(std::chrono::milliseconds delay) override;
  void direct_timer_after(std::chrono::milliseconds delay) override;
  std::weak_ptr<LeaseCache> weak_cache() override;
  std::weak_ptr<LocalLine> weak_line() override;
  void on_io(std::function<void(LockEntry&)> work);

  const std::shared_ptr<LockTable> table_;
  const std::string key_;  // in table_
  bool in_table_ = false;  // set once by create(): only a made entry leaves the table
  std::optional<Strand> strand_ GUARDED_BY(mutex_);
  ThreadHolds threads_;
};

}  // namespace simba::internal
