// simba/memory_backend.h: the in-process reference backend ("memory:").
//
// The oracle of the conformance kit: the protocol with nothing else in the way. Pushes owner
// changes to watchers at once. Can judge leases by any Clock (simba::testing::SimulatedClock in
// tests). Thread-safe; its records are kept in 16 parts, each under a lock of its own (by the
// name up to its first '#', so a mutex and the records derived from it share one), so threads
// taking different mutexes seldom wait for each other.
//
// Memory stays bounded however many names pass through: the record of a free mutex (released
// or expired) is forgotten once 256 newer acquisitions and releases have happened in its part
// (about 4,096 in all), and watches that ended are swept. Fencing tokens come from one counter per backend, so a new
// owner of a forgotten mutex still gets a larger token than any before; reading a forgotten
// mutex reports a token no smaller than its last one.
#pragma once

#include <memory>

#include "simba/backend.h"
#include "simba/clock.h"

namespace simba {

std::shared_ptr<Backend> make_memory_backend(std::shared_ptr<const Clock> clock = nullptr);

}  // namespace simba
