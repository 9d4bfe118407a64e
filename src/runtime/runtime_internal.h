// What the rest of simba may ask the runtime beyond its public header. Internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "simba/runtime.h"

namespace simba::internal {

// True on a thread of any Runtime (timer, I/O or callback pool).
bool on_runtime_thread() noexcept;

// What the rest of simba may ask a Runtime beyond its public members.
struct RuntimeAccess {
  // A timer, as Runtime::schedule_at(), that calls fire(target, arg) if `target` still lives
  // when it fires: without the allocation a std::function capturing a weak_ptr costs (every
  // held lease keeps a timer pending). Cancelled with Runtime::cancel().
  static Runtime::TimerId schedule_weak_at(Runtime& runtime, std::chrono::steady_clock::time_point deadline,
                                           std::weak_ptr<void> target, void (*fire)(void* target, std::uint64_t arg),
                                           std::uint64_t arg);
};

// Runs `task`, logging what it throws (an uncaught exception in a `where` task).
void run_logged(const std::function<void()>& task, const char* where) noexcept;

}  // namespace simba::internal
