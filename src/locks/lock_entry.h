// One mutex of the lock manager in this process, made of parts with one job each:
//   RequestQueue  (request_queue.h)  the local FIFO of requests; Handovers, their limit
//   Offer         (offer.h)          a handover to a sleeping Locker thread, which other
//                 Lockers' requests may pass for a while
//   ThreadHolds   (thread_holds.h)   per-thread reentrancy of the Lockable interface
//   LeaseCache    (lease_cache.h)    a lease kept after the last hold: its FastPath
//                 (fast_path.h), demand, linger, and IdleMarker (idle_marker.h)
//   RemoteContender (remote_contender.h) the one remote contender (a ServiceCore), started
//                 and stopped as the entry's state says (entry_state.h); it stays away for a
//                 YieldWindow (yield_window.h) after giving a busy lease back
// The entry itself grants, hands over and revokes (lock_entry.cc) and takes requests in and out
// (lock_requests.cc): it ties the parts together.
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
#include <stop_token>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "core/service_core.h"
#include "locks/entry_state.h"
#include "locks/fast_path.h"
#include "locks/lease_cache.h"
#include "locks/offer.h"
#include "locks/remote_contender.h"
#include "locks/request_queue.h"
#include "locks/thread_holds.h"
#include "simba/mutex.h"

namespace simba::internal {

class LockTable;

class LockEntry final : public std::enable_shared_from_this<LockEntry>, private LeaseCache {
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

  // Queues a request with its handle's terms. `inline_round`: the caller may block for the
  // first remote round (a thread that waits anyway). `may_give_up`: its waiter may call
  // give_up() (the single-attempt rule needs the time it came). `waker`: a Locker's request,
  // whose thread is woken to claim() a handover (offer.h). Returns the ticket.
  std::uint64_t request(std::chrono::milliseconds timeout, Terms terms, Mutex::Callback done, bool inline_round,
                        bool may_give_up = false, Waker* waker = nullptr);
  // A woken Locker request's thread takes the lease on offer (offer.h): granted (its
  // completion ran, or runs, as for any grant), or passed (another took it first: wait on).
  enum class Claim { granted, passed };
  Claim claim(std::uint64_t ticket);
  bool cancel(std::uint64_t ticket, std::error_code reason);
  // A waiting thread's deadline passed: gives up its request unless no remote round has
  // finished since it queued (then it must wait a little longer: at least one attempt).
  enum class GiveUp { gave_up, granted, wait_for_round };
  GiveUp give_up(std::uint64_t ticket);
  // The message of a timed-out wait.
  std::string timeout_message(std::chrono::milliseconds timeout, bool name_contender = false) const;

  // Hold::unlock(): hands over locally or releases. No-op for a hold already revoked.
  void end_hold(std::uint64_t hold_id) noexcept;
  // Whether hold `hold_id` is the holder and the lease behind it live by this host's clock.
  bool hold_is_owner(std::uint64_t hold_id) const;

  // Holds taken through Mutex's Lockable interface, per thread.
  ThreadHolds& threads() noexcept { return threads_; }

  // Where Mutex::lock_async's callbacks run: one at a time per mutex.
  Strand callback_strand();

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

  struct Holder {
    std::uint64_t id;
    std::uint64_t token;
    std::uint64_t generation;  // the core's, to match a loss
    std::stop_source lost;
    std::optional<Runtime::TimerId> max_hold_timer;
    Terms terms{};  // of the request it came from (a fast hold: of the hold that cached)
  };
  // What to run once mutex_ is released: each path grants, cancels or times out at most one
  // request (kept inline, no allocation). `keep` (the request's hold on the entry) goes when
  // the caller's outcome does, after the caller is done with the entry.
  struct Outcome {
    Mutex::Callback done;
    std::error_code error;
    Hold hold;
    std::shared_ptr<LockEntry> keep;
  };
  using Outcomes = std::optional<Outcome>;

  LockEntry(std::shared_ptr<LockTable> table, std::string key, std::string name);

  // RemoteContender's questions.
  EntryFacts local_facts() const override REQUIRES(mutex_);
  void drive_after(std::chrono::milliseconds delay) override;
  void on_round(const RoundTimes& times);
  void on_lost(std::uint64_t generation);
  void expire(std::uint64_t ticket);
  void revoke(std::uint64_t hold_id, const char* why);
  void grant_front_locked(Outcomes& outcomes, const ServiceCore::Lease& lease) REQUIRES(mutex_);
  // The lease of a hold that ended with `ending` terms (or that was on offer to a request that
  // left): handed to the next local request, cached, or given back.
  void pass_on_locked(const Terms& ending, Outcomes& outcomes) REQUIRES(mutex_);
  // A new Locker request takes the lease on offer, passing the waiting ones (offer.h).
  bool pass_locked(Request& request, Outcomes& outcomes) REQUIRES(mutex_);
  // Takes a request out that leaves without a hold (cancelled, timed out, given up), with its
  // deadline's timer; nullopt if it left already. `vacant`: it was woken for a lease on offer,
  // which now waits for the next request (call reoffer() once mutex_ is released).
  std::optional<Request> leave_locked(std::uint64_t ticket, bool& vacant) REQUIRES(mutex_);
  // A woken request left before it claimed the lease on offer: the next one gets it.
  void reoffer();
  void end_holder_locked(std::stop_source* to_stop) REQUIRES(mutex_);
  // end_hold's drive: a failure is logged (an unlock never throws).
  void drive_after_hold_locked() noexcept REQUIRES(mutex_);
  static void settle(Outcomes& outcomes, Outcome outcome) noexcept;
  static void run(Outcomes& outcomes) noexcept;
  // LeaseCache's questions.
  void adopt_fast_hold_locked(std::uint64_t token, std::uint64_t generation, std::stop_source lost,
                              const Terms& terms) override REQUIRES(mutex_);
  std::weak_ptr<LeaseCache> weak_cache() override;
  Runtime::TimerId after_on_io(std::chrono::milliseconds delay, std::function<void(LockEntry&)> work);
  void on_io(std::function<void(LockEntry&)> work);
  // The slow path took over a fast hold (settle_cache_locked made it holder_): ends it there.
  void end_fast_hold() noexcept;

  const std::shared_ptr<LockTable> table_;
  const std::string key_;  // in table_
  bool in_table_ = false;  // set once by create(): only a made entry leaves the table
  // Under mutex_ (RemoteContender's).
  RequestQueue requests_ GUARDED_BY(mutex_);
  std::optional<Holder> holder_ GUARDED_BY(mutex_);
  Handovers handovers_ GUARDED_BY(mutex_);
  Offer offer_ GUARDED_BY(mutex_);
  std::uint64_t next_id_ GUARDED_BY(mutex_) = 0;
  std::optional<Strand> strand_ GUARDED_BY(mutex_);

  std::uint64_t fast_hold_id_ GUARDED_BY(mutex_) = 0;  // the holder_ a settled fast hold became

  ThreadHolds threads_;
};

}  // namespace simba::internal
