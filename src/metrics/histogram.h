// Histograms of durations with fixed buckets, kept per thread, and the per-mutex slots of the
// metrics. Internal (simba/metrics.h is what users see).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "simba/metrics.h"

namespace simba::internal {

// Buckets from 100 µs to an hour: a backend round trip, a wait, a hold. Upper bounds in ns.
inline constexpr std::array<std::int64_t, 20> kBucketBoundsNs{
    100'000,       250'000,        500'000,        1'000'000,      2'500'000,         5'000'000,          10'000'000,
    25'000'000,    50'000'000,     100'000'000,    250'000'000,    500'000'000,       1'000'000'000,      2'500'000'000,
    5'000'000'000, 10'000'000'000, 30'000'000'000, 60'000'000'000, 300'000'000'000LL, 3'600'000'000'000LL};

// Counts and sum of a histogram, added up from its threads' parts.
struct HistogramTotals {
  std::array<std::uint64_t, kBucketBoundsNs.size() + 1> counts{};
  std::uint64_t sum_ns = 0;
  HistogramSnapshot snapshot() const;
};

// One thread's part of a histogram: only that thread observes (a relaxed load and store a
// field, no locked instruction, and no cache line shared with another thread's reports);
// any thread adds it up.
class ThreadHistogram {
 public:
  void observe(std::chrono::nanoseconds duration) noexcept {
    const auto ns = std::max<std::int64_t>(duration.count(), 0);
    std::size_t bucket = 0;
    while (bucket < kBucketBoundsNs.size() && ns > kBucketBoundsNs[bucket]) ++bucket;
    bump(counts_[bucket], 1);
    bump(sum_ns_, static_cast<std::uint64_t>(ns));
  }
  void add_to(HistogramTotals& totals) const noexcept;

 private:
  static void bump(std::atomic<std::uint64_t>& field, std::uint64_t by) noexcept {
    field.store(field.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  std::array<std::atomic<std::uint64_t>, kBucketBoundsNs.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

struct TimingPart;
// The TimingParts this thread reported to last (0: none, or its parts ended) and its part there.
inline constinit thread_local std::uint64_t last_parts_id = 0;
inline constinit thread_local TimingPart* last_part = nullptr;

// The timings one thread reports to one Telemetry.
struct TimingPart {
  ThreadHistogram acquire_wait, hold, handover;
  std::array<ThreadHistogram, kBackendOps> round_trip;
};
struct TimingTotals {
  HistogramTotals acquire_wait, hold, handover;
  std::array<HistogramTotals, kBackendOps> round_trip;
  void add(const TimingPart& part) noexcept;
};

// A Telemetry's timings, a part per thread that reports: a report writes its own thread's part,
// found through a thread-local list (the last one used at once). A thread's end adds its parts
// to the retired totals of the Telemetries still alive; a part of a Telemetry gone is dropped
// at the thread's next new part or its end.
class TimingParts {
 public:
  TimingParts();
  // Runs `report` on this thread's part, or under a lock on the shared part where the thread
  // has none (memory ran out making it, or its parts ended: a thread-local or, on the main
  // thread, a static object's destructor reporting).
  template <class Report>
  void report(Report&& report) noexcept {
    if (last_parts_id == id_) {  // the part this thread used last: two thread-local reads
      report(*last_part);
      return;
    }
    if (TimingPart* part = mine()) {
      report(*part);
      return;
    }
    internal::MutexLock lock(registry_->mutex);
    report(registry_->shared);
  }
  TimingTotals totals() const;
  // How many parts this thread keeps, of every TimingParts it reported to (tests).
  static std::size_t parts_of_this_thread() noexcept;

  struct Registry {
    mutable internal::AnnotatedMutex mutex;
    std::vector<std::shared_ptr<TimingPart>> live GUARDED_BY(mutex);
    TimingTotals retired GUARDED_BY(mutex);
    TimingPart shared GUARDED_BY(mutex);  // written under the lock, by whichever thread found no part of its own
  };

 private:
  TimingPart* mine() noexcept;

  const std::uint64_t id_;  // unique in the process: a new TimingParts at a freed one's address is not it
  const std::shared_ptr<Registry> registry_;
};

// The series of one labelled mutex, or of every name past the bound.
struct MutexSlot {
  explicit MutexSlot(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<std::uint64_t> acquisitions{0};
  std::atomic<std::uint64_t> releases{0};
  std::atomic<std::uint64_t> lost{0};
  std::atomic<std::int64_t> holders{0};
  std::atomic<std::int64_t> waiters{0};
};

}  // namespace simba::internal
