// simba/mutex.h: the distributed lock manager: client.mutex(name).
//
//   simba::Mutex orders = client.mutex("orders");   // cheap, copyable handle; thread-safe
//   { std::scoped_lock guard(orders); ... }          // Lockable + TimedLockable, reentrant per thread
//   simba::Hold hold = orders.acquire(5s);           // a hold not bound to a thread
//   std::future<simba::Hold> f = orders.lock_async(5s);
//   orders.lock_async(5s, [](std::error_code ec, simba::Hold hold) { ... });
//   // simba/asio.h: co_await simba::async_lock(orders, 5s, asio::use_awaitable)
//
// One process, one remote contender per mutex. Every handle of one name on one backend shares
// one entry; every local request (threads, futures, callbacks, Asio) queues FIFO on it (a
// Locker's may pass a sleeping Locker's for at most 1 ms, never a Mutex handle's), and
// the entry runs at most one remote contender on the runtime's contention loop. When a hold
// ends and a local request waits, the lease is handed over locally, without a round trip,
// at most LockOptions::max_local_handovers times in a row; then it goes back to the backend
// so that other processes are never starved. The fencing token stays the same across local
// handovers of one remote lease (it rises with every remote acquisition): a token orders
// processes, not the threads of one process.
//
// While held, the lease is renewed automatically. A hold ends by unlock() (or a Hold's
// destructor), or it is revoked: the lease was lost (backend unreachable, the process stalled
// past its lease, another owner seen) or it outlived max_hold. A revoked hold learns it through
// Hold::lost() / Mutex::lease_token() (stop requested) and fencing_token() turns 0; its later
// unlock() only cleans up. The next local request then waits for a new remote lease.
//
// States of an entry (in the spirit of online-lock's five):
//
//   state      remote contender               local holder  waiters  next
//   idle       none                           none          none     request -> waiting
//   waiting    contending                     none          >= 1     won -> held; all left -> cancelled
//   cancelled  contending, being stopped      none          none     stopped -> idle; request -> waiting
//   held       owns the lease, renewing it    one           any      unlock + waiter -> held (local
//                                                                    handover); unlock -> releasing;
//                                                                    lost / max_hold -> releasing
//   releasing  giving the lease back          none          any      released -> idle, or -> waiting
//                                                                    if requests queued
//
// Caching: when the last local hold ends and no local request waits, the entry keeps the
// remote lease (still renewed) for up to LockOptions::linger, so that taking the mutex again
// in this process costs no backend call (lock() then takes no lock of its own either: an
// atomic exchange and a clock check). The lease goes back at once when another process asks
// for it (the backend's DemandSignal), when `linger` passes unused,
// on Client::release_cached(), or when the entry is freed. While another process's demand is
// pending, no further local handovers happen after the current hold. A cached hold keeps the
// fencing token of the remote lease: the token orders processes; holds within one process are
// ordered by the local queue. A process stalled past its lease never uses its cached lease
// again (the clock check); it contends anew. The owner record shows a caching owner
// (MutexOwner::caching()) and, while a cached lease is unused, MutexOwner::idle (marked at the
// demand poll, IdleMarks::mark_idle, where the engine keeps marks: Backend::idle_marks()).
//
//   cached     owns the lease, renewing it    none          none     request -> held (no backend
//                                                                    call); demand / linger /
//                                                                    release_cached -> releasing
//
// An entry with no handle, holder or waiter is freed (Client::lock_entries() counts them), and
// a lease it caches is released: keep a Mutex handle to benefit from caching.
// A Client and its copies (with_lock_options too) share entries: one per name, one remote
// contender per name. A Client constructed on its own has its own entries, contending with
// its own ContendOptions, even over the same backend object. An entry's contender id says
// whether it caches (MutexOwner::caching()) as the handle that made the entry did.
//
// Lifespan: a Mutex and a Hold keep their backend and runtime alive. A thread that locked
// through the Lockable interface must unlock from the same thread; a Hold may be unlocked
// from any thread. Destroying a Hold releases it; destroying a Mutex handle does not.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

