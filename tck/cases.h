// The kit's case files, as run_kit() links them. Internal to the kit.
#pragma once

namespace simba::tck {

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
