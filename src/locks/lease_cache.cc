// Lock caching: a lease kept after the last local hold, its fast path, and its hand-back on
// another process's demand, on linger, or on request. See simba/mutex.h and lease_cache.h.
#include "locks/lease_cache.h"

#include <algorithm>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/lock_table.h"
#include "locks/on_io.h"

namespace simba::internal {

LeaseCache::LeaseCache(std::string name, const std::shared_ptr<const CoreContext>& context)
    : RemoteContender(std::move(name), context),
      runtime_(context->runtime),
      backend_(context->backend),
      demand_(backend_->demand_signal() != nullptr),
      idle_marks_(backend_->idle_marks()),
      poll_failures_("mutex '" + this->name() + "'"),
      idle_marker_("mutex '" + this->name() + "'") {}

// The caching owner reads the demand at the poll interval, at most 100 ms: a cheap read that
// bounds how long a demand whose push was missed waits (ZooKeeper's watch, one-shot, misses
// a change made before it is armed again; its poll interval is a second).
std::chrono::milliseconds LeaseCache::demand_poll() const { return std::min(poll(), std::chrono::milliseconds(100)); }

// Caching pays while nobody else wants the mutex. A process that saw another owner within
// the last second (it had to wait) expects contention: it hands the lease back at unlock, as
// it would without caching, instead of keeping it until the next demand arrives (which may be
// a round trip after the unlock: on ZooKeeper, a node created behind ours, seen by a watch).
bool LeaseCache::may_cache_locked(const Terms& terms, bool requests_waiting) const {
  return demand_ && terms.linger.count() > 0 && !demanded_ && !window().contended(Clock::now()) && !release_wanted() &&
         !requests_waiting && running() && fast_.state() == FastPath::State::closed && core().is_owner();
}

void LeaseCache::enter_cache_locked(const Terms& terms) {
  cached_ = true;
  cache_terms_ = terms;
  cache_generation_ = core().generation();
  const auto epoch = ++cache_epoch_;
  fast_.open(core().fencing_token(), core().lease_deadline());
  const auto uses = fast_.uses();
  polled_uses_ = uses;
  linger_timer_ = after_on_io(terms.linger, [epoch, uses](LeaseCache& entry) { entry.linger_passed(epoch, uses); });
  // The owner reads the demand at the poll interval too: a safety net for a push that never
  // came (Redis: JVM Simba waiters only join the queue), and the only way on SQL engines,
  // where the first read comes at once (a waiter that asked during the hold is served now),
  // unless one was made within the poll interval.
  const bool push = backend_->demand_push() != nullptr;
  const auto now = Clock::now();
  const auto first_poll = push || now - last_poll_ < demand_poll() ? demand_poll() : std::chrono::milliseconds(0);
  poll_timer_ = after_on_io(first_poll, [epoch](LeaseCache& entry) { entry.poll_demand(epoch); });
}

bool LeaseCache::settle_cache_locked() {
  if (!cached_ || !fast_.settle()) return false;
  // A thread holds it through the fast path: from now on it is the ordinary holder.
  leave_cache_locked();
  adopt_fast_hold_locked(fast_.token(), cache_generation_, fast_.lost_source(), cache_terms_);
  return true;
}

void LeaseCache::leave_cache_locked() {
  cached_ = false;
  idle_seen_ = false;
  // Marked idle, or a mark in flight that read the cached state before this: mark in use.
  if (idle_marker_.may_be_marked()) {
    on_io([](LeaseCache& entry) { entry.sync_idle_mark(); });
  }
  if (linger_timer_) runtime_->cancel(*linger_timer_);
  if (poll_timer_) runtime_->cancel(*poll_timer_);
  linger_timer_.reset();
  poll_timer_.reset();
}

void LeaseCache::linger_passed(std::uint64_t epoch, std::uint64_t uses) {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || epoch != cache_epoch_) return;
    const auto now_uses = fast_.uses();
    if (now_uses != uses) {  // used through the fast path meanwhile: another linger from now
      linger_timer_ = after_on_io(cache_terms_.linger,
                                  [epoch, now_uses](LeaseCache& entry) { entry.linger_passed(epoch, now_uses); });
      return;
    }
    if (settle_cache_locked()) return;  // in use right now: its end decides
    leave_cache_locked();
    want_release();
  }
  drive();
}

void LeaseCache::on_demand() {
  on_io([](LeaseCache& entry) { entry.demand_arrived(); });
}

void LeaseCache::demand_arrived() {
  {
    internal::MutexLock lock(mutex_);
    if (!running()) return;  // nothing held here: a demand for the next owner
    if (!demanded_) telemetry().demand(name(), core().contender_id());
    demanded_ = true;
    if (!cached_ || settle_cache_locked()) return;  // a holder ends first, then releases
    leave_cache_locked();
    want_release();
  }
  drive();
}

