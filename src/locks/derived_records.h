// Records a primitive keeps beside its name (a semaphore's slots, a shared mutex's readers).
// Internal.
#pragma once

#include <string>

#include "simba/backend.h"

namespace simba::internal {

// Throws Error(errc::invalid_argument) if `record`, the longest record that `what` (e.g.
// "semaphore 'payments'") keeps, is longer than the backend accepts, saying by how much the
// name must shrink.
void require_record_fits(const Backend& backend, const std::string& what, const std::string& record);

}  // namespace simba::internal
