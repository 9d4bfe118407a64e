// One pub/sub connection for every watch of a Redis backend. Internal to the Redis backend.
//
// A thread owns the connection: it writes (P)SUBSCRIBE / (P)UNSUBSCRIBE requests queued by
// other threads (woken through an eventfd), reads messages and calls the watchers. When the
// connection drops it tells every watcher WatchEvent::lost, reconnects with backoff and
// jitter, and subscribes again. The thread starts with the first watch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "simba/backend.h"
#include "backends/common/watcher.h"
#include "simba/redis_backend.h"

namespace simba::redis {

class Connection;

class Subscriber {
 public:
  Subscriber(RedisOptions options, std::string where);
  ~Subscriber();

  // Calls `on_event` for messages on any of `channels` ("acquired@@..." -> acquired,
  // "released@@..." -> released) and on connection loss.
  // Returns once the server confirmed both subscriptions, or after `command_timeout`, or at
  // once while Redis cannot be reached (a reconnect then makes every watcher look again).
  std::unique_ptr<Subscription> watch(const std::vector<std::string>& channels,
                                      std::function<void(WatchEvent)> on_event);


 private:
  using Watcher = internal::Watcher;

  void run();
  bool connect_and_resubscribe();
  void drain_requests();
  void dispatch(const std::string& channel, const std::string& payload);
  void notify_all(WatchEvent event);
  void wake();
  void remove(const std::shared_ptr<Watcher>& watcher);

  const RedisOptions options_;
  const std::string where_;
  std::unique_ptr<Connection> connection_;  // touched only by the thread
  int wake_fd_ = -1;

  std::mutex mutex_;  // guards everything below
  bool stopping_ = false;
  std::thread thread_;
  // Watchers by what they listen to; a channel or pattern is subscribed while it has one.
  std::map<std::string, std::vector<std::shared_ptr<Watcher>>> by_channel_;
  std::set<std::shared_ptr<Watcher>> watchers_;
  // Channels and patterns with no watcher left, and since when: unsubscribed after a linger,
  // so a mutex locked again and again keeps its subscription.
  std::map<std::string, std::chrono::steady_clock::time_point> idle_channels_;
  void unsubscribe_idle();
  // Requests for the thread: {command, name}.
  std::vector<std::pair<std::string, std::string>> requests_;
  // Channels and patterns the server confirmed on the current connection.
  std::set<std::string> confirmed_;
  bool connect_failed_ = false;  // the last connection attempt failed
  std::condition_variable confirmed_changed_;
};

}  // namespace simba::redis
