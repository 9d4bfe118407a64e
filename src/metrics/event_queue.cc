// The event hook's queue and thread (event_queue.h).
#include "metrics/event_queue.h"

#include "base/log.h"

namespace simba::internal {
namespace {

// Logs the 1st, 2nd, 4th, 8th... of a count.
bool worth_saying(std::uint64_t count) { return (count & (count - 1)) == 0; }

}  // namespace

EventQueue::~EventQueue() {
  auto& s = *shared_;
  const bool on_event_thread = thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  bool stuck = false;
  {
    internal::UniqueMutexLock lock(s.mutex);
    // Events recorded before the last Client went reach the hook, unless it takes too long.
    if (!on_event_thread) {
      s.drained.wait_for(lock.native(), kDrainBound, [&]() REQUIRES(s.mutex) { return s.queue.empty() && !s.busy; });
    }
    stuck = s.busy && !on_event_thread;
    s.stopping = true;
  }
  s.wake.notify_all();
  if (!thread_.joinable()) return;
  // The last Client let go on the event thread itself (its hook held the last copy), or the
  // hook has not returned: the thread ends by itself once it sees `stopping`.
  if (on_event_thread || stuck) {
    if (stuck) log_warn("the event hook has not returned for over a second; its thread ends when it does");
    thread_.detach();
  } else {
    thread_.join();
  }
}

void EventQueue::set_hook(EventHook hook) {
  auto& s = *shared_;
  internal::MutexLock lock(s.mutex);
  s.hook = std::move(hook);
  s.active.store(static_cast<bool>(s.hook), std::memory_order_release);
  if (s.hook && !thread_.joinable()) thread_ = std::thread([shared = shared_] { run(shared); });
  if (!s.hook) s.queue.clear();
}

void EventQueue::push(Event event) {
  auto& s = *shared_;
  {
    internal::MutexLock lock(s.mutex);
    if (!s.hook) return;
    if (s.queue.size() >= kCapacity) {
      const auto dropped = s.dropped.fetch_add(1, std::memory_order_relaxed) + 1;
      if (worth_saying(dropped)) {
        log_warn("the event hook is slower than the events come: " + std::to_string(dropped) +
                 " events dropped so far (metrics: events_dropped)");
      }
      return;
    }
    s.queue.push_back(std::move(event));
  }
  s.wake.notify_one();
}

void EventQueue::run(const std::shared_ptr<Shared>& shared) {
  auto& s = *shared;
  internal::UniqueMutexLock lock(s.mutex);
  for (;;) {
    s.wake.wait(lock.native(), [&]() REQUIRES(s.mutex) { return s.stopping || !s.queue.empty(); });
    if (s.stopping) return;
    Event event = std::move(s.queue.front());
    s.queue.pop_front();
    EventHook hook = s.hook;  // a copy: set_hook may replace it meanwhile
    s.busy = true;
    lock.unlock();
    deliver(s, hook, event);
    hook = nullptr;  // outside the lock: it may hold the last copy of the Client, which ends here
    lock.lock();
    s.busy = false;
    if (s.queue.empty()) s.drained.notify_all();
  }
}

void EventQueue::deliver(Shared& s, const EventHook& hook, const Event& event) {
  if (!hook) return;
  const auto started = std::chrono::steady_clock::now();
  try {
    hook(event);
  } catch (const std::exception& e) {
    const auto errors = s.hook_errors.fetch_add(1, std::memory_order_relaxed) + 1;
    if (worth_saying(errors)) {
      log_error("the event hook threw (" + std::to_string(errors) + " so far): " + e.what());
    }
  } catch (...) {
    const auto errors = s.hook_errors.fetch_add(1, std::memory_order_relaxed) + 1;
    if (worth_saying(errors)) {
      log_error("the event hook threw a non-standard exception (" + std::to_string(errors) + " so far)");
    }
  }
  const auto took = std::chrono::steady_clock::now() - started;
  if (took >= kSlowHook && !s.slow) {
    log_warn("the event hook took " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
             " ms for one event; the lock callers do not wait for it, but events queue up");
  }
  s.slow = took >= kSlowHook;
}

}  // namespace simba::internal
