// A strand embedded in its owner: see serial_queue.h.
#include "runtime/serial_queue.h"

#include "runtime/runtime_internal.h"

namespace simba::internal {

namespace {
thread_local const void* running_owner = nullptr;  // whose queue runs on this thread, if any
}  // namespace

bool SerialQueue::push(Task task) {
  tasks_.push_back(std::move(task));
  return !std::exchange(scheduled_, true);
}

bool SerialQueue::rearm() {
  if (tasks_.empty()) scheduled_ = false;
  return scheduled_;
}

void SerialQueue::run(const void* owner, std::vector<Task>& batch) noexcept {
  const void* outer = running_owner;
  running_owner = owner;
  for (auto& task : batch) {
    run_logged(task, "callback");
    task = nullptr;
  }
  running_owner = outer;
  batch.clear();
}

bool SerialQueue::running_in_this_thread(const void* owner) noexcept { return running_owner == owner; }

}  // namespace simba::internal
