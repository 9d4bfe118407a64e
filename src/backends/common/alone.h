// The calls of a batch an engine does not put in its one round trip (a waiter's look, an
// acquisition of several dependent round trips, calls a failed statement held): each goes
// through acquire(), as it would alone. Internal to the engines.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

#include "simba/backend.h"

namespace simba::internal {

// results[i] = backend.acquire(calls[i]...) for each i in `alone`, or the error it threw.
inline void acquire_alone(Backend& backend, const std::vector<AcquireCall>& calls,
                          const std::vector<std::size_t>& alone, std::vector<AcquireResult>& results) {
  for (const std::size_t i : alone) {
    try {
      results[i].snapshot = backend.acquire(calls[i].mutex, calls[i].contender_id, calls[i].ttl, calls[i].transition);
    } catch (...) {
      results[i].error = std::current_exception();
    }
  }
}

}  // namespace simba::internal
