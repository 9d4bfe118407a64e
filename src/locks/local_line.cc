// The local line of one mutex: grants, handovers, the offer to a sleeping Locker, revocations
// (local_line.h).
#include "locks/local_line.h"

#include <cassert>

#include "base/log.h"
#include "locks/on_io.h"

namespace simba::internal {

void LocalLine::on_round(const RoundTimes& times) {
  Outcomes outcomes;
  std::unique_ptr<Subscription> unwatched;  // ends outside the lock
  std::uint64_t lapsed = 0;                 // a hold whose direct lease ran out before it was taken over
  {
    internal::MutexLock lock(mutex_);
    count_round();
    const auto now = times.answered;
    const auto lease = core().lease(now);
    // The round that judged the direct lease's answer (sent when it was) says whether the hold
    // kept it: a stall may have let it run out before the core took it over. Only that round's
    // verdict counts: a later round may have won the mutex anew (and its hook may run first).
    if (holder_ && holder_->adopting && holder_->adopting->sent == times.sent) {
      holder_->adopting.reset();
      if (!times.ours) lapsed = holder_->id;
    }
    if (lease.rival_seen) {
      window().rival_seen(now);
      if (!requests_.empty() && !requests_.front().met_owner_at) requests_.front().met_owner_at = window().last_rival();
      // The demand watch only costs while contended (ZooKeeper: a listing at every change of
      // the latch). Watched again once quiet.
      unwatched = rival_seen_locked();
    }
    if (!holder_ && !release_wanted() && !requests_.empty() && lease.owner) {
      handovers_.reset();  // a fresh remote lease
      window().won(times.answered - times.sent);
      lease_won_locked(requests_.front().terms.linger.count() > 0 && !window().contended(now));
      grant_front_locked(outcomes, lease);
    }
    lease_renewed_locked(lease.deadline);
  }
  unwatched.reset();
  if (lapsed != 0) {
    const auto why = "the lease of " + core().contender_id() +
                     " ran out before it could be renewed (the process stalled?); no longer owner";
    revoke(lapsed, why.c_str(), LostReason::stall);
    return;  // (revoke drives)
  }
  const bool granted = outcomes.has_value();
  run(outcomes);
  // A grant leaves the entry held, where the contender has nothing to do; whatever the
  // completion did meanwhile (an unlock) drove it already.
  if (!granted) drive();
}

void LocalLine::on_lost(std::uint64_t generation) {
  if (generation != core().generation()) return;  // a contender already stopped
  std::uint64_t hold_id = 0;
  {
    internal::MutexLock lock(mutex_);
    uncache_locked();  // a cached lease is gone with the remote one; a fast hold is revoked below
    if (holder_ && holder_->generation == generation) {
      hold_id = holder_->id;
    } else if (running()) {
      want_release();  // the contender went dormant: restart it for the waiters
    }
  }
  if (hold_id != 0) {
    revoke(hold_id, "the lease was lost");
  } else {
    drive();
  }
}

void LocalLine::revoke(std::uint64_t hold_id, const char* why, std::optional<LostReason> counted_here) {
  std::stop_source to_stop{std::nostopstate};
  {
    internal::MutexLock lock(mutex_);
    if (!holder_ || holder_->id != hold_id) return;
    log_warn("mutex '" + name() + "': " + why + "; the hold is revoked (lost() requested)");
    // A lost lease was counted where it was lost (the core); max_hold is the hold's own end.
    if (counted_here) {
      telemetry().lost(slot(), *counted_here, name(), core().contender_id(), holder_->token,
                       Clock::now() - holder_->granted_at);
    }
    end_holder_locked(&to_stop, Clock::now());
    want_release();
  }
  to_stop.request_stop();  // outside the lock: stop callbacks may unlock
  drive();
}

void LocalLine::end_hold(std::uint64_t hold_id, bool recycle_lost) noexcept {
  Outcomes outcomes;
  {
    internal::MutexLock lock(mutex_);
    if (!holder_ || holder_->id != hold_id) return;  // revoked earlier: nothing left to do
    // Not revoked (a revoke takes the holder out under this lock before it stops the state).
    if (recycle_lost && !holder_->lost.stop_requested()) spare_lost_ = std::move(holder_->lost);
    const auto terms = holder_->terms;
    const auto now = Clock::now();
    telemetry().released(slot(), name(), core().contender_id(), holder_->token, now - holder_->granted_at);
    end_holder_locked(nullptr, now);
    if (direct_held()) {
      // The direct lease goes back, or the core takes it over for a request queued behind it
      // (its first round grants): the drive's.
      drive_after_hold_locked(now);
      return;
    }
    pass_on_locked(terms, outcomes);
    if (!outcomes) {
      drive_after_hold_locked(now);  // nothing to complete first: on without letting go of the lock
      return;
    }
  }
  run(outcomes);
  internal::MutexLock lock(mutex_);
  drive_after_hold_locked(std::nullopt);  // a completion ran meanwhile: a release reads the clock itself
}

void LocalLine::drive_after_hold_locked(std::optional<Clock::time_point> ended_at) noexcept {
  try {
    drive_locked(std::nullopt, ended_at);
  } catch (const std::exception& e) {
    log_error("mutex '" + name() + "': releasing: " + e.what());
  } catch (...) {
    log_error("mutex '" + name() + "': releasing: a non-standard exception");
  }
}

void LocalLine::pass_on_locked(const Terms& ending, Outcomes& outcomes) {
  // A pending demand from another process ends local handovers, as the limit (the ending
  // hold's handle's) does.
  const bool may_hand_over = handovers_.may_hand_over(ending, demanded());
  const bool hand_over = !requests_.empty() && may_hand_over && !release_wanted();
  const auto now = hand_over ? Clock::now() : Clock::time_point{};
  const auto lease = hand_over ? core().lease(now) : ServiceCore::Lease{};
  if (hand_over && lease.owner) {
    switch (offer_.hand_over(requests_.front(), ending, now)) {
      case Offer::Next::grant:
        handover_locked();
        grant_front_locked(outcomes, lease);
        break;
      case Offer::Next::wake: requests_.front().waker->wake(); break;  // under the lock: its waiter is there
      case Offer::Next::woken: break;
    }
    return;
  }
  offer_.closed();
  if (may_cache_locked(ending, !requests_.empty())) {
    handovers_.reset();
    enter_cache_locked(ending);
  } else {
    want_release();
    if (!may_hand_over && !requests_.empty()) yield();
    handovers_.reset();
  }
}

bool LocalLine::pass_locked(Request& request, Outcomes& outcomes) {
  if (!offer_.may_pass(request, requests_) || holder_ || release_wanted() ||
      !handovers_.may_hand_over(offer_.terms(), demanded())) {
    return false;
  }
  const auto lease = core().lease(Clock::now());
  if (!lease.owner) return false;
  requests_.push_front(std::move(request));
  telemetry().waiting(slot(), 1);
  handover_locked();
  grant_front_locked(outcomes, lease);
  return true;
}

LocalLine::Claim LocalLine::claim(std::uint64_t ticket) {
  Outcomes outcomes;
  bool lapsed = false;
  {
    internal::MutexLock lock(mutex_);
    offer_.claimed(ticket);
    if (!requests_.find(ticket)) return Claim::granted;  // granted meanwhile: its Hold is on the way
    if (holder_ || !offer_.on_offer() || !requests_.is_front(ticket) || release_wanted()) return Claim::passed;
    if (const auto lease = core().lease(Clock::now()); lease.owner) {
      handover_locked();
      grant_front_locked(outcomes, lease);
    } else {
      offer_.closed();  // the lease ran out by our clock: contend anew (on_round grants)
      want_release();
      lapsed = true;
    }
  }
  if (lapsed) {
    drive();
    return Claim::passed;
  }
  run(outcomes);
  return Claim::granted;
}

void LocalLine::reoffer() {
  Outcomes outcomes;
  {
    internal::MutexLock lock(mutex_);
    if (holder_ || !offer_.vacant()) return;  // taken meanwhile
    if (release_wanted()) {
      offer_.closed();  // the lease goes back; the contender's next win grants
    } else {
      pass_on_locked(offer_.terms(), outcomes);
    }
  }
  run(outcomes);
}

void LocalLine::end_holder_locked(std::stop_source* to_stop, Clock::time_point now) {
  hold_ended_at_ = now;
  telemetry().ended(slot(), hold_ended_at_ - holder_->granted_at);
  if (holder_->max_hold_timer) runtime_->cancel(*holder_->max_hold_timer);
  if (to_stop) *to_stop = holder_->lost;
  if (holder_->id == fast_hold_id_) fast_hold_id_ = 0;  // a settled fast hold (fast_ closes at its unlock)
  holder_.reset();
}

void LocalLine::grant_front_locked(Outcomes& outcomes, const ServiceCore::Lease& lease) {
  Request request = requests_.pop_front();
  if (request.deadline) runtime_->cancel(*request.deadline);
  offer_.granted(request.ticket);
  const auto now = lease.now;  // a clock read costs ~20-30 ns here: the lease's, read just before
  Holder holder{++next_id_, lease.token, lease.generation, fresh_lost_locked(), std::nullopt, request.terms, now};
  telemetry().waiting(slot(), -1);
  telemetry().acquired(slot(), name(), core().contender_id(), lease.token, now - request.queued_at);
  if (request.terms.max_hold.count() > 0) {
    // Releasing takes a round trip: off the timer's short path.
    holder.max_hold_timer = internal::after_on_io<LocalLine>(
        *runtime_, request.terms.max_hold, weak_line(),
        [id = holder.id](LocalLine& line) { line.revoke(id, "the hold outlived its max_hold", LostReason::max_hold); });
  }
  Hold hold(request.self, holder.id, holder.token, holder.lost.get_token());
  holder_ = std::move(holder);
  settle(outcomes, Outcome{std::move(request.done), std::error_code(), std::move(hold), std::move(request.self)});
}

void LocalLine::handover_locked() {
  handovers_.handed_over();
  telemetry().handed_over(Clock::now() - hold_ended_at_);
}

void LocalLine::settle(Outcomes& outcomes, Outcome outcome) noexcept {
  assert(!outcomes && "one outcome per pass");  // another would end here, under the entry's lock
  outcomes.emplace(std::move(outcome));
}

void LocalLine::run(Outcomes& outcomes) noexcept {
  if (!outcomes) return;
  auto& outcome = *outcomes;
  try {
    outcome.done(outcome.error, std::move(outcome.hold));
  } catch (const std::exception& e) {
    log_error(std::string("a lock completion threw: ") + e.what());
  } catch (...) {
    log_error("a lock completion threw a non-standard exception");
  }
  outcome.hold.unlock();  // a Hold no completion took goes back here, outside the entry's lock
  outcome.done = nullptr;
}

EntryFacts LocalLine::local_facts() const {
  return {.holder = holder_.has_value(), .requests = !requests_.empty(), .cached = cached()};
}

void LocalLine::adopt_fast_hold_locked(std::uint64_t token, std::uint64_t generation, std::stop_source lost,
                                       const Terms& terms) {
  // A fast hold taken over is counted from here on (its start was not timed: the fast path is not).
  Holder holder{++next_id_, token, generation, std::move(lost), std::nullopt, terms, Clock::now()};
  telemetry().acquired(slot(), name(), core().contender_id(), token, std::nullopt);
  fast_hold_id_ = holder.id;
  holder_ = std::move(holder);
}

void LocalLine::end_fast_hold() noexcept {
  std::uint64_t id;
  {
    internal::MutexLock lock(mutex_);
    fast_path().closed();
    id = fast_hold_id_;
  }
  if (id != 0) end_hold(id);  // 0: it was revoked meanwhile
}

bool LocalLine::hold_is_owner(std::uint64_t hold_id) const {
  {
    internal::MutexLock lock(mutex_);
    if (!holder_ || holder_->id != hold_id || holder_->lost.stop_requested()) return false;
    if (direct_held()) return direct_live(Clock::now());
    // Taken over by the core, whose first round has not judged it yet (the core owns nothing
    // until then): the lease itself says. Asking the core meanwhile said false for a moment
    // (LockerTest.AHoldIsOwnerAllAlongWhileTheCoreTakesItsLeaseOver).
    if (holder_->adopting && Clock::now() < holder_->adopting->deadline) return true;
  }
  return core().is_owner();
}

Hold LocalLine::grant_direct_locked(const ServiceCore::TakenLease& lease, const Terms& terms,
                                    std::shared_ptr<LockEntry> self) {
  handovers_.reset();  // a fresh remote lease
  window().won(lease.answered - lease.sent);
  Holder holder{++next_id_, lease.token(), /*generation=*/0, fresh_lost_locked(), std::nullopt, terms, lease.answered};
  telemetry().acquired(slot(), name(), core().contender_id(), holder.token, lease.answered - lease.sent);
  Hold hold(std::move(self), holder.id, holder.token, holder.lost.get_token());
  holder_ = std::move(holder);
  return hold;
}

std::stop_source LocalLine::fresh_lost_locked() {
  if (spare_lost_.stop_possible()) return std::exchange(spare_lost_, std::stop_source(std::nostopstate));
  return std::stop_source();
}

void LocalLine::adopting_locked(std::uint64_t generation, const ServiceCore::TakenLease& lease) {
  if (!holder_ || holder_->generation != 0) return;
  holder_->generation = generation;
  holder_->adopting = Holder::Adopting{lease.sent, lease.deadline};
}

}  // namespace simba::internal
