// A lock-free histogram of durations with fixed buckets, and the per-mutex slots of the
// metrics. Internal (simba/metrics.h is what users see).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "simba/metrics.h"

namespace simba::internal {

// Buckets from 100 µs to an hour: a backend round trip, a wait, a hold. Upper bounds in ns.
inline constexpr std::array<std::int64_t, 20> kBucketBoundsNs{
    100'000,       250'000,        500'000,        1'000'000,      2'500'000,         5'000'000,          10'000'000,
    25'000'000,    50'000'000,     100'000'000,    250'000'000,    500'000'000,       1'000'000'000,      2'500'000'000,
    5'000'000'000, 10'000'000'000, 30'000'000'000, 60'000'000'000, 300'000'000'000LL, 3'600'000'000'000LL};

class Histogram {
 public:
  void observe(std::chrono::nanoseconds duration) noexcept {
    const auto ns = std::max<std::int64_t>(duration.count(), 0);
    std::size_t bucket = 0;
    while (bucket < kBucketBoundsNs.size() && ns > kBucketBoundsNs[bucket]) ++bucket;
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  }
  HistogramSnapshot snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kBucketBoundsNs.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
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
