// The contention loop shared by MutexContendService and MutexRetrievalService. Internal.
//
// One ServiceCore drives one mutex for one contender (or, with no contender, observes it).
// Backend calls run on the runtime's I/O pool, never more than one at a time per core;
// notifications run on the core's strand. `mutex_` guards the loop state and the state last
// delivered to the retriever.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "base/thread_annotations.h"
#include "core/channel_liveness.h"
#include "core/kept_state.h"
#include "metrics/telemetry.h"
#include "runtime/serial_queue.h"
#include "simba/backend.h"
#include "simba/contender.h"
#include "simba/options.h"
#include "simba/runtime.h"
#include "simba/service.h"

namespace simba::internal {

class RoundBatcher;

// When a round's request left and when its answer was judged (a failed round: when it failed).
struct RoundTimes {
  std::chrono::steady_clock::time_point sent;
  std::chrono::steady_clock::time_point answered;
  // This round's answer left the contender owner (a lease won or renewed by it). A later
  // round may have changed that by the time the hook runs: the hooks of two rounds may run
  // in either order.
  bool ours = false;
};

// What the contenders of one Client share (one per Client and options, not one per contender:
// at 100,000 mutexes a copy each would cost 200 bytes each): the backend, the runtime, the
// options and what follows from them, where rounds are counted and where they are batched.
struct CoreContext {
  // Throws Error(errc::invalid_argument) for bad options.
  CoreContext(std::shared_ptr<Backend> backend, std::shared_ptr<Runtime> runtime, ContendOptions options,
              std::shared_ptr<Telemetry> telemetry = nullptr, std::shared_ptr<RoundBatcher> batcher = nullptr);

  const std::shared_ptr<Backend> backend;
  const std::shared_ptr<Runtime> runtime;
  const ContendOptions options;
  // Where its rounds, releases and losses are counted (the Client's); null: nowhere. A
  // service's contender (not one_shot) also counts its lease as an acquisition and a holder.
  const std::shared_ptr<Telemetry> telemetry;
  // Where a contender's rounds that wait for an I/O thread go, batched with others (the
  // Client's, when its backend offers Batches); null: each round alone on an I/O thread.
  const std::shared_ptr<RoundBatcher> batcher;
  const bool push;                       // the backend pushes changes (Backend::push())
  const bool push_acquisitions;          // ... acquisitions too
  const bool waiters_hear_acquisitions;  // ... and waiters hear them
  const bool watch_when_waiting;         // a contender's watch opens once it waits (Capabilities)
  const std::chrono::milliseconds poll;  // the options' poll interval, else the backend's
  // Where start() and stop() wait for a core's round or stale release to settle: one for all
  // the cores (a condition variable each would cost 48 bytes a mutex), told only when one of
  // them waits (ServiceCore::settle_waiters_). A condition_variable_any, as its waiters hold
  // different mutexes.
  mutable std::condition_variable_any settled;
  // Where its contenders hear that the push channel was lost, when they watch only once they
  // wait (watch_when_waiting): one watch of the channel for all of them.
  mutable ChannelLiveness liveness;
};

// What one contender adds to its core: the lock manager's hooks.
struct CoreHooks {
  // Called on an I/O thread after every contention round, successful or not. Must be quick.
  std::function<void(const RoundTimes&)> on_round;
  // true: the lock manager's contender (LockEntry). No notifications at all (nothing is posted
  // to the strand and mutex_state() stays empty: two thread hops saved per hold), and once
  // ownership is lost it stops contending until stop() (its entry learns of the loss through
  // on_lost, and stop() releases the remote lease). false: a service's contender or observer,
  // which notifies its retriever and contends again after a loss.
  bool one_shot = false;
  // Called (on an I/O thread, outside the core's locks) when this contender stops owning the
  // mutex other than by stop(): revoked after an error, a stall or a lost push channel, or
  // another owner seen. The argument is the generation that owned it.
  std::function<void(std::uint64_t generation)> on_lost;
  // Called (on an I/O thread, outside the core's locks, before on_round) when a round that
  // renewed this contender's lease says another contender wants the mutex (the backend's
  // OwnerSnapshot::demanded).
  std::function<void()> on_demand;
};

class ServiceCore : public std::enable_shared_from_this<ServiceCore> {
 public:
  using Clock = std::chrono::steady_clock;