// A push is a cue to look, not a demand: it may come without one (DemandPush::watch_demand():
// a ZooKeeper waiter that left, a dropped channel, another mutex ringing a shared slot of
// SQLite's wake board), and a lease given back for it would cost the next hold a round trip.
void LeaseCache::demand_pushed() {
  {
    internal::MutexLock lock(mutex_);
    if (!running() || demanded_) return;  // nothing held here, or heard already
  }
  if (read_demand()) demand_arrived();
}

// Whether the backend's record shows a demand on our own lease. A failed read is said once per
// run of failures (the lease's own renewals say whether it survives) and reads as no demand.
bool LeaseCache::read_demand() {
  try {
    auto snapshot = backend_->read(name());
    poll_failures_.succeeded();
    return snapshot.demanded && snapshot.owner.owner_id == core().contender_id();
  } catch (const std::exception& e) {
    telemetry().backend_error(BackendOp::read, name(), e.what());
    poll_failures_.failed("reading the demand", e);
    return false;
  }
}

// Brings the owner record's idle mark in line with the entry (idle_marker.h): idle while
// cached and unused at the last poll, else not.
void LeaseCache::sync_idle_mark() noexcept {
  if (idle_marks_ == nullptr) return;
  idle_marker_.sync(
      [this]() -> std::optional<std::uint64_t> {
        internal::MutexLock lock(mutex_);
        if (!running() || !core().is_owner()) return std::nullopt;
        return cached_ && idle_seen_ ? fast_.token() : 0;
      },
      [this](bool idle) {
        const auto sent = Clock::now();
        try {
          const bool kept = idle_marks_->mark_idle(name(), core().contender_id(), idle);
          telemetry().round_trip(BackendOp::mark_idle, Clock::now() - sent);
          return kept;
        } catch (const std::exception& e) {
          telemetry().backend_error(BackendOp::mark_idle, name(), e.what());
          throw;
        }
      });
}

Runtime::TimerId LeaseCache::after_on_io(std::chrono::milliseconds delay, std::function<void(LeaseCache&)> work) {
  return internal::after_on_io(*runtime_, delay, weak_cache(), std::move(work));
}

void LeaseCache::on_io(std::function<void(LeaseCache&)> work) {
  internal::on_io(*runtime_, weak_cache(), std::move(work));
}

void LeaseCache::poll_demand(std::uint64_t epoch) {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || epoch != cache_epoch_) return;
    last_poll_ = Clock::now();
    // Unused since the last poll and not in use now: the record may say the lease is idle.
    const auto uses = fast_.uses();
    idle_seen_ = uses == polled_uses_ && fast_.state() == FastPath::State::open;
    polled_uses_ = uses;
  }
  if (read_demand()) {
    demand_arrived();
    return;
  }
  sync_idle_mark();
  internal::MutexLock lock(mutex_);
  if (!cached_ || epoch != cache_epoch_) return;
  poll_timer_ = after_on_io(demand_poll(), [epoch](LeaseCache& entry) { entry.poll_demand(epoch); });
}

// On an I/O thread, after the first remote win: listen for demands from now on (for as long
// as the entry lives: the watch is kept across leases), then read once for a demand left
// before the watch began.
void LeaseCache::watch_demand() {
  std::unique_ptr<Subscription> watch;
  if (auto* pushes = backend_->demand_push()) {
    try {
      // Runs on the backend's thread: only a post (the entry is never released there).
      watch = pushes->watch_demand(name(), core().contender_id(), [runtime = runtime_, weak = weak_cache()] {
        internal::on_io<LeaseCache>(*runtime, weak, [](LeaseCache& cache) { cache.demand_pushed(); });
      });
    } catch (const std::exception& e) {
      log_warn("mutex '" + name() + "': cannot watch for demand (" + e.what() + "); reading it at the poll interval");
    }
  }
  {
    internal::MutexLock lock(mutex_);
    if (demand_watched_ && !demand_watch_) std::swap(demand_watch_, watch);  // else contended meanwhile
  }
  watch.reset();
  if (read_demand()) demand_arrived();
}

void LeaseCache::lease_won_locked(bool caching) {
  demanded_ = false;
  if (caching && demand_ && !demand_watched_) {  // kept across leases while uncontended
    demand_watched_ = true;
    on_io([](LeaseCache& cache) { cache.watch_demand(); });
  }
}

std::unique_ptr<Subscription> LeaseCache::rival_seen_locked() {
  demand_watched_ = false;
  return std::move(demand_watch_);
}

bool LeaseCache::release_cached() noexcept {
  {
    internal::MutexLock lock(mutex_);
    if (!cached_ || settle_cache_locked()) return false;
    leave_cache_locked();
    want_release();
  }
  try {
    drive();
  } catch (const std::exception& e) {
    log_error("mutex '" + name() + "': releasing a cached lease: " + e.what());
  }
  return true;
}

}  // namespace simba::internal
