// What Client::shared_mutex() makes a SharedMutex of. Internal.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "simba/backend.h"
#include "simba/mutex.h"
#include "simba/options.h"

namespace simba::internal {

struct SharedMutexState;

// The state of a shared mutex `name`; `record` makes the handle of the record of the name
// given; `poll` bounds the pause between a waiting writer's looks at the readers.
// Throws Error(errc::unsupported) if the backend offers no Administration (no listing).
std::shared_ptr<SharedMutexState> make_shared_mutex_state(std::string name, std::shared_ptr<Backend> backend,
                                                          const ContendOptions& options, std::chrono::milliseconds poll,
                                                          const std::function<Mutex(const std::string&)>& record);

}  // namespace simba::internal
