// The one remote contender of a lock manager entry: a ServiceCore, started when local requests
// wait and stopped when the lease (or the place in line) must go back, as the entry's state
// says (entry_state.h). Internal.
//
// Only the thread that is driving (drive()) starts or stops the core, outside the entry's
// lock; a thread that finds another driving leaves it a note and returns (the driver looks
// again before it stops). After giving a busy lease back it stays away for a YieldWindow.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/thread_annotations.h"
#include "core/service_core.h"
#include "locks/entry_state.h"
#include "locks/yield_window.h"

namespace simba::internal {

// A LockEntry is its RemoteContender (privately: it is how the entry is implemented): the
// entry's lock lives here, so that the contender's facts and the entry's are read under one
// lock, and each side checks it (GUARDED_BY this mutex_).
class RemoteContender {
 public:
  using Clock = std::chrono::steady_clock;

  RemoteContender(const RemoteContender&) = delete;
  RemoteContender& operator=(const RemoteContender&) = delete;

 protected:
  RemoteContender(std::string name, std::shared_ptr<const CoreContext> context);
  ~RemoteContender();

  // Makes the core, contending as `id`. It delivers no notifications: `entry` learns of each
  // round, loss and demand through its on_round, on_lost and on_demand, held weakly (an idle
  // entry is freed).
  template <class Entry>
  void contend_as(std::string id, std::weak_ptr<Entry> entry) {
    CoreHooks hooks;
    hooks.one_shot = true;
    hooks.on_round = [entry](const RoundTimes& times) {
      if (auto self = entry.lock()) self->on_round(times);
    };
    hooks.on_lost = [entry](std::uint64_t generation) {
      if (auto self = entry.lock()) self->on_lost(generation);
    };
    hooks.on_demand = [entry] {
      if (auto self = entry.lock()) self->on_demand();
    };
    make_core(std::move(id), std::move(hooks));
  }
  // Stops the core; waits for runtime tasks that still hold it. Before the entry's slot goes.
  void stop_contending() noexcept;

  // The entry's side, under mutex_: whether a local hold, local requests, a cached lease exist.
  virtual EntryFacts local_facts() const REQUIRES(mutex_) = 0;
  // Calls yield_ended() after `delay`, on an I/O thread, if the entry still lives then.
  virtual void drive_after(std::chrono::milliseconds delay) = 0;

  ServiceCore& core() const noexcept { return *core_; }
  const std::string& name() const noexcept { return name_; }
  bool push() const noexcept { return context_->push; }
  std::chrono::milliseconds poll() const noexcept { return context_->poll; }
  // Where the entry counts (the Client's telemetry, never null), and its name's slot there.
  Telemetry& telemetry() const noexcept { return *context_->telemetry; }
  MutexSlot& slot() const noexcept { return slot_; }

  bool running() const REQUIRES(mutex_) { return running_; }
  bool release_wanted() const REQUIRES(mutex_) { return release_wanted_; }
  // The lease (or the place in line) must go back: the next drive() stops a running core.
  void want_release() REQUIRES(mutex_) {
    if (running_) release_wanted_ = true;
  }
  // The entry's state (entry_state.h): the contender's facts and the entry's.
  EntryState state() const REQUIRES(mutex_);

  // A round ended (on_round). Counted: a single attempt waits for one.
  void count_round() REQUIRES(mutex_) { ++rounds_; }
  std::uint64_t rounds() const REQUIRES(mutex_) { return rounds_; }
  YieldWindow& window() REQUIRES(mutex_) { return window_; }
  const YieldWindow& window() const REQUIRES(mutex_) { return window_; }
  // A busy lease went back while requests wait here: stay away for a while.
  void yield() REQUIRES(mutex_) { window_.yield(Clock::now(), context_->push, context_->poll); }

  // Starts or stops the core until it matches the entry's state. `inline_round`: the first
  // round of a start may run on this thread (a thread that waits anyway), counted from when
  // the caller read the clock (ServiceCore::InlineRound).
  using InlineRound = std::optional<ServiceCore::InlineRound>;
  void drive(InlineRound inline_round = std::nullopt) EXCLUDES(mutex_);
  // The same from under the entry's lock (held again when it returns): one lock less for a
  // caller that held it anyway. `hold_ended_at`: the caller's clock read at a hold's end, from
  // which a stop's release counts its round trip (ServiceCore::stop): one read less.
  void drive_locked(InlineRound inline_round = std::nullopt,
                    std::optional<Clock::time_point> hold_ended_at = std::nullopt) REQUIRES(mutex_);
  // The drive_after() that ends a yield.
  void yield_ended() EXCLUDES(mutex_);

