// simba/redis_backend.h: the Redis backend ("redis://[user:password@]host:port[/db][?prefix=simba]").
//
// Simba v3's layout, so JVM Simba contenders and ours share a mutex:
//   <prefix>:{<mutex>}              the lock: the owner's contender id, PX ttl + transition
//   <prefix>:{<mutex>}:contender    Simba's wait queue (sorted set of waiting contender ids)
//   channel <prefix>:{<mutex>}                  "acquired@@<owner id>"
//   channel <prefix>:{<mutex>}:<contender id>   "released@@<releaser id>"
// plus, ignored by Simba, the fencing hash <prefix>:{<mutex>}:fencing {token, owner}. Every
// script declares the keys it touches and all keys of a mutex share its hash tag (one cluster
// slot), but the client speaks to one node and follows no MOVED redirection: Redis Cluster is
// not supported. Leases are judged by Redis (PX, and TIME for timestamps). A release wakes the
// first queued waiter that still listens (Simba's queue order); waiters in one process share
// one pub/sub connection. Thread-safe: a small pool of connections serves concurrent calls.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "simba/backend.h"

namespace simba {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // Redis 6 ACL user; empty: the default user
  std::string password;  // empty: no AUTH. Never appears in messages or logs.
  int db = 0;
  std::string prefix = "simba";
  // Bound on connecting (TCP, AUTH, SELECT, the PING that proves it is Redis). Default: 2s.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  // Bound on one command's round trip. Default: 2s.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(2)};
  // Connections kept for commands (more callers wait for a free one). Default: 4.
  unsigned pool_size = 4;
  // A free mutex's keys (its fencing hash) expire after this long unused (see
  // Backend::sweep); 0: never. Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
};

// Connects once to check the server (so a wrong password or a port that is not Redis fails
// here, within connect_timeout) and returns the backend. Throws Error with
// errc::unavailable (unreachable, not Redis), errc::permission_denied (AUTH refused) or
// errc::invalid_argument (bad options).
std::shared_ptr<Backend> make_redis_backend(const RedisOptions& options);

}  // namespace simba
