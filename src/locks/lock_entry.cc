// One mutex of the lock manager as its handles see it: made in the table, requests in and out
// (lock_entry.h). Grants and handovers: local_line.cc.
#include "locks/lock_entry.h"

#include <algorithm>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/lock_table.h"
#include "locks/on_io.h"
#include "locks/single_attempt.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba::internal {

std::shared_ptr<LockEntry> LockEntry::create(std::shared_ptr<LockTable> table, std::string key, std::string name,
                                             bool caches, std::string given_id) {
  std::shared_ptr<LockEntry> entry(new LockEntry(std::move(table), std::move(key), std::move(name)));
  // An entry whose holds may cache says so in its id (MutexOwner::caching()): another process's
  // single attempt then waits for the hand-back its demand brings (give_up()).
  std::string id = given_id.empty() ? contender_id::host() : std::move(given_id);
  if (entry->may_ever_cache() && caches) id += MutexOwner::kCachingSuffix;
  entry->contend_as(std::move(id), std::weak_ptr<LockEntry>(entry));
  // Made: from now on its end takes it out of the table. An entry that failed here (a name the
  // backend cannot hold) ends under the table's lock, which takes its slot out itself.
  entry->in_table_ = true;
  return entry;
}

LockEntry::LockEntry(std::shared_ptr<LockTable> table, std::string key, std::string name)
    : LocalLine(std::move(name), table->context()), table_(std::move(table)), key_(std::move(key)) {}

LockEntry::~LockEntry() {
  telemetry().relocks_retired(fast().uses());
  // The contender stops before the slot goes: a new entry of the name never contends beside it.
  stop_contending();
  if (in_table_) table_->forget(key_);
}

Strand LockEntry::callback_strand() {
  internal::MutexLock lock(mutex_);
  if (!strand_) strand_ = runtime_->make_strand();
  return *strand_;
}

void LockEntry::drive_after(std::chrono::milliseconds delay) {
  internal::after_on_io<LockEntry>(*runtime_, delay, weak_from_this(), [](LockEntry& entry) { entry.yield_ended(); });
}

void LockEntry::direct_timer_after(std::chrono::milliseconds delay) {
  internal::after_on_io<LockEntry>(*runtime_, delay, weak_from_this(),
                                   [](LockEntry& entry) { entry.direct_timer_fired(); });
}

std::weak_ptr<LeaseCache> LockEntry::weak_cache() {
  return std::shared_ptr<LeaseCache>(shared_from_this(), static_cast<LeaseCache*>(this));
}

std::weak_ptr<LocalLine> LockEntry::weak_line() {
  return std::shared_ptr<LocalLine>(shared_from_this(), static_cast<LocalLine*>(this));
}

void LockEntry::post_io(std::function<void()> work) { runtime_->post_io(std::move(work)); }

void LockEntry::on_io(std::function<void(LockEntry&)> work) {
  internal::on_io(*runtime_, weak_from_this(), std::move(work));
}

std::uint64_t LockEntry::request(std::chrono::milliseconds timeout, Terms terms, Mutex::Callback done,
                                 bool inline_round, Waker* waker) {
  std::uint64_t ticket;
  InlineRound first_round;  // a first round here counts from the request's clock read
  Outcomes outcomes;
  {
    internal::MutexLock lock(mutex_);
    ticket = ++next_id_;
    const auto queued_at = Clock::now();
    if (inline_round) first_round = ServiceCore::InlineRound{queued_at};
    Request request{ticket, terms, std::move(done), std::nullopt, rounds(), shared_from_this(), queued_at};
    request.waker = waker;
    if (timeout != kNoTimeout) {
      std::weak_ptr<LockEntry> weak = shared_from_this();
      request.deadline = runtime_->schedule_after(std::max(timeout, std::chrono::milliseconds(0)), [weak, ticket] {
        if (auto self = weak.lock()) self->expire(ticket);
      });
    }
    if (!pass_locked(request, outcomes)) {
      requests_.push(std::move(request));
      telemetry().waiting(slot(), 1);
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
      drive_locked(first_round);  // nothing to complete first: on without letting go of the lock
      return ticket;
    }
  }
  run(outcomes);
  drive(first_round);
  return ticket;
}

Hold LockEntry::direct_hold(const Terms& terms) {
  if (terms.max_hold.count() > 0) return {};
  internal::MutexLock lock(mutex_);
  if (held_locked() || !requests_.empty() || cached() || offer_.on_offer()) return {};
  Hold hold;
  // Requests that came while the call ran queue behind this one, which came first.
  if (const auto* lease = take_direct_locked()) hold = grant_direct_locked(*lease, terms, shared_from_this());
  after_direct_locked();
  return hold;
}

std::optional<Request> LockEntry::leave_locked(std::uint64_t ticket, bool& vacant) {
  auto request = requests_.take(ticket);
  if (!request) return std::nullopt;
  telemetry().waiting(slot(), -1);
  if (request->deadline) runtime_->cancel(*request->deadline);  // false if it is what fired
  vacant = offer_.left(ticket) && !held_locked();
  return request;
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
  facts.attempting = requests_.is_front(ticket) && !held_locked() && running();
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
    facts.held_here = held_locked();
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
