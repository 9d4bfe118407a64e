// The local line of one mutex of the lock manager: who holds it in this process and who is
// next. Internal; a LockEntry is its LocalLine (privately).
//
// It grants the lease to the front request (after a round won, a handover or a cached lease),
// hands it over when a hold ends (to the next request, up to the limit of local handovers, or
// on offer to a sleeping Locker that other Lockers may pass: offer.h), caches it or lets it go,
// and revokes a hold whose lease was lost or that outlived max_hold. Completions (futures,
// callbacks, Asio posts) run after the lock is released: each path settles at most one Outcome.
// The requests' own comings and goings (deadlines, cancellation, the single attempt) are the
// entry's (lock_entry.h).
//
//   the lease comes from         it goes to
//   a round won (on_round)       the front request
//   a hold's end (end_hold)      the front request; or its Locker thread is woken to claim it
//                                (on offer: another Locker's request may pass it); or the
//                                lease cache; or back to the backend (the contender stops)
//   a loss, or max_hold          nowhere: the hold is revoked (its lost() is requested)
// (A cached lease is taken by a request as it comes: the entry's request().)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "base/thread_annotations.h"
#include "core/service_core.h"
#include "locks/lease_cache.h"
#include "locks/offer.h"
#include "locks/request_queue.h"
#include "simba/mutex.h"

namespace simba::internal {

class LocalLine : protected LeaseCache {
 public:
  // Hold::unlock(): hands over locally or releases. No-op for a hold already revoked.
  // `recycle_lost`: nobody but the hold has its stop state (Hold::end): the next hold may
  // have it, not a new one (an allocation per hold less).
  void end_hold(std::uint64_t hold_id, bool recycle_lost = false) noexcept;
  // Whether hold `hold_id` is the holder and the lease behind it live by this host's clock.
  bool hold_is_owner(std::uint64_t hold_id) const;
  // A woken Locker request's thread takes the lease on offer (offer.h): granted (its
  // completion ran, or runs, as for any grant), or passed (another took it first: wait on).
  enum class Claim { granted, passed };
  Claim claim(std::uint64_t ticket);

 protected:
  friend class RemoteContender;  // its core's hooks call on_round and on_lost

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

  LocalLine(std::string name, const std::shared_ptr<const CoreContext>& context)
      : LeaseCache(std::move(name), context) {}
  ~LocalLine() = default;

  // This line, held as the entry is (a max_hold timer holds it weakly).
  virtual std::weak_ptr<LocalLine> weak_line() = 0;

  // The front request takes `lease` (won here, handed over or cached).
  void grant_front_locked(Outcomes& outcomes, const ServiceCore::Lease& lease) REQUIRES(mutex_);
  // A new Locker request takes the lease on offer, passing the waiting ones (offer.h).
  bool pass_locked(Request& request, Outcomes& outcomes) REQUIRES(mutex_);
  // The direct lease just taken (take_direct_locked) becomes a hold with `terms`; `self` is the
  // entry, which the Hold keeps.
  Hold grant_direct_locked(const ServiceCore::TakenLease& lease, const Terms& terms, std::shared_ptr<LockEntry> self)
      REQUIRES(mutex_);
  // A woken request left before it claimed the lease on offer: the next one gets it.
  void reoffer();
  // The drive after a hold ended (at `ended_at`, if just before): a failure is logged (an
  // unlock never throws).
  void drive_after_hold_locked(std::optional<Clock::time_point> ended_at) noexcept REQUIRES(mutex_);
  static void settle(Outcomes& outcomes, Outcome outcome) noexcept;
  static void run(Outcomes& outcomes) noexcept;
  // The slow path took over a fast hold (settle_cache_locked made it holder_): ends it there.
  void end_fast_hold() noexcept;

  RequestQueue requests_ GUARDED_BY(mutex_);
  Offer offer_ GUARDED_BY(mutex_);
  std::uint64_t next_id_ GUARDED_BY(mutex_) = 0;  // tickets and holds
  bool held_locked() const REQUIRES(mutex_) { return holder_.has_value(); }

 private:
  struct Holder {
    std::uint64_t id;
    std::uint64_t token;
    std::uint64_t generation;  // the core's, to match a loss
    std::stop_source lost;
    std::optional<Runtime::TimerId> max_hold_timer;
    Terms terms{};  // of the request it came from (a fast hold: of the hold that cached)
    Clock::time_point granted_at{};
    // A hold of the direct lease has generation 0 (no core generation is); once the core takes
    // it over, the core's, and `adopting` until the core's round judged it: when the lease's
    // call was sent (the round that judges its answer has that time) and the lease's end (the
    // hold is owner until then, though the core owns nothing before that round).
    struct Adopting {
      Clock::time_point sent;
      Clock::time_point deadline;
    };
    std::optional<Adopting> adopting = std::nullopt;
  };

  // RemoteContender's questions and news.
  EntryFacts local_facts() const override REQUIRES(mutex_);
  void on_round(const RoundTimes& times);
  void on_lost(std::uint64_t generation);
  void adopting_locked(std::uint64_t generation, const ServiceCore::TakenLease& lease) override REQUIRES(mutex_);
  // `counted_here`: the loss is counted here, for this reason (the hold outlived its max_hold,
  // or a direct lease ran out before the core took it over); a lease the core lost was
  // counted by the core.
  void revoke(std::uint64_t hold_id, const char* why, std::optional<LostReason> counted_here = std::nullopt);
  // A local handover (its count, against the limit, and its time since the last hold ended).
  void handover_locked() REQUIRES(mutex_);
  // The lease of a hold that ended with `ending` terms (or that was on offer to a request that
  // left): handed to the next local request, cached, or given back.
  void pass_on_locked(const Terms& ending, Outcomes& outcomes) REQUIRES(mutex_);
  void end_holder_locked(std::stop_source* to_stop, Clock::time_point now) REQUIRES(mutex_);
  // LeaseCache's question.
  void adopt_fast_hold_locked(std::uint64_t token, std::uint64_t generation, std::stop_source lost,
                              const Terms& terms) override REQUIRES(mutex_);

  // A new hold's stop state (its lost()).
  std::stop_source fresh_lost_locked() REQUIRES(mutex_);

  std::optional<Holder> holder_ GUARDED_BY(mutex_);
  // The stop state of a hold that ended unstopped and seen by nobody else (end_hold's
  // `recycle_lost`): the next hold's.
  std::stop_source spare_lost_ GUARDED_BY(mutex_){std::nostopstate};
  Handovers handovers_ GUARDED_BY(mutex_);
  std::uint64_t fast_hold_id_ GUARDED_BY(mutex_) = 0;     // the holder_ a settled fast hold became
  Clock::time_point hold_ended_at_ GUARDED_BY(mutex_){};  // of the last hold (a handover's start)
};

}  // namespace simba::internal
