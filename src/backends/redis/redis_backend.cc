// The Redis backend: Simba v3's keys and channels, Lua scripts run by SHA, one pub/sub
// connection per backend.
#include "simba/redis_backend.h"
#include "base/thread_annotations.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "backends/common/pool.h"
#include "backends/common/sweep.h"
#include "backends/redis/connection.h"
#include "backends/redis/reply.h"
#include "backends/redis/subscriber.h"
#include "simba/contender.h"
#include "simba/error.h"

namespace simba {
namespace {

using redis::Connection;
using redis::Reply;

// Acquire-or-renew. KEYS: lock, fencing hash, wait queue. ARGV: contender id, lease ms
// (ttl + transition), the "acquired" channel, ttl ms, sweep_idle ms (0: no expiry).
// Idle records go by expiry: the fencing hash outlives the lease by sweep_idle, and never goes
// before the server clock passes token / 1000, so a hash made again (HINCRBY from nothing
// gives 1) starts at now x 1000, above every token before it.
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
// A contender that does not get a held mutex publishes a demand on ARGV[6] (the owner of a
// cached lease listens there); a renewal says whether anyone waits in the queue (ours or
// Simba's: JVM contenders never publish a demand).
// KEYS[4] is the index of the mutex's own derived records (redis::derived_index_of): an owner
// hears whether it exists, i.e. whether any derived record is held (a shared mutex's writer
// then need not look for readers). A derived record (a name with '#': a semaphore's slot or line,
// a shared mutex's reader) also has KEYS[5], the index of its primitive's derived records
// (redis::derived_index_key), and its name in ARGV[7]: its holder keeps it in that set, and the
// set's expiry past its lease, so a listing of the set sees every held one (kListDerived); and
// KEYS[6], KEYS[7], its primitive's lock key and fencing hash, which an owner hears of.
// Returns {owner id, lease ms left, fencing token, server now ms, holder's acquired_at, ttl,
// waiters in the queue (a renewal; else 0)}, and for an owner also {0 (not idle), 1 if no
// derived record is held} and, for a derived record, {1 if its primitive is held, the
// primitive's fencing token}. A renewal says 0 (unknown) and nothing of the primitive: only
// the answer that grants a lease is heard (ServiceCore, when it wins).
constexpr const char* kAcquire = R"lua(
local id = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local idle = tonumber(ARGV[5])
local function keep(token)
  if idle > 0 then
    redis.call('PEXPIREAT', KEYS[2], math.max(now + tonumber(ARGV[2]) + idle, math.floor(token / 1000) + 1))
  end
  if KEYS[5] then
    redis.call('SADD', KEYS[5], ARGV[7])
    local life = tonumber(ARGV[2]) + idle
    if redis.call('PTTL', KEYS[5]) < life then redis.call('PEXPIRE', KEYS[5], life) end
  end
end
local function owned(reply, fresh)
  reply[8] = 0
  reply[9] = 0
  if fresh then
    reply[9] = 1 - redis.call('EXISTS', KEYS[4])
    if KEYS[6] then
      reply[10] = redis.call('EXISTS', KEYS[6])
      reply[11] = tonumber(redis.call('HGET', KEYS[7], 'token') or 0)
    end
  end
  return reply
end
if redis.call('SET', KEYS[1], id, 'NX', 'PX', ARGV[2]) then
  local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
  if token == 1 then
    -- A new counter (or one lost with the data): start above any earlier token.
    token = now * 1000
  end
  redis.call('HSET', KEYS[2], 'owner', id, 'token', token, 'at', now, 'ttl', ARGV[4])
  keep(token)
  -- Heard by waiters (they are in the queue) and observers (they listen on '<lock>:' too);
  -- with neither, nobody needs it, not even this process's own subscription.
  local waiting = redis.call('ZCARD', KEYS[3])
  if waiting > 0 or redis.call('PUBSUB', 'NUMSUB', ARGV[3] .. ':')[2] > 0 then
    redis.call('PUBLISH', ARGV[3], 'acquired@@' .. id)
  end
  -- Out of the queue if it waited there (an empty queue, the uncontended case: one call).
  if waiting > 0 then waiting = waiting - redis.call('ZREM', KEYS[3], id) end
  return owned({id, tonumber(ARGV[2]), token, now, now, tonumber(ARGV[4]), waiting}, true)
end
local owner = redis.call('GET', KEYS[1])
if owner == id then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], 'owner', id, 'at', now, 'ttl', ARGV[4])
  local token = tonumber(redis.call('HGET', KEYS[2], 'token'))
  keep(token)
  return owned({id, tonumber(ARGV[2]), token, now, now, tonumber(ARGV[4]), redis.call('ZCARD', KEYS[3])}, false)
