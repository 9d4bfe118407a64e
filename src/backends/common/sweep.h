// How engines clean up the records of idle mutexes (Backend::sweep) and keep tokens rising
// across it. Internal to backends.
//
// Tokens: a record an engine creates starts its fencing token at the backend clock's epoch
// milliseconds x kTokensPerMilli, and sweep() deletes only records whose token is below the
// clock's value then. A mutex swept at time S had a token below S x 1000; its next record,
// made at T >= S, starts at T x 1000: above every token before it, as long as the backend's
// clock does not go back.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::internal {

inline constexpr std::int64_t kTokensPerMilli = 1000;
// Records deleted per statement or call when a backend sweeps by itself.
inline constexpr std::size_t kSweepBatch = 1000;
// Every engine's own sweep option ("sweep_idle=1h"; 0 turns self-sweeping off).
inline constexpr const char* kSweepIdleKey = "sweep_idle";
inline constexpr const char* kSweepIdleHelp =
    "records of mutexes idle this long are deleted (default 1h; 0: never; tokens never go back)";

// When a backend sweeps by itself: at most every idle / 2 (and 100 ms apart), one caller at a
// time, the first half an idle period after the backend opened. A sweep's error is logged as a
// warning; it never fails the call that ran it.
class SweepSchedule {
 public:
  explicit SweepSchedule(std::chrono::milliseconds idle)
      : idle_(idle),
        every_(std::max<std::chrono::milliseconds>(idle / 2, std::chrono::milliseconds(100))),
        next_(std::chrono::steady_clock::now() + every_) {}

  std::chrono::milliseconds idle() const { return idle_; }

  // Runs sweep(idle) if one is due.
  template <class Sweep>
  void maybe(const std::string& where, Sweep&& sweep) noexcept {
    if (idle_.count() <= 0) return;
    {
      internal::MutexLock lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      if (running_ || now < next_) return;
      running_ = true;
      next_ = now + every_;
    }
    try {
      sweep(idle_);
    } catch (const std::exception& e) {
      log_warn(where + ": sweeping idle mutex records failed (tried again later): " + e.what());
    }
    internal::MutexLock lock(mutex_);
    running_ = false;
  }

 private:
  const std::chrono::milliseconds idle_;
  const std::chrono::milliseconds every_;
  internal::AnnotatedMutex mutex_;
  std::chrono::steady_clock::time_point next_ GUARDED_BY(mutex_);
  bool running_ GUARDED_BY(mutex_) = false;
};

// sweep() for engines that delete with one statement: batches of kSweepBatch records, each
// its own statement (well within the command timeout, its row locks held briefly, however
// large `limit` is), until `limit` records went or a batch found fewer than it asked for.
template <class DeleteBatch>
std::size_t sweep_in_batches(std::size_t limit, DeleteBatch&& delete_batch) {
  std::size_t total = 0;
  while (total < limit) {
    const std::size_t want = std::min(limit - total, kSweepBatch);
    const std::size_t got = delete_batch(want);
    total += got;
    if (got < want) break;
  }
  return total;
}

// list() for engines that find names first and read each record: the first `limit` of the
// sorted `names`, each read with read(name); `now` from the last read (or read("") if none).
template <class Names, class Read>
MutexListing listing_of(const Names& names, std::size_t limit, Read&& read) {
  MutexListing out;
  for (const auto& name : names) {
    if (out.records.size() == limit) {
      out.truncated = true;
      break;
    }
    OwnerSnapshot seen = read(name);
    out.now = seen.now;
    out.records.push_back({name, std::move(seen.owner)});
  }
  if (out.now == 0) out.now = read(std::string()).now;
  return out;
}

}  // namespace simba::internal
