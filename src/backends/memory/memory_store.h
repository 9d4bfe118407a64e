// The memory engine's stores for URIs ("memory:", "memory:NAME"). Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "simba/backend.h"

namespace simba::internal {

// A store on the system clock whose fencing tokens come from `tokens`: the registry gives
// every store of the process one counter, so a store made again after the last was freed never
// hands out a token an earlier one did.
std::shared_ptr<Backend> make_memory_store(std::shared_ptr<std::atomic<std::uint64_t>> tokens);

}  // namespace simba::internal
