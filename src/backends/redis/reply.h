// What the Redis backend reads back: the owner record of a script's reply, and the mutex a key
// belongs to. Pure functions (fuzzed: fuzz/redis_reply.cc). Internal to the Redis backend.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "simba/backend.h"

namespace simba::redis {

// Turns a script's {owner, lease ms left, token, now, acquired_at, ttl[, waiters[, idle[, no
// derived record held[, primitive held, primitive's token]]]]} into an owner record.
// Without the holder's own acquired_at/ttl (a JVM Simba holder), ttl_at is estimated with
// `transition`. Throws Error(errc::internal) naming `where` for a reply of another shape or
// with times no clock gives (negative, or beyond the year 10000).
OwnerSnapshot owner_from_reply(const redisReply& reply, std::chrono::milliseconds ttl,
                               std::chrono::milliseconds transition, const std::string& where);

// Simba's keys of a mutex: the lock "<prefix>:{<mutex>}", its wait queue "...:contender" and
// our fencing hash "...:fencing".
std::string lock_key(const std::string& prefix, const std::string& mutex);
std::string queue_key(const std::string& prefix, const std::string& mutex);
std::string fencing_key(const std::string& prefix, const std::string& mutex);
// The index of the records derived from `name` (a semaphore's slots and line, a shared
// mutex's readers: "<name>#<suffix>", no '#' in the suffix), "<prefix>:{<name>}:derived": a set
// of their names. The record `mutex` belongs to the index of the name before its last '#';
// nullopt for a name without '#'. key_of() knows no index key (a listing by SCAN passes it by).
std::optional<std::string> derived_index_key(const std::string& prefix, const std::string& mutex);
std::string derived_index_of(const std::string& prefix, const std::string& name);

// The mutex and kind ("lock", "fencing", "contender") of one of those keys; nullopt for any
// other key. Inverse of the three above for every name.
struct KeyOf {
  std::string mutex;
  std::string kind;
};
std::optional<KeyOf> key_of(const std::string& prefix, std::string_view key);

}  // namespace simba::redis
