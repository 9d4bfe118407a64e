// The ZooKeeper session of one backend.
#include "backends/zookeeper/session.h"

#include <cstring>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "simba/error.h"

namespace simba::zookeeper {

struct Call::State {
  internal::AnnotatedMutex mutex;
  std::condition_variable done_cv;
  bool done GUARDED_BY(mutex) = false;
  // Filled by the completion before finish() sets `done` under the lock; read once `done`.
  Reply reply;
  // What the request points at until it is answered.
  std::string path, data, parent, parent_data;
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
  Stat set_stat{};
  // write_all's multi.
  std::vector<std::pair<std::string, std::string>> writes;
  std::vector<zoo_op_t> many_ops;
  std::vector<zoo_op_result_t> many_results;
  std::vector<Stat> many_stats;
  std::function<void(const Reply&)> then;

  void finish(int rc) {
    {
      internal::MutexLock lock(mutex);
      reply.rc = rc;
      done = true;
    }
    done_cv.notify_all();
    if (then) then(reply);  // `reply` no longer changes once done
  }
};

Reply Call::wait() {
  internal::UniqueMutexLock lock(state_->mutex);
  if (!state_->done_cv.wait_for(lock.native(), bound_, [&]() REQUIRES(state_->mutex) { return state_->done; })) {
    Reply timed_out;
    timed_out.rc = ZOPERATIONTIMEOUT;
    return timed_out;
  }
  return state_->reply;
}

namespace {

using State = Call::State;

// The completion's `data` owns a reference to the call's state.
std::shared_ptr<State> take(const void* data) {
  std::unique_ptr<std::shared_ptr<State>> holder(static_cast<std::shared_ptr<State>*>(const_cast<void*>(data)));
  return *holder;
}

void on_void(int rc, const void* data) { take(data)->finish(rc); }

void on_stat(int rc, const Stat* stat, const void* data) {
  auto state = take(data);
  if (stat) state->reply.stat = *stat;
  state->finish(rc);
}

void on_multi(int rc, const void* data) {
  auto state = take(data);
  state->reply.stat = state->set_stat;
  state->finish(rc);
}

void on_multi_all(int rc, const void* data) {
  auto state = take(data);
  state->reply.results.reserve(state->many_results.size());
  for (const auto& result : state->many_results) state->reply.results.push_back(result.err);
  state->finish(rc);
}

void on_data(int rc, const char* value, int length, const Stat* stat, const void* data) {
  auto state = take(data);
  if (value && length > 0) state->reply.value.assign(value, static_cast<std::size_t>(length));
  if (stat) state->reply.stat = *stat;
  state->finish(rc);
}

void on_string_stat(int rc, const char* value, const Stat* stat, const void* data) {
  auto state = take(data);
  if (value) state->reply.value = value;
  if (stat) state->reply.stat = *stat;
  state->finish(rc);
}

void on_strings_stat(int rc, const String_vector* strings, const Stat* stat, const void* data) {
  auto state = take(data);
  if (strings) state->reply.children.assign(strings->data, strings->data + strings->count);
  if (stat) state->reply.stat = *stat;
  state->finish(rc);
}

void log_client(const char* message) { internal::log_debug(std::string("zookeeper client: ") + message); }

// The C client formats some log lines in a static buffer that every session's threads share
// (a data race ThreadSanitizer sees as soon as two sessions reconnect at once), so its
// logging stays off unless simba logs at debug level. What matters reaches simba's log anyway:
// connection loss, expiry and every failed call.
void quiet_client() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!internal::log_debug_enabled()) zoo_set_debug_level(static_cast<ZooLogLevel>(0));
  });
}

char kAuth[] = "auth", kWorld[] = "world", kAnyone[] = "anyone", kEmpty[] = "";
ACL kNodeAcl[] = {{ZOO_PERM_ALL, {kAuth, kEmpty}}, {ZOO_PERM_READ, {kWorld, kAnyone}}};
ACL kRootAcl[] = {{ZOO_PERM_ALL, {kAuth, kEmpty}}, {ZOO_PERM_READ | ZOO_PERM_CREATE, {kWorld, kAnyone}}};
ACL_vector kNodeAcls = {2, kNodeAcl};
ACL_vector kRootAcls = {2, kRootAcl};

}  // namespace

