// simba/locker.h: a blocking, RAII distributed lock on one mutex.
//
//   simba::Locker locker("orders", client);
//   locker.acquire(std::chrono::seconds(10));   // throws Error(errc::timeout) on timeout
//   use(locker.fencing_token());
//   // the destructor (or close()) releases
//
// Meets the standard TimedLockable requirements (lock, try_lock, try_lock_for,
// try_lock_until, unlock), so std::unique_lock<simba::Locker> and std::scoped_lock work.
// Not reentrant: a second acquire on one instance while it holds or waits fails with
// std::errc::resource_deadlock_would_occur. One instance is meant for one thread at a time;
// is_owner(), fencing_token() and lease_token() may be called from any thread.
//
// If the lease is lost while held (the backend became unreachable, or the process stalled
// past its lease), the Locker stops contending and requests stop on lease_token(): register a
// std::stop_callback or poll stop_requested() to learn it. unlock() then only cleans up.
//
// A Locker is a one-shot hold on the lock manager (simba/mutex.h) with no caching: it shares
// its Client's entry for the name, and so its one remote contender, with every Locker and
// Mutex handle of that name made from the Client or its copies; they queue locally, and a
// release hands the lease to the next of them before it goes back to the backend. Mutex
// handles' requests are served in FIFO order; a Locker that asks while the lease is being
// handed to a sleeping Locker thread may take it first (as with std::mutex), for at most 1 ms
// after that thread was first woken, and never ahead of a Mutex handle's request
// (docs/lock-manager.md). A Locker given a contender id contends apart, as that id.
//
// Lifespan: a Locker keeps its backend and runtime alive and may outlive the Client it was
// made from; its destructor releases the lease.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "simba/client.h"
#include "simba/contender.h"

namespace simba {

namespace internal {
struct LockerState;
}

class Locker {
 public:
  // `contender_id`: empty for the Client's contender of `mutex` (a host id, shared with its
  // other handles of the name); else an entry of its own that contends as that id.
  // Throws Error(errc::invalid_argument) for a blank mutex name or a bad contender id.
  Locker(std::string mutex, Client client, std::string contender_id = {});
  ~Locker();  // close(): releases; never throws.
  Locker(const Locker&) = delete;
  Locker& operator=(const Locker&) = delete;

  // Blocks until this contender owns the mutex.
  void acquire();
  // Blocks until owner or `timeout` passes (at least one attempt is always made); then throws
  // Error(errc::timeout) with a message naming the mutex, the contender and the timeout.
  void acquire(std::chrono::milliseconds timeout);
  // As above, and interrupted as close() from another thread interrupts them (Error(std::errc::
  // operation_canceled)) when stop is requested on `interrupt`, also before they start: a
  // token already stopped throws at once without contending. So a thread that asks the
  // acquiring one to stop, then calls close(), finds it either refusing to start or waiting
  // and interrupted: no acquire can begin after close() returned (simba lock and leader).
  void acquire(std::stop_token interrupt);
  void acquire(std::chrono::milliseconds timeout, std::stop_token interrupt);
  // Releases the lease and stops contending. Idempotent; never throws. From another thread
  // while an acquire waits: interrupts it (the acquire throws Error(std::errc::
  // operation_canceled), try_lock_for returns false) and returns once anything it won has gone
  // back and its contender stopped, so a process may exit right after (simba lock and leader
  // on SIGTERM).
  void close() noexcept;

  // TimedLockable.
  void lock() { acquire(); }
  void unlock() noexcept { close(); }
  bool try_lock();  // One attempt: true if it won the mutex.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(std::chrono::steady_clock::now() +
                         std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& deadline) {
    return try_lock_for(deadline - C::now());
  }

  const std::string& mutex() const;
  // The id its contender has on the backend (shared with the Client's handles of the name).
  const std::string& contender_id() const;
  // Time-aware (see MutexContendService::is_owner).
  bool is_owner() const;
  // The token of the current hold; 0 when not held.
  std::uint64_t fencing_token() const;
  // Stop is requested when the lease of the current hold is lost. A new token per hold: one
  // taken in a hold is never stopped by a later hold's loss. Between holds: the last hold's
  // token if it was asked for during that hold or its lease was lost, else one that never stops.
  std::stop_token lease_token() const;

 private:
  // false: timed out or interrupted (by close(), or by `stop` if given).
  bool acquire_until(std::chrono::steady_clock::time_point deadline, const std::stop_token& stop = {});

  std::shared_ptr<internal::LockerState> state_;
};

}  // namespace simba