namespace simba {

namespace internal {
class LockEntry;
class LocalLine;
class PermitRace;
struct SharedMutexState;
}  // namespace internal

class Semaphore;
class SharedMutex;

// Options of the lock manager's handles, per Client (Client::with_lock_options) and, for
// max_hold and linger, per handle (Mutex::with_max_hold, Mutex::with_linger). They go with
// each request: handles with different options share one entry and one remote contender.
struct LockOptions {
  // A hold older than this is revoked: lost() is requested and the lease released. 0 = no
  // limit. Must be >= 0. Default: 0.
  std::chrono::milliseconds max_hold{0};
  // Consecutive local handovers of one remote lease before it goes back to the backend
  // (0: never hand over locally). Default: 8.
  unsigned max_local_handovers = 8;
  // How long a lease is kept cached after its last local hold (see above). Unset: one ttl of
  // the Client's ContendOptions. 0: no caching (every last unlock releases). Must be >= 0.
  // Caching needs the backend's demand signal (every engine of simba has it); on a backend
  // without it, leases are never cached.
  std::optional<std::chrono::milliseconds> linger;

  // Throws Error(errc::invalid_argument) naming the bad field.
  void validate() const;
};

// One hold of a mutex, not bound to a thread and not reentrant. Move-only; an empty Hold
// (default-constructed, moved from, or unlocked) holds nothing.
class Hold {
 public:
  Hold() noexcept = default;
  Hold(Hold&& other) noexcept = default;  // `other` is left empty
  Hold& operator=(Hold&& other) noexcept {
    if (this != &other) {
      unlock();
      entry_ = std::move(other.entry_);
      id_ = other.id_;
      token_ = other.token_;
      lost_ = std::move(other.lost_);
    }
    return *this;
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  ~Hold() { unlock(); }  // never throws

  // True until unlock(); stays true after the lease is lost (check lost()).
  bool owns_lock() const noexcept { return entry_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }
  // The mutex's name ("" for an empty Hold).
  const std::string& mutex() const noexcept;
  // The fencing token of this hold; 0 for an empty Hold or once the lease is lost.
  std::uint64_t fencing_token() const noexcept;
  // Stop is requested when the lease is lost or the hold outlived max_hold.
  std::stop_token lost() const noexcept { return lost_; }
  // Time-aware (see MutexContendService::is_owner): true while this hold holds the mutex and
  // the lease behind it has not run out by this host's clock, even if no renewal has told of
  // a loss yet. Never throws.
  bool is_owner() const noexcept;
  // Ends the hold: hands the lease to the next local waiter or releases it. Idempotent.
  void unlock() noexcept {
    if (entry_) end();
  }

 private:
  friend class internal::LocalLine;  // grants holds
  friend class Locker;               // ends its holds with end(true)
  // `recycle_lost`: the hold's stop state went to nobody but the hold (a Locker whose
  // lease_token() was not asked for): the entry may give it to its next hold.
  void end(bool recycle_lost = false) noexcept;
  Hold(std::shared_ptr<internal::LockEntry> entry, std::uint64_t id, std::uint64_t token,
       std::stop_token lost) noexcept;

  std::shared_ptr<internal::LockEntry> entry_;
  std::uint64_t id_ = 0;
  std::uint64_t token_ = 0;
  std::stop_token lost_;  // of the holder's stop_source (a token: a copy and its end cost half a source's)
};

class Mutex {
 public:
  // Runs once with the outcome: a Hold, or an error and an empty Hold.
  using Callback = std::function<void(std::error_code, Hold)>;

  // Made by Client::mutex(name): `max_hold`, `linger` (resolved) and `max_local_handovers`
  // from its LockOptions.
  explicit Mutex(std::shared_ptr<internal::LockEntry> entry, std::chrono::milliseconds max_hold,
                 std::chrono::milliseconds linger = std::chrono::milliseconds(0), unsigned max_local_handovers = 8);