Session::Session(const ZookeeperOptions& options, std::string where, Events events)
    : options_(options),
      where_(std::move(where)),
      events_(std::move(events)),
      connect_string_(options.hosts + options.chroot) {
  if (options_.hosts.empty()) throw Error(errc::invalid_argument, "zookeeper backend needs host:port");
  if (!options_.chroot.empty() && (options_.chroot.front() != '/' || options_.chroot.back() == '/')) {
    throw Error(errc::invalid_argument,
                "zookeeper chroot '" + options_.chroot + "' must start with '/' and not end with it");
  }
  if (options_.session_timeout.count() <= 0 || options_.connect_timeout.count() <= 0) {
    throw Error(errc::invalid_argument, "zookeeper timeouts must be > 0");
  }
  if (options_.sweep_idle.count() < 0) throw Error(errc::invalid_argument, "zookeeper sweep_idle must be >= 0");
  if (options_.user.empty() != options_.password.empty()) {
    throw Error(errc::invalid_argument, "zookeeper digest authentication needs both user and password");
  }
  internal::WriterLock lock(handle_mutex_);
  internal::MutexLock state(mutex_);
  zh_ = open_locked();
}

Session::~Session() { end(); }

void Session::end() {
  zhandle_t* zh;
  {
    // Both locks, as every write of zh_ takes them: the client's threads read it under mutex_
    // (on_node_event, on_session_event) until zookeeper_close() has joined them.
    internal::WriterLock lock(handle_mutex_);
    internal::MutexLock state(mutex_);
    ended_ = true;
    connected_ = false;
    zh = zh_;
    zh_ = nullptr;
  }
  changed_.notify_all();        // an ensure() waiting for a connection gives up
  if (zh) zookeeper_close(zh);  // closes the session: its ephemeral nodes go at once
}

zhandle_t* Session::open_locked() {
  quiet_client();
  ++generation_;
  connected_ = connected_before_ = expired_ = false;
  granted_ = options_.session_timeout;
  zhandle_t* zh = zookeeper_init2(connect_string_.c_str(), &Session::on_session_event,
                                  static_cast<int>(options_.session_timeout.count()), nullptr, this, 0, log_client);
  if (!zh) {
    throw Error(errc::unavailable, "cannot open a ZooKeeper session for " + where_ + ": " + std::strerror(errno));
  }
  return zh;
}

void Session::throw_ended() const {
  throw Error(errc::unavailable, "the ZooKeeper session for " + where_ + " was ended (end_sessions)");
}

std::uint64_t Session::ensure() {
  const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
  for (;;) {
    replace_if_expired();
    internal::UniqueMutexLock lock(mutex_);
    changed_.wait_until(lock.native(), deadline,
                        [&]() REQUIRES(mutex_) { return connected_ || auth_failed_ || expired_ || ended_; });
    if (ended_) throw_ended();
    if (auth_failed_) {
      throw Error(errc::permission_denied,
                  "ZooKeeper at " + where_ + " refused the digest credentials of '" + options_.user + "'");
    }
    if (connected_) return generation_;
    // The session expired while we waited for it (a reconnect the server refused): a new one,
    // within the same connect_timeout.
    if (expired_ && std::chrono::steady_clock::now() < deadline) continue;
    throw Error(errc::unavailable, "no connection to ZooKeeper at " + where_ + " within " +
                                       std::to_string(options_.connect_timeout.count()) + " ms");
  }
}

void Session::replace_if_expired() {
  zhandle_t* stale = nullptr;
  bool given_up = false;
  {
    internal::UniqueMutexLock lock(mutex_);
    if (ended_) throw_ended();
    // Disconnected for longer than the session timeout, the session is over whatever the
    // client hears (a server that lost its data even refuses our reconnect for good): treat
    // it as expired, as Curator does, and start a new one.
    if (!connected_ && !expired_ && connected_before_ &&
        std::chrono::steady_clock::now() - disconnected_since_ > granted_) {
      expired_ = given_up = true;
    }
  }
  if (given_up) {
    internal::log_warn("no connection to ZooKeeper at " + where_ +
                       " for longer than the session timeout; "
                       "its nodes are gone: opening a new session");
    events_.on_state(ZOO_EXPIRED_SESSION_STATE, false);
  }
  // Replace an expired session: close its handle first, holding no lock (closing waits for its
  // completion thread, which may be in a callback that needs one), then open the new one.
  // Calls in between fail with ZINVALIDSTATE (unavailable) and are retried.
  {
    internal::WriterLock handle(handle_mutex_);
    internal::MutexLock lock(mutex_);
    if (expired_ && !auth_failed_ && !ended_) std::swap(stale, zh_);
  }
  if (stale) zookeeper_close(stale);
  internal::WriterLock handle(handle_mutex_);
  internal::MutexLock lock(mutex_);
  if (!zh_ && expired_ && !auth_failed_ && !ended_) {
    zh_ = open_locked();
    internal::log_info("opened a new zookeeper session for " + where_);
  }
}

