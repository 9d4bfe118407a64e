// A strand embedded in its owner. Internal.
//
// Tasks run one at a time, in the order queued, on the runtime's callback pool, as on a
// Strand; but the queue lives inside its owner and its owner's mutex guards it: no allocation
// and no mutex of its own. A Strand costs about 120 bytes, and every service has one.
//
//   SerialQueue queue_ GUARDED_BY(mutex_);
//   // queue a task, under mutex_:
//   if (queue_.push(std::move(task))) runtime->post_callback([self] { self->drain(); });
//   // drain():
//   std::vector<SerialQueue::Task> batch;
//   { lock; batch = queue_.take(); }
//   SerialQueue::run(this, batch);
//   { lock; again = queue_.rearm(); }
//   if (again) runtime->post_callback(...drain...);
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace simba::internal {

class SerialQueue {
 public:
  using Task = std::function<void()>;

  // Queues `task`. True if no drain is scheduled: the caller posts one.
  bool push(Task task);
  // At the start of a drain: the tasks queued so far (tasks queued meanwhile wait for the
  // next drain, after other owners had their turn).
  std::vector<Task> take() { return std::exchange(tasks_, {}); }
  // At the end of a drain: true if tasks came meanwhile (the caller posts another drain),
  // else the queue is idle and the next push() schedules one.
  bool rearm();

  // Runs `batch` in order, each destroyed once it ran (so a later flush proves that what it
  // held is let go), with running_in_this_thread(owner) true meanwhile. Logs what a task
  // throws.
  static void run(const void* owner, std::vector<Task>& batch) noexcept;
  // True when called from inside a task of the queue of `owner`.
  static bool running_in_this_thread(const void* owner) noexcept;

 private:
  std::vector<Task> tasks_;  // not a deque: that allocates 0.5 KB up front
  bool scheduled_ = false;
};

}  // namespace simba::internal
