// What Client::semaphore() makes a Semaphore of. Internal.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "simba/backend.h"
#include "simba/mutex.h"

namespace simba::internal {

struct SemaphoreState;

// The state of a semaphore `name` of `permits` slots; `slot` makes the handle of the slot of
// the name given.
std::shared_ptr<SemaphoreState> make_semaphore_state(std::string name, unsigned permits,
                                                     std::shared_ptr<Backend> backend,
                                                     const std::function<Mutex(const std::string&)>& slot);

}  // namespace simba::internal
