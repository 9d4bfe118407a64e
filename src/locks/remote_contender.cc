// The remote contender of a lock manager entry (remote_contender.h).
#include "locks/remote_contender.h"

#include <utility>

#include "base/log.h"
#include "locks/lock_table.h"

namespace simba::internal {

RemoteContender::RemoteContender(std::string name, std::shared_ptr<const CoreContext> context)
    : name_(std::move(name)), context_(std::move(context)), slot_(context_->telemetry->slot(name_)) {}

RemoteContender::~RemoteContender() { stop_contending(); }

void RemoteContender::make_core(std::string id, CoreHooks hooks) {
  auto contender = make_contender(name_, {}, {}, std::move(id));
  core_ = std::make_shared<ServiceCore>(contender, contender, context_, std::move(hooks));
}

// Nothing waits or holds (they would keep the entry alive), so the core is stopped.
void RemoteContender::stop_contending() noexcept {
  if (core_) release_core(core_);
}

EntryState RemoteContender::state() const {
  auto facts = local_facts();
  facts.contending = running_;
  facts.release_wanted = release_wanted_;
  return entry_state(facts);
}

void RemoteContender::yield_ended() {
  {
    MutexLock lock(mutex_);
    restart_pending_ = false;
  }
  drive();
}

void RemoteContender::drive(InlineRound inline_round) {
  MutexLock lock(mutex_);
  drive_locked(inline_round);
}

void RemoteContender::drive_locked(InlineRound inline_round, std::optional<Clock::time_point> hold_ended_at) {
  if (driving_) {
    redrive_ = true;
    return;
  }
  driving_ = true;
  for (;;) {
    redrive_ = false;
    auto move = ContenderMove::none;
    // A direct lease stays the entry's while its hold lasts (until its renewal is due); a hold
    // or a request then has the core take it over; with neither it goes back.
    std::optional<ServiceCore::TakenLease> adopted;  // taken over by the core
    bool give_back = false;                          // given back
    if (direct_) {
      const auto facts = local_facts();
      if (facts.holder && !direct_due_) break;
      direct_due_ = false;
      if (facts.holder || facts.requests) {
        move = ContenderMove::start;
        adopted = std::move(direct_);
        running_ = true;
        core_settled_ = false;
        adopting_locked(core_->generation() + 1, *adopted);  // only this driver starts or stops the core
      } else {
        move = ContenderMove::stop;
        give_back = true;
      }
      direct_.reset();
    } else {
      move = contender_move(state());
      if (move == ContenderMove::stop) {
        // While the lease goes back (outside the lock, below), a round that lands meanwhile must
        // not grant a request that came meanwhile from it: it would hold a lease already gone.
        release_wanted_ = true;
      } else if (move == ContenderMove::start) {
        if (!window_.away([] { return Clock::now(); })) {
          running_ = true;
          core_settled_ = false;
        } else {
          move = ContenderMove::none;  // yielding to other processes for a while
          if (!restart_pending_) {
            restart_pending_ = true;
            drive_after(std::chrono::ceil<std::chrono::milliseconds>(window_.not_before() - Clock::now()));
          }
        }
      }
    }
    if (move == ContenderMove::none) break;
    // Started and stopped outside the lock: a round calls back into the entry.
    mutex_.unlock();
    bool started = true;
    if (move == ContenderMove::start) {
      try {
        if (adopted) {
          core_->start(ServiceCore::InlineRound{adopted->sent, &adopted->answer});
        } else {
          core_->start(inline_round);
        }
      } catch (const std::exception& e) {
        // Only a core left in a wrong state gets here: a bug. Say so; try again later.
        log_error("mutex '" + name_ + "': could not start contending: " + e.what());
        started = false;
      } catch (...) {
        log_error("mutex '" + name_ + "': could not start contending: a non-standard exception");
        started = false;
      }
      inline_round.reset();
    } else {
      if (give_back) {
        // The direct lease goes back (logs a failure; never throws).
        core_->release_lease("the end of its hold", std::exchange(hold_ended_at, std::nullopt));
      } else {
        // Releases the lease (or the place in line); logs a failure; never throws.
        core_->close(std::exchange(hold_ended_at, std::nullopt));
      }
      // A start after it still runs here, counted from now: the release took a round trip.
      if (inline_round) inline_round->since = Clock::now();
    }
    mutex_.lock();
    if (!started) {
      running_ = false;
      break;
    }
    if (move == ContenderMove::stop && !give_back) {
      running_ = false;
      release_wanted_ = false;  // gone back: requests that came meanwhile start a new round
    }
  }
  driving_ = false;
}

const ServiceCore::TakenLease* RemoteContender::take_direct_locked() {
  if (running_ || driving_ || release_wanted_ || restart_pending_ || direct_ || !core_->may_take_lease() ||
      window_.away([] { return Clock::now(); })) {
    return nullptr;
  }
  // A core stopped from a runtime thread may still have a round in flight (its end gives back
  // what it took): asked until it has settled, then known until the next start.
  if (!core_settled_ && !(core_settled_ = core_->settled())) return nullptr;
  // The driver meanwhile: a drive on another thread leaves a note (redrive_), looked at below.
  driving_ = true;
  const auto sent = Clock::now();
  mutex_.unlock();
  auto lease = core_->take_lease(sent);
  mutex_.lock();
  driving_ = false;
  if (!lease) {
    if (redrive_) drive_locked();
    return nullptr;
  }
  direct_ = std::move(lease);
  arm_direct_timer_locked(direct_->answered);
  return &*direct_;
}

void RemoteContender::arm_direct_timer_locked(Clock::time_point now) {
  const auto due = direct_due_at();
  if (direct_timer_pending_ && direct_timer_at_ <= due) return;  // it fires first, and arms again
  direct_timer_pending_ = true;
  direct_timer_at_ = due;
  direct_timer_after(std::chrono::ceil<std::chrono::milliseconds>(due - now));
}

void RemoteContender::direct_timer_fired() {
  MutexLock lock(mutex_);
  const auto now = Clock::now();
  if (now >= direct_timer_at_) direct_timer_pending_ = false;  // (else a later one is still pending)
  if (!direct_) return;
  if (now < direct_due_at()) {
    arm_direct_timer_locked(now);
    return;
  }
  direct_due_ = true;
  drive_locked();
}

}  // namespace simba::internal