std::chrono::milliseconds Session::session_timeout() const {
  internal::MutexLock lock(mutex_);
  return granted_;
}

const ACL_vector* Session::node_acl() const { return options_.user.empty() ? &ZOO_OPEN_ACL_UNSAFE : &kNodeAcls; }
const ACL_vector* Session::root_acl() const { return options_.user.empty() ? &ZOO_OPEN_ACL_UNSAFE : &kRootAcls; }

void Session::on_session_event(zhandle_t* zh, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* self = static_cast<Session*>(context);
  bool fresh = false, dropped = false, resumed = false;
  {
    internal::MutexLock lock(self->mutex_);
    if (zh != self->zh_) return;  // a replaced or closing session's last words
    if (state == ZOO_CONNECTED_STATE) {
      fresh = !self->connected_before_;
      resumed = !fresh && !self->connected_;
      if (fresh && !self->options_.user.empty()) {
        // Before anyone may send a request (ensure() waits for connected_). The client
        // repeats it on every reconnect of this session. Digest authentication itself never
        // fails: a wrong password only finds the nodes' ACL closed (ZNOAUTH).
        const std::string credentials = self->options_.user + ":" + self->options_.password;
        int rc = zoo_add_auth(zh, "digest", credentials.data(), static_cast<int>(credentials.size()), nullptr, nullptr);
        if (rc != ZOK) {
          internal::log_error("ZooKeeper at " + self->where_ + ": cannot add digest authentication: " + zerror(rc));
          self->auth_failed_ = true;
        }
      }
      self->connected_ = self->connected_before_ = true;
      self->granted_ = std::chrono::milliseconds(zoo_recv_timeout(zh));
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
      self->connected_ = false;
      self->expired_ = true;
    } else if (state == ZOO_AUTH_FAILED_STATE) {
      self->connected_ = false;
      self->auth_failed_ = true;
    } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
      if (self->connected_) {
        self->disconnected_since_ = std::chrono::steady_clock::now();
        dropped = true;
      }
      self->connected_ = false;
    } else {
      return;
    }
  }
  self->changed_.notify_all();
  if (state == ZOO_ASSOCIATING_STATE) return;
  if (dropped) {
    internal::log_warn("lost the connection to ZooKeeper at " + self->where_ + "; reconnecting");
  } else if (resumed) {
    internal::log_info("connected to ZooKeeper at " + self->where_ + " again; the session survived");
  } else if (state == ZOO_EXPIRED_SESSION_STATE) {
    internal::log_warn("zookeeper session for " + self->where_ + " expired; its nodes are gone");
  } else if (state == ZOO_AUTH_FAILED_STATE) {
    internal::log_error("ZooKeeper at " + self->where_ + " refused the digest credentials of '" + self->options_.user +
                        "'");
  }
  self->events_.on_state(state, fresh);
}

void Session::on_node_event(zhandle_t* zh, int type, int, const char* path, void* context) {
  if (type == ZOO_SESSION_EVENT || !path) return;  // the session watcher handles those
  auto* self = static_cast<Session*>(context);
  {
    internal::MutexLock lock(self->mutex_);
    if (zh != self->zh_) return;
  }
  self->events_.on_node(type, path);
}

namespace {
// The C client's zoo_amulti (3.8, and upstream still) checks the session's state once per
// operation, and an operation after one that found the session unrecoverable (expired) frees a
// path it never allocated: the previous operation's, which is ours (with a chroot, its own
// copy, again). Sent on an expired session, a multi freed our node's path, which the call's
// state freed again: a double free that aborted `simba lock` on waking from a stall past its
// session. So a multi goes only on a connected session; otherwise it is not sent and answers
// ZCONNECTIONLOSS, and the caller retries as for any lost connection. (The session is seen
// connected just before the call: expiring it takes the client's I/O thread a reconnect and
// the server's answer, so only a call descheduled for that long in between could still meet
// an expiry.)
template <class Send>
int send_multi(zhandle_t* zh, Send send) {
  if (zoo_state(zh) != ZOO_CONNECTED_STATE) return ZCONNECTIONLOSS;
  return send();
}

// The state of a call about `path`; `then`, if any, runs with its answer.
std::shared_ptr<State> call_about(const std::string& path, std::function<void(const Reply&)> then = {}) {
  auto state = std::make_shared<State>();
  state->path = path;
  state->then = std::move(then);
  return state;
}
}  // namespace

