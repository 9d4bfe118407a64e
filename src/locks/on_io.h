// Work for an object of the lock manager on the runtime's I/O threads, if the object still
// lives then: a timer's thread must not make backend calls, and an idle entry is freed.
// Internal.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "simba/runtime.h"

namespace simba::internal {

// Runs `work` on an I/O thread soon, if `target` still lives then.
template <class T>
void on_io(Runtime& runtime, std::weak_ptr<T> target, std::function<void(T&)> work) {
  runtime.post_io([target = std::move(target), work = std::move(work)] {
    if (auto self = target.lock()) work(*self);
  });
}

// Runs `work` on an I/O thread after `delay`, if `target` still lives then. The timer runs
// inside `runtime`, so `runtime` outlives it.
template <class T>
Runtime::TimerId after_on_io(Runtime& runtime, std::chrono::milliseconds delay, std::weak_ptr<T> target,
                             std::function<void(T&)> work) {
  return runtime.schedule_after(delay, [&runtime, target = std::move(target), work = std::move(work)] {
    if (!target.expired()) on_io(runtime, target, work);
  });
}

}  // namespace simba::internal
