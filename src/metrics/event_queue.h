// The Client's event hook: events queued by the threads that lock, delivered in order on one
// thread of their own, so a slow or throwing hook never holds up a lock. Internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <thread>

#include "base/thread_annotations.h"
#include "simba/metrics.h"

namespace simba::internal {

class EventQueue {
 public:
  static constexpr std::size_t kCapacity = 65'536;
  // A hook slower than this per event is reported (once per run of slow calls).
  static constexpr auto kSlowHook = std::chrono::seconds(1);
  // How long the end of the last Client waits for the hook to take the events still queued.
  static constexpr auto kDrainBound = std::chrono::seconds(1);

  EventQueue() = default;
  ~EventQueue();  // delivers what is queued first (up to kDrainBound)
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Installs `hook` (null: none); the thread starts with the first hook. Events queued before
  // are delivered to the hook in place when they are.
  void set_hook(EventHook hook);
  // Whether a hook is installed: an event is built only then.
  bool active() const noexcept { return active_.load(std::memory_order_acquire); }
  // Queues `event` (dropped and counted when the queue is full).
  void push(Event event);

  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t hook_errors() const noexcept { return hook_errors_.load(std::memory_order_relaxed); }

 private:
  void run();
  void deliver(const EventHook& hook, const Event& event);

  std::atomic<bool> active_{false};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> hook_errors_{0};

  internal::AnnotatedMutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;  // the queue emptied and no event is being delivered
  EventHook hook_ GUARDED_BY(mutex_);
  std::deque<Event> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool busy_ GUARDED_BY(mutex_) = false;  // an event is with the hook
  bool slow_ = false;                     // the event thread's: the last call was slow (reported once per run)
  std::thread thread_;                    // started once, under mutex_
};

}  // namespace simba::internal
