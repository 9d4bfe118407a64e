// A small pool of connections for a server backend. Internal to backends.
//
// with(fn) lends a connection to fn; a connection that fn left broken() is dropped (a new one
// is opened next time), so a restarted server costs one failed call per pooled connection,
// not a process restart. At most `size` connections exist; more callers wait for one.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>
#include "base/thread_annotations.h"

namespace simba::internal {

template <class Connection>
class Pool {
 public:
  Pool(unsigned size, std::function<std::unique_ptr<Connection>()> open)
      : size_(std::max(1u, size)), open_(std::move(open)) {}

  // Keeps an already open connection (the one a backend opened to check the server).
  void seed(std::unique_ptr<Connection> connection) {
    internal::MutexLock lock(mutex_);
    idle_.push_back(std::move(connection));
    ++count_;
  }

  template <class F>
  decltype(auto) with(F&& fn) {
    auto connection = take();
    struct GiveBack {
      Pool* pool;
      std::unique_ptr<Connection>* connection;
      ~GiveBack() { pool->give_back(std::move(*connection)); }
    } give_back{this, &connection};
    return fn(*connection);
  }

 private:
  std::unique_ptr<Connection> take() {
    internal::UniqueMutexLock lock(mutex_);
    for (;;) {
      if (!idle_.empty()) {
        auto connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
      }
      if (count_ < size_) {
        ++count_;
        lock.unlock();
        try {
          return open_();
        } catch (...) {
          lock.lock();
          --count_;
          returned_.notify_one();
          throw;
        }
      }
      returned_.wait(lock.native());
    }
  }

  void give_back(std::unique_ptr<Connection> connection) {
    {
      internal::MutexLock lock(mutex_);
      if (connection->broken()) {
        --count_;
      } else {
        idle_.push_back(std::move(connection));
      }
    }
    returned_.notify_one();
  }

  const unsigned size_;
  const std::function<std::unique_ptr<Connection>()> open_;
  internal::AnnotatedMutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(mutex_);
  unsigned count_ GUARDED_BY(mutex_) = 0;
};

}  // namespace simba::internal
