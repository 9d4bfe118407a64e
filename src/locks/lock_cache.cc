// Lock caching: a lease kept after the last local hold, its fast path, and its hand-back on
// another process's demand, on linger, or on request. See simba/mutex.h and lock_entry.h.
#include <algorithm>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/lock_entry.h"

namespace simba::internal {
namespace {

// The fast path reads CLOCK_MONOTONIC_COARSE (lock_entry.h), which lags steady_clock's
// CLOCK_MONOTONIC by at most a tick (1-10 ms): it stops using a cached lease kFastMargin
// before its deadline by steady_clock, so a lagging reading never overruns it.
constexpr std::int64_t kFastMargin = 20'000'000;  // ns

std::int64_t fast_deadline(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count() - kFastMargin;
}

}  // namespace

LockEntry::FastLock LockEntry::fast_lock_slow() noexcept {
  if (fast_thread_.load(std::memory_order_relaxed) == this_thread_tag()) {
    if (fast_lost_.stop_requested()) return FastLock::lost;
    ++fast_count_;
    return FastLock::counted;
  }
  return FastLock::none;
}

void LockEntry::fast_missed_deadline() noexcept {
  // Near or past the lease's end by our clock: the ordinary path judges it exactly.
  int expected = kFastHeld;
  if (!fast_.compare_exchange_strong(expected, kFastOpen, std::memory_order_release)) end_fast_hold();
}

std::optional<std::uint64_t> LockEntry::fast_token() const noexcept {
  if (fast_thread_.load(std::memory_order_relaxed) != this_thread_tag()) return std::nullopt;
  return fast_lost_.stop_requested() ? 0 : fast_token_;
}

std::optional<std::stop_token> LockEntry::fast_lease() const noexcept {
  if (fast_thread_.load(std::memory_order_relaxed) != this_thread_tag()) return std::nullopt;
  return fast_lost_.get_token();
}

// The slow path took over a fast hold (settle_cache_locked made it holder_): end it there.
void LockEntry::end_fast_hold() noexcept {
  std::uint64_t id;
  {
    internal::MutexLock lock(mutex_);
    fast_.store(kFastClosed, std::memory_order_relaxed);
    id = fast_hold_id_;
  }
  if (id != 0) end_hold(id);  // 0: it was revoked meanwhile
}

// The caching owner reads the demand at the poll interval, at most 100 ms: a cheap read that
// bounds how long a demand whose push was missed waits (ZooKeeper's watch, one-shot, misses
// a change made before it is armed again; its poll interval is a second).
std::chrono::milliseconds LockEntry::demand_poll() const { return std::min(poll_, std::chrono::milliseconds(100)); }

// Caching pays while nobody else wants the mutex. A process that saw another owner within
// the last second (it had to wait) expects contention: it hands the lease back at unlock, as
// it would without caching, instead of keeping it until the next demand arrives (which may be
// a round trip after the unlock: on ZooKeeper, a node created behind ours, seen by a watch).
bool LockEntry::contended_locked() const {
  return rival_seen_ && Clock::now() - *rival_seen_ < std::chrono::seconds(1);
}

bool LockEntry::may_cache_locked(const Terms& terms) const {
  return demand_ && terms.linger.count() > 0 && !demanded_ && !contended_locked() && !release_wanted_ &&
         waiters_.empty() && core_running_ && fast_.load(std::memory_order_relaxed) == kFastClosed && core_->is_owner();
}

void LockEntry::enter_cache_locked(const Terms& terms) {
  cached_ = true;
  handovers_ = 0;
  cache_terms_ = terms;
  cache_generation_ = core_->generation();
  const auto epoch = ++cache_epoch_;
  fast_token_ = core_->fencing_token();
  if (!fast_lost_.stop_possible() || fast_lost_.stop_requested()) fast_lost_ = std::stop_source();
  fast_until_.store(fast_deadline(core_->lease_deadline()), std::memory_order_relaxed);
  fast_.store(kFastOpen, std::memory_order_release);
  const auto uses = fast_uses_.load(std::memory_order_relaxed);
  polled_uses_ = uses;
  linger_timer_ = after_on_io(terms.linger, [epoch, uses](LockEntry& entry) { entry.linger_passed(epoch, uses); });
  // The owner reads the demand at the poll interval too: a safety net for a push that never
  // came (Redis: JVM Simba waiters only join the queue), and the only way on SQL engines,
  // where the first read comes at once (a waiter that asked during the hold is served now),
  // unless one was made within the poll interval.
  const bool push = backend_->capabilities().demand_push;
  const auto now = Clock::now();
  const auto first_poll = push || now - last_poll_ < demand_poll() ? demand_poll() : std::chrono::milliseconds(0);
  poll_timer_ = after_on_io(first_poll, [epoch](LockEntry& entry) { entry.poll_demand(epoch); });
}

void LockEntry::refresh_cache_locked() {
  fast_until_.store(fast_deadline(core_->lease_deadline()), std::memory_order_relaxed);
}

bool LockEntry::settle_cache_locked() {
  if (!cached_) return false;
  int state = fast_.load(std::memory_order_acquire);
  for (;;) {
    if (state == kFastOpen) {
      if (fast_.compare_exchange_weak(state, kFastClosed, std::memory_order_acq_rel)) return false;
    } else if (state == kFastHeld) {
      if (fast_.compare_exchange_weak(state, kFastHeldClosing, std::memory_order_acq_rel)) break;
    } else {
      return false;
    }
  }
  // A thread holds it through the fast path: from now on it is the ordinary holder.
  leave_cache_locked();
  Holder holder{++next_id_, fast_token_, cache_generation_, fast_lost_, std::nullopt, cache_terms_};
  fast_hold_id_ = holder.id;
  holder_ = std::move(holder);
  return true;
}

void LockEntry::leave_cache_locked() {
  cached_ = false;
  idle_seen_ = false;
  // Marked idle, or a mark in flight that read the cached state before this: mark in use.
  if (idle_marked_.load(std::memory_order_relaxed) || mark_requests_.load(std::memory_order_acquire) != 0) {
    on_io([](LockEntry& entry) { entry.sync_idle_mark(); });
  }
  if (linger_timer_) runtime_->cancel(*linger_timer_);
  if (poll_timer_) runtime_->cancel(*poll_timer_);
  linger_timer_.reset();
  poll_timer_.reset();
}

void LockEntry::linger_passed(std::uint64_t epoch, std::uint64_t uses) {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || epoch != cache_epoch_) return;
    const auto now_uses = fast_uses_.load(std::memory_order_relaxed);
    if (now_uses != uses) {  // used through the fast path meanwhile: another linger from now
      linger_timer_ = after_on_io(cache_terms_.linger,
                                  [epoch, now_uses](LockEntry& entry) { entry.linger_passed(epoch, now_uses); });
      return;
    }
    if (settle_cache_locked()) return;  // in use right now: its end decides
    leave_cache_locked();
    release_wanted_ = true;
  }
  drive();
}

