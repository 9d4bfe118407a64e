// The event hook's queue and thread (event_queue.h).
#include "metrics/event_queue.h"

#include "base/log.h"

namespace simba::internal {

EventQueue::~EventQueue() {
  const bool on_event_thread = thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  {
    internal::UniqueMutexLock lock(mutex_);
    // Events recorded before the last Client went reach the hook, unless it takes too long.
    if (!on_event_thread) {
      drained_.wait_for(lock.native(), kDrainBound, [this]() REQUIRES(mutex_) { return queue_.empty() && !busy_; });
    }
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  // The last Client let go on the event thread itself (its hook held the last copy): it cannot
  // join itself, and ends once it sees stopping_.
  if (on_event_thread) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void EventQueue::set_hook(EventHook hook) {
  internal::MutexLock lock(mutex_);
  hook_ = std::move(hook);
  active_.store(static_cast<bool>(hook_), std::memory_order_release);
  if (hook_ && !thread_.joinable()) thread_ = std::thread([this] { run(); });
  if (!hook_) queue_.clear();
}

void EventQueue::push(Event event) {
  {
    internal::MutexLock lock(mutex_);
    if (!hook_) return;
    if (queue_.size() >= kCapacity) {
      const auto dropped = dropped_.fetch_add(1, std::memory_order_relaxed) + 1;
      if ((dropped & (dropped - 1)) == 0) {  // the 1st, 2nd, 4th, 8th... drop
        log_warn("the event hook is slower than the events come: " + std::to_string(dropped) +
                 " events dropped so far (metrics: events_dropped)");
      }
      return;
    }
    queue_.push_back(std::move(event));
  }
  wake_.notify_one();
}

void EventQueue::run() {
  internal::UniqueMutexLock lock(mutex_);
  for (;;) {
    wake_.wait(lock.native(), [this]() REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Event event = std::move(queue_.front());
    queue_.pop_front();
    EventHook hook = hook_;  // a copy: set_hook may replace it meanwhile
    busy_ = true;
    lock.unlock();
    deliver(hook, event);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

void EventQueue::deliver(const EventHook& hook, const Event& event) {
  if (!hook) return;
  const auto started = std::chrono::steady_clock::now();
  try {
    hook(event);
  } catch (const std::exception& e) {
    const auto errors = hook_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
    if ((errors & (errors - 1)) == 0) {
      log_error(std::string("the event hook threw (") + std::to_string(errors) + " so far): " + e.what());
    }
  } catch (...) {
    const auto errors = hook_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
    if ((errors & (errors - 1)) == 0) {
      log_error("the event hook threw a non-standard exception (" + std::to_string(errors) + " so far)");
    }
  }
  const auto took = std::chrono::steady_clock::now() - started;
  if (took >= kSlowHook && !slow_) {
    log_warn("the event hook took " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
             " ms for one event; the lock callers do not wait for it, but events queue up");
  }
  slow_ = took >= kSlowHook;
}

}  // namespace simba::internal
