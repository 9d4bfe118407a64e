// simba/runtime.h: the threads every contender of a process shares.
//
// One timer thread, a small I/O pool that runs backend calls, and a callback pool that runs
// user callbacks through per-service strands (one at a time, in order). No thread per
// contender: a process with 10,000 mutexes uses the same few threads as one with one.
// Runtime::shared() is the process default; tests inject their own. Thread-safe.
//
// Lifespan and ownership: every Client, service, Locker and Scheduler holds a reference, so a
// runtime lives until the last of them is gone; its destructor joins its threads (the shared
// one at static destruction). Never destroy a runtime from one of its own tasks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace simba {

namespace internal {
class RuntimeImpl;
class StrandImpl;
struct RuntimeAccess;
}  // namespace internal

// Runs posted tasks one at a time, in posting order, on the runtime's callback pool.
class Strand {
 public:
  explicit Strand(std::shared_ptr<internal::StrandImpl> impl) : impl_(std::move(impl)) {}
  void post(std::function<void()> task) const;
  // True when called from inside a task of this strand.
  bool running_in_this_thread() const;

 private:
  std::shared_ptr<internal::StrandImpl> impl_;
};

class Runtime {
 public:
  struct Options {
    unsigned io_threads = 4;        // Threads running (blocking) backend calls. Default: 4.
    unsigned callback_threads = 2;  // Threads running user callbacks. Default: 2.
  };
  using TimerId = std::uint64_t;

  Runtime();
  explicit Runtime(Options options);
  // Stops the threads after the tasks that are running finish; pending timers are dropped.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process-wide runtime, created on first use.
  static std::shared_ptr<Runtime> shared();

  // Runs `task` on the I/O pool once `delay` has passed, ahead of normal tasks (keep it
  // short). Returns an id for cancel().
  TimerId schedule_after(std::chrono::steady_clock::duration delay, std::function<void()> task);
  // The same at a time of the steady clock (one already past: at once), for a caller that has
  // read the clock already.
  TimerId schedule_at(std::chrono::steady_clock::time_point deadline, std::function<void()> task);
  // Cancels a timer that has not fired. Returns false if it fired or was cancelled already.
  bool cancel(TimerId id);
  // Runs `task` on the I/O pool as soon as a thread is free. Urgent tasks (an owner's lease
  // renewal) go before every normal one still waiting: under a flood of first acquisitions
  // on a slow engine, leases already held are kept.
  enum class Priority { normal, urgent };
  void post_io(std::function<void()> task, Priority priority = Priority::normal);
  // Runs `task` on the callback pool as soon as a thread is free, in no order with other
  // tasks: a Strand keeps its tasks in order.
  void post_callback(std::function<void()> task);
  // A new strand on the callback pool.
  Strand make_strand();

  Options options() const;

 private:
  friend struct internal::RuntimeAccess;
  std::unique_ptr<internal::RuntimeImpl> impl_;
};

}  // namespace simba
