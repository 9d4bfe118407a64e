// simba/simba.h: the API in one include: Client and connect(), contenders and services,
// Locker, Scheduler, the lock manager (Mutex, Hold, Semaphore, Permit, SharedMutex, SharedHold), errors, options and
// durations, the runtime, the log sink.
//
// Engine-specific options (simba/redis_backend.h, simba/postgres_backend.h, ...) are included
// only by code that configures an engine in C++ rather than by URI; the backend seam is
// simba/backend.h, and the test doubles are in simba/testing/ (library simba::testing).
//
// Who may outlive whom:
//   - A Client is a handle; copies share its backend and runtime, which live as long as the
//     last Client, service, Locker or Scheduler made from it.
//   - Services, Lockers and Schedulers keep what they need alive: they may outlive the Client
//     they came from. Destroying one stops it (releasing its lease) before it returns.
//   - Callbacks may run until the service's stop() or destructor returns, never after.
//   - A Runtime lives until the last Client, service, Locker or Scheduler holding it is gone
//     (Runtime::shared() also until static destruction at exit, which joins its threads):
//     stop services before main() returns, not from static destructors.
#pragma once

#include "simba/client.h"
#include "simba/connect.h"
#include "simba/contender.h"
#include "simba/duration.h"
#include "simba/error.h"
#include "simba/locker.h"
#include "simba/log.h"
#include "simba/metrics.h"
#include "simba/mutex.h"
#include "simba/options.h"
#include "simba/owner.h"
#include "simba/runtime.h"
#include "simba/scheduler.h"
#include "simba/semaphore.h"
#include "simba/service.h"
#include "simba/shared_mutex.h"
#include "simba/version.h"