void LockEntry::on_demand() {
  on_io([](LockEntry& entry) { entry.demand_arrived(); });
}

void LockEntry::demand_arrived() {
  {
    internal::MutexLock lock(mutex_);
    if (!core_running_) return;  // nothing held here: a demand for the next owner
    demanded_ = true;
    if (!cached_ || settle_cache_locked()) return;  // a holder ends first, then releases
    leave_cache_locked();
    release_wanted_ = true;
  }
  drive();
}

// Whether the backend's record shows a demand on our own lease. A failed read is said once per
// run of failures (the lease's own renewals say whether it survives) and reads as no demand.
bool LockEntry::read_demand() {
  try {
    auto snapshot = backend_->read(name_);
    poll_failing_.store(false, std::memory_order_relaxed);
    return snapshot.demanded && snapshot.owner.owner_id == core_->contender_id();
  } catch (const std::exception& e) {
    warn_once(poll_failing_, "reading the demand", e);
    return false;
  }
}

// Says a failure of `doing` once per run of failures (`failing` is set until a success clears it).
void LockEntry::warn_once(std::atomic<bool>& failing, const char* doing, const std::exception& e) {
  if (!failing.exchange(true, std::memory_order_relaxed)) log_warn("mutex '" + name_ + "': " + doing + ": " + e.what());
}

