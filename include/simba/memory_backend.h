// simba/memory_backend.h: the in-process reference backend ("memory:").
//
// The oracle of the conformance kit: the protocol with nothing else in the way. Pushes owner
// changes to watchers at once. Can judge leases by any Clock (simba::testing::SimulatedClock in tests). Thread-safe.
#pragma once

#include <memory>

#include "simba/backend.h"
#include "simba/clock.h"

namespace simba {

std::shared_ptr<Backend> make_memory_backend(std::shared_ptr<const Clock> clock = nullptr);

}  // namespace simba