  // A direct lease: a Locker that finds the entry idle takes the lease by one call on its own
  // thread, with no core started (take_direct_locked). The entry keeps it, not the core; its
  // hold's end gives it back by one call (the next drive). Whatever needs a started core
  // meanwhile (a request queued behind the hold, the renewal falling due: the timer of
  // direct_timer_after) has the core take it over: started with the answer that won it
  // (ServiceCore::InlineRound::answered), as if its first round had won it. Only where the
  // core may_take_lease() (memory, SQLite: nothing of a started core is needed for an owner).
  //
  // Takes the direct lease if the entry's contender is idle (the caller checked the entry's
  // side: no hold, no request, nothing cached) and the answer wins it: then it is held,
  // mutex_ held again. Else null (not idle, or another owns it, or the call failed): the caller
  // contends through the core. mutex_ is let go while the call runs.
  const ServiceCore::TakenLease* take_direct_locked() REQUIRES(mutex_);
  // After the direct lease was granted (or not): a drive another thread asked for meanwhile.
  void after_direct_locked() REQUIRES(mutex_) {
    if (redrive_) drive_locked();
  }
  bool direct_held() const REQUIRES(mutex_) { return direct_.has_value(); }
  // The direct lease is live by this host's clock at `now`.
  bool direct_live(Clock::time_point now) const REQUIRES(mutex_) { return direct_ && now < direct_->deadline; }
  // The direct lease's renewal timer fired (direct_timer_after): the core takes it over once due.
  void direct_timer_fired() EXCLUDES(mutex_);
  // Calls direct_timer_fired() after `delay`, on an I/O thread, if the entry still lives then.
  virtual void direct_timer_after(std::chrono::milliseconds delay) = 0;
  // The core takes `lease` (the direct lease) over as generation `generation`: a hold of it is
  // now the core's (the entry's side adopts it, under mutex_), if the round that judges the
  // lease's answer finds it still live; until that round ends, the lease says whether it is.
  virtual void adopting_locked(std::uint64_t generation, const ServiceCore::TakenLease& lease) REQUIRES(mutex_) = 0;

  // The entry's lock: this contender's state, and the entry's queue, holder and cache.
  mutable AnnotatedMutex mutex_;

 private:
  void make_core(std::string id, CoreHooks hooks);

  const std::string name_;
  const std::shared_ptr<const CoreContext> context_;  // the table's, shared
  MutexSlot& slot_;                                   // in context_->telemetry
  std::shared_ptr<ServiceCore> core_;

  bool running_ GUARDED_BY(mutex_) = false;
  bool release_wanted_ GUARDED_BY(mutex_) = false;
  bool driving_ GUARDED_BY(mutex_) = false;
  bool redrive_ GUARDED_BY(mutex_) = false;
  bool restart_pending_ GUARDED_BY(mutex_) = false;  // a drive_after() for the end of a yield
  // The direct lease (take_direct_locked), the core's to take over once due_ (or needed).
  std::optional<ServiceCore::TakenLease> direct_ GUARDED_BY(mutex_);
  bool direct_due_ GUARDED_BY(mutex_) = false;
  // The core is known settled since its last stop (ServiceCore::settled()): a direct lease may
  // be taken. Cleared at every start.
  bool core_settled_ GUARDED_BY(mutex_) = true;
  // A direct_timer_after() is pending, for direct_timer_at_: armed once per renewal period, not
  // once per direct lease (one fires early: armed again for the lease then held).
  bool direct_timer_pending_ GUARDED_BY(mutex_) = false;
  Clock::time_point direct_timer_at_ GUARDED_BY(mutex_){};
  void arm_direct_timer_locked(Clock::time_point now) REQUIRES(mutex_);
  // When the core is to take the direct lease over: halfway to its renewal (the core renews at
  // the ttl's end).
  Clock::time_point direct_due_at() const REQUIRES(mutex_) {
    return direct_->sent + (direct_->ttl_deadline - direct_->sent) / 2;
  }
  std::uint64_t rounds_ GUARDED_BY(mutex_) = 0;
  YieldWindow window_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
