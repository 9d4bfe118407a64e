// simba/semaphore.h: a counting semaphore over the fleet: client.semaphore(name, permits).
//
//   simba::Semaphore pool = client.semaphore("payments", 3);  // at most 3 permits held at once
//   simba::Permit p = pool.acquire(5s);                       // Error(errc::timeout) names the holders
//   p.fencing_token();  p.lost();  p.release();               // as a Hold: token, stop_token, idempotent
//   std::future<simba::Permit> f = pool.acquire_async(5s);    // or with a callback, or with Asio:
//   simba::Permit q = co_await simba::async_acquire(pool, 5s, asio::use_awaitable);  // simba/asio.h
//   simba::Permit maybe = pool.try_acquire();                 // empty if no permit was free
//
// Semantics:
//   - A semaphore of N permits is N permit slots, 0 .. N-1. A Permit is the lease of one slot,
//     held, renewed and lost exactly as a mutex lease (simba/mutex.h): renewed automatically
//     while held, lost (Permit::lost() requested) when the backend is unreachable, the process
//     stalled past its lease or an operator evicted it. A holder that dies frees its slot when
//     its lease runs out. Each slot is exclusive, so there are never more than N holders at any
//     instant judged by the server's clock.
//   - Each slot is a mutex record of its own, named slot_name(name, k, N):
//     "<name>#<k>of<N>" (payments#0of3). `simba status`, `list`, `watch` and `release --force` see
//     the slots as they see any mutex.
//   - The fencing token of a Permit is its slot's: it rises with every grant of that slot
//     (tokens of different slots are not ordered against each other).
//   - Every contender of one semaphore must agree on N. A handle checks, at its first
//     acquisition (one listing of the slots), that no live holder holds a slot of the same
//     name with another N (on engines with Administration: all of simba's); a mismatch is
//     refused with Error(errc::invalid_argument) naming both counts. Contenders with another N
//     that start while none of the others holds are not seen: keep N in one place.
//   - A blocking acquire() first asks the slots one by one, from the slot the handle was last
//     granted (a random one at first), until one is granted (a free permit costs one round
//     trip); if none is, and for acquire_async(), the request joins the semaphore's line, a
//     mutex record "<name>#wait". The request at the head of the line waits on every slot at
//     once and takes the first it is granted; the others are withdrawn (a slot granted
//     meanwhile goes back at once), and the line passes to the next request. So a waiting
//     process has one remote contender, and waiting processes are served first come, first
//     served, as a mutex's waiters are (no process is starved). While a process leads the
//     line, up to N more of its requests join the lead without waiting in the line (a permit
//     released there passes to the next of them without a round trip); the rest queue FIFO
//     in the line, and the last of the lead to settle passes the line on. Slots and the line are
//     never cached. A request's first asking may take a slot that is free while the head
//     waits: the line orders the waiters, not the first try.
//
// Thread-safety: Semaphore is a cheap copyable handle; any thread may use it. A Permit is not
// bound to a thread; it is move-only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "simba/mutex.h"

namespace simba {

namespace internal {
struct SemaphoreState;
class PermitRace;
}  // namespace internal

// One permit of a semaphore. Move-only; an empty Permit (default-constructed, moved from or
// released) holds nothing. Destroying it releases it.
class Permit {
 public:
  Permit() noexcept = default;

  // True until release(); stays true after the lease is lost (check lost()).
  bool owns_permit() const noexcept { return hold_.owns_lock(); }
  explicit operator bool() const noexcept { return owns_permit(); }
  // The semaphore's name ("" for an empty Permit).
  const std::string& semaphore() const noexcept { return semaphore_; }
  // The slot this permit holds, 0 .. permits-1 (the CLI's SIMBA_PERMIT).
  unsigned slot() const noexcept { return slot_; }
  // The slot's fencing token; 0 for an empty Permit or once the lease is lost.
  std::uint64_t fencing_token() const noexcept { return hold_.fencing_token(); }
  // Stop is requested when the lease is lost.
  std::stop_token lost() const noexcept { return hold_.lost(); }
  // Time-aware, as Hold::is_owner(). Never throws.
  bool is_owner() const noexcept { return hold_.is_owner(); }
  // Gives the permit back (to the next local request on its slot, or to the backend).
  // Idempotent; never throws.
  void release() noexcept { hold_.unlock(); }

 private:
  friend class internal::PermitRace;
  friend class Semaphore;
  Permit(std::string semaphore, unsigned slot, Hold hold) noexcept
      : semaphore_(std::move(semaphore)), slot_(slot), hold_(std::move(hold)) {}

  std::string semaphore_;
  unsigned slot_ = 0;
  Hold hold_;
};

class Semaphore {
 public:
  // Runs once with the outcome: a Permit, or an error and an empty Permit.
  using Callback = std::function<void(std::error_code, Permit)>;

  // The most permits a semaphore may have.
  static constexpr unsigned kMaxPermits = 1024;

  // The mutex record of slot `slot` of a semaphore of `permits`: "<name>#<slot>of<permits>".
  static std::string slot_name(const std::string& name, unsigned slot, unsigned permits);

  const std::string& name() const noexcept;
  unsigned permits() const noexcept;

  // A Permit, waiting up to `timeout` (0: as try_acquire()), or forever.
  // Throws Error(errc::timeout) naming the semaphore and, per slot, the holder it saw and the
  // last backend error (a request that timed out in the line, behind other waiters, names the
  // one ahead and the holders a listing finds then, made on an I/O thread before the timeout
  // is told); Error(errc::invalid_argument) for a negative timeout or a mismatch of permits
  // (see above). The async forms' errors say the same.
  Permit acquire(std::chrono::milliseconds timeout);
  Permit acquire();
  // The same, until `interrupt` is stopped: then the request is withdrawn from every slot, and
  // a slot granted meanwhile given back, before it returns an empty Permit.
  Permit acquire(std::chrono::milliseconds timeout, std::stop_token interrupt);
  // Without waiting for a holder: at most one remote attempt per slot, in turn, until one is
  // granted; an empty Permit if none was. Throws like acquire(), never errc::timeout.
  Permit try_acquire();
  // Without blocking a thread: the future holds the Permit or the Error.
  std::future<Permit> acquire_async(std::chrono::milliseconds timeout);
  // `done` runs on the runtime's callback pool (one at a time per semaphore).
  void acquire_async(std::chrono::milliseconds timeout, Callback done);

  // For adapters such as simba/asio.h (simba::async_acquire): starts a request whose `done`
  // runs once, on a runtime thread, and must return quickly (post the work elsewhere). The
  // returned function withdraws the request (from any thread, any number of times): `done` then
  // runs with std::errc::operation_canceled and an empty Permit, unless it ran already.
  std::function<void()> enqueue(std::chrono::milliseconds timeout, Callback done) const;

 private:
  friend class Client;
  explicit Semaphore(std::shared_ptr<internal::SemaphoreState> state) : state_(std::move(state)) {}
  // Starts a request; `done` runs on a runtime thread and must return quickly.
  std::shared_ptr<internal::PermitRace> request(
      std::chrono::milliseconds timeout,
      std::function<void(std::error_code, Permit, const std::string& why)> done) const;

  std::shared_ptr<internal::SemaphoreState> state_;
};

}  // namespace simba