  // `contender` null: observe only. `retriever` receives the notifications; with a contender,
  // it is that contender (kept once: `contender` must be `retriever`).
  ServiceCore(std::shared_ptr<MutexRetriever> retriever, std::shared_ptr<MutexContender> contender,
              std::shared_ptr<const CoreContext> context, CoreHooks hooks = {});
  ~ServiceCore();

  // With `first_round` and no initial delay, the first round runs on the calling thread before
  // start() returns (a blocking lock: no thread hop to win a free mutex).
  // A batched round (RoundBatcher): what it is (none: its generation ended, and it settled
  // as a round of an ended generation does), the call it sends, and its answer.
  std::optional<BackendOp> begin_round(std::uint64_t generation);
  AcquireCall call() const;
  void answer_round(std::uint64_t generation, Clock::time_point sent, BackendOp op, const AcquireResult& result);

  // A first round on the calling thread, counted from `since`: the caller's clock read just
  // before start(), which spares the round its own. It is earlier than the round's send, so
  // the lease it counts ends before the backend's does.
  struct InlineRound {
    Clock::time_point since;
    // The first round's answer, when the caller made its call already (take_lease(), sent at
    // `since`): the core sends nothing, judges that answer as of now and arms its next round
    // from `since`, as for a round of its own. Its round trip was counted by take_lease().
    const OwnerSnapshot* answered = nullptr;
  };
  void start(std::optional<InlineRound> first_round = std::nullopt);

  // A lease taken by one call of this contender outside the core's rounds (a lock entry's
  // direct lease, locks/remote_contender.h): the answer that won it, when its call was sent
  // and answered, and until when it lasts by this host's clock.
  struct TakenLease {
    OwnerSnapshot answer;
    Clock::time_point sent;
    Clock::time_point answered;
    Clock::time_point ttl_deadline;  // the renewal is due before this
    Clock::time_point deadline;      // the lease's end (ttl + transition, or what was granted)
    std::uint64_t token() const noexcept { return answer.owner.fencing_token; }
  };
  // Whether take_lease() may be used at all: the engine needs nothing of a started core for an
  // owner (no watch before the first round, no push channel to hear a loss on) and the options
  // no initial delay.
  bool may_take_lease() const;
  // Whether the core is stopped and settled: no round in flight, no stale release pending
  // (take_lease() may be called now). Once true it stays so until start().
  bool settled() const;
  // One acquisition by this contender on the calling thread, sent at `sent` (the caller's
  // clock read), while may_take_lease(): the lease if the answer won it and it is live by this
  // host's clock, else nullopt (another owns it, or the call failed: counted in the telemetry;
  // the caller contends through start(), whose rounds report a failure that persists). Only
  // while may_take_lease() and settled(). The round trip is counted. The lease is given back by release_lease(), or
  // taken over by start() with `answered`.
  std::optional<TakenLease> take_lease(Clock::time_point sent);
  // Gives this contender's lease back on the backend (a failure is logged and counted; never
  // throws): stop()'s release, and a direct lease's end. `sent`: when its first attempt counts
  // as sent (none: now). A release that fails on a broken connection is sent again on a new
  // one, kReleaseAttempts times in all; after that the lease is left to run out.
  static constexpr int kReleaseAttempts = 3;
  void release_lease(const char* why, std::optional<Clock::time_point> sent = std::nullopt) noexcept;
  // `released_at`: the caller's clock read just before (a hold's end), from which the release's
  // round trip is counted unless stop() first waits for a round in flight: one read less.
  void stop(std::optional<Clock::time_point> released_at = std::nullopt);
  void close(std::optional<Clock::time_point> released_at = std::nullopt) noexcept;

