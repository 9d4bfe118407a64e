// The Redis backend: Simba v3's keys and channels, Lua scripts run by SHA, one pub/sub
// connection per backend.
#include "simba/redis_backend.h"

#include <mutex>
#include <vector>

#include "backends/common/pool.h"
#include "backends/common/raw_probe.h"
#include "backends/redis/connection.h"
#include "backends/redis/subscriber.h"
#include "simba/contender.h"
#include "simba/error.h"

namespace simba {
namespace {

using redis::Connection;
using redis::Reply;

// Acquire-or-renew. KEYS: lock, fencing hash, wait queue. ARGV: contender id, lease ms
// (ttl + transition), the "acquired" channel, ttl ms.
// The token rises whenever the lock was free (a new ownership); a renewal keeps it. The
// fencing hash also records when the holder last renewed and its ttl, so any reader can tell
// ttl_at exactly (JVM Simba holders, which do not write it, get an estimate).
// The wait queue is Simba's: a waiter joins it as Simba's do (ZADD NX on the server's TIME, so
// it keeps its place across rounds, and Simba's releases, which wake the lowest entry, reach
// ours in turn). Simba scores by whole seconds, so its entry of second S joined somewhere in
// [S, S+1) and ties go by id; ours is scored by its exact time minus half a second, which puts
// it after Simba's of earlier seconds, before those of later ones, on even terms with those
// of its own second, and in arrival order among ours. An owner never stays queued: the winner leaves
// the queue, and a holder seen here (a JVM Simba one, which never leaves it) is taken out.
// Returns {owner id, lease ms left, fencing token, server now ms, holder's acquired_at, ttl}.
constexpr const char* kAcquire = R"lua(
local id = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('SET', KEYS[1], id, 'NX', 'PX', ARGV[2]) then
  local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
  if token == 1 then
    -- A new counter (or one lost with the data): start above any earlier token.
    token = now * 1000
  end
  redis.call('HSET', KEYS[2], 'owner', id, 'token', token, 'at', now, 'ttl', ARGV[4])
  redis.call('PUBLISH', ARGV[3], 'acquired@@' .. id)
  redis.call('ZREM', KEYS[3], id)
  return {id, tonumber(ARGV[2]), token, now, now, tonumber(ARGV[4])}
end
local owner = redis.call('GET', KEYS[1])
if owner == id then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], 'owner', id, 'at', now, 'ttl', ARGV[4])
  return {id, tonumber(ARGV[2]), tonumber(redis.call('HGET', KEYS[2], 'token')), now, now, tonumber(ARGV[4])}
end
redis.call('ZADD', KEYS[3], 'NX', string.format('%.6f', tonumber(t[1]) + tonumber(t[2]) / 1e6 - 0.5), id)
if owner then redis.call('ZREM', KEYS[3], owner) end
local holder = redis.call('HMGET', KEYS[2], 'owner', 'token', 'at', 'ttl')
if holder[1] ~= owner then holder = {owner, holder[2], -1, -1} end
return {owner, redis.call('PTTL', KEYS[1]), tonumber(holder[2] or 0), now, tonumber(holder[3]), tonumber(holder[4])}
)lua";

// Release if ours, and wake the first waiter in Simba's queue (lowest score), as Simba does,
// taking it out of the queue: a wake-up nobody hears (its contender left: PUBLISH reached
// no one) takes that entry out too and goes to the next. Observers hear every release on the
// channel "<prefix>:{<mutex>}:". A waiter that gives up leaves the queue.
// KEYS: lock, wait queue. ARGV: contender id, waiter channel prefix "<prefix>:{<mutex>}:".
constexpr const char* kRelease = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local message = 'released@@' .. ARGV[1]
for _ = 1, 1000 do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #first == 0 then break end
  redis.call('ZREM', KEYS[2], first[1])
  if redis.call('PUBLISH', ARGV[2] .. first[1], message) > 0 then break end
end
redis.call('PUBLISH', ARGV[2], message)
return 1
)lua";

