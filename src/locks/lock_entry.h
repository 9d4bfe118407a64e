// One mutex of the lock manager in this process: its local FIFO of requests, its one holder,
// and the one remote contender (a ServiceCore) behind them. Internal; the states are the
// table in simba/mutex.h.
//
// `mutex_` guards the queue, the holder and the contender's running flag. Only the thread
// that is "driving" (drive()) starts or stops the contender, outside `mutex_`; others leave it
// a note (redrive_). Completions (futures, callbacks, Asio posts) run outside `mutex_`.
// Lock order: mutex_ before the core's own lock; threads_mutex_ is never held with mutex_.
//
// Caching (lock_cache.cc): a `cached_` entry keeps its lease with no holder and no waiter,
// and opens the fast path: `fast_` goes open -> held by one exchange in Mutex::lock() (no lock
// taken, no allocation) and back at unlock(). Whatever else wants the entry under `mutex_`
// first settles it (settle_cache_locked): closes the fast path, and turns a fast hold it
// finds into the ordinary holder_, whose end then comes through end_hold().
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/thread_annotations.h"
#include "core/service_core.h"
#include "simba/mutex.h"

namespace simba::internal {

class LockTable;

class LockEntry : public std::enable_shared_from_this<LockEntry> {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kNoTimeout = std::chrono::milliseconds::max();

  // Throws Error(errc::invalid_argument) for a name the backend cannot hold.
  // `key`: its slot in `table`. `caches`: whether the handle that makes it caches leases (its
  // contender id says so). `given_id`: empty for a host id (LockTable::entry).
  static std::shared_ptr<LockEntry> create(std::shared_ptr<LockTable> table, std::string key, std::string name,
                                           bool caches, std::string given_id);
  ~LockEntry();

  const std::string& name() const noexcept { return name_; }
  const std::string& contender_id() const noexcept { return core_->contender_id(); }

  // Queues a request. `inline_round`: the caller may block for the first remote round (a
  // thread that waits anyway). Returns the ticket.
  // A request's terms: its handle's LockOptions.
  struct Terms {
    std::chrono::milliseconds max_hold;
    std::chrono::milliseconds linger;
    unsigned max_local_handovers;
  };
  std::uint64_t request(std::chrono::milliseconds timeout, Terms terms, Mutex::Callback done, bool inline_round);
  bool cancel(std::uint64_t ticket, std::error_code reason);
  // A waiting thread's deadline passed: gives up its request unless no remote round has
  // finished since it queued (then it must wait a little longer: at least one attempt).
  enum class GiveUp { gave_up, granted, wait_for_round };
  GiveUp give_up(std::uint64_t ticket);
  // The message of a timed-out wait.
  std::string timeout_message(std::chrono::milliseconds timeout, bool name_contender = false) const;

  // Hold::unlock(): hands over locally or releases. No-op for a hold already revoked.
  void end_hold(std::uint64_t hold_id) noexcept;
  // Whether hold `hold_id` is the holder and the lease behind it live by this host's clock.
  bool hold_is_owner(std::uint64_t hold_id) const;

  // Holds taken through Mutex's Lockable interface, per thread.
  enum class Reentry { not_held, counted, lost };
  Reentry reenter(std::thread::id thread);
  void adopt(std::thread::id thread, Hold hold);
  // nullopt: the thread holds nothing here. At zero the hold comes back, to be destroyed
  // outside the entry's locks; above zero an empty Hold.
  std::optional<Hold> leave(std::thread::id thread);
  std::uint64_t thread_token(std::thread::id thread) const;
  std::stop_token thread_lease(std::thread::id thread) const;

  // Where Mutex::lock_async's callbacks run: one at a time per mutex.
  Strand callback_strand();