  ServiceStatus status() const { return status_.load(std::memory_order_acquire); }
  const std::string& mutex() const { return retriever_->mutex(); }
  const std::string& contender_id() const;
  MutexState mutex_state() const;
  bool is_owner() const;
  // Whether this contender still owns the lease of `token` and the answer that won it saw no
  // record derived from the mutex held (OwnerSnapshot::no_derived_held): with the lease held
  // since, none has come in (a shared mutex's reader looks at the gate after it announces).
  bool no_derived_held_since_won(std::uint64_t token) const;
  // What the answer that won the lease of `token`, still owned, said of the primitive the
  // mutex is derived from (OwnerSnapshot::parent), if that round was sent at or after `since`:
  // the primitive as it was at an instant after `since`, with this lease held from then on.
  std::optional<OwnerSnapshot::Parent> parent_seen_since(Clock::time_point since, std::uint64_t token) const;
  bool is_in_ttl() const;
  std::uint64_t fencing_token() const;
  // How long a single attempt waits when the owner it met caches its lease
  // (MutexOwner::caching()): its attempt left a demand; the owner hears it (a push, or its
  // poll), releases, and this contender hears that (a push, or its poll) and takes the lease:
  // 250 ms, the polls, and four times the last round's time (the round trips of a hand-back,
  // as slow as this contender's were: a busy machine's, up to ttl + transition). 0 without demand.
  std::chrono::milliseconds handback_bound() const;
  // How long a single attempt waits for this contender's first round at most: a round is
  // bounded by the engine's timeouts, so none within a whole lease (+ a hand-back) means a
  // stuck contender, and the attempt fails rather than spin.
  std::chrono::milliseconds attempt_bound() const;
  // Whether the owner the last round saw caches (and this backend carries demands).
  bool met_caching_owner() const;
  // Until when this contender's lease lasts by this host's clock (the epoch if not owner).
  Clock::time_point lease_deadline() const;
  // One consistent look at this contender's lease as of `now`, under one lock: for a caller
  // that needs several of is_owner(), fencing_token(), generation() and lease_deadline().
  struct Lease {
    bool owner = false;            // is_owner()
    std::uint64_t token = 0;       // fencing_token()
    std::uint64_t generation = 0;  // generation()
    Clock::time_point deadline{};  // lease_deadline()
    bool rival_seen = false;       // the last round saw another contender own the mutex
    Clock::time_point now{};       // when it was judged (lease()'s argument)
  };
  Lease lease(Clock::time_point now) const;
  // The owner id the last round saw (empty before the first, or after an error).
  std::string last_owner_id() const;
  // The error of the last round if it failed, else empty.
  std::string last_error() const;

  // The backend's push channel was lost (ChannelLiveness): as a watch's WatchEvent::lost.
  void on_channel_lost();

  // Test seams: the current generation, and delivering a result as if a round of
  // `generation` had produced it.
  std::uint64_t generation() const;
  void deliver(std::uint64_t generation, const MutexOwner& owner);
  // Waits until every notification posted before the call has been delivered.
  void flush();
  bool delivers_notifications() const { return !one_shot_; }

 private:
  friend class ChannelLiveness;  // liveness_

