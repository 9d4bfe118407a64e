// The calls of a batch an engine does not put in its one round trip (a waiter's look, an
// acquisition of several dependent round trips, calls a failed statement held): each goes
// through acquire(), as it would alone. Internal to the engines.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

#include "simba/backend.h"

namespace simba::internal {

// results[i] = take(calls[i]) for each i in `alone`, or the error it threw.
template <class Take>
void acquire_alone(const std::vector<AcquireCall>& calls, const std::vector<std::size_t>& alone,
                   std::vector<AcquireResult>& results, Take&& take) {
  for (const std::size_t i : alone) {
    try {
      results[i].snapshot = take(calls[i]);
    } catch (...) {
      results[i].error = std::current_exception();
    }
  }
}

// results[i] = backend.acquire(calls[i]...) for each i in `alone`, or the error it threw.
inline void acquire_alone(Backend& backend, const std::vector<AcquireCall>& calls,
                          const std::vector<std::size_t>& alone, std::vector<AcquireResult>& results) {
  acquire_alone(calls, alone, results, [&](const AcquireCall& call) {
    return backend.acquire(call.mutex, call.contender_id, call.ttl, call.transition);
  });
}

}  // namespace simba::internal
