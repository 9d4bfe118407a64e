// The Redis backend against redis-server processes of its own: faults (a server down at
// start, a wrong password, a port that is not Redis, a restart mid-run) and wake-ups (a dead
// contender's queue entry, a release by a JVM Simba client).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>

#include "kit.h"
#include "simba/redis_backend.h"

extern char** environ;

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

// A redis-server on loopback in a temporary folder, without persistence.
class RedisServer {
 public:
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    dir_ = std::filesystem::temp_directory_path() / ("simba-redis-" + contender_id::uuid());
    std::filesystem::create_directories(dir_);
    port_ = free_port();
  }
  ~RedisServer() {
    kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  int port() const { return port_; }
  std::string uri(const std::string& userinfo = "",
                  const std::string& query = "connect_timeout=500ms&command_timeout=500ms") const {
    return "redis://" + userinfo + "127.0.0.1:" + std::to_string(port_) + "?" + query;
  }

  // Starts the server and waits until its log says it listens. The first start of a server
  // tries another port if the one it picked is taken; a restart keeps its port (clients hold
  // its URI) and fails if that is gone.
  void start() {
    for (int attempt = 0;; ++attempt) {
      bool exited = false;
      ASSERT_NO_FATAL_FAILURE(spawn_and_wait(exited));
      if (!exited) break;
      ASSERT_TRUE(!started_once_ && attempt < 20) << "redis-server on port " << port_ << " exited at start:\n"
                                                  << log_text();
      port_ = free_port();
    }
    started_once_ = true;
  }

  // SIGKILL: the server vanishes with everything it held.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // A free port below the kernel's ephemeral range: no outgoing connection of this machine
  // takes it while the server is down, and a connect to it never meets itself (a loopback
  // connect to a port in that range can be given the same port as its own source, and succeed).
  static int free_port() {
    int ephemeral_low = 32768;
    if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
    const int low = 20000;
    const int span = ephemeral_low - low > 1000 ? ephemeral_low - low : 40000;
    std::mt19937 rng{std::random_device{}()};
    for (;;) {
      int port = low + static_cast<int>(rng() % static_cast<unsigned>(span));
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      close(fd);
      if (rc == 0) return port;
    }
  }

 private:
  // Spawns redis-server on port_ and waits until its own log says it accepts connections (a
  // connect that succeeds proves nothing: another process may hold the port), or until it has
  // exited (then `exited`, and it is reaped).
  void spawn_and_wait(bool& exited) {
    const auto log = dir_ / "redis.log";
    std::error_code ignored;
    std::filesystem::remove(log, ignored);  // a restart's log says nothing of an earlier run
    std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save",       "",          "--appendonly",        "no",     "--dir",
                                     dir_.string(),  "--logfile", log.string()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ), 0)
        << "redis-server is not installed (./scripts/test installs it)";
    const bool settled = wait_until(
        [&] {
          if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            exited = true;
            return true;
          }
          return log_text().find("Ready to accept connections") != std::string::npos;
        },
        10s);
    ASSERT_TRUE(settled) << "redis-server on port " << port_ << " did not start in 10 s:\n" << log_text();
  }

  std::string log_text() const {
    std::ifstream in(dir_ / "redis.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  std::vector<std::string> extra_;
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool started_once_ = false;  // clients may hold the URI: the port is kept
};

// A plain command on the server, the way redis-cli or a JVM Simba client would send it.
std::string redis_cli(int port, const std::vector<std::string>& args) {
  std::string command = "redis-cli -p " + std::to_string(port);
  for (const auto& arg : args) command += " '" + arg + "'";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
    pclose(pipe);
  }
  return out;
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

std::pair<std::error_code, std::string> connect_error(const std::string& uri) {
  try {
    open_backend(uri);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

// A refused connection and a refused password fail at once, not after retrying until the
// connect timeout: with a timeout of 10 s, anything that waits for it takes at least that.
constexpr auto kLongConnectTimeout = 10s;
const std::string kLongConnectQuery =
    "connect_timeout=" + std::to_string(std::chrono::milliseconds(kLongConnectTimeout).count()) +
    "ms&command_timeout=500ms";

TEST(RedisFaultTest, ServerDownAtStartIsAClearErrorAtOnceNotAtTheConnectTimeout) {
  RedisServer server;  // not started
  auto started = std::chrono::steady_clock::now();
  auto [code, what] = connect_error(server.uri("", kLongConnectQuery));
  EXPECT_EQ(code, errc::unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kLongConnectTimeout) << "waited for the connect timeout";
  EXPECT_NE(what.find(std::to_string(server.port())), std::string::npos) << what;
}

TEST(RedisFaultTest, WrongPasswordIsPermissionDeniedAtOnceAndNeverShown) {
  RedisServer server({"--requirepass", "s3cret-pw"});
  ASSERT_NO_FATAL_FAILURE(server.start());
  for (const std::string userinfo : {":wrong-pw@", "default:wrong-pw@", ""}) {
    auto started = std::chrono::steady_clock::now();
    auto [code, what] = connect_error(server.uri(userinfo, kLongConnectQuery));
    EXPECT_EQ(code, errc::permission_denied) << userinfo << ": " << what;
    EXPECT_LT(std::chrono::steady_clock::now() - started, kLongConnectTimeout)
        << userinfo << ": waited for the connect timeout";
    EXPECT_EQ(what.find("wrong-pw"), std::string::npos) << what;
    EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
  }
  auto client = connect(server.uri(":s3cret-pw@"));
  Locker locker("auth", client);
  locker.acquire(2s);
  EXPECT_EQ(client.backend()->describe().find("s3cret"), std::string::npos) << client.backend()->describe();
}

TEST(RedisFaultTest, APortThatIsNotRedisIsUnavailableAtTheConnectTimeoutTheUriSets) {
  // A listener that accepts and never answers: the PING that proves it is Redis waits for the
  // URI's connect timeout, which must be what ends it, not the default one (2 s).
  const auto default_timeout = RedisOptions{}.connect_timeout;
  constexpr auto kConnectTimeout = 300ms;
  ASSERT_LT(kConnectTimeout, default_timeout);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  auto started = std::chrono::steady_clock::now();
  auto [code, what] = connect_error("redis://127.0.0.1:" + std::to_string(port) +
                                    "?connect_timeout=" + std::to_string(kConnectTimeout.count()) + "ms");
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(code, errc::unavailable);
  EXPECT_LT(took, default_timeout) << "the default connect timeout ended it, not the URI's";
  EXPECT_NE(what.find("Redis"), std::string::npos) << what;
  close(listener);
}

TEST(RedisFaultTest, ContenderStartedWhileServerIsDownAcquiresOnceItIsUp) {
  RedisServer server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  auto client = Client(open_backend(server.uri()), tck::fast_options(), std::make_shared<Runtime>());
  server.kill();
  auto recorder = std::make_shared<tck::Recorder>("down-at-start");
  auto service = client.contend_service(recorder);
  service->start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(service->is_owner());
  ASSERT_NO_FATAL_FAILURE(server.start());
  EXPECT_TRUE(wait_until([&] { return service->is_owner(); }, 10s));
  service->stop();
}

TEST(RedisFaultTest, RestartMidRunRevokesOwnersAtOnceAndResumesWithoutLeaks) {
  RedisServer server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  ContendOptions options = tck::fast_options();
  options.ttl = 2s;  // long enough that a revocation within it cannot be the lease running out
  options.transition = 1s;
  auto client = Client(open_backend(server.uri()), options, std::make_shared<Runtime>());
  auto owner = std::make_shared<tck::Recorder>("restart");
  auto waiter = std::make_shared<tck::Recorder>("restart");
  auto first = client.contend_service(owner);
  first->start();
  ASSERT_TRUE(wait_until([&] { return first->is_owner(); }, 5s));
  auto second = client.contend_service(waiter);
  second->start();
  ASSERT_TRUE(wait_until([&] { return second->after_owner().owner_id == owner->contender_id(); }, 5s));
  const int threads = tck::thread_count();
  const int fds = open_fds();

  for (int restart = 0; restart < 3; ++restart) {
    const int released_before = owner->released_count() + waiter->released_count();
    server.kill();
    auto killed = std::chrono::steady_clock::now();
    // The owner stops believing at once: the push channel drops, long before ttl.
    ASSERT_TRUE(wait_until([&] { return !first->is_owner() && !second->is_owner(); }, 1s)) << "restart " << restart;
    ASSERT_TRUE(wait_until([&] { return owner->released_count() + waiter->released_count() > released_before; }, 1s));
    EXPECT_LT(std::chrono::steady_clock::now() - killed, options.ttl);
    ASSERT_NO_FATAL_FAILURE(server.start());
    // Someone owns again, without restarting anything.
    ASSERT_TRUE(wait_until([&] { return first->is_owner() || second->is_owner(); }, 10s)) << "restart " << restart;
    // Let the push channel reconnect too (its backoff is at most 500ms) before the next kill.
    std::this_thread::sleep_for(700ms);
  }
  EXPECT_LE(tck::thread_count(), threads);
  EXPECT_LE(open_fds(), fds + 2);  // the pool may hold a connection more than before
  first->stop();
  second->stop();
}

// A redis-server of its own and a Client on it with leases of 5 s: a wake-up by expiry would take
// far longer than the bounds below.
class RedisWakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(server.start());
    options.ttl = 5s;
    options.transition = 2s;
    client.emplace(open_backend(server.uri()), options, std::make_shared<Runtime>());
  }

  // `contender` started, once it owns.
  std::unique_ptr<MutexContendService> owning(const std::shared_ptr<tck::Recorder>& contender) {
    auto service = client->contend_service(contender);
    service->start();
    EXPECT_TRUE(wait_until([&] { return service->is_owner(); }, 5s));
    return service;
  }
  // `contender` started, once it has seen `owner_id` own.
  std::unique_ptr<MutexContendService> waiting_for(const std::shared_ptr<tck::Recorder>& contender,
                                                   const std::string& owner_id) {
    auto service = client->contend_service(contender);
    service->start();
    EXPECT_TRUE(wait_until([&] { return service->after_owner().owner_id == owner_id; }, 5s));
    return service;
  }
  // The owner stops; the waiter owns within ttl/2 (by expiry it would take a ttl).
  void expect_stop_wakes(MutexContendService& owner, MutexContendService& waiter) {
    auto released = std::chrono::steady_clock::now();
    owner.stop();
    ASSERT_TRUE(wait_until([&] { return waiter.is_owner(); }, 5s));
    EXPECT_LT(std::chrono::steady_clock::now() - released, options.ttl / 2);
  }

  RedisServer server;
  ContendOptions options = tck::fast_options();
  std::optional<Client> client;
};

TEST_F(RedisWakeTest, ADeadContendersQueueEntryNeverSwallowsTheWakeUp) {
  auto owner = std::make_shared<tck::Recorder>("queue");
  auto waiter = std::make_shared<tck::Recorder>("queue");
  auto first = owning(owner);
  // A contender that died while queued, first in line (Simba would wake only it).
  redis_cli(server.port(), {"ZADD", "simba:{queue}:contender", "1", "99:1@gone-host"});
  auto second = waiting_for(waiter, owner->contender_id());
  expect_stop_wakes(*first, *second);
  second->stop();
}

// An owner that never waited keeps no subscription (a process holding many leases would keep
// one per lease); a contender subscribes to its waiter channel once it has found the mutex held,
// and is woken there by the release.
TEST_F(RedisWakeTest, OnlyAWaiterSubscribesAndItsReleaseWakesIt) {
  auto owner = std::make_shared<tck::Recorder>("subs");
  auto waiter = std::make_shared<tck::Recorder>("subs");
  // Subscribers of a channel, by the server's count.
  auto subscribers = [&](const std::string& channel) {
    const std::string out = redis_cli(server.port(), {"PUBSUB", "NUMSUB", channel});
    return std::atoi(out.substr(out.find('\n') + 1).c_str());
  };
  auto first = owning(owner);
  EXPECT_EQ(subscribers("simba:{subs}:" + owner->contender_id()), 0);
  EXPECT_EQ(subscribers("simba:{subs}"), 0);
  auto second = waiting_for(waiter, owner->contender_id());
  ASSERT_TRUE(wait_until([&] { return subscribers("simba:{subs}:" + waiter->contender_id()) == 1; }, 5s));
  EXPECT_EQ(subscribers("simba:{subs}"), 1);  // the waiter hears acquisitions too
  EXPECT_EQ(subscribers("simba:{subs}:" + owner->contender_id()), 0);
  expect_stop_wakes(*first, *second);
  second->stop();
}

TEST_F(RedisWakeTest, AJvmSimbaReleaseWakesOurWaiterAtOnce) {
  // A JVM Simba owner holds the mutex.
  redis_cli(server.port(), {"SET", "simba:{jvm}", "1:777@jvm-host", "NX", "PX", "20000"});
  auto waiter = std::make_shared<tck::Recorder>("jvm");
  auto service = waiting_for(waiter, "1:777@jvm-host");
  // Simba's queue now lists our waiter, which is where a JVM release is addressed.
  EXPECT_NE(redis_cli(server.port(), {"ZRANGE", "simba:{jvm}:contender", "0", "-1"}).find(waiter->contender_id()),
            std::string::npos);
  auto released = std::chrono::steady_clock::now();
  redis_cli(server.port(), {"DEL", "simba:{jvm}"});
  redis_cli(server.port(), {"PUBLISH", "simba:{jvm}:" + waiter->contender_id(), "released@@1:777@jvm-host"});
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - released, options.ttl / 2);  // expiry would take a ttl
  EXPECT_EQ(redis_cli(server.port(), {"GET", "simba:{jvm}"}), waiter->contender_id() + "\n");
  service->stop();
}

