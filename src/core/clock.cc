// The host's system clock (simba/clock.h).
#include "simba/clock.h"

#include <time.h>

namespace simba {

EpochMillis SystemClock::coarse_now() const {
#ifdef CLOCK_REALTIME_COARSE
  timespec now{};
  if (clock_gettime(CLOCK_REALTIME_COARSE, &now) == 0)
    return static_cast<EpochMillis>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
#endif
  return epoch_millis_now();
}

}  // namespace simba