end
redis.call('ZADD', KEYS[3], 'NX', string.format('%.6f', tonumber(t[1]) + tonumber(t[2]) / 1e6 - 0.5), id)
if idle > 0 then redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[2]) + idle) end
if owner then
  redis.call('ZREM', KEYS[3], owner)
  redis.call('PUBLISH', ARGV[6], 'demand@@' .. id)
end
local holder = redis.call('HMGET', KEYS[2], 'owner', 'token', 'at', 'ttl')
if holder[1] ~= owner then holder = {owner, holder[2], -1, -1} end
return {owner, redis.call('PTTL', KEYS[1]), tonumber(holder[2] or 0), now, tonumber(holder[3]), tonumber(holder[4]), 0}
)lua";

// Release if ours, and wake the first waiter in Simba's queue (lowest score), as Simba does,
// taking it out of the queue: a wake-up nobody hears (its contender left: PUBLISH reached
// no one) takes that entry out too and goes to the next. Observers hear every release on the
// channel "<prefix>:{<mutex>}:". A waiter that gives up leaves the queue.
// The fencing hash notes when the mutex became free ('free') and stays for sweep_idle. The
// queue is looked at once (ZCARD) and walked only when somebody waits: an uncontended release
// runs 8 commands, an uncontended acquisition 8, and neither sends a message anyone hears unless
// an observer listens (`redis-cli monitor`).
// KEYS: lock, wait queue, fencing hash, and a derived record's index (kAcquire). ARGV: contender
// id, waiter channel prefix "<prefix>:{<mutex>}:", sweep_idle ms (0: no expiry), and a derived
// record's name, which leaves the index with its lease.
constexpr const char* kRelease = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('DEL', KEYS[1])
if KEYS[4] then redis.call('SREM', KEYS[4], ARGV[4]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = redis.call('HGET', KEYS[3], 'token')  -- false: no fencing hash (or one without a token)
if token then
  redis.call('HSET', KEYS[3], 'free', now)
  local idle = tonumber(ARGV[3])
  if idle > 0 then
    redis.call('PEXPIREAT', KEYS[3], math.max(now + idle, math.floor(tonumber(token) / 1000) + 1))
  end
end
local message = 'released@@' .. ARGV[1]
if redis.call('ZCARD', KEYS[2]) > 0 then  -- nobody queued (the uncontended case): one call
  redis.call('ZREM', KEYS[2], ARGV[1])
  for _ = 1, 1000 do
    local first = redis.call('ZRANGE', KEYS[2], 0, 0)
    if #first == 0 then break end
    redis.call('ZREM', KEYS[2], first[1])
    if redis.call('PUBLISH', ARGV[2] .. first[1], message) > 0 then break end
  end
end
redis.call('PUBLISH', ARGV[2], message)
return 1
)lua";

// Deletes idle records: no lock key, no wait queue, nothing done for ARGV[1] ms (the last
// renewal 'at' and release 'free'), and a token below now x 1000. KEYS: (lock, wait queue,
// fencing hash) for each mutex. Returns how many hashes it deleted.
constexpr const char* kSweep = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deleted = 0
for i = 1, #KEYS, 3 do
  if redis.call('EXISTS', KEYS[i], KEYS[i + 1]) == 0 then
    local record = redis.call('HMGET', KEYS[i + 2], 'token', 'at', 'free')
    local last = math.max(tonumber(record[2] or 0), tonumber(record[3] or 0))
    if last <= now - tonumber(ARGV[1]) and tonumber(record[1] or 0) < now * 1000 then
      deleted = deleted + redis.call('DEL', KEYS[i + 2])
    end
  end