  // The watch of `generation` (a push channel, or a watch that only reports the server's loss),
  // or null: none, or it could not be opened (logged; the core polls).
  std::shared_ptr<Subscription> open_watch(std::uint64_t generation);
  // Once `subscription` is in place (waited for on an I/O thread, which it blocks), a round of
  // `generation`: its first (after the initial delay), or another look after a first round
  // that lost before the watch was confirmed. Null `subscription`: a contender's watch not yet
  // opened (CoreContext::watch_when_waiting), opened first.
  void round_when_watched(std::uint64_t generation, std::shared_ptr<Subscription> subscription, bool first);
  void trigger(std::uint64_t generation, bool from_timer);
  void on_watch(std::uint64_t generation, WatchEvent event);
  // Sets up the first round of `generation` (the watch it has, if any) and marks the core
  // running; true if that round runs on this thread now.
  bool first_round_locked(std::uint64_t generation, std::shared_ptr<Subscription> subscription, bool after_watch,
                          bool inline_round) REQUIRES(mutex_);
  // `sent`: when the round counts as sent (none: now). `begun`: the round's op, when it was
  // begun already under the lock that set in_flight_ (start()'s inline first round: an
  // acquisition, or an observer's read); none: begin_round() decides, under a lock of its own.
  void run_round(std::uint64_t generation, std::optional<Clock::time_point> sent = std::nullopt,
                 std::optional<BackendOp> begun = std::nullopt);
  // `counted`: its round trip was counted already (a taken lease's answer).
  void finish_round(std::uint64_t generation, Clock::time_point sent, BackendOp op, const OwnerSnapshot& snapshot,
                    bool counted = false);
  // Until when a lease won by `snapshot`'s answer to a call sent at `sent` lasts (the options'
  // ttl + transition, or what the backend granted if shorter) and when its renewal is due.
  Clock::time_point lease_end(Clock::time_point sent, const OwnerSnapshot& snapshot) const;
  Clock::time_point ttl_end(Clock::time_point sent, const OwnerSnapshot& snapshot) const;
  void fail_round(std::uint64_t generation, Clock::time_point sent, const std::string& what);
  // The timer that revokes at lease_deadline_ unless a renewal came back first.
  void arm_deadline_locked(std::uint64_t generation) REQUIRES(mutex_);
  void on_lease_deadline(std::uint64_t generation);
  // The round timer is armed lazily: arming it for a time no sooner than the runtime timer
  // pending (timer_) only moves what it is for (due_generation_, due_at_), and a pending one
  // that fires early arms again for due_at_; disarming it (a stop, a round started otherwise)
  // leaves the runtime timer to fire to nothing. So a lease taken and given back faster than
  // its renewal period schedules a runtime timer once a period, not once a hold.
  void arm_timer_locked(std::uint64_t generation, std::chrono::milliseconds delay) REQUIRES(mutex_);
  void arm_timer_locked(std::uint64_t generation, Clock::time_point at) REQUIRES(mutex_);  // `at`: read already
  void disarm_timer_locked() REQUIRES(mutex_) { due_ = false; }
  void schedule_timer_locked(Clock::time_point at) REQUIRES(mutex_);
  void on_timer(std::uint64_t sequence);
  void revoke_locked(std::uint64_t generation, LostReason reason) REQUIRES(mutex_);
  void lost_locked(std::uint64_t generation, LostReason reason) REQUIRES(mutex_);
  // Telemetry: this contender now owns the lease (it did not before); a service's contender
  // waits for the mutex (counted among the waiters) or no longer does.
  void won_locked(Clock::time_point now) REQUIRES(mutex_);
  void standing_by_locked(bool waiting) REQUIRES(mutex_);
  void post_apply_locked(std::uint64_t generation, const MutexOwner& owner) REQUIRES(mutex_);
  // Queues `task` among the notifications (notifications_), and a drain if none is scheduled.
  void notify_locked(SerialQueue::Task task) REQUIRES(mutex_);
  // On the callback pool: runs the notifications queued so far.
  void drain_notifications();
  void apply(std::uint64_t generation, const MutexOwner& owner);
  bool current_locked(std::uint64_t generation) const REQUIRES(mutex_);
  // A round ended or a stale release was done: tells whoever waits for it.
  void settled_locked() REQUIRES(mutex_);
  // Waits on context_->settled until `done`, at most until `deadline`.
  template <class Done>
  void await_settled_locked(internal::UniqueMutexLock& lock, Clock::time_point deadline, Done done) REQUIRES(mutex_);
  // The contender's id, or null for an observer (KeptState's own_id).
  const std::string* own_id() const noexcept { return contender_ ? &contender_->contender_id() : nullptr; }
  void cancel_deadline_locked() REQUIRES(mutex_);
  const std::string& last_owner_locked() const REQUIRES(mutex_);
  // A round of an earlier generation ended: the generation due a round meanwhile (again_), to
  // trigger once unlocked, if any.
  std::optional<std::uint64_t> settle_stale_locked() REQUIRES(mutex_);
  // A round of an earlier generation ended, answered or failed, after stop(): its command may
  // have run on the server after stop()'s release, leaving a lease it won or (Redis, a latch)
  // a place in the queue. True if the service is stopped and a contender: then it is given
  // back again (counted in stale_releases_ until end_stale_round has sent it).
  bool stale_round_releases_locked() REQUIRES(mutex_);
  // Unlocked, after the above: releases again (`release`), or triggers the round due meanwhile.
  void end_stale_round(std::optional<std::uint64_t> next, bool release, const char* why);
  void see_locked(const std::string& seen) REQUIRES(mutex_);  // last_seen_ = seen (none if empty)

