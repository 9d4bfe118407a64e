// simba/shared_mutex.h: a read-write lock over the fleet: client.shared_mutex(name).
//
//   simba::SharedMutex config = client.shared_mutex("config");  // SharedTimedLockable + TimedLockable
//   { std::shared_lock reader(config); ... }                    // many readers at once
//   { std::unique_lock writer(config); ... }                    // one writer, no reader
//   simba::SharedHold r = config.acquire_shared(5s);            // thread-independent holds
//   simba::SharedHold w = config.acquire(5s);  w.downgrade();   // a writer may become a reader
//
// Semantics:
//   - Many readers, or one writer. Each hold is a lease, renewed while held and lost
//     (SharedHold::lost() requested) as a mutex lease is; a holder that dies lets go when its
//     lease runs out.
//   - Writers are preferred: a writer holds the gate, the mutex `name` itself, while the
//     readers inside finish and while it writes, and a new reader comes in only while the gate
//     is free; so once a writer waits, no new reader gets in, and overlapping readers never
//     starve it. Writers are served by the gate as mutex waiters are (no process is starved);
//     readers that wait for a writer come in when the gate is free, after the writers queued
//     there.
//   - Fencing: a write hold's token is the gate's, which rises with every grant of the mutex
//     `name` (every write); a read hold carries the token of the last write granted before it
//     (0 if none yet), so a reader can tell which write it sees.
//   - Records: "<name>" (the gate: the mutex of that name) and one "<name>#r<8 hex digits>" per
//     reading process (all of its readers share one lease). A reader takes its process's
//     lease and then reads the gate; a writer takes the gate and then lists the readers'
//     records: of two that come at once, one sees the other. So whoever holds the mutex `name`
//     (client.mutex(name), a Locker, a plain `simba lock name`) keeps new readers out too, and
//     with await_no_readers() may write: `simba lock` does that, so `simba lock --shared name`
//     readers and plain `simba lock name` writers exclude each other. The backend must offer
//     Administration (every engine of simba does); simba status/list/release --force see the
//     records. On engines with a name limit (SQL: 66 bytes) the name leaves room for the 10
//     bytes of a reader's suffix (client.shared_mutex() refuses a longer one).
//   - The Lockable and SharedLockable interfaces are reentrant per thread for the same mode. A
//     thread holding a read lock may not upgrade: lock() throws Error(errc::failed_precondition).
//     A thread holding the write lock may also lock_shared() (counted within its write).
//     Thread-independent holds (acquire, acquire_shared) are not reentrant: a thread that
//     holds a read hold and asks for the write lock waits for itself until its timeout.
//   - Costs: a process's first read costs three round trips (its reader lease, a read of the
//     gate, the lease back at its last read's end), a read while the process already reads
//     one; a write three (the gate, a listing of the readers, the gate back) and one listing
//     per further look at the readers (a waiting writer watches the readers' records, and a
//     waiting reader the gate: where the engine reports changes, a release ends the pause
//     between two looks). Most engines answer these looks with the lease itself (Backend:
//     OwnerSnapshot::parent, no_derived_held): then a first read and a write with no reader in
//     cost two round trips, as a mutex's cycle does. Memory, SQLite, Redis, PostgreSQL and etcd
//     answer both; MariaDB and ZooKeeper both once the backend has listed the readers (a
//     process's first write still looks); MySQL without RETURNING neither.
//
// Thread-safety: SharedMutex is a cheap copyable handle; any thread may use it. A SharedHold
// is not bound to a thread; it is move-only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "simba/mutex.h"

namespace simba {

namespace internal {
struct SharedMutexState;
}

enum class LockMode { shared, exclusive };

// One read or write hold of a SharedMutex. Move-only; an empty SharedHold (default-constructed,
// moved from, or unlocked) holds nothing. Destroying it unlocks it.
class SharedHold {
 public:
  SharedHold() noexcept = default;
  SharedHold(SharedHold&& other) noexcept;
  SharedHold& operator=(SharedHold&& other) noexcept;
  SharedHold(const SharedHold&) = delete;
  SharedHold& operator=(const SharedHold&) = delete;
  ~SharedHold() { unlock(); }

  bool owns_lock() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }
  LockMode mode() const noexcept { return mode_; }
  // Write: this write's token. Read: the token of the last write granted before it (0: none).
  // 0 once the lease is lost.
  std::uint64_t fencing_token() const noexcept { return lost_.stop_requested() ? 0 : token_; }
  // Stop is requested when the lease behind the hold is lost.
  std::stop_token lost() const noexcept { return lost_; }
  // Time-aware, as Hold::is_owner(). Never throws.
  bool is_owner() const noexcept;
  // A write hold becomes a read hold with no writer in between; its token stays. Throws
  // Error(errc::failed_precondition) for a read or empty hold.
  void downgrade();
  // Ends the hold. Idempotent; never throws.
  void unlock() noexcept;

 private:
  friend class SharedMutex;
  friend struct internal::SharedMutexState;
  std::shared_ptr<internal::SharedMutexState> state_;
  LockMode mode_ = LockMode::shared;
  std::uint64_t token_ = 0;
  std::stop_token lost_;
  Hold gate_;  // a write hold's: the lease of the mutex `name`
};

class SharedMutex {
 public:
  const std::string& name() const noexcept;

  // Thread-independent holds, waiting up to `timeout` (at least one attempt), or forever.
  // Throws Error(errc::timeout) naming what it waited for.
  SharedHold acquire(std::chrono::milliseconds timeout);
  SharedHold acquire();
  SharedHold acquire_shared(std::chrono::milliseconds timeout);
  SharedHold acquire_shared();
  // The same, until `interrupt` is stopped: then an empty SharedHold, nothing left held.
  // milliseconds::max(): no timeout.
  SharedHold acquire(std::chrono::milliseconds timeout, std::stop_token interrupt);
  SharedHold acquire_shared(std::chrono::milliseconds timeout, std::stop_token interrupt);

  // For a holder of the mutex `name` itself (client.mutex(name), a Locker, a plain `simba
  // lock`), which already keeps new readers out: waits up to `timeout` (milliseconds::max():
  // forever) until the readers inside have finished, so it may write as a writer of this lock
  // would. True if they have. Blocks for a listing of the readers' records per look.
  bool await_no_readers(std::chrono::milliseconds timeout) const;

  // Lockable + TimedLockable (the write lock) and SharedLockable + SharedTimedLockable,
  // reentrant per thread for the same mode (see above). unlock*() never throw.
  void lock();
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return lock_until(
        false, std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& deadline) {
    return try_lock_for(deadline - C::now());
  }
  void unlock() noexcept;
  void lock_shared();
  bool try_lock_shared();
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return lock_until(
        true, std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class C, class D>
  bool try_lock_shared_until(const std::chrono::time_point<C, D>& deadline) {
    return try_lock_shared_for(deadline - C::now());
  }
  void unlock_shared() noexcept;
  // The calling thread's hold (Lockable interfaces): its fencing token (0 if none).
  std::uint64_t fencing_token() const;

 private:
  friend class Client;
  explicit SharedMutex(std::shared_ptr<internal::SharedMutexState> state) : state_(std::move(state)) {}
  bool lock_until(bool shared, std::chrono::steady_clock::time_point deadline);
  // A hold, or an empty one if `deadline` passed; `why` says what it waited for.
  SharedHold hold_until(bool shared, std::chrono::steady_clock::time_point deadline, std::string* why,
                        std::stop_token interrupt = {}) const;

  std::shared_ptr<internal::SharedMutexState> state_;
};

}  // namespace simba