// Brings the owner record's idle mark in line with the entry: idle while cached and unused
// at the last poll, else not. One thread marks at a time (others leave it a request and go: an
// I/O thread never waits for another's backend call); each pass reads the entry's state
// afresh, so the last pass leaves the mark where the entry is. A lease that went took its mark
// with it.
void LockEntry::sync_idle_mark() noexcept {
  if (!idle_mark_) return;
  if (mark_requests_.fetch_add(1, std::memory_order_acq_rel) != 0) return;  // the marking thread will see it
  for (;;) {
    const auto requests = mark_requests_.load(std::memory_order_acquire);
    mark_once();
    if (mark_requests_.fetch_sub(requests, std::memory_order_acq_rel) == requests) return;
  }
}

void LockEntry::mark_once() noexcept {
  std::uint64_t want;
  bool owner;
  {
    internal::MutexLock lock(mutex_);
    owner = core_running_ && core_->is_owner();
    want = owner && cached_ && idle_seen_ ? fast_token_ : 0;
  }
  if (want == marked_token_) return;
  if (!owner) {
    marked_token_ = 0;
  } else {
    try {
      const bool marked = backend_->mark_idle(name_, core_->contender_id(), want != 0);
      marked_token_ = marked ? want : 0;
      mark_failing_.store(false, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      warn_once(mark_failing_, want ? "marking the cached lease idle" : "marking the cached lease in use", e);
    }
  }
  idle_marked_.store(marked_token_ != 0, std::memory_order_relaxed);
}

// Runs `work` on an I/O thread after `delay` (a timer's thread must not make backend calls),
// if the entry still lives then.
Runtime::TimerId LockEntry::after_on_io(std::chrono::milliseconds delay, std::function<void(LockEntry&)> work) {
  std::weak_ptr<LockEntry> weak = shared_from_this();
  return runtime_->schedule_after(delay, [weak, work = std::move(work)] {
    if (auto self = weak.lock()) self->on_io(work);
  });
}

void LockEntry::on_io(std::function<void(LockEntry&)> work) {
  runtime_->post_io([weak = weak_from_this(), work = std::move(work)] {
    if (auto self = weak.lock()) work(*self);
  });
}

void LockEntry::poll_demand(std::uint64_t epoch) {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || epoch != cache_epoch_) return;
    last_poll_ = Clock::now();
    // Unused since the last poll and not in use now: the record may say the lease is idle.
    const auto uses = fast_uses_.load(std::memory_order_relaxed);
    idle_seen_ = uses == polled_uses_ && fast_.load(std::memory_order_acquire) == kFastOpen;
    polled_uses_ = uses;
  }
  if (read_demand()) {
    demand_arrived();
    return;
  }
  sync_idle_mark();
  internal::MutexLock lock(mutex_);
  if (!cached_ || epoch != cache_epoch_) return;
  poll_timer_ = after_on_io(demand_poll(), [epoch](LockEntry& entry) { entry.poll_demand(epoch); });
}

// On an I/O thread, after the first remote win: listen for demands from now on (for as long
// as the entry lives: the watch is kept across leases), then read once for a demand left
// before the watch began.
void LockEntry::watch_demand() {
  std::unique_ptr<Subscription> watch;
  if (backend_->capabilities().demand_push) {
    try {
      auto runtime = runtime_;
      std::weak_ptr<LockEntry> weak = shared_from_this();
      // Runs on the backend's thread: only a post (the entry is never released there).
      watch = backend_->watch_demand(name_, core_->contender_id(), [runtime, weak] {
        runtime->post_io([weak] {
          if (auto entry = weak.lock()) entry->demand_arrived();
        });
      });
    } catch (const std::exception& e) {
      log_warn("mutex '" + name_ + "': cannot watch for demand (" + e.what() + "); reading it at the poll interval");
    }
  }
  {
    internal::MutexLock lock(mutex_);
    if (demand_watched_ && !demand_watch_) std::swap(demand_watch_, watch);  // else contended meanwhile
  }
  watch.reset();
  if (read_demand()) demand_arrived();
}

bool LockEntry::release_cached() noexcept {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || settle_cache_locked()) return false;
    leave_cache_locked();
    release_wanted_ = true;
  }
  try {
    drive();
  } catch (const std::exception& e) {
    log_error("mutex '" + name_ + "': releasing a cached lease: " + e.what());
  }
  return true;
}

}  // namespace simba::internal