// KEYS: lock, fencing hash. Returns what kAcquire returns, without contending.
constexpr const char* kRead = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('GET', KEYS[1])
local holder = redis.call('HMGET', KEYS[2], 'owner', 'token', 'at', 'ttl')
if owner == false or holder[1] ~= owner then holder = {owner, holder[2], -1, -1} end
return {owner, redis.call('PTTL', KEYS[1]), tonumber(holder[2] or 0), now, tonumber(holder[3]), tonumber(holder[4])}
)lua";

struct Script {
  const char* source;
  std::string sha;  // from SCRIPT LOAD; guarded by the backend's pool mutex
};

class RedisBackend final : public Backend, public internal::RawProbe {
 public:
  RedisBackend(const RedisOptions& options, std::string where)
      : options_(options),
        where_(std::move(where)),
        pool_(options.pool_size, [this] { return std::make_unique<Connection>(options_, where_); }),
        subscriber_(redis::make_subscriber(options, where_)) {
    // Connect now: a wrong password or a port that is not Redis fails here, not later.
    auto connection = std::make_unique<Connection>(options_, where_);
    for (Script* script : {&acquire_, &release_, &read_}) load(*connection, *script);
    pool_.seed(std::move(connection));
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id,
                        std::chrono::milliseconds ttl, std::chrono::milliseconds transition) override {
    const auto lease = ttl + transition;
    auto reply = run(acquire_, {lock_key(mutex), fencing_key(mutex), queue_key(mutex)},
                     {contender_id, std::to_string(lease.count()), lock_key(mutex), std::to_string(ttl.count())});
    return snapshot(*reply, ttl, transition);
  }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    auto reply = run(release_, {lock_key(mutex), queue_key(mutex)}, {contender_id, lock_key(mutex) + ":"});
    return reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  }

  OwnerSnapshot read(const std::string& mutex) override {
    auto reply = run(read_, {lock_key(mutex), fencing_key(mutex)}, {});
    return snapshot(*reply, std::chrono::milliseconds(0), std::chrono::milliseconds(0));
  }

  // A waiting contender listens on its own Simba waiter channel, where releases (ours and
  // JVM Simba's) are addressed, and on the mutex channel ("acquired@@"): at each new owner it
  // looks again, which takes a JVM owner's entry out of the queue (Simba never does) before
  // that owner's release could wake itself. An observer listens on the mutex channel and on
  // the channel every release also goes to. Nobody hears their own acquisitions or releases.
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    if (contender_id.empty()) return subscriber_->watch({lock_key(mutex), lock_key(mutex) + ":"}, std::move(on_change));
    return subscriber_->watch({lock_key(mutex) + ":" + contender_id, lock_key(mutex)}, std::move(on_change));
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = "redis";
    caps.push = true;
    caps.waiters_hear_acquisitions = true;
    caps.poll_interval = std::chrono::milliseconds(100);
    caps.multi_process = true;
    caps.multi_host = true;
    caps.max_mutex_bytes = 64 * 1024;
    return caps;
  }

  std::string describe() const override { return where_; }

  // SET NX PX + DEL on one pooled connection: the fewest round trips a Redis lock can take.
  double raw_once() override {
    const std::string key = options_.prefix + ":bench-raw:" + raw_id_;
    return pool_.with([&](Connection& connection) {
      const auto start = std::chrono::steady_clock::now();
      connection.checked({"SET", key, "owner", "NX", "PX", "10000"});
      connection.checked({"DEL", key});
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    });
  }

 private:
  std::string lock_key(const std::string& mutex) const { return options_.prefix + ":{" + mutex + "}"; }
  std::string queue_key(const std::string& mutex) const { return lock_key(mutex) + ":contender"; }
  std::string fencing_key(const std::string& mutex) const { return lock_key(mutex) + ":fencing"; }

  // Turns a script's {owner, lease ms left, token, now, acquired_at, ttl} into an owner
  // record. Without the holder's own acquired_at/ttl (a JVM Simba holder), ttl_at is
  // estimated with our transition.
  OwnerSnapshot snapshot(const redisReply& reply, std::chrono::milliseconds ttl,
                         std::chrono::milliseconds transition) const {
    if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 6) {
      throw Error(errc::internal, where_ + ": unexpected script reply");
    }
    auto integer = [&](std::size_t i, long long fallback) {
      return reply.element[i]->type == REDIS_REPLY_INTEGER ? reply.element[i]->integer : fallback;
    };
    OwnerSnapshot out;
    out.now = integer(3, 0);
    out.owner.fencing_token = static_cast<std::uint64_t>(std::max<long long>(integer(2, 0), 0));
    const redisReply* id = reply.element[0];
    if (id->type != REDIS_REPLY_STRING) return out;  // no owner
    long long left = integer(1, -2);
    if (left == -1) left = (ttl + transition).count();  // a key without expiry: assume one lease
    if (left < 0) return out;                           // expired meanwhile
    out.owner.owner_id.assign(id->str, id->len);
    out.owner.transition_at = out.now + left;
    long long at = integer(4, -1), holder_ttl = integer(5, -1);
    if (at >= 0 && holder_ttl >= 0) {
      out.owner.acquired_at = at;
      out.owner.ttl_at = at + holder_ttl;
    } else {
      out.owner.ttl_at = std::max<EpochMillis>(out.now, out.owner.transition_at - transition.count());
      out.owner.acquired_at = out.owner.ttl_at - ttl.count();
    }
    return out;
  }

  // Runs a script by SHA on a pooled connection, loading it again after NOSCRIPT.
  Reply run(Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    return pool_.with([&](Connection& connection) {
      std::vector<std::string> command = {"EVALSHA", sha_of(script), std::to_string(keys.size())};
      command.insert(command.end(), keys.begin(), keys.end());
      command.insert(command.end(), args.begin(), args.end());
      auto reply = connection.command(command);
      if (reply->type == REDIS_REPLY_ERROR && std::string(reply->str, reply->len).rfind("NOSCRIPT", 0) == 0) {
        load(connection, script);  // the server restarted or flushed its scripts
        command[1] = sha_of(script);
        reply = connection.command(command);
      }
      if (reply->type == REDIS_REPLY_ERROR) Connection::fail_reply(where_, *reply, "script");
      return reply;
    });
  }

  void load(Connection& connection, Script& script) {
    auto reply = connection.checked({"SCRIPT", "LOAD", script.source});
    std::lock_guard lock(mutex_);
    script.sha.assign(reply->str, reply->len);
  }

  std::string sha_of(const Script& script) {
    std::lock_guard lock(mutex_);
    return script.sha;
  }

  const RedisOptions options_;
  const std::string where_;
  std::mutex mutex_;  // guards the scripts' SHAs
  internal::Pool<Connection> pool_;
  Script acquire_{kAcquire, {}}, release_{kRelease, {}}, read_{kRead, {}};
  std::unique_ptr<internal::PushChannel> subscriber_;
  const std::string raw_id_ = contender_id::uuid();  // simba-bench's baseline key
};

}  // namespace

std::shared_ptr<Backend> make_redis_backend(const RedisOptions& options) {
  if (options.host.empty()) throw Error(errc::invalid_argument, "Redis backend needs a host");
  if (options.port < 1 || options.port > 65535) throw Error(errc::invalid_argument, "Redis port out of range");
  if (options.db < 0) throw Error(errc::invalid_argument, "Redis db must be >= 0");
  if (options.prefix.empty()) throw Error(errc::invalid_argument, "Redis key prefix must not be empty");
  if (options.connect_timeout.count() <= 0 || options.command_timeout.count() <= 0) {
    throw Error(errc::invalid_argument, "Redis timeouts must be > 0");
  }
  std::string where = "redis://";
  if (!options.user.empty() || !options.password.empty()) {
    where += options.user + (options.password.empty() ? "" : ":***") + "@";
  }
  where += options.host + ":" + std::to_string(options.port) + "/" + std::to_string(options.db);
  return std::make_shared<RedisBackend>(options, std::move(where));
}

}  // namespace simba
