// What the rest of simba may ask the runtime beyond its public header. Internal.
#pragma once

namespace simba::internal {

// True on a thread of any Runtime (timer, I/O or callback pool).
bool on_runtime_thread() noexcept;

}  // namespace simba::internal
