// The Client's event hook: events queued by the threads that lock, delivered in order on one
// thread of their own, so a slow or throwing hook never holds up a lock. Internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
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

  EventQueue() : shared_(std::make_shared<Shared>()) {}
  // Delivers what is queued first (up to kDrainBound). A hook that has not returned by then
  // keeps its thread, which ends once the hook returns: the destructor does not wait for it.
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Installs `hook` (null: none, and what is queued is dropped); the thread starts with the
  // first hook. Events queued before are delivered to the hook in place when they are.
  void set_hook(EventHook hook);
  // Whether a hook is installed: an event is built only then.
  bool active() const noexcept { return shared_->active.load(std::memory_order_acquire); }
  // Queues `event` (dropped and counted when the queue is full).
  void push(Event event);

  std::uint64_t dropped() const noexcept { return shared_->dropped.load(std::memory_order_relaxed); }
  std::uint64_t hook_errors() const noexcept { return shared_->hook_errors.load(std::memory_order_relaxed); }

 private:
  // What the event thread uses: it holds it too, so it may outlive the queue.
  struct Shared {
    std::atomic<bool> active{false};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> hook_errors{0};

    internal::AnnotatedMutex mutex;
    std::condition_variable wake;
    std::condition_variable drained;  // the queue emptied and no event is with the hook
    EventHook hook GUARDED_BY(mutex);
    std::deque<Event> queue GUARDED_BY(mutex);
    bool stopping GUARDED_BY(mutex) = false;
    bool busy GUARDED_BY(mutex) = false;  // an event is with the hook
    bool slow = false;                    // the event thread's own: the last call was slow
  };
  static void run(const std::shared_ptr<Shared>& shared);
  static void deliver(Shared& shared, const EventHook& hook, const Event& event);

  const std::shared_ptr<Shared> shared_;
  std::thread thread_;  // started once, under shared_->mutex; joined or detached by the destructor
};

}  // namespace simba::internal
