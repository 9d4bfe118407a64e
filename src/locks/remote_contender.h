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
  std::uint64_t rounds_ GUARDED_BY(mutex_) = 0;
  YieldWindow window_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
