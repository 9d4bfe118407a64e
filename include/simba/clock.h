// simba/clock.h: the wall clock a local backend judges leases by, replaceable in tests.
#pragma once

#include "simba/owner.h"

namespace simba {

class Clock {
 public:
  virtual ~Clock() = default;
  // Epoch milliseconds. Thread-safe.
  virtual EpochMillis now() const = 0;
  // Epoch milliseconds that may lag now() (the system clock's coarse reading, several times
  // cheaper: it lags by the kernel's tick, a few milliseconds, and more while a virtual
  // machine's host does not run it), never ahead of it, never used to grant or judge a lease: only for what decides
  // when an idle record is forgotten, where a lagging reading keeps a record longer, never
  // shorter. Thread-safe. By default now().
  virtual EpochMillis coarse_now() const { return now(); }
};

// The host's system clock.
class SystemClock final : public Clock {
 public:
  EpochMillis now() const override { return epoch_millis_now(); }
  EpochMillis coarse_now() const override;  // CLOCK_REALTIME_COARSE
};

}  // namespace simba
