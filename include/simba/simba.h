// simba/simba.h: everything public, in one include.
#pragma once

#include "simba/backend.h"
#include "simba/client.h"
#include "simba/clock.h"
#include "simba/connect.h"
#include "simba/contender.h"
#include "simba/duration.h"
#include "simba/error.h"
#include "simba/fault_injection.h"
#include "simba/locker.h"
#include "simba/memory_backend.h"
#include "simba/options.h"
#include "simba/owner.h"
#include "simba/runtime.h"
#include "simba/scheduler.h"
#include "simba/service.h"
#include "simba/sqlite_backend.h"