  const std::string& name() const noexcept;
  // A handle on the same mutex whose requests are revoked after `max_hold` (0: no limit).
  // Throws Error(errc::invalid_argument) for a negative duration.
  Mutex with_max_hold(std::chrono::milliseconds max_hold) const;
  // A handle on the same mutex whose holds leave the lease cached for `linger` when they end
  // (0: released at once). Throws Error(errc::invalid_argument) for a negative duration.
  Mutex with_linger(std::chrono::milliseconds linger) const;

  // Lockable and TimedLockable, reentrant per thread: a thread that holds the mutex through
  // these counts up, unlock() counts down and ends the hold at zero. lock() of a thread whose
  // hold was revoked throws Error(errc::unavailable) (unlock first); try_lock*() return false.
  void lock();
  bool try_lock();  // Never waits for a local holder; makes at most one remote attempt.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return lock_until(std::chrono::steady_clock::now() +
                      std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& deadline) {
    return try_lock_for(deadline - C::now());
  }
  // Never throws. By a thread that holds nothing here: logged as a usage error, nothing else.
  void unlock() noexcept;
  // Of the calling thread's hold: its fencing token (0 if it holds none or lost it), and its
  // lease token (stop requested when the lease is lost; a default token if it holds none).
  std::uint64_t fencing_token() const;
  std::stop_token lease_token() const;
  // True while the calling thread holds the mutex through lock()/try_lock*().
  bool held_by_this_thread() const;

  // A Hold, waiting up to `timeout` (at least one remote attempt is made), or forever.
  // Throws Error(errc::timeout) naming the mutex, the owner if known and the last backend
  // error, if any.
  Hold acquire(std::chrono::milliseconds timeout);
  Hold acquire();
  // Without blocking a thread: the future holds the Hold or the Error.
  std::future<Hold> lock_async(std::chrono::milliseconds timeout);
  // `done` runs on the runtime's callback pool (one at a time per mutex).
  void lock_async(std::chrono::milliseconds timeout, Callback done);

  // For adapters such as simba/asio.h: queues a request whose `done` runs on a runtime thread
  // and must return quickly (post the work elsewhere). Returns a ticket for cancel().
  std::uint64_t enqueue(std::chrono::milliseconds timeout, Callback done) const;
  // Takes a queued request out, completing it with `reason`; false if it was no longer queued
  // (it completed or is completing).
  bool cancel(std::uint64_t ticket, std::error_code reason = std::make_error_code(std::errc::operation_canceled)) const;

 private:
  friend class Locker;
  friend class Semaphore;    // waits on its slots' entries
  friend class SharedMutex;  // waits on its gate and records
  friend class internal::PermitRace;
  friend struct internal::SharedMutexState;
  bool lock_until(std::chrono::steady_clock::time_point deadline);
  // A Hold, or an empty one if `deadline` passed (after at least one remote attempt; a
  // request behind a local holder gives up at the deadline).
  // `interrupt`: a stop ends the wait at once, the request taken out and the contender stopped
  // (a lease it won given back) before it returns an empty Hold. (By reference: a copy of a
  // token is two atomic read-modify-writes, a tenth of a memory cycle's.)
  Hold hold_until(std::chrono::steady_clock::time_point deadline, const std::stop_token& interrupt = {}) const;
  // A Locker's first try: the mutex taken by one call on this thread if its entry is idle
  // (the direct lease, src/locks/remote_contender.h); else an empty Hold.
  Hold direct_hold() const;

  std::shared_ptr<internal::LockEntry> entry_;
  std::chrono::milliseconds max_hold_;
  std::chrono::milliseconds linger_;
  unsigned max_local_handovers_;
  // A Locker's handle: its thread is woken to claim a handover, and its request may pass
  // other Lockers' on the way (see Locker).
  bool for_locker_ = false;
};

}  // namespace simba
