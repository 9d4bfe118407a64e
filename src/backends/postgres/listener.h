// One LISTEN connection for every watch of a PostgreSQL backend. Internal.
//
// A thread owns the connection: LISTEN simba_mutex, then it waits on the socket and calls the
// watchers of the mutex each notification names. When the connection drops it tells every
// watcher WatchEvent::lost, reconnects with backoff (at most 500 ms apart), listens again and
// tells every watcher `released` (changes may have passed unseen). Starts with the first watch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/watcher.h"
#include "simba/postgres_backend.h"

namespace simba::postgres {

class Connection;

inline constexpr const char* kChannel = "simba_mutex";

class Listener {
 public:
  Listener(PostgresOptions options, std::string where);
  ~Listener();

  // Returns once the LISTEN connection is up, or after the command timeout, or at once while
  // the server cannot be reached.
  std::unique_ptr<Subscription> watch(const std::string& mutex, std::function<void(WatchEvent)> on_event);

 private:
  void run();
  void remove(const std::shared_ptr<internal::Watcher>& watcher);
  void notify_all(WatchEvent event);
  void dispatch(const std::string& payload);

  const PostgresOptions options_;
  const std::string where_;
  int wake_fd_ = -1;
  std::unique_ptr<Connection> connection_;  // touched only by the thread

  std::mutex mutex_;  // guards everything below
  std::condition_variable state_changed_;
  bool stopping_ = false;
  bool listening_ = false;
  bool connect_failed_ = false;
  std::thread thread_;
  std::map<std::string, std::vector<std::shared_ptr<internal::Watcher>>> by_mutex_;
};

}  // namespace simba::postgres
