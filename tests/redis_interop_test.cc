// Simba-JVM interop on Redis under a mixed contest (run through src/backends/redis/test_server.sh): two contenders
// that speak Simba v3.1's wire protocol by hand (this file's own scripts, issuing the commands
// Simba's acquire and release scripts issue: SET NX PX + PUBLISH acquired, else ZADD NX scored
// by TIME seconds; release: DEL, pop the lowest queue entry, PUBLISH released to that one
// contender) against two of ours, on one mutex for 20 s. Each kind must get at least a quarter
// of the sections, no two sections may overlap, and nothing but the fencing hash may be left.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <poll.h>

#include <atomic>
#include <functional>
#include <random>
#include <thread>

#include "kit.h"
#include "server_test.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// Simba v3.1's acquire, keys declared. KEYS: lock, queue. ARGV: contender id, lease ms.
constexpr const char* kJvmAcquire = R"lua(
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  redis.call('publish', KEYS[1], 'acquired@@' .. ARGV[1])
  return {ARGV[1], tonumber(ARGV[2])}
end
redis.call('zadd', KEYS[2], 'nx', redis.call('time')[1], ARGV[1])
return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1])}
)lua";

// Simba v3.1's release. KEYS: lock, queue. ARGV: contender id.
constexpr const char* kJvmRelease = R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  redis.call('zrem', KEYS[2], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
local first = redis.call('zrevrange', KEYS[2], -1, -1)
if #first == 0 then return 1 end
redis.call('zrem', KEYS[2], first[1])
redis.call('publish', KEYS[1] .. ':' .. first[1], 'released@@' .. ARGV[1])
return 1
)lua";

struct Context {
  explicit Context(int port) : c(redisConnect("127.0.0.1", port)) {}
  ~Context() { redisFree(c); }
  redisReply* command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    return static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data()));
  }
  redisContext* c;
};

// What the contest shares: who is in a section, and how many each kind had.
struct Contest {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> ours{0}, jvm{0};
  std::atomic<bool> running{true};
  // Other work between sections: 1 to 10 ms at random, shorter than a section (20 ms), so
  // every contender is queued again before the holder releases (the queue decides who is
  // next), and no contender's return lines up with a release.
  static void think() {
    thread_local std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 10)(rng)));
  }
  void section(std::atomic<int>& count) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::sleep_for(20ms);
    inside.fetch_sub(1);
    count.fetch_add(1);
  }
};

// A JVM Simba contender: contends, holds for a section and releases; while held by another it
// waits for a wake-up on its own channel, or until the lease would run out (plus Simba's
// jitter), and contends again. Only a release addressed to it wakes it early.
void jvm_contender(int port, const std::string& mutex, const std::string& id, Contest& contest) {
  Context commands(port), wakeups(port);
  const std::string lock = "simba:{" + mutex + "}", queue = lock + ":contender";
  freeReplyObject(wakeups.command({"SUBSCRIBE", lock + ":" + id}));
  std::mt19937 rng(std::random_device{}());
  while (contest.running) {
    auto* reply = commands.command({"EVAL", kJvmAcquire, "2", lock, queue, id, "3000"});
    ASSERT_TRUE(reply && reply->type == REDIS_REPLY_ARRAY) << (reply ? reply->str : commands.c->errstr);
    const std::string owner(reply->element[0]->str, reply->element[0]->len);
    const long long left = reply->element[1]->integer;
    freeReplyObject(reply);
    if (owner == id) {
      contest.section(contest.jvm);
      freeReplyObject(commands.command({"EVAL", kJvmRelease, "2", lock, queue, id}));
      Contest::think();
      continue;
    }
    // As Simba's ContendPeriod: until the lease's transition ends, plus -200..1000 ms of jitter.
    pollfd fd{wakeups.c->fd, POLLIN, 0};
    const long long wait_ms = std::max(0LL, left + std::uniform_int_distribution<int>(-200, 999)(rng));
    if (poll(&fd, 1, static_cast<int>(wait_ms)) > 0) {
      redisBufferRead(wakeups.c);
      void* message = nullptr;
      while (redisGetReplyFromReader(wakeups.c, &message) == REDIS_OK && message) {
        freeReplyObject(message);
        message = nullptr;
      }
    }
  }
  freeReplyObject(commands.command({"EVAL", kJvmRelease, "2", lock, queue, id}));  // leaves the queue
}

