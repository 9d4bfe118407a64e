// The shared runtime: one timer thread, an I/O pool and a callback pool with strands.
#include "simba/runtime.h"
#include "base/thread_annotations.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "runtime/runtime_internal.h"
#include "runtime/serial_queue.h"
#include "runtime/timer_queue.h"

namespace simba {
namespace internal {

thread_local bool runtime_thread = false;
bool on_runtime_thread() noexcept { return runtime_thread; }

void run_logged(const std::function<void()>& task, const char* where) noexcept {
  try {
    task();
  } catch (const std::exception& e) {
    log_error(std::string("uncaught exception in a ") + where + " task: " + e.what());
  } catch (...) {
    log_error(std::string("uncaught non-standard exception in a ") + where + " task");
  }
}

// The queue of a pool. Its threads and strands hold it by shared_ptr, so whichever thread
// drops the last reference to the runtime (even one of the pool's own, inside a task), no
// thread ever touches freed memory.
struct PoolState {
  explicit PoolState(const char* pool_name) : name(pool_name) {}

  // Queues `task` (an urgent one before every normal one); once stopped, drops it
  // (destroyed outside the lock).
  void post(std::function<void()> task, bool urgent = false) {
    {
      internal::MutexLock lock(mutex);
      if (stopped) return;
      (urgent ? urgent_tasks : tasks).push_back(std::move(task));
    }
    cv.notify_one();
  }

  void stop() {
    std::deque<std::function<void()>> dropped, dropped_urgent;
    {
      internal::MutexLock lock(mutex);
      stopped = true;
      dropped.swap(tasks);
      dropped_urgent.swap(urgent_tasks);
    }
    cv.notify_all();
  }

  static void loop(const std::shared_ptr<PoolState>& state) {
    for (;;) {
      std::function<void()> task;
      {
        internal::UniqueMutexLock lock(state->mutex);
        state->cv.wait(lock.native(), [&]() REQUIRES(state->mutex) {
          return state->stopped || !state->tasks.empty() || !state->urgent_tasks.empty();
        });
        if (state->stopped) return;
        auto& queue = state->urgent_tasks.empty() ? state->tasks : state->urgent_tasks;
        task = std::move(queue.front());
        queue.pop_front();
      }
      run_logged(task, state->name);
    }
  }

  const char* const name;
  internal::AnnotatedMutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks GUARDED_BY(mutex);
  std::deque<std::function<void()>> urgent_tasks GUARDED_BY(mutex);
  bool stopped GUARDED_BY(mutex) = false;
};

// Joins `thread`, or detaches it if it is the calling thread (the runtime is being destroyed
// from inside one of its own tasks; the thread exits on its own once the task returns).
void join_or_detach(std::thread& thread) {
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

// A fixed set of threads draining one PoolState.
class TaskPool {
 public:
  TaskPool(unsigned threads, const char* name) : state_(std::make_shared<PoolState>(name)) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) {
      threads_.emplace_back([state = state_, i] {
        std::string thread_name = std::string(state->name) + "-" + std::to_string(i);
        pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
        runtime_thread = true;
        PoolState::loop(state);
      });
    }
  }
  ~TaskPool() {
    state_->stop();
    for (auto& thread : threads_) join_or_detach(thread);
  }

  const std::shared_ptr<PoolState>& state() const { return state_; }
  void post(std::function<void()> task, bool urgent = false) { state_->post(std::move(task), urgent); }

 private:
  std::shared_ptr<PoolState> state_;
  std::vector<std::thread> threads_;
};

class StrandImpl : public std::enable_shared_from_this<StrandImpl> {
 public:
  explicit StrandImpl(std::shared_ptr<PoolState> pool) : pool_(std::move(pool)) {}

  void post(std::function<void()> task) {
    bool schedule;
    {
      internal::MutexLock lock(mutex_);
      schedule = queue_.push(std::move(task));
    }
    if (schedule) pool_->post([self = shared_from_this()] { self->drain(); });
  }

  bool running_in_this_thread() const { return SerialQueue::running_in_this_thread(this); }

 private:
  void drain() {
    std::vector<SerialQueue::Task> batch;
    {
      internal::MutexLock lock(mutex_);
      batch = queue_.take();
    }
    SerialQueue::run(this, batch);
    bool again;
    {
      internal::MutexLock lock(mutex_);
      again = queue_.rearm();
    }
    if (again) pool_->post([self = shared_from_this()] { self->drain(); });
  }

  std::shared_ptr<PoolState> pool_;
  internal::AnnotatedMutex mutex_;
  SerialQueue queue_ GUARDED_BY(mutex_);
};

// Timers, in deadline order. The timer thread holds this by shared_ptr (see PoolState).
struct TimerState {
  explicit TimerState(std::shared_ptr<PoolState> target) : io(std::move(target)) {}

