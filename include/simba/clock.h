// simba/clock.h: the wall clock a local backend judges leases by, replaceable in tests.
#pragma once

#include <atomic>
#include <chrono>

#include "simba/owner.h"

namespace simba {

class Clock {
 public:
  virtual ~Clock() = default;
  // Epoch milliseconds. Thread-safe.
  virtual EpochMillis now() const = 0;
};

// The host's system clock.
class SystemClock final : public Clock {
 public:
  EpochMillis now() const override { return epoch_millis_now(); }
};

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

}  // namespace simba
