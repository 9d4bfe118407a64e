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
    auto move = contender_move(state());
    if (move == ContenderMove::stop) {
      // While the lease goes back (outside the lock, below), a round that lands meanwhile must
      // not grant a request that came meanwhile from it: it would hold a lease already gone.
      release_wanted_ = true;
    } else if (move == ContenderMove::start) {
      if (!window_.away([] { return Clock::now(); })) {
        running_ = true;
      } else {
        move = ContenderMove::none;  // yielding to other processes for a while
        if (!restart_pending_) {
          restart_pending_ = true;
          drive_after(std::chrono::ceil<std::chrono::milliseconds>(window_.not_before() - Clock::now()));
        }
      }
    }
    if (move == ContenderMove::none) break;
    // Started and stopped outside the lock: a round calls back into the entry.
    mutex_.unlock();
    bool started = true;
    if (move == ContenderMove::start) {
      try {
        core_->start(inline_round);
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
      // Releases the lease (or the place in line); logs a failure; never throws.
      core_->close(std::exchange(hold_ended_at, std::nullopt));
      // A start after it still runs here, counted from now: the release took a round trip.
      if (inline_round) inline_round->since = Clock::now();
    }
    mutex_.lock();
    if (!started) {
      running_ = false;
      break;
    }
    if (move == ContenderMove::stop) {
      running_ = false;
      release_wanted_ = false;  // gone back: requests that came meanwhile start a new round
    }
  }
  driving_ = false;
}

}  // namespace simba::internal