  // Ordered so that the flags pack together: at 100,000 mutexes a byte each is 100 KB.
  const std::shared_ptr<MutexRetriever> retriever_;
  MutexContender* const contender_;  // retriever_ itself, as a contender; null: observer
  const std::shared_ptr<const CoreContext> context_;
  std::atomic<ServiceStatus> status_{ServiceStatus::initial};
  int failures_ GUARDED_BY(mutex_) = 0;  // rounds failed in a row (here: it fills status_'s word)
  // The hooks' functions; null when it has none (a service's contender or observer).
  const std::unique_ptr<const CoreHooks> hooks_;
  MutexSlot* const slot_;  // in context_->telemetry, if any
  // Its place among the contenders that hear a lost channel through context_->liveness
  // (guarded by that one's lock).
  LivenessLink liveness_;

  mutable internal::AnnotatedMutex mutex_;
  // Where notifications wait for the callback pool, delivered one at a time and in order (a
  // strand of its own would cost 120 bytes a mutex); none for a one_shot core.
  [[no_unique_address]] SerialQueue notifications_ GUARDED_BY(mutex_);  // (its tail holds the flags)
  // Its flags, one bit each (at 100,000 leases each byte here is 100 KB); all guarded by
  // mutex_, so sharing their bytes races with nothing.
  // A round is queued or running, of this generation or (after a stop() on a runtime thread,
  // which does not wait for it) of an earlier one: one at a time per contender.
  bool in_flight_ : 1 GUARDED_BY(mutex_) = false;
  // Another round is due as soon as the one in flight ends. When that one is of an earlier
  // generation, its end starts the round (settle_stale_locked).
  bool again_ : 1 GUARDED_BY(mutex_) = false;
  bool dormant_ : 1 GUARDED_BY(mutex_) = false;
  bool owned_ : 1 GUARDED_BY(mutex_) = false;
  bool standing_by_ : 1 GUARDED_BY(mutex_) = false;  // telemetry: counted among the waiters
  // The answer that won the lease now held saw no derived record held (OwnerSnapshot::no_derived_held).
  bool no_derived_since_won_ : 1 GUARDED_BY(mutex_) = false;
  // What the last answer that won the lease said of the primitive (OwnerSnapshot::parent), and
  // when its round was sent (parent_token_, parent_round_sent_): parent_seen_since().
  bool parent_seen_ : 1 GUARDED_BY(mutex_) = false;
  bool parent_held_ : 1 GUARDED_BY(mutex_) = false;
  // The owner the last round saw was this contender (else last_seen_).
  bool last_owner_ours_ : 1 GUARDED_BY(mutex_) = false;
  // The last round failed: last_seen_ is its error.
  bool last_failed_ : 1 GUARDED_BY(mutex_) = false;
  // A contender's watch may not be in place on the server yet (Subscription::wait_ready), or
  // not be open yet (CoreContext::watch_when_waiting): the first round that does not win waits
  // for it (opens it), then looks again.
  bool watch_unconfirmed_ : 1 GUARDED_BY(mutex_) = false;
  // The first round waits for the watch (Subscription::ready_before_first_round), off the
  // caller's thread: until it is in place, nothing triggers a round (round_when_watched).
  bool awaiting_watch_ : 1 GUARDED_BY(mutex_) = false;
  // The round timer is armed (arm_timer_locked), for the current generation, at due_at_.
  bool due_ : 1 GUARDED_BY(mutex_) = false;
  const bool one_shot_;  // CoreHooks::one_shot
  // Releases of rounds that ended after stop(), in flight (one a generation at most, and
  // generations follow stop() and start() calls): start() waits for them, or one could give
  // back the lease the next generation (the same contender id) just won.
  std::uint16_t stale_releases_ GUARDED_BY(mutex_) = 0;
  // Threads waiting in start() or stop() (on context_->settled) for a round to end (in_flight_
  // false) or the last stale release to be done: settled_locked() tells them.
  std::uint16_t settle_waiters_ GUARDED_BY(mutex_) = 0;
  // How long the last round took, sent to answered, in ms (saturated): handback_bound() scales
  // with it.
  std::uint16_t last_round_ms_ GUARDED_BY(mutex_) = 0;
  // Of the last round timer scheduled; one that fires with another is stale. (32 bits: a stale
  // timer would need 4 billion timers scheduled after it while it is pending to be taken for
  // the current one.)
  std::uint32_t timer_sequence_ GUARDED_BY(mutex_) = 0;

