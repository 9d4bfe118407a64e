// One reconnecting push channel: the loop that Redis pub/sub, PostgreSQL LISTEN and the
// MariaDB/MySQL liveness monitor share. Internal to the backends.
//
// A thread owns the connection (a PushLink the engine supplies). It subscribes the keys that
// have watchers (requests from other threads wake it through an eventfd), waits on the socket
// and the wake-up fd, and hands what arrives to the watchers of each key. When the connection
// drops it tells every watcher WatchEvent::lost, reconnects with backoff (50 ms doubling to
// 500 ms, with jitter: while it is down owners cannot hear of a server restart), subscribes
// again and tells every watcher `released` (changes may have passed unseen). The thread
// starts with the first watch and ends with the channel.
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
#include <utility>
#include <vector>

#include "backends/common/watcher.h"
#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::internal {

// Where a link reports what it read.
class PushSink {
 public:
  virtual ~PushSink() = default;
  // A message for the watchers of `key`.
  virtual void deliver(const std::string& key, WatchEvent event) = 0;
  // The server confirmed the subscription to `key` (for links whose subscribe() returned false).
  virtual void confirmed(const std::string& key) = 0;
};

// One connection of a push channel, made by the engine's connect function (which throws
// Error when it cannot connect). Used by the channel's thread only.
class PushLink {
 public:
  virtual ~PushLink() = default;
  // The socket the thread waits on for reading.
  virtual int socket() const = 0;
  // Starts listening to `key`: true if that holds at once, false if the server confirms it
  // later (PushSink::confirmed). Throws Error on a broken connection.
  virtual bool subscribe(const std::string& key) = 0;
  virtual void unsubscribe(const std::string& key) = 0;
  // The socket is readable: reads what arrived and reports it. Throws Error when the
  // connection is lost.
  virtual void read(PushSink& sink) = 0;
};

struct PushChannelOptions {
  std::string thread_name;  // at most 15 bytes
  std::string what;         // "pub/sub", "LISTEN", "monitor": for log lines
  std::string where;        // the backend's description: for log lines
  // How long a handle's wait_ready() waits for the connection and its keys' subscriptions;
  // 0: no wait.
  std::chrono::milliseconds ready_timeout{0};
  // How long a key without watchers stays subscribed (a mutex locked again and again keeps
  // its subscription); 0: unsubscribed at once.
  std::chrono::milliseconds linger{0};
};

class PushChannel final : private PushSink {
 public:
  using Connect = std::function<std::unique_ptr<PushLink>()>;

  PushChannel(PushChannelOptions options, Connect connect);
  ~PushChannel() override;
  PushChannel(const PushChannel&) = delete;
  PushChannel& operator=(const PushChannel&) = delete;

  // When a watch's keys are subscribed.
  enum class Subscribe {
    // At once; watch() returns once they are (or after ready_timeout, or at once while the
    // server cannot be reached: the reconnect then makes every watcher look again).
    before_return,
    // At once, without waiting: the handle's wait_ready() waits for them (same bounds), and
    // its ready_before_first_round() is true: a contender's first round waits for them.
    before_first_round,
    // At the handle's first wait_ready() (a contender that found the mutex held); watch()
    // returns once the channel is connected (at once after its first connection). Until then
    // only `lost` and `released` after a reconnect come: an owner that never waits costs the
    // server no subscription (PostgreSQL's LISTEN grows slower with every channel a session
    // listens to).
    lazily,
  };

  // Calls `on_event` for messages on any of `keys`, with `lost` when the connection drops and
  // `released` once it is back. No keys: only those two (a liveness watch). The handle's
  // wait_ready() subscribes the keys if they are not yet and waits for them, with the bounds
  // of Subscribe::before_return.
  std::unique_ptr<Subscription> watch(std::vector<std::string> keys, std::function<void(WatchEvent)> on_event,
                                      Subscribe when = Subscribe::before_return);

 private:
  // What watch() returns: ends the watch when it goes; wait_ready() is the channel's.
  class Handle;

  void run();
  bool connect_and_resubscribe();
  void unsubscribe_idle();
  void drain_requests();
  void wait_for_wake(std::chrono::milliseconds timeout);
  void remove(const std::shared_ptr<Watcher>& watcher);
  void wait_ready(const std::shared_ptr<Watcher>& watcher);
  bool listen_locked(const std::shared_ptr<Watcher>& watcher) REQUIRES(mutex_);  // true: a subscription was requested
  void wake_thread();
  void notify_all(WatchEvent event);
  void deliver(const std::string& key, WatchEvent event) override;
  void confirmed(const std::string& key) override;

  const PushChannelOptions options_;
  const Connect connect_;
  const int wake_fd_;
  std::unique_ptr<PushLink> link_;  // touched only by the thread

  internal::AnnotatedMutex mutex_;
  std::condition_variable ready_changed_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool connected_ GUARDED_BY(mutex_) = false;
  bool connect_failed_ GUARDED_BY(mutex_) = false;  // the last connection attempt failed
  std::thread thread_ GUARDED_BY(mutex_);
  // Every watch (a lazy one whose keys it does not listen to yet has Watcher::pending set).
  std::set<std::shared_ptr<Watcher>> watchers_ GUARDED_BY(mutex_);
  // A key listened to (subscribed, or asked to be): its watchers (none while it idles), and
  // whether the server confirmed it on the current connection. One entry per key: at 100,000
  // contenders a second copy of each key would cost more than its watchers.
  struct Key {
    std::vector<std::shared_ptr<Watcher>> watchers;
    bool confirmed = false;
  };
  std::map<std::string, Key> keys_ GUARDED_BY(mutex_);
  // The keys of keys_ with no watcher left, and since when: unsubscribed once they have lingered.
  std::map<std::string, std::chrono::steady_clock::time_point> idle_ GUARDED_BY(mutex_);
  std::vector<std::pair<bool, std::string>> requests_ GUARDED_BY(mutex_);  // {subscribe (else unsubscribe), key}
};

}  // namespace simba::internal
