// simba/testing/simulated_clock.h: a clock for tests that moves only when told to. Part of
// the simba::testing library; give it to make_memory_backend() to judge leases by it.
#pragma once

#include <atomic>
#include <chrono>

#include "simba/clock.h"

namespace simba::testing {

// A clock that moves only when told to. Thread-safe.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(EpochMillis start = 1'000'000) : now_(start) {}
  EpochMillis now() const override { return now_.load(); }
  void advance(std::chrono::milliseconds by) { now_.fetch_add(by.count()); }
  void set(EpochMillis to) { now_.store(to); }

 private:
  std::atomic<EpochMillis> now_;
};

}  // namespace simba::testing