end
return deleted
)lua";

// KEYS: lock, fencing hash, wait queue. Returns what kAcquire returns, without contending
// (waiters in the queue whoever owns), and 1 if the owner marked its lease idle (else 0).
constexpr const char* kRead = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('GET', KEYS[1])
local holder = redis.call('HMGET', KEYS[2], 'owner', 'token', 'at', 'ttl', 'idle')
if owner == false or holder[1] ~= owner then holder = {owner, holder[2], -1, -1, false} end
local idle = 0
if owner and holder[5] and holder[5] == holder[2] then idle = 1 end
return {owner, redis.call('PTTL', KEYS[1]), tonumber(holder[2] or 0), now, tonumber(holder[3]), tonumber(holder[4]),
        redis.call('ZCARD', KEYS[3]), idle}
)lua";

// The held records of an index of derived records (kAcquire), sorted by name, as kRead reads
// each; a name whose lock key is gone (its holder died, or its release came first) leaves the
// index. KEYS: the index. ARGV: "<prefix>:{", the most records to return. Returns {server now
// ms, 1 if more were held than returned (else 0), then per record its name and what kRead
// returns}. The records' keys are not in KEYS: they are named by the index (Redis Cluster is not
// supported, docs/engines.md).
constexpr const char* kListDerived = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local names = redis.call('SMEMBERS', KEYS[1])
table.sort(names)
local out = {now, 0}
local limit = tonumber(ARGV[2])
local found = 0
for _, name in ipairs(names) do
  local lock = ARGV[1] .. name .. '}'
  local owner = redis.call('GET', lock)
  if not owner then
    redis.call('SREM', KEYS[1], name)
  elseif found == limit then
    out[2] = 1
  else
    found = found + 1
    local holder = redis.call('HMGET', lock .. ':fencing', 'owner', 'token', 'at', 'ttl', 'idle')
    if holder[1] ~= owner then holder = {owner, holder[2], -1, -1, false} end
    local idle = 0
    if holder[5] and holder[5] == holder[2] then idle = 1 end
    out[#out + 1] = name
    out[#out + 1] = {owner, redis.call('PTTL', lock), tonumber(holder[2] or 0), now, tonumber(holder[3]),
                     tonumber(holder[4]), redis.call('ZCARD', lock .. ':contender'), idle}
  end
end
return out
)lua";

// The owner marks its live lease idle (ARGV[2] = '1') or in use: the fencing hash's 'idle'
// field holds the token of the lease marked idle, so a new lease (a new token) starts
// unmarked. Simba ignores the field. KEYS: lock, fencing hash. ARGV: owner id, '1' or '0'.
// Returns 1 if ARGV[1] owns the mutex (and its hash is ours), else 0.
constexpr const char* kMarkIdle = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[2], 'idle', redis.call('HGET', KEYS[2], 'token'))
else
  redis.call('HDEL', KEYS[2], 'idle')
end
return 1
)lua";

// simba-bench's fenced floor (RawProbe::fenced_once): the least a lock cycle that issues a fencing
// token costs here, a script each way. KEYS: lock, token hash. ARGV: owner, lease ms.
constexpr const char* kFencedAcquire = R"lua(
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('HINCRBY', KEYS[2], 'token', 1) end
return 0
)lua";
// KEYS: lock. ARGV: owner.
constexpr const char* kFencedRelease = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

struct Script {
  explicit Script(const char* source) : source(source) {}
  const char* const source;
  mutable internal::AnnotatedMutex mutex;
  std::string sha GUARDED_BY(mutex);  // from SCRIPT LOAD
};

