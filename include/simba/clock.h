// simba/clock.h: the wall clock a local backend judges leases by, replaceable in tests.
#pragma once

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

}  // namespace simba