  // The fast path of Mutex's Lockable interface over a cached lease (lock_cache.cc).
  // fast_lock: counted (this thread holds it fast: one more), acquired (taken from the cache),
  // lost (this thread's fast hold was revoked), or none (take the ordinary path);
  // `may_acquire` false only counts.
  enum class FastLock { none, counted, acquired, lost };
  FastLock fast_lock(bool may_acquire) noexcept {
    int expected = kFastOpen;
    if (!may_acquire || !fast_.compare_exchange_strong(expected, kFastHeld, std::memory_order_acquire)) {
      return fast_lock_slow();  // this thread's own fast hold, counted; or none
    }
    if (coarse_now_ns() >= fast_until_.load(std::memory_order_relaxed)) {
      fast_missed_deadline();
      return FastLock::none;
    }
    fast_thread_.store(this_thread_tag(), std::memory_order_relaxed);
    fast_count_ = 1;
    fast_uses_.store(fast_uses_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return FastLock::acquired;
  }
  // true if this thread held the mutex fast (and now one count less).
  bool fast_unlock() noexcept {
    if (fast_thread_.load(std::memory_order_relaxed) != this_thread_tag()) return false;
    if (--fast_count_ > 0) return true;
    fast_thread_.store(nullptr, std::memory_order_relaxed);
    int expected = kFastHeld;
    if (!fast_.compare_exchange_strong(expected, kFastOpen, std::memory_order_release)) end_fast_hold();
    return true;
  }
  // A distinct address per thread, cheaper to get than std::this_thread::get_id().
  static const void* this_thread_tag() noexcept {
    static thread_local char tag;
    return &tag;
  }
  // CLOCK_MONOTONIC_COARSE in ns: a few ns to read (see lock_cache.cc for its margin).
  static std::int64_t coarse_now_ns() noexcept {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  }
  // Of this thread's fast hold, if it has one.
  std::optional<std::uint64_t> fast_token() const noexcept;
  std::optional<std::stop_token> fast_lease() const noexcept;
  // Gives the lease back now if it is cached (Client::release_cached()); true if it was.
  bool release_cached() noexcept;

 private:
  struct Waiter {
    std::uint64_t ticket;
    Terms terms;
    Mutex::Callback done;
    std::optional<Runtime::TimerId> timer;
    std::uint64_t rounds_at_queue;
    std::shared_ptr<LockEntry> self;  // a waiter keeps its entry alive (cycle ends as it leaves)
    Clock::time_point queued_at;
    // When a round first met another owner while this waiter was first in line: a single
    // attempt's wait for a caching owner's hand-back counts from there.
    std::optional<Clock::time_point> met_owner_at{};
  };
  struct Holder {
    std::uint64_t id;
    std::uint64_t token;
    std::uint64_t generation;  // the core's, to match a loss
    std::stop_source lost;
    std::optional<Runtime::TimerId> max_hold_timer;
    Terms terms{};  // of the request it came from (a fast hold: of the hold that cached)
  };
  // What to run once mutex_ is released. `keep` (the waiter's hold on the entry) goes when the
  // caller's list does, after the caller is done with the entry.
  struct Outcome {
    Mutex::Callback done;
    std::error_code error;
    Hold hold;
    std::shared_ptr<LockEntry> keep;
  };
  using Outcomes = std::vector<Outcome>;

  LockEntry(std::shared_ptr<LockTable> table, std::string key, std::string name);

  void drive(bool inline_round = false);
  void on_round();
  void on_lost(std::uint64_t generation);
  void expire(std::uint64_t ticket);
  void revoke(std::uint64_t hold_id, const char* why);
  void grant_front_locked(Outcomes& outcomes) REQUIRES(mutex_);
  void end_holder_locked(std::stop_source* to_stop) REQUIRES(mutex_);
  static void run(Outcomes& outcomes) noexcept;
  Clock::duration yield_delay_locked() const REQUIRES(mutex_);
  void open_window_locked() REQUIRES(mutex_);
  // Caching (lock_cache.cc).
  bool may_cache_locked(const Terms& terms) const REQUIRES(mutex_);
  bool contended_locked() const REQUIRES(mutex_);
  std::chrono::milliseconds demand_poll() const;
  void enter_cache_locked(const Terms& terms) REQUIRES(mutex_);
  bool settle_cache_locked() REQUIRES(mutex_);
  void leave_cache_locked() REQUIRES(mutex_);
  void refresh_cache_locked() REQUIRES(mutex_);
  void demand_arrived();
  void on_demand();
  void watch_demand();
  void poll_demand(std::uint64_t epoch);
  bool read_demand();
  void sync_idle_mark() noexcept;
  void mark_once() noexcept;
  void warn_once(std::atomic<bool>& failing, const char* doing, const std::exception& e);
  Runtime::TimerId after_on_io(std::chrono::milliseconds delay, std::function<void(LockEntry&)> work);
  // Runs `work` on an I/O thread soon, if the entry still lives then.
  void on_io(std::function<void(LockEntry&)> work);
  void linger_passed(std::uint64_t epoch, std::uint64_t uses);
  void end_fast_hold() noexcept;
  FastLock fast_lock_slow() noexcept;
  void fast_missed_deadline() noexcept;

  const std::shared_ptr<LockTable> table_;
  const std::string key_;  // in table_
  bool in_table_ = false;  // set once by create(): only a made entry leaves the table
  const std::string name_;
  const std::shared_ptr<Runtime> runtime_;
  const std::shared_ptr<Backend> backend_;
  const bool push_;
  const bool demand_;     // the backend has a demand signal: caching allowed
  const bool idle_mark_;  // the backend keeps an idle mark on the owner record
  const std::chrono::milliseconds poll_;
  std::shared_ptr<ServiceCore> core_;

  mutable internal::AnnotatedMutex mutex_;
  std::deque<Waiter> waiters_ GUARDED_BY(mutex_);
  std::optional<Holder> holder_ GUARDED_BY(mutex_);
  std::uint64_t next_id_ GUARDED_BY(mutex_) = 0;
  std::uint64_t rounds_ GUARDED_BY(mutex_) = 0;
  unsigned handovers_ GUARDED_BY(mutex_) = 0;
  bool core_running_ GUARDED_BY(mutex_) = false;
  bool release_wanted_ GUARDED_BY(mutex_) = false;
  bool driving_ GUARDED_BY(mutex_) = false;
  bool redrive_ GUARDED_BY(mutex_) = false;
  Clock::time_point not_before_ GUARDED_BY(mutex_){};
  std::optional<Clock::time_point> started_at_ GUARDED_BY(mutex_);  // when the contender last started
  Clock::duration round_trip_ GUARDED_BY(mutex_){};                 // from that start to the lease, last time
  Clock::time_point last_window_ GUARDED_BY(mutex_){};              // end of the last window left to others
  std::optional<Clock::time_point> rival_seen_ GUARDED_BY(mutex_);  // when a round last saw another owner
  std::optional<Runtime::TimerId> restart_timer_ GUARDED_BY(mutex_);
  std::optional<Strand> strand_ GUARDED_BY(mutex_);

  // Caching, under mutex_ (the fast_* words are atomics: the fast path reads them unlocked).
  bool cached_ GUARDED_BY(mutex_) = false;
  bool demanded_ GUARDED_BY(mutex_) = false;          // another process asked since this remote lease began
  std::uint64_t cache_epoch_ GUARDED_BY(mutex_) = 0;  // one per entry into the cached state
  bool demand_watched_ GUARDED_BY(mutex_) = false;    // watch_demand() was started (once per entry)
  std::unique_ptr<Subscription> demand_watch_ GUARDED_BY(mutex_);
  Clock::time_point last_poll_ GUARDED_BY(mutex_){};  // when the demand was last read
  std::optional<Runtime::TimerId> linger_timer_ GUARDED_BY(mutex_);
  std::optional<Runtime::TimerId> poll_timer_ GUARDED_BY(mutex_);
  Terms cache_terms_ GUARDED_BY(mutex_){};  // of the hold whose end cached the lease
  std::uint64_t cache_generation_ GUARDED_BY(mutex_) = 0;
  enum : int { kFastClosed, kFastOpen, kFastHeld, kFastHeldClosing };
  std::atomic<int> fast_{kFastClosed};
  std::atomic<const void*> fast_thread_{nullptr};  // this_thread_tag() of the fast holder
  std::atomic<std::int64_t> fast_until_{0};        // CLOCK_MONOTONIC_COARSE ns: the cached lease is usable before
  std::atomic<std::uint64_t> fast_uses_{0};
  unsigned fast_count_ = 0;       // the fast holder's own count
  std::uint64_t fast_token_ = 0;  // written before the fast path opens
  std::stop_source fast_lost_{std::nostopstate};
  std::uint64_t fast_hold_id_ GUARDED_BY(mutex_) = 0;  // the holder_ a settled fast hold became
  std::atomic<bool> poll_failing_{false};              // the last read of the demand failed
  bool idle_seen_ GUARDED_BY(mutex_) = false;          // the last poll found the cached lease unused
  std::uint64_t polled_uses_ GUARDED_BY(mutex_) = 0;   // fast_uses_ at the last poll

  // The idle mark on the owner record (Backend::mark_idle), set by one thread at a time.
  std::atomic<std::uint64_t> mark_requests_{0};  // sync_idle_mark() calls not yet served
  std::uint64_t marked_token_ = 0;               // the marking thread's: the lease marked idle, or 0
  std::atomic<bool> idle_marked_{false};         // marked_token_ != 0, read under mutex_
  std::atomic<bool> mark_failing_{false};        // the last mark failed

  mutable internal::AnnotatedMutex threads_mutex_;
  struct ThreadHold {
    Hold hold;
    unsigned count = 0;
  };
  std::unordered_map<std::thread::id, ThreadHold> threads_ GUARDED_BY(threads_mutex_);
};

}  // namespace simba::internal