class RedisBackend final
    : public BackendOffering<Push, DemandSignal, DemandPush, IdleMarks, Administration, RawProbe, Batches> {
 public:
  // Waiters hear acquisitions and look again at each: that keeps Simba's wait queue free of owners.
  bool waiters_hear_acquisitions() const noexcept override { return true; }
  RedisBackend(const RedisOptions& options, std::string where)
      : options_(options),
        where_(std::move(where)),
        pool_(options.pool_size, [this] { return std::make_unique<Connection>(options_, where_); }),
        subscriber_(redis::make_subscriber(options, where_)) {
    // Connect now: a wrong password or a port that is not Redis fails here, not later.
    auto connection = std::make_unique<Connection>(options_, where_);
    for (Script* script : {&acquire_, &release_, &read_, &sweep_, &mark_idle_, &list_derived_}) {
      load(*connection, *script);
    }
    pool_.seed(std::move(connection));
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    auto reply = run(acquire_, acquire_keys(mutex), acquire_args(mutex, contender_id, ttl, transition));
    return redis::owner_from_reply(*reply, ttl, transition, where_);
  }

  // The acquire script once per call, pipelined on one connection: one round trip. A call
  // whose script the server no longer has (NOSCRIPT: a restart or SCRIPT FLUSH) is sent again
  // after loading it.
  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    auto command_of = [&](const AcquireCall& call, const std::string& sha) {
      return evalsha(sha, acquire_keys(call.mutex),
                     acquire_args(call.mutex, call.contender_id, call.ttl, call.transition));
    };
    return pool_.with([&](Connection& connection) {
      std::vector<std::vector<std::string>> commands;
      commands.reserve(calls.size());
      const std::string sha = sha_of(acquire_);
      for (const auto& call : calls) commands.push_back(command_of(call, sha));
      auto replies = connection.pipeline(commands);
      std::vector<AcquireResult> results(calls.size());
      bool loaded = false;
      for (std::size_t i = 0; i < calls.size(); ++i) {
        try {
          if (replies[i]->type == REDIS_REPLY_ERROR &&
              std::string_view(replies[i]->str, replies[i]->len).starts_with("NOSCRIPT")) {
            if (!loaded) load(connection, acquire_);
            loaded = true;
            replies[i] = connection.command(command_of(calls[i], sha_of(acquire_)));
          }
          if (replies[i]->type == REDIS_REPLY_ERROR) Connection::fail_reply(where_, *replies[i], "script");
          results[i].snapshot = redis::owner_from_reply(*replies[i], calls[i].ttl, calls[i].transition, where_);
        } catch (...) {
          if (connection.broken()) throw;  // the connection went: the whole batch failed
          results[i].error = std::current_exception();
        }
      }
      return results;
    });
  }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    std::vector<std::string> keys{lock_key(mutex), queue_key(mutex), fencing_key(mutex)};
    std::vector<std::string> args{contender_id, lock_key(mutex) + ":", std::to_string(options_.sweep_idle.count())};
    if (auto index = redis::derived_index_key(options_.prefix, mutex)) {
      keys.push_back(std::move(*index));
      args.push_back(mutex);
    }
    auto reply = run(release_, keys, args);
    return reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  }

  // Another process's lease ends the way its own release would end it.
  bool evict(const std::string& mutex, const std::string& owner_id) override { return release(mutex, owner_id); }

  OwnerSnapshot read(const std::string& mutex) override {
    auto reply = run(read_, {lock_key(mutex), fencing_key(mutex), queue_key(mutex)}, {});
    return redis::owner_from_reply(*reply, std::chrono::milliseconds(0), std::chrono::milliseconds(0), where_);
  }

  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    auto reply = run(mark_idle_, {lock_key(mutex), fencing_key(mutex)}, {owner_id, idle ? "1" : "0"});
    return reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  }

  // Every name with a lock key, fencing hash or wait queue under our prefix, found by SCAN
  // (the server's clock read beside its first call), then read, pipelined: a listing of a few
  // names costs two round trips, one if none matched.
  MutexListing list(const std::string& prefix, std::size_t limit) override {
    std::set<std::string> names;
    MutexListing out;
    scan(
        prefix, [&](const std::string& name, const std::string&) { names.insert(name); }, &out.now);
    std::vector<std::string> wanted;
    for (const auto& name : names) {
      if (wanted.size() == limit) {
        out.truncated = true;
        break;
      }
      wanted.push_back(name);
    }
    auto snapshots = read_many(wanted);
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      out.now = std::max(out.now, snapshots[i].now);
      out.records.push_back({std::move(wanted[i]), std::move(snapshots[i].owner)});
    }
    return out;
  }

  // One script over the name's index of derived records (kListDerived): one round trip, however
  // large the keyspace (a SCAN walks all of it).
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    auto reply = run(list_derived_, {redis::derived_index_of(options_.prefix, name)},
                     {options_.prefix + ":{", std::to_string(limit)});
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements % 2 != 0 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_INTEGER) {
      throw Error(errc::internal, where_ + ": unexpected reply listing the records derived from '" + name + "'");
    }
    MutexListing out;
    out.now = reply->element[0]->integer;
    out.truncated = reply->element[1]->integer != 0;
    for (std::size_t i = 2; i < reply->elements; i += 2) {
      const redisReply* record = reply->element[i];
      if (record->type != REDIS_REPLY_STRING) {
        throw Error(errc::internal, where_ + ": unexpected reply listing the records derived from '" + name + "'");
      }
      out.records.push_back({std::string(record->str, record->len),
                             redis::owner_from_reply(*reply->element[i + 1], std::chrono::milliseconds(0),
                                                     std::chrono::milliseconds(0), where_)
                                 .owner});
    }
    return out;
  }

  // read() of each name, pipelined on one connection, up to 256 to a round trip.
  std::vector<OwnerSnapshot> read_many(const std::vector<std::string>& names) {
    std::vector<OwnerSnapshot> out;
    out.reserve(names.size());
    constexpr std::size_t kChunk = 256;
    for (std::size_t start = 0; start < names.size(); start += kChunk) {
      const std::size_t end = std::min(names.size(), start + kChunk);
      auto command_of = [&](const std::string& name, const std::string& sha) {
        return evalsha(sha, {lock_key(name), fencing_key(name), queue_key(name)}, {});
      };
      pool_.with([&](Connection& connection) {
        std::vector<std::vector<std::string>> commands;
        commands.reserve(end - start);
        const std::string sha = sha_of(read_);
        for (std::size_t i = start; i < end; ++i) commands.push_back(command_of(names[i], sha));
        auto replies = connection.pipeline(commands);
        bool loaded = false;
        for (std::size_t i = 0; i < replies.size(); ++i) {
          if (replies[i]->type == REDIS_REPLY_ERROR &&
              std::string_view(replies[i]->str, replies[i]->len).starts_with("NOSCRIPT")) {
            if (!loaded) load(connection, read_);
            loaded = true;
            replies[i] = connection.command(command_of(names[start + i], sha_of(read_)));
          }
          if (replies[i]->type == REDIS_REPLY_ERROR) Connection::fail_reply(where_, *replies[i], "script");
          out.push_back(
              redis::owner_from_reply(*replies[i], std::chrono::milliseconds(0), std::chrono::milliseconds(0), where_));
        }
      });
    }
    return out;
  }

  // Expiry sweeps by itself (see kAcquire); this deletes idle fencing hashes now.
  // Expiry sweeps by itself (see kAcquire); this deletes idle fencing hashes now, checked by
  // the script 100 mutexes a call (at most `limit` mutexes are looked at past the first).
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    std::size_t swept = 0;
    std::vector<std::string> keys;
    auto flush = [&] {
      if (keys.empty()) return;
      auto reply = run(sweep_, keys, {std::to_string(idle_for.count())});
      if (reply->type == REDIS_REPLY_INTEGER) swept += static_cast<std::size_t>(reply->integer);
      keys.clear();
    };
    scan("", [&](const std::string& name, const std::string& kind) {
      if (kind != "fencing" || swept + keys.size() / 3 >= limit) return;
      for (auto key : {lock_key(name), queue_key(name), fencing_key(name)}) keys.push_back(std::move(key));
      if (keys.size() >= 300) flush();
    });
    flush();
    return swept;
  }

  // A waiting contender listens on its own Simba waiter channel, where releases (ours and
  // JVM Simba's) are addressed, and on the mutex channel ("acquired@@"): at each new owner it
  // looks again, which takes a JVM owner's entry out of the queue (Simba never does) before
  // that owner's release could wake itself. An observer listens on the mutex channel and on
  // the channel every release also goes to. Nobody hears their own acquisitions or releases.
  // A contender's watch opens once it has found the mutex held (Capabilities::watch_when_waiting):
  // an owner that never waited keeps no subscription; owners hear a lost connection through
  // watch_channel().
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    if (contender_id.empty()) return subscriber_->watch({lock_key(mutex), lock_key(mutex) + ":"}, std::move(on_change));
    // The look after it waits for the server's confirmation (wait_ready), off the caller's thread.
    return subscriber_->watch({lock_key(mutex) + ":" + contender_id, lock_key(mutex)}, std::move(on_change),
                              internal::PushChannel::Subscribe::before_first_round);
  }

  // The pub/sub connection itself: lost when it drops (the server may have restarted and
  // forgotten every lease).
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override {
    return subscriber_->watch({}, std::move(on_change), internal::PushChannel::Subscribe::before_return);
  }

  // The owner listens on the demand channel ("<prefix>:{<mutex>}:demand", beside Simba's keys
  // and channels and ignored by Simba); JVM waiters show in read()'s queue count instead.
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& /*owner_id*/,
                                             std::function<void()> on_demand) override {
    return subscriber_->watch({demand_channel(mutex)}, [on_demand = std::move(on_demand)](WatchEvent) { on_demand(); });
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = "redis";
    caps.poll_interval = std::chrono::milliseconds(100);
    caps.multi_process = true;
    caps.multi_host = true;
    caps.max_mutex_bytes = 64 * 1024;
    caps.watch_when_waiting = true;
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

  // kFencedAcquire then kFencedRelease, each as the lock cycle's scripts run (run(): a pooled
  // connection each); the token hash's expiry is set after, untimed, so that a run leaves nothing.
  std::optional<double> fenced_once() override {
    const std::string key = options_.prefix + ":bench-fenced:" + raw_id_, hash = key + ":fencing";
    if (sha_of(fenced_release_).empty()) {
      pool_.with([&](Connection& connection) {
        load(connection, fenced_acquire_);
        load(connection, fenced_release_);
      });
    }
    const auto start = std::chrono::steady_clock::now();
    run(fenced_acquire_, {key, hash}, {"owner", "10000"});
    run(fenced_release_, {key}, {"owner"});
    const double took = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    pool_.with([&](Connection& connection) { connection.checked({"PEXPIRE", hash, "60000"}); });
    return took;
  }

 private:
  std::string lock_key(const std::string& mutex) const { return redis::lock_key(options_.prefix, mutex); }
  std::string queue_key(const std::string& mutex) const { return redis::queue_key(options_.prefix, mutex); }
  std::string fencing_key(const std::string& mutex) const { return redis::fencing_key(options_.prefix, mutex); }
  std::string demand_channel(const std::string& mutex) const { return lock_key(mutex) + ":demand"; }

  // Calls found(name, kind) for every key of a mutex whose name starts with `prefix`; kind is
  // "lock", "fencing" or "contender". SCAN, so the server never blocks on the whole keyspace.
  template <class Found>
  // With `now`: the server's clock too, read in the first call's round trip (TIME).
  void scan(const std::string& prefix, Found&& found, EpochMillis* now = nullptr) {
    const std::string pattern = glob_escaped(options_.prefix + ":{" + prefix) + "*";
    std::string cursor = "0";
    do {
      auto reply = pool_.with([&](Connection& connection) {
        std::vector<std::string> call{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        if (!now) return connection.checked(call);
        auto replies = connection.pipeline({call, {"TIME"}});
        for (auto& one : replies) {
          if (one->type == REDIS_REPLY_ERROR) Connection::fail_reply(where_, *one, "SCAN");
        }
        *now = time_of(*replies[1]);
        now = nullptr;
        return std::move(replies[0]);
      });
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
          reply->element[1]->type != REDIS_REPLY_ARRAY) {
        throw Error(errc::internal, where_ + ": unexpected SCAN reply");
      }
      cursor.assign(reply->element[0]->str, reply->element[0]->len);
      for (std::size_t i = 0; i < reply->element[1]->elements; ++i) {
        const redisReply* key = reply->element[1]->element[i];
        if (key->type != REDIS_REPLY_STRING) continue;
        if (auto found_key = redis::key_of(options_.prefix, std::string_view(key->str, key->len))) {
          if (found_key->mutex.compare(0, prefix.size(), prefix) == 0) found(found_key->mutex, found_key->kind);
        }
      }
    } while (cursor != "0");
  }

  // TIME's reply in epoch milliseconds.
  EpochMillis time_of(const redisReply& reply) const {
    if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 || reply.element[0]->type != REDIS_REPLY_STRING ||
        reply.element[1]->type != REDIS_REPLY_STRING) {
      throw Error(errc::internal, where_ + ": unexpected TIME reply");
    }
    const auto seconds = std::stoll(std::string(reply.element[0]->str, reply.element[0]->len));
    const auto micros = std::stoll(std::string(reply.element[1]->str, reply.element[1]->len));
    return seconds * 1000 + micros / 1000;
  }

  static std::string glob_escaped(const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }

  // The acquire script's KEYS and ARGV (see kAcquire).
  std::vector<std::string> acquire_keys(const std::string& mutex) const {
    std::vector<std::string> keys{lock_key(mutex), fencing_key(mutex), queue_key(mutex),
                                  redis::derived_index_of(options_.prefix, mutex)};
    if (auto index = redis::derived_index_key(options_.prefix, mutex)) {
      keys.push_back(std::move(*index));
      const std::string primitive = mutex.substr(0, mutex.rfind('#'));
      keys.push_back(lock_key(primitive));
      keys.push_back(fencing_key(primitive));
    }
    return keys;
  }
  std::vector<std::string> acquire_args(const std::string& mutex, const std::string& contender_id,
                                        std::chrono::milliseconds ttl, std::chrono::milliseconds transition) const {
    std::vector<std::string> args{contender_id,
                                  std::to_string((ttl + transition).count()),
                                  lock_key(mutex),
                                  std::to_string(ttl.count()),
                                  std::to_string(options_.sweep_idle.count()),
                                  demand_channel(mutex)};
    if (mutex.find('#') != std::string::npos) args.push_back(mutex);  // a derived record: its index's member
    return args;
  }

  static std::vector<std::string> evalsha(const std::string& sha, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args) {
    std::vector<std::string> command = {"EVALSHA", sha, std::to_string(keys.size())};
    command.insert(command.end(), keys.begin(), keys.end());
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }

  // Runs a script by SHA on a pooled connection, loading it again after NOSCRIPT.
  Reply run(Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    return pool_.with([&](Connection& connection) {
      std::vector<std::string> command = evalsha(sha_of(script), keys, args);
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
    internal::MutexLock lock(script.mutex);
    script.sha.assign(reply->str, reply->len);
  }

  std::string sha_of(const Script& script) {
    internal::MutexLock lock(script.mutex);
    return script.sha;
  }

  const RedisOptions options_;
  const std::string where_;
  internal::Pool<Connection> pool_;
  Script acquire_{kAcquire}, release_{kRelease}, read_{kRead}, sweep_{kSweep}, mark_idle_{kMarkIdle},
      list_derived_{kListDerived}, fenced_acquire_{kFencedAcquire}, fenced_release_{kFencedRelease};
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
  if (options.sweep_idle.count() < 0) throw Error(errc::invalid_argument, "Redis sweep_idle must be >= 0");
  std::string where = "redis://";
  if (!options.user.empty() || !options.password.empty()) {
    where += options.user + (options.password.empty() ? "" : ":***") + "@";
  }
  where += options.host + ":" + std::to_string(options.port) + "/" + std::to_string(options.db);
  return std::make_shared<RedisBackend>(options, std::move(where));
}

}  // namespace simba
