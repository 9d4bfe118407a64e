// The etcd backend's watch stream: one bidirectional Watch stream per backend carries every
// watch of its contenders and observers. Internal to the etcd backend.
//
// A watch asks for the events of a key or a key range from a revision on; its events are
// delivered on the reading thread, outside the hub's lock. When the stream breaks, the hub
// tells on_reset(true) (changes may be missed from now on), opens it again, creates every
// watch again from the current revision and, once the server confirmed them, tells
// on_reset(false) (look again: what changed meanwhile is not replayed).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "backends/etcd/channel.h"
#include "base/thread_annotations.h"

namespace simba::etcd {

class WatchHub {
 public:
  using Id = std::uint64_t;
  using OnEvents = std::function<void(const pb::WatchResponse&)>;
  // lost: the stream broke; !lost: it is back and the watches are in place again.
  explicit WatchHub(Channel& channel, std::function<void(bool lost)> on_reset);
  ~WatchHub();

  // Watches `key` (with `end`: the range [key, end)) from `start_revision` (0: from now);
  // `deletes_only` filters out puts. Never blocks on the server.
  Id add(std::string key, std::string end, std::int64_t start_revision, bool deletes_only, OnEvents on_events);
  // Ends a watch: once this returns, its callback is not called again (unless running now).
  void remove(Id id);
  // Whether the server confirmed the watch and the stream it is on is up.
  bool live(Id id);
  // Rises each time the stream breaks (and with it every watch's stream of events).
  std::uint64_t epoch();

 private:
  struct Target {
    pb::WatchCreateRequest request;
    std::shared_ptr<const OnEvents> on_events;
    std::int64_t server_id = -1;  // -1: not created (yet)
  };
  using Stream = grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>;

  void read_loop();
  void create_locked(Id id, Target& target) REQUIRES(mutex_);
  void cancel_locked(std::int64_t server_id) REQUIRES(mutex_);
  void handle(const pb::WatchResponse& response, bool& resync);

  Channel& channel_;
  const std::function<void(bool)> on_reset_;
  internal::AnnotatedMutex mutex_;
  std::condition_variable wake_;
  bool closing_ GUARDED_BY(mutex_) = false;
  Id next_id_ GUARDED_BY(mutex_) = 1;
  std::uint64_t epoch_ GUARDED_BY(mutex_) = 1;
  std::map<Id, Target> targets_ GUARDED_BY(mutex_);
  std::deque<Id> creating_ GUARDED_BY(mutex_);  // creates sent, answered in this order (0: removed since)
  std::map<std::int64_t, Id> by_server_id_ GUARDED_BY(mutex_);
  grpc::ClientContext* context_ GUARDED_BY(mutex_) = nullptr;
  Stream* stream_ GUARDED_BY(mutex_) = nullptr;
  std::thread reader_;
};

}  // namespace simba::etcd
