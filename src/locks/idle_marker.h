// The idle mark on the owner record (IdleMarks::mark_idle): brought in line with the entry by one
// thread at a time. Internal, part of a LockEntry's lease cache.
//
// sync() may be called from any thread at any time. One caller marks; a caller that finds a
// pass running leaves it a request and returns at once (an I/O thread never waits for another
// thread's backend call). Each pass asks the entry afresh what the record should say, so the
// last pass leaves the mark where the entry is. A failed write is warned once per run of
// failures and tried again at the next sync().
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "base/log.h"

namespace simba::internal {

// Warns of a failing background call once per run of failures.
class FailureNotice {
 public:
  explicit FailureNotice(std::string subject) : subject_(std::move(subject)) {}
  void failed(const char* doing, const std::exception& e) noexcept {
    if (failing_.exchange(true, std::memory_order_relaxed)) return;
    try {
      log_warn(subject_ + ": " + doing + ": " + e.what());
    } catch (...) {  // out of memory for the message: the next failure says it
      failing_.store(false, std::memory_order_relaxed);
    }
  }
  void succeeded() noexcept { failing_.store(false, std::memory_order_relaxed); }

 private:
  const std::string subject_;
  std::atomic<bool> failing_{false};
};

class IdleMarker {
 public:
  // `subject`: how warnings name the mutex ("mutex 'x'").
  explicit IdleMarker(std::string subject) : failures_(std::move(subject)) {}

  // `wanted()`: what the record should say: nullopt if this process no longer owns the lease
  // (a mark went with it), 0 for in use, else the fencing token of the cached, unused lease.
  // `write(idle)`: IdleMarks::mark_idle for our lease; true if the engine kept the mark; throws
  // on failure.
  template <class Wanted, class Write>
  void sync(Wanted&& wanted, Write&& write) noexcept {
    if (requests_.fetch_add(1, std::memory_order_acq_rel) != 0) return;  // the marking thread sees it
    for (;;) {
      const auto requests = requests_.load(std::memory_order_acquire);
      pass(wanted(), write);
      if (requests_.fetch_sub(requests, std::memory_order_acq_rel) == requests) return;
    }
  }

  // Whether the record may say idle: marked, or a pass in flight that may have read the entry's
  // earlier state. Leaving the cached state then asks for a sync().
  bool may_be_marked() const noexcept {
    return marked_.load(std::memory_order_relaxed) || requests_.load(std::memory_order_acquire) != 0;
  }

 private:
  template <class Write>
  void pass(std::optional<std::uint64_t> want, Write& write) noexcept {
    const auto target = want.value_or(0);
    if (target == marked_token_) return;
    if (!want) {
      marked_token_ = 0;
    } else {
      try {
        marked_token_ = write(target != 0) ? target : 0;
        failures_.succeeded();
      } catch (const std::exception& e) {
        failures_.failed(target != 0 ? "marking the cached lease idle" : "marking the cached lease in use", e);
      }
    }
    marked_.store(marked_token_ != 0, std::memory_order_relaxed);
  }

  FailureNotice failures_;
  std::atomic<std::uint64_t> requests_{0};  // sync() calls not yet served
  std::uint64_t marked_token_ = 0;          // the marking thread's: the lease marked idle, or 0
  std::atomic<bool> marked_{false};         // marked_token_ != 0
};

}  // namespace simba::internal