template <class Submit>
Call Session::submit(std::shared_ptr<State> state, Submit submit) {
  auto* holder = new std::shared_ptr<State>(state);
  int rc;
  {
    internal::ReaderLock lock(handle_mutex_);
    rc = zh_ ? submit(zh_, static_cast<const void*>(holder)) : ZINVALIDSTATE;
  }
  if (rc != ZOK) {  // not sent: no completion will come
    delete holder;
    state->finish(rc);
  }
  return Call(std::move(state), options_.session_timeout + std::chrono::seconds(2));
}

Call Session::create(const std::string& path, const std::string& data, int mode, const ACL_vector* acl) {
  auto state = call_about(path);
  state->data = data;
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_acreate2(zh, state->path.c_str(), state->data.data(), static_cast<int>(state->data.size()), acl, mode,
                        on_string_stat, holder);
  });
}

Call Session::children(const std::string& path) {
  auto state = call_about(path);
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_aget_children2(zh, state->path.c_str(), 0, on_strings_stat, holder);
  });
}

Call Session::watch_children(const std::string& path, std::function<void(const Reply&)> then) {
  auto state = call_about(path, std::move(then));
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_awget_children2(zh, state->path.c_str(), &Session::on_node_event, this, on_strings_stat, holder);
  });
}

Call Session::get(const std::string& path) {
  auto state = call_about(path);
  return submit(
      state, [&](zhandle_t* zh, const void* holder) { return zoo_aget(zh, state->path.c_str(), 0, on_data, holder); });
}

Call Session::watch_exists(const std::string& path, std::function<void(const Reply&)> then) {
  auto state = call_about(path, std::move(then));
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_awexists(zh, state->path.c_str(), &Session::on_node_event, this, on_stat, holder);
  });
}

Call Session::set(const std::string& path, const std::string& data, int version) {
  auto state = call_about(path);
  state->data = data;
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_aset(zh, state->path.c_str(), state->data.data(), static_cast<int>(state->data.size()), version, on_stat,
                    holder);
  });
}

Call Session::write_all(std::vector<std::pair<std::string, std::string>> writes) {
  auto state = call_about(writes.empty() ? std::string() : writes.front().first);
  state->writes = std::move(writes);
  const std::size_t n = state->writes.size();
  state->many_ops.resize(n);
  state->many_results.resize(n);
  state->many_stats.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& [path, data] = state->writes[i];
    zoo_set_op_init(&state->many_ops[i], path.c_str(), data.data(), static_cast<int>(data.size()), -1,
                    &state->many_stats[i]);
  }
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return send_multi(zh, [&] {
      return zoo_amulti(zh, static_cast<int>(n), state->many_ops.data(), state->many_results.data(), on_multi_all,
                        holder);
    });
  });
}

Call Session::remove(const std::string& path, int version) {
  auto state = call_about(path);
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return zoo_adelete(zh, state->path.c_str(), version, on_void, holder);
  });
}

Call Session::remove_and_set(const std::string& path, int version, const std::string& parent, const std::string& data) {
  auto state = call_about(path);
  state->parent = parent;
  state->parent_data = data;
  zoo_delete_op_init(&state->ops[0], state->path.c_str(), version);
  zoo_set_op_init(&state->ops[1], state->parent.c_str(), state->parent_data.data(),
                  static_cast<int>(state->parent_data.size()), -1, &state->set_stat);
  return submit(state, [&](zhandle_t* zh, const void* holder) {
    return send_multi(zh, [&] { return zoo_amulti(zh, 2, state->ops, state->results, on_multi, holder); });
  });
}

void Session::fail(int rc, const std::string& what) const {
  const std::string message = "ZooKeeper at " + where_ + ": " + what + ": " + zerror(rc);
  if (rc == ZNOAUTH || rc == ZAUTHFAILED || rc == ZINVALIDACL) throw Error(errc::permission_denied, message);
  if (unavailable(rc)) throw Error(errc::unavailable, message);
  throw Error(errc::internal, message);
}

bool Session::unavailable(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
         rc == ZINVALIDSTATE || rc == ZSESSIONMOVED || rc == ZNOTHING || rc == ZSYSTEMERROR || rc == ZNOTREADONLY;
}

}  // namespace simba::zookeeper
