// The kit's case files, as run_kit() links them, and what several of them share. Internal to
// the kit.
#pragma once

#include <chrono>

#include "kit.h"

namespace simba::tck {

// Leases of a second and a second, for cases whose many holders contend for long: a loaded,
// sanitized machine may still stall a renewal past one, and a holder whose lease ran out is
// rightly replaced, so their order checks hold only while no holder lost its lease.
inline ContendOptions steady_options() {
  auto options = fast_options();
  options.ttl = std::chrono::seconds(1);
  options.transition = std::chrono::seconds(1);
  return options;
}

int link_batch_cases();
int link_cache_cases();
int link_connect_cases();
int link_contend_cases();
int link_locker_cases();
int link_lock_cases();
int link_records_cases();
int link_semaphore_cases();
int link_rwlock_cases();
#ifdef SIMBA_TCK_WITH_ASIO
int link_lock_asio_cases();
#endif

}  // namespace simba::tck