void our_contender(const std::string& uri, const std::string& mutex, Contest& contest) {
  ContendOptions options;
  options.ttl = 2s;
  options.transition = 1s;
  Client client(open_backend(uri), options, std::make_shared<Runtime>());
  while (contest.running) {
    Locker locker(mutex, client);
    if (!locker.try_lock_for(1s)) continue;
    contest.section(contest.ours);
    locker.unlock();
    Contest::think();
  }
}

TEST(RedisInteropTest, TwoJvmAndTwoOfOursShareOneMutexFairlyAndLeaveOnlyTheFencingHash) {
  const std::string uri = test::env("SIMBA_TEST_REDIS_URI");
  const int port = std::atoi(test::env("SIMBA_TEST_REDIS_PORT").c_str());
  ASSERT_FALSE(uri.empty()) << "run through src/backends/redis/test_server.sh";
  const std::string mutex = tck::unique_mutex("mixed");
  Contest contest;
  std::vector<std::thread> actors;
  actors.emplace_back([&] { jvm_contender(port, mutex, "1:101@jvm-a", contest); });
  actors.emplace_back([&] { jvm_contender(port, mutex, "1:202@jvm-b", contest); });
  actors.emplace_back([&] { our_contender(uri, mutex, contest); });
  actors.emplace_back([&] { our_contender(uri, mutex, contest); });
  std::this_thread::sleep_for(20s);
  contest.running = false;
  for (auto& actor : actors) actor.join();
  const int total = contest.ours + contest.jvm;
  std::cout << "sections: ours " << contest.ours << ", JVM " << contest.jvm << "\n";
  EXPECT_EQ(contest.overlaps, 0);
  // About 700 fit in 20 s; lost wake-ups (waiters sleeping out a 3 s lease) cut that down.
  EXPECT_GE(total, 300) << "too few sections: wake-ups were lost";
  EXPECT_GE(contest.ours * 4, total) << "ours starved";
  EXPECT_GE(contest.jvm * 4, total) << "the JVM contenders starved";
  Context check(port);
  auto* keys = check.command({"KEYS", "simba:{" + mutex + "}*"});
  ASSERT_TRUE(keys && keys->type == REDIS_REPLY_ARRAY);
  std::vector<std::string> left;
  for (std::size_t i = 0; i < keys->elements; ++i) left.emplace_back(keys->element[i]->str, keys->element[i]->len);
  freeReplyObject(keys);
  // Who is still queued, if anyone: the message names them.
  std::string queued;
  if (auto* members = check.command({"ZRANGE", "simba:{" + mutex + "}:contender", "0", "-1", "WITHSCORES"})) {
    for (std::size_t i = 0; members->type == REDIS_REPLY_ARRAY && i < members->elements; ++i) {
      queued += std::string(members->element[i]->str, members->element[i]->len) + " ";
    }
    freeReplyObject(members);
  }
  EXPECT_EQ(left, std::vector<std::string>{"simba:{" + mutex + "}:fencing"}) << "still queued: " << queued;
}

// A JVM Simba waiter never publishes a demand: it only joins Simba's queue. Our lock manager,
// caching the lease (linger far beyond the bound), still gives it back: it reads the queue at
// its renewals and at the poll interval (100 ms at most). The JVM contender is woken by that
// release, as by any Simba release, and takes the mutex.
TEST(RedisInteropTest, AJvmWaiterGetsALeaseOurLockManagerCaches) {
  const std::string uri = test::env("SIMBA_TEST_REDIS_URI");
  const int port = std::atoi(test::env("SIMBA_TEST_REDIS_PORT").c_str());
  ASSERT_FALSE(uri.empty()) << "run through src/backends/redis/test_server.sh";
  const std::string mutex = tck::unique_mutex("jvm-waiter");
  ContendOptions options;
  options.ttl = 2s;
  options.transition = 1s;
  Client client(open_backend(uri), options, std::make_shared<Runtime>());
  auto ours = client.mutex(mutex).with_linger(60s);
  ours.lock();
  ours.unlock();
  ASSERT_FALSE(client.owner(mutex).empty()) << "the lease should be cached";
  std::this_thread::sleep_for(250ms);  // past the owner's first look at the queue, between two polls
  Context commands(port), wakeups(port);
  const std::string lock = "simba:{" + mutex + "}", queue = lock + ":contender", id = "1:303@jvm-c";
  freeReplyObject(wakeups.command({"SUBSCRIBE", lock + ":" + id}));
  const auto start = Steady::now();
  auto* reply = commands.command({"EVAL", kJvmAcquire, "2", lock, queue, id, "3000"});
  ASSERT_TRUE(reply && reply->type == REDIS_REPLY_ARRAY);
  EXPECT_NE(std::string(reply->element[0]->str, reply->element[0]->len), id) << "it should have queued";
  freeReplyObject(reply);
  pollfd fd{wakeups.c->fd, POLLIN, 0};
  ASSERT_GT(poll(&fd, 1, 1000), 0) << "no release woke the JVM waiter within 1 s (the cached lease was kept)";
  reply = commands.command({"EVAL", kJvmAcquire, "2", lock, queue, id, "3000"});
  ASSERT_TRUE(reply && reply->type == REDIS_REPLY_ARRAY);
  EXPECT_EQ(std::string(reply->element[0]->str, reply->element[0]->len), id);
  freeReplyObject(reply);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
  std::cout << "the JVM waiter owned " << took.count() << " ms after queueing\n";
  EXPECT_LT(took, 500ms);
  freeReplyObject(commands.command({"EVAL", kJvmRelease, "2", lock, queue, id}));
}