  static void loop(const std::shared_ptr<TimerState>& state) {
    internal::UniqueMutexLock lock(state->mutex);
    while (!state->stopped) {
      if (state->timers.empty()) {
        state->sleeping_until = std::chrono::steady_clock::time_point::max();
        state->cv.wait(lock.native());
        state->sleeping_until = std::chrono::steady_clock::time_point::min();
        continue;
      }
      const auto deadline = state->timers.next_deadline();
      if (deadline > std::chrono::steady_clock::now()) {
        state->sleeping_until = deadline;
        state->cv.wait_until(lock.native(), deadline);
        state->sleeping_until = std::chrono::steady_clock::time_point::min();
        continue;
      }
      auto task = state->timers.pop();
      lock.unlock();
      // Ahead of normal work: a timer task is short (it decides and posts the real work with
      // its own priority) and may be a lease that is due.
      state->io->post(runnable(std::move(task)), /*urgent=*/true);
      lock.lock();
    }
  }

  void stop() {
    std::vector<TimerQueue::Task> dropped;
    {
      internal::MutexLock lock(mutex);
      stopped = true;
      dropped = timers.clear();
    }
    cv.notify_all();
  }

  Runtime::TimerId add(std::chrono::steady_clock::time_point deadline, TimerQueue::Task task) {
    Runtime::TimerId id;
    bool earliest;
    {
      internal::MutexLock lock(mutex);
      if (stopped) return 0;
      id = timers.add(deadline, std::move(task));
      earliest = deadline < sleeping_until;
    }
    if (earliest) cv.notify_one();
    return id;
  }

  bool cancel(Runtime::TimerId id) {
    TimerQueue::Task dropped;  // destroyed outside the lock
    internal::MutexLock lock(mutex);
    return timers.cancel(id, &dropped);
  }

  const std::shared_ptr<PoolState> io;
  internal::AnnotatedMutex mutex;
  std::condition_variable cv;
  TimerQueue timers GUARDED_BY(mutex);
  bool stopped GUARDED_BY(mutex) = false;
  // When the thread waits: until when (max: no timers). min: it is awake and will look at
  // the queue before waiting again. Lets add() skip waking it for a later deadline (cancel()
  // never wakes it: it wakes at the old deadline, finds nothing due, waits again).
  std::chrono::steady_clock::time_point sleeping_until GUARDED_BY(mutex) = std::chrono::steady_clock::time_point::min();
};

class RuntimeImpl {
 public:
  explicit RuntimeImpl(Runtime::Options options)
      : options_(options),
        io_(options.io_threads, "simba-io"),
        callbacks_(options.callback_threads, "simba-cb"),
        timers_(std::make_shared<TimerState>(io_.state())),
        timer_thread_([state = timers_] {
          pthread_setname_np(pthread_self(), "simba-timer");
          runtime_thread = true;
          TimerState::loop(state);
        }) {}

  ~RuntimeImpl() {
    timers_->stop();
    join_or_detach(timer_thread_);
    // io_ and callbacks_ stop and join in their destructors.
  }

  Runtime::TimerId schedule_after(std::chrono::steady_clock::duration delay, std::function<void()> task) {
    return schedule_at(std::chrono::steady_clock::now() + std::max(delay, std::chrono::steady_clock::duration::zero()),
                       std::move(task));
  }

  Runtime::TimerId schedule_at(std::chrono::steady_clock::time_point deadline, TimerQueue::Task task) {
    return timers_->add(deadline, std::move(task));
  }

  bool cancel(Runtime::TimerId id) { return timers_->cancel(id); }

  const Runtime::Options options_;
  TaskPool io_;
  TaskPool callbacks_;

 private:
  const std::shared_ptr<TimerState> timers_;
  std::thread timer_thread_;
};

}  // namespace internal

void Strand::post(std::function<void()> task) const { impl_->post(std::move(task)); }
bool Strand::running_in_this_thread() const { return impl_->running_in_this_thread(); }

Runtime::Runtime() : Runtime(Options{}) {}
Runtime::Runtime(Options options) : impl_(std::make_unique<internal::RuntimeImpl>(options)) {}
Runtime::~Runtime() = default;

std::shared_ptr<Runtime> Runtime::shared() {
  static const std::shared_ptr<Runtime> instance = std::make_shared<Runtime>();
  return instance;
}

Runtime::TimerId Runtime::schedule_after(std::chrono::steady_clock::duration delay, std::function<void()> task) {
  return impl_->schedule_after(delay, std::move(task));
}
Runtime::TimerId Runtime::schedule_at(std::chrono::steady_clock::time_point deadline, std::function<void()> task) {
  return impl_->schedule_at(deadline, std::move(task));
}
Runtime::TimerId internal::RuntimeAccess::schedule_weak_at(Runtime& runtime,
                                                           std::chrono::steady_clock::time_point deadline,
                                                           std::weak_ptr<void> target,
                                                           void (*fire)(void* target, std::uint64_t arg),
                                                           std::uint64_t arg) {
  return runtime.impl_->schedule_at(deadline, TimerQueue::WeakCall{std::move(target), fire, arg});
}
bool Runtime::cancel(TimerId id) { return impl_->cancel(id); }
void Runtime::post_io(std::function<void()> task, Priority priority) {
  impl_->io_.post(std::move(task), priority == Priority::urgent);
}
void Runtime::post_callback(std::function<void()> task) { impl_->callbacks_.post(std::move(task)); }
Strand Runtime::make_strand() { return Strand(std::make_shared<internal::StrandImpl>(impl_->callbacks_.state())); }
Runtime::Options Runtime::options() const { return impl_->options_; }

}  // namespace simba
