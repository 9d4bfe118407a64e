// The shared runtime: one timer thread, an I/O pool and a callback pool with strands.
#include "simba/runtime.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/log.h"

namespace simba {
namespace internal {
namespace {

void run_logged(const std::function<void()>& task, const char* where) noexcept {
  try {
    task();
  } catch (const std::exception& e) {
    log_error(std::string("uncaught exception in a ") + where + " task: " + e.what());
  } catch (...) {
    log_error(std::string("uncaught non-standard exception in a ") + where + " task");
  }
}

}  // namespace

// A fixed set of threads draining one FIFO queue.
class TaskPool {
 public:
  TaskPool(unsigned threads, const char* name) : name_(name) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) {
      threads_.emplace_back([this, i] {
        std::string thread_name = std::string(name_) + "-" + std::to_string(i);
        pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
        loop();
      });
    }
  }
  ~TaskPool() { shutdown(); }

  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
      tasks_.clear();
    }
    cv_.notify_all();
    for (auto& thread : threads_) {
      if (thread.get_id() == std::this_thread::get_id()) {
        thread.detach();  // The runtime is being destroyed by one of its own tasks.
      } else if (thread.joinable()) {
        thread.join();
      }
    }
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopped_ || !tasks_.empty(); });
        if (stopped_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      run_logged(task, name_);
    }
  }

  const char* name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

class StrandImpl : public std::enable_shared_from_this<StrandImpl> {
 public:
  explicit StrandImpl(std::shared_ptr<TaskPool> pool) : pool_(std::move(pool)) {}

  void post(std::function<void()> task) {
    bool schedule;
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
      schedule = !scheduled_;
      scheduled_ = true;
    }
    if (schedule) pool_->post([self = shared_from_this()] { self->drain(); });
  }

  bool running_in_this_thread() const { return current_ == this; }

 private:
  void drain() {
    const StrandImpl* outer = current_;
    current_ = this;
    for (int batch = 0; batch < 64; ++batch) {
      std::function<void()> task;
      {
        std::lock_guard lock(mutex_);
        if (tasks_.empty()) {
          scheduled_ = false;
          current_ = outer;
          return;
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      run_logged(task, "callback");
    }
    current_ = outer;
    // Yield the thread to other strands, then go on.
    pool_->post([self = shared_from_this()] { self->drain(); });
  }

  static thread_local const StrandImpl* current_;
  std::shared_ptr<TaskPool> pool_;
  std::mutex mutex_;
  std::deque<std::function<void()>> tasks_;
  bool scheduled_ = false;
};

thread_local const StrandImpl* StrandImpl::current_ = nullptr;

class RuntimeImpl {
 public:
  explicit RuntimeImpl(Runtime::Options options)
      : options_(options),
        io_(std::make_shared<TaskPool>(options.io_threads, "simba-io")),
        callbacks_(std::make_shared<TaskPool>(options.callback_threads, "simba-cb")),
        timer_thread_([this] {
          pthread_setname_np(pthread_self(), "simba-timer");
          timer_loop();
        }) {}

  ~RuntimeImpl() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
      timers_.clear();
      deadlines_.clear();
    }
    cv_.notify_all();
    if (timer_thread_.get_id() == std::this_thread::get_id()) {
      timer_thread_.detach();
    } else {
      timer_thread_.join();
    }
    io_->shutdown();
    callbacks_->shutdown();
  }

  Runtime::TimerId schedule_after(std::chrono::steady_clock::duration delay, std::function<void()> task) {
    auto deadline = std::chrono::steady_clock::now() + std::max(delay, std::chrono::steady_clock::duration::zero());
    Runtime::TimerId id;
    bool earliest;
    {
      std::lock_guard lock(mutex_);
      id = ++next_id_;
      timers_.emplace(Key{deadline, id}, std::move(task));
      deadlines_.emplace(id, deadline);
      earliest = timers_.begin()->first.id == id;
    }
    if (earliest) cv_.notify_one();
    return id;
  }

  bool cancel(Runtime::TimerId id) {
    std::lock_guard lock(mutex_);
    auto it = deadlines_.find(id);
    if (it == deadlines_.end()) return false;
    timers_.erase(Key{it->second, id});
    deadlines_.erase(it);
    return true;
  }

  const Runtime::Options options_;
  const std::shared_ptr<TaskPool> io_;
  const std::shared_ptr<TaskPool> callbacks_;

 private:
  struct Key {
    std::chrono::steady_clock::time_point deadline;
    Runtime::TimerId id;
    bool operator<(const Key& other) const {
      return deadline != other.deadline ? deadline < other.deadline : id < other.id;
    }
  };

  void timer_loop() {
    std::unique_lock lock(mutex_);
    while (!stopped_) {
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = timers_.begin();
      if (first->first.deadline > std::chrono::steady_clock::now()) {
        cv_.wait_until(lock, first->first.deadline);
        continue;
      }
      auto task = std::move(first->second);
      deadlines_.erase(first->first.id);
      timers_.erase(first);
      io_->post(std::move(task));
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Key, std::function<void()>> timers_;
  std::unordered_map<Runtime::TimerId, std::chrono::steady_clock::time_point> deadlines_;
  Runtime::TimerId next_id_ = 0;
  bool stopped_ = false;
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

Runtime::TimerId Runtime::schedule_after(std::chrono::steady_clock::duration delay,
                                         std::function<void()> task) {
  return impl_->schedule_after(delay, std::move(task));
}
bool Runtime::cancel(TimerId id) { return impl_->cancel(id); }
void Runtime::post_io(std::function<void()> task) { impl_->io_->post(std::move(task)); }
Strand Runtime::make_strand() {
  return Strand(std::make_shared<internal::StrandImpl>(impl_->callbacks_));
}
Runtime::Options Runtime::options() const { return impl_->options_; }

}  // namespace simba