  std::uint64_t generation_ GUARDED_BY(mutex_) = 0;
  Runtime::TimerId timer_ GUARDED_BY(mutex_) = 0;           // the round timer pending in the runtime (0: none)
  Clock::time_point timer_at_ GUARDED_BY(mutex_);           // when it fires
  Clock::time_point due_at_ GUARDED_BY(mutex_);             // when the round it is armed for is due (due_)
  Runtime::TimerId deadline_timer_ GUARDED_BY(mutex_) = 0;  // arm_deadline_locked() (0: none)
  Clock::time_point lease_deadline_ GUARDED_BY(mutex_){};
  // When the push channel was last lost: the server may have forgotten every lease, so an
  // answer to a round sent before then proves nothing and restores no ownership.
  Clock::time_point channel_lost_at_ GUARDED_BY(mutex_){};
  Clock::time_point ttl_deadline_ GUARDED_BY(mutex_){};
  Clock::time_point owned_since_ GUARDED_BY(mutex_){};  // telemetry: when owned_ became true
  std::uint64_t parent_token_ GUARDED_BY(mutex_) = 0;
  Clock::time_point parent_round_sent_ GUARDED_BY(mutex_){};
  std::uint64_t token_ GUARDED_BY(mutex_) = 0;
  // What the last round saw, in one string (each held lease keeps one, not two): its error if
  // it failed (last_failed_), else the id of the owner it saw when not this contender
  // (last_owner_ours_; null: none). last_owner_locked() and last_error() say which. On the
  // heap, and only when there is one: an owner, which sees itself, keeps 8 bytes, not 32.
  std::unique_ptr<std::string> last_seen_ GUARDED_BY(mutex_);
  std::shared_ptr<Subscription> subscription_ GUARDED_BY(mutex_);
  // The state last delivered to the retriever (not one_shot), kept small (kept_state.h).
  KeptState state_ GUARDED_BY(mutex_);
};

template <class Done>
void ServiceCore::await_settled_locked(internal::UniqueMutexLock& lock, Clock::time_point deadline, Done done) {
  ++settle_waiters_;
  if (deadline == Clock::time_point::max()) {
    context_->settled.wait(lock.native(), done);
  } else {
    context_->settled.wait_until(lock.native(), deadline, done);
  }
  --settle_waiters_;
}

// Closes `core` and lets go of it such that the last reference is not dropped by a runtime
// thread: it waits (up to 10 s: a backend call in flight) until no runtime task still holds
// the core. A core released last by a runtime task would tear down its runtime from that
// runtime's own thread, which then outlives the caller, and possibly the process's exit.
// Called from a runtime thread itself (a callback destroying a service), it cannot wait.
void release_core(std::shared_ptr<ServiceCore>& core) noexcept;

}  // namespace simba::internal
