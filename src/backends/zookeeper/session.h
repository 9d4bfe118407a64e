// The ZooKeeper session of one backend: opened with the backend, opened again after it
// expires; asynchronous calls (so independent ones travel together) that callers wait for
// with a bound. Internal to the ZooKeeper backend.
//
// The C client runs two threads per session: one for the socket, one for completions and
// watches. Callbacks (Events) run on the latter; they must be quick and never wait for a call.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "simba/zookeeper_backend.h"

namespace simba::zookeeper {

struct Reply {
  int rc = ZOK;
  std::string value;  // get: the data; create: the path created
  Stat stat{};        // of the node (children: of the parent)
  std::vector<std::string> children;
  // write_all: each write's code (a multi that failed: the failing write's own code, and
  // ZOK or ZRUNTIMEINCONSISTENCY for the others, none of which was applied).
  std::vector<int> results;
};

// A call in flight.
class Call {
 public:
  struct State;
  Call(std::shared_ptr<State> state, std::chrono::milliseconds bound) : state_(std::move(state)), bound_(bound) {}
  // The answer; rc ZOPERATIONTIMEOUT if none came within the bound.
  Reply wait();

 private:
  std::shared_ptr<State> state_;
  std::chrono::milliseconds bound_;
};

class Session {
 public:
  struct Events {
    // The session's state changed: ZOO_CONNECTED_STATE (`fresh`: the first connection of a
    // new session), ZOO_CONNECTING_STATE (connection lost), ZOO_EXPIRED_SESSION_STATE or
    // ZOO_AUTH_FAILED_STATE.
    std::function<void(int state, bool fresh)> on_state;
    // A node watch fired: ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT, ZOO_CHILD_EVENT, ...
    std::function<void(int type, const std::string& path)> on_node;
  };

  // Opens the session (does not wait for it). Throws Error(errc::invalid_argument) for bad
  // options.
  Session(const ZookeeperOptions& options, std::string where, Events events);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The generation (1, 2, ... one per session opened) of the connected session, waiting up to
  // connect_timeout; after an expiry (also one that comes while it waits), or a disconnection
  // longer than the session timeout (also reported as ZOO_EXPIRED_SESSION_STATE), it opens a
  // new session first. Throws Error: errc::unavailable (no connection),
  // errc::permission_denied (digest refused).
  std::uint64_t ensure();
  // Closes the session for good (Backend::end_sessions): the server drops its ephemeral nodes
  // at once; calls after it answer ZINVALIDSTATE, ensure() throws errc::unavailable.
  void end();
  // The session timeout the server granted (what was asked, before the first connection).
  std::chrono::milliseconds session_timeout() const;
  const std::string& where() const { return where_; }

  // ACLs for what we create: latch nodes and mutex folders, and the /simba root.
  const ACL_vector* node_acl() const;
  const ACL_vector* root_acl() const;

  Call create(const std::string& path, const std::string& data, int mode, const ACL_vector* acl);
  Call children(const std::string& path);
  // The watch variants leave a watch that calls Events::on_node once; `then`, if given, runs
  // with the answer on the completion thread (or at once, on the caller's, if it was not sent).
  Call watch_children(const std::string& path, std::function<void(const Reply&)> then = {});
  Call get(const std::string& path);
  Call watch_exists(const std::string& path, std::function<void(const Reply&)> then = {});
  Call set(const std::string& path, const std::string& data, int version);
  // Writes every (path, data), at any version, in one multi: all of them or none. Sent only
  // while the session is connected, as remove_and_set().
  Call write_all(std::vector<std::pair<std::string, std::string>> writes);
  Call remove(const std::string& path, int version);
  // Deletes `path` (at `version`; -1: any) and writes `data` into `parent`, atomically, in a
  // multi sent only while the session is connected (else ZCONNECTIONLOSS, unsent: session.cc,
  // send_multi). The reply's stat is the parent's afterwards.
  Call remove_and_set(const std::string& path, int version, const std::string& parent, const std::string& data);

  // Throws the Error for ZooKeeper code `rc`: unavailable for connection trouble,
  // permission_denied for ACL and auth refusals, internal otherwise.
  [[noreturn]] void fail(int rc, const std::string& what) const;
  // Whether `rc` is connection or session trouble (fail() says unavailable), rather than a
  // refusal of one request.
  static bool unavailable(int rc);

 private:
  static void on_session_event(zhandle_t* zh, int type, int state, const char* path, void* context);
  static void on_node_event(zhandle_t* zh, int type, int state, const char* path, void* context);
  zhandle_t* open_locked() REQUIRES(mutex_);
  // ensure()'s first step: an expired session (or one disconnected for longer than its
  // timeout) closed and a new one opened, not waited for.
  void replace_if_expired();
  [[noreturn]] void throw_ended() const;  // ensure() after end()
  template <class Submit>
  Call submit(std::shared_ptr<Call::State> state, Submit submit);

  const ZookeeperOptions options_;
  const std::string where_;
  const Events events_;
  const std::string connect_string_;

  internal::AnnotatedSharedMutex handle_mutex_ ACQUIRED_BEFORE(mutex_);
  // Written under both locks (handle_mutex_ exclusively); read under either (handle_mutex_
  // shared while a call is submitted, mutex_ by the client's threads): no one annotation says
  // that.
  zhandle_t* zh_ = nullptr;

  mutable internal::AnnotatedMutex mutex_;
  std::condition_variable changed_;
  std::uint64_t generation_ GUARDED_BY(mutex_) = 0;
  bool connected_ GUARDED_BY(mutex_) = false;
  bool connected_before_ GUARDED_BY(mutex_) = false;  // this session was connected at least once
  std::chrono::steady_clock::time_point disconnected_since_ GUARDED_BY(mutex_){};
  bool expired_ GUARDED_BY(mutex_) = false;
  bool auth_failed_ GUARDED_BY(mutex_) = false;
  bool ended_ GUARDED_BY(mutex_) = false;  // end(): never opened again
  std::chrono::milliseconds granted_ GUARDED_BY(mutex_){0};
};

}  // namespace simba::zookeeper
