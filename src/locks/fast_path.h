// The fast path over a cached lease: one thread at a time takes the mutex by one atomic
// exchange and a clock read, with no lock and no allocation (Mutex's Lockable interface).
// Internal, part of a LockEntry.
//
// Its states, one atomic word:
//
//   state         meaning                                     next
//   closed        no cached lease (or the slow path has it)   open(): the lease was cached -> open
//   open          cached, no thread holds it                  lock() -> held; settle() -> closed
//   held          one thread holds it (counted: reentrant)    unlock() -> open; settle() -> closing
//   closing       held, and the slow path took the hold over  unlock() / a missed deadline -> the
//                 (its end goes through the entry's holder)   caller ends that hold, then closed()
//
// open(), settle() and closed() run under the entry's lock; lock() and unlock() run on the
// locking thread without it. The token, the lease's stop source and the deadline are written
// before the path opens (release) and read after a thread takes it (acquire).
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>

namespace simba::internal {

class FastPath {
 public:
  enum class State : int { closed, open, held, closing };

  // lock(): counted (this thread holds it fast: one more), acquired (taken from the cache),
  // lost (this thread's fast hold was revoked), none (take the ordinary path), or settled (the
  // lease is near its end by our clock and the slow path took this hold over meanwhile: the
  // caller ends that hold (its entry's end_hold), then takes the ordinary path).
  enum class Lock { none, counted, acquired, lost, settled };
  // unlock(): not_held (this thread holds nothing fast), counted_down (still held), released
  // (back to open), or settled (the slow path took this hold over: the caller ends it).
  enum class Unlock { not_held, counted_down, released, settled };

  // `may_acquire` false only counts this thread's own fast hold.
  Lock lock(bool may_acquire) noexcept {
    auto expected = State::open;
    if (!may_acquire || !state_.compare_exchange_strong(expected, State::held, std::memory_order_acquire)) {
      return relock();
    }
    if (coarse_now_ns() >= until_.load(std::memory_order_relaxed)) {
      // Near or past the lease's end by our clock: the ordinary path judges it exactly.
      expected = State::held;
      return state_.compare_exchange_strong(expected, State::open, std::memory_order_release) ? Lock::none
                                                                                              : Lock::settled;
    }
    thread_.store(this_thread_tag(), std::memory_order_relaxed);
    count_ = 1;
    uses_.store(uses_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return Lock::acquired;
  }

  Unlock unlock() noexcept {
    if (thread_.load(std::memory_order_relaxed) != this_thread_tag()) return Unlock::not_held;
    if (--count_ > 0) return Unlock::counted_down;
    thread_.store(nullptr, std::memory_order_relaxed);
    auto expected = State::held;
    return state_.compare_exchange_strong(expected, State::open, std::memory_order_release) ? Unlock::released
                                                                                            : Unlock::settled;
  }

  // Opens the path over a cached lease: its fencing token and its usable end by steady_clock.
  // A stop source still usable (not stopped) is kept: holds of earlier cached spells share it.
  void open(std::uint64_t token, std::chrono::steady_clock::time_point deadline) noexcept;
  // A renewal: the cached lease is usable until `deadline` now.
  void extend(std::chrono::steady_clock::time_point deadline) noexcept;
  // Closes the path for the slow path. True if a thread holds it fast (now `closing`: from
  // here on the caller owns that hold, whose unlock() says `settled`); false if it was open
  // (now closed) or not open at all.
  bool settle() noexcept;
  // After the caller ended a settled hold: closed.
  void closed() noexcept { state_.store(State::closed, std::memory_order_relaxed); }

  State state() const noexcept { return state_.load(std::memory_order_acquire); }
  // Fast takes so far (for linger and the idle mark: used since?).
  std::uint64_t uses() const noexcept { return uses_.load(std::memory_order_relaxed); }
  std::uint64_t token() const noexcept { return token_; }
  // Stopped when the cached lease is lost (revoking a fast hold).
  std::stop_source lost_source() const noexcept { return lost_; }

  // Of this thread's fast hold, if it has one: its token (0 once lost) and its lease.
  std::optional<std::uint64_t> thread_token() const noexcept;
  std::optional<std::stop_token> thread_lease() const noexcept;

  // A distinct address per thread, cheaper to get than std::this_thread::get_id().
  static const void* this_thread_tag() noexcept {
    static thread_local char tag;
    return &tag;
  }
  // CLOCK_MONOTONIC_COARSE in ns: a few ns to read (see fast_path.cc for its margin).
  static std::int64_t coarse_now_ns() noexcept {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  }

 private:
  Lock relock() noexcept;

  std::atomic<State> state_{State::closed};
  std::atomic<const void*> thread_{nullptr};  // this_thread_tag() of the fast holder
  std::atomic<std::int64_t> until_{0};        // CLOCK_MONOTONIC_COARSE ns: usable before
  std::atomic<std::uint64_t> uses_{0};
  unsigned count_ = 0;       // the fast holder's own count
  std::uint64_t token_ = 0;  // written before the path opens
  std::stop_source lost_{std::nostopstate};
};

}  // namespace simba::internal