// Messages `subscriber` receives until `sentinel`, published now on `channel` by `commands`,
// arrives (so anything published before it, by whatever the test did, came first).
std::vector<std::string> messages_before(Context& subscriber, Context& commands, const std::string& channel,
                                         const std::string& sentinel) {
  freeReplyObject(commands.command({"PUBLISH", channel, sentinel}));
  std::vector<std::string> out;
  const timeval limit{5, 0};
  redisSetTimeout(subscriber.c, limit);
  for (;;) {
    void* raw = nullptr;
    if (redisGetReply(subscriber.c, &raw) != REDIS_OK || !raw) {
      ADD_FAILURE() << "the sentinel did not arrive within 5 s";
      return out;
    }
    auto* reply = static_cast<redisReply*>(raw);
    std::string text;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
        std::string(reply->element[0]->str, reply->element[0]->len) == "message") {
      text.assign(reply->element[2]->str, reply->element[2]->len);
    }
    freeReplyObject(reply);
    if (text == sentinel) return out;
    if (!text.empty()) out.push_back(text);
  }
}

// Simba's "acquired@@" message is work for listeners: waiters (queued, JVM Simba's or ours)
// and observers (who listen on "<lock>:" too) hear each acquisition; with neither, nothing is
// published, not even to the owner's own process (issue 28: a cycle no one watches costs no
// message). A subscriber on the mutex channel alone, as a JVM contender that is not queued,
// tells the cases apart; a sentinel published afterwards bounds the wait.
TEST(RedisInteropTest, AnAcquisitionIsPublishedWhenSomeoneWaitsOrObservesAndOnlyThen) {
  const std::string uri = test::env("SIMBA_TEST_REDIS_URI");
  const int port = std::atoi(test::env("SIMBA_TEST_REDIS_PORT").c_str());
  ASSERT_FALSE(uri.empty()) << "run through src/backends/redis/test_server.sh";
  Client client(open_backend(uri), tck::fast_options(), std::make_shared<Runtime>());
  auto acquire_and_listen = [&](const std::string& mutex, const std::function<void(Context&)>& arrange) {
    const std::string lock = "simba:{" + mutex + "}";
    Context listener(port), commands(port);
    freeReplyObject(listener.command({"SUBSCRIBE", lock}));
    arrange(commands);
    Locker locker(mutex, client);
    locker.lock();
    auto heard = messages_before(listener, commands, lock, "sentinel");
    locker.unlock();
    return std::make_pair(heard, "acquired@@" + locker.contender_id());
  };
  {
    auto [heard, acquired] = acquire_and_listen(tck::unique_mutex("unheard"), [](Context&) {});
    EXPECT_EQ(heard, std::vector<std::string>{}) << "nobody waited or observed";
  }
  {
    const std::string mutex = tck::unique_mutex("observed");
    Context observer(port);
    freeReplyObject(observer.command({"SUBSCRIBE", "simba:{" + mutex + "}:"}));
    auto [heard, acquired] = acquire_and_listen(mutex, [](Context&) {});
    EXPECT_EQ(heard, std::vector<std::string>{acquired}) << "an observer listens";
  }
  {
    const std::string mutex = tck::unique_mutex("awaited");
    auto [heard, acquired] = acquire_and_listen(mutex, [&](Context& commands) {
      // A JVM Simba waiter's entry (queued while another held the mutex).
      freeReplyObject(commands.command({"ZADD", "simba:{" + mutex + "}:contender", "1", "1:404@jvm-d"}));
    });
    EXPECT_EQ(heard, std::vector<std::string>{acquired}) << "a waiter is queued";
  }
}

}  // namespace
}  // namespace simba