// simba-bench's fenced floor (RawProbe::fenced_once): each call is one lock cycle that issues a
// token (the counter rises by one), and leaves no lock key and no record without an expiry.
TEST(RedisProbeTest, TheFencedFloorIssuesATokenEachCycleAndLeavesNothingBehind) {
  RedisServer server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  auto backend = open_backend(server.uri());
  RawProbe* probe = backend->raw_probe();
  ASSERT_NE(probe, nullptr);
  for (int i = 0; i < 3; ++i) {
    const auto took = probe->fenced_once();
    ASSERT_TRUE(took.has_value());
    EXPECT_GT(*took, 0.0);
  }
  const std::string keys = redis_cli(server.port(), {"KEYS", "simba:bench-fenced:*"});
  ASSERT_EQ(keys.find("\n"), keys.size() - 1) << "one key, the token hash: " << keys;
  const std::string hash = keys.substr(0, keys.size() - 1);
  EXPECT_TRUE(hash.ends_with(":fencing")) << hash;
  EXPECT_EQ(redis_cli(server.port(), {"HGET", hash, "token"}), "3\n") << "one token a cycle";
  const int ttl = std::atoi(redis_cli(server.port(), {"PTTL", hash}).c_str());
  EXPECT_GT(ttl, 0) << "the hash expires";
  EXPECT_LE(ttl, 60'000);
}

}  // namespace
}  // namespace simba
