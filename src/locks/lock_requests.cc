// The request side of a lock manager entry: a request comes, passes, waits, is woken to claim,
// is cancelled, times out or gives up (lock_entry.h). Grants and handovers: lock_entry.cc.
#include <algorithm>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/lock_entry.h"
#include "locks/single_attempt.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba::internal {

std::uint64_t LockEntry::request(std::chrono::milliseconds timeout, Terms terms, Mutex::Callback done,
                                 bool inline_round, bool may_give_up, Waker* waker) {
  std::uint64_t ticket;
  Outcomes outcomes;
  {
    internal::MutexLock lock(mutex_);
    ticket = ++next_id_;
    Request request{ticket,
                    terms,
                    std::move(done),
                    std::nullopt,
                    rounds(),
                    shared_from_this(),
                    may_give_up ? Clock::now() : Clock::time_point{}};
    request.waker = waker;
    if (timeout != kNoTimeout) {
      std::weak_ptr<LockEntry> weak = shared_from_this();
      request.deadline = runtime_->schedule_after(std::max(timeout, std::chrono::milliseconds(0)), [weak, ticket] {
        if (auto self = weak.lock()) self->expire(ticket);
      });
    }
    if (!pass_locked(request, outcomes)) {
      requests_.push(std::move(request));
      // A cached lease is taken with no backend call (unless a fast hold has it: wait behind
      // it; or the lease ran out by our clock: contend anew).
      if (uncache_locked()) {
        if (const auto lease = core().lease(Clock::now()); lease.owner) {
          grant_front_locked(outcomes, lease);
        } else {
          want_release();
        }
      }
    }
    if (!outcomes) {
      drive_locked(inline_round);  // nothing to complete first: on without letting go of the lock
      return ticket;
    }
  }
  run(outcomes);
  drive(inline_round);
  return ticket;
}

bool LockEntry::pass_locked(Request& request, Outcomes& outcomes) {
  if (!offer_.may_pass(request, requests_) || holder_ || release_wanted() ||
      !handovers_.may_hand_over(offer_.terms(), demanded())) {
    return false;
  }
  const auto lease = core().lease(Clock::now());
  if (!lease.owner) return false;
  requests_.push_front(std::move(request));
  handovers_.handed_over();
  grant_front_locked(outcomes, lease);
  return true;
}

LockEntry::Claim LockEntry::claim(std::uint64_t ticket) {
  Outcomes outcomes;
  bool lapsed = false;
  {
    internal::MutexLock lock(mutex_);
    offer_.claimed(ticket);
    if (!requests_.find(ticket)) return Claim::granted;  // granted meanwhile: its Hold is on the way
    if (holder_ || !offer_.on_offer() || !requests_.is_front(ticket) || release_wanted()) return Claim::passed;
    if (const auto lease = core().lease(Clock::now()); lease.owner) {
      handovers_.handed_over();
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

std::optional<Request> LockEntry::leave_locked(std::uint64_t ticket, bool& vacant) {
  auto request = requests_.take(ticket);
  if (!request) return std::nullopt;
  if (request->deadline) runtime_->cancel(*request->deadline);  // false if it is what fired
  vacant = offer_.left(ticket) && !holder_;
  return request;
}

void LockEntry::reoffer() {
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

bool LockEntry::cancel(std::uint64_t ticket, std::error_code reason) {
  Outcomes outcomes;
  bool vacant = false;
  {
    internal::MutexLock lock(mutex_);
    auto request = leave_locked(ticket, vacant);
    if (!request) return false;
    settle(outcomes, Outcome{std::move(request->done), reason, Hold(), std::move(request->self)});
  }
  run(outcomes);
  if (vacant) reoffer();
  drive();
  return true;
}

LockEntry::GiveUp LockEntry::give_up(std::uint64_t ticket) {
  std::shared_ptr<LockEntry> keep;  // outlives the lock
  internal::UniqueMutexLock lock(mutex_);
  const Request* request = requests_.find(ticket);
  if (!request) return GiveUp::granted;
  const auto now = Clock::now();
  AttemptFacts facts;
  facts.attempting = requests_.is_front(ticket) && !holder_ && running();
  if (facts.attempting) {
    facts.won_ungranted = core().is_owner() && !release_wanted();  // on_round grants next
    facts.round_since_queued = rounds() != request->rounds_at_queue;
    facts.since_queued = now - request->queued_at;
    facts.attempt_bound = core().attempt_bound();
    facts.met_caching_owner = core().met_caching_owner();
    facts.since_met_owner = now - request->met_owner_at.value_or(request->queued_at);
    facts.handback_bound = core().handback_bound();
  }
  switch (single_attempt(facts)) {
    case AttemptVerdict::wait_for_round: return GiveUp::wait_for_round;
    case AttemptVerdict::ends_without_round: {
      const auto error = core().last_error();
      log_warn("mutex '" + name() + "': a single attempt saw no round of its contender within " +
               format_duration(core().attempt_bound()) + " (rounds " + std::to_string(rounds()) + ", waiters " +
               std::to_string(requests_.size()) + (release_wanted() ? ", release wanted" : "") +
               (error.empty() ? "" : ", last backend error: " + error) + "); it fails");
      break;
    }
    case AttemptVerdict::ends: break;
  }
  bool vacant = false;
  keep = std::move(leave_locked(ticket, vacant)->self);
  lock.unlock();
  if (vacant) reoffer();
  // Stopping the contender (no waiter left) waits for its round in flight: not on the thread
  // of an attempt that has ended.
  on_io([](LockEntry& entry) { entry.drive(); });
  return GiveUp::gave_up;
}

std::string LockEntry::timeout_message(std::chrono::milliseconds timeout, bool name_contender) const {
  TimeoutFacts facts;
  facts.mutex = name();
  if (timeout != kNoTimeout) facts.timeout = timeout;
  if (name_contender) facts.contender = core().contender_id();
  {
    internal::MutexLock lock(mutex_);
    facts.held_here = holder_.has_value();
  }
  facts.owner = core().last_owner_id();
  facts.self = core().contender_id();
  facts.last_error = core().last_error();
  return internal::timeout_message(facts);
}

void LockEntry::expire(std::uint64_t ticket) {
  Outcomes outcomes;
  bool vacant = false;
  {
    internal::MutexLock lock(mutex_);
    auto request = leave_locked(ticket, vacant);
    if (!request) return;
    settle(outcomes,
           Outcome{std::move(request->done), make_error_code(errc::timeout), Hold(), std::move(request->self)});
  }
  run(outcomes);
  if (vacant) reoffer();
  // On a timer thread: stopping the contender may take a round trip; not here.
  on_io([](LockEntry& entry) { entry.drive(); });
}

}  // namespace simba::internal
