// The etcd backend against a server of its own (src/backends/etcd/test_server.sh): a server
// restart mid-run, a killed and a stopped `simba lock` process ($SIMBA_CLI) followed within
// their lease as the server granted it, a waiter whose own key went while it waited (etcd 3.4's
// lock bug), name encoding, several endpoints and credentials (a refused password, a token that
// expired).
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "backends/etcd/names.h"
#include "kit.h"
#include "server_test.h"
#include "simba/error.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;
using test::env;

std::string endpoint() { return "127.0.0.1:" + env("SIMBA_TEST_ETCD_PORT"); }
std::string uri(const std::string& query = "", const std::string& hosts = endpoint()) {
  return "etcd://" + hosts + (query.empty() ? "" : "?" + query);
}

// Runs `command` (through the shell) and returns its standard output.
std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (std::size_t got = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
  pclose(pipe);
  return out;
}

// The keys under `prefix` on the server, one per line (etcdctl, from Debian's etcd-client).
std::string keys_under(const std::string& prefix) {
  return run("ETCDCTL_API=3 etcdctl --endpoints=" + endpoint() + " get --prefix --keys-only '" + prefix +
             "' | sed '/^$/d'");
}

bool have_cli() { return !env("SIMBA_CLI").empty(); }

// The part of a takeover that is not the lease's, as this machine does it now: a client of its
// own takes and gives back a free mutex (a connection, two round trips, a contender started
// and stopped). Run beside the takeover, on another thread.
class Control {
 public:
  Control()
      : thread_([this] {
          const auto started = std::chrono::steady_clock::now();
          try {
            Client client = connect(uri());
            Locker locker(tck::unique_mutex("control"), client);
            locker.acquire(10s);
            locker.unlock();
          } catch (const std::exception& e) {
            error_ = e.what();
          }
          took_ = std::chrono::steady_clock::now() - started;
        }) {}
  // How long it took (waits for it); a failure of the control is the test's.
  std::chrono::steady_clock::duration took() {
    if (thread_.joinable()) thread_.join();
    EXPECT_EQ(error_, "") << "the control failed";
    return took_;
  }
  ~Control() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::chrono::steady_clock::duration took_{};
  std::string error_;  // the control's failure, if any
  std::thread thread_;
};

// A `simba lock` process holding a fresh mutex with a 1 s lease (etcd's shortest here), and a
// waiter of ours in line behind it.
struct ProcessOwnerScene {
  const std::string mutex = tck::unique_mutex();
  Client client = connect(uri());
  test::ChildProcess owner{{env("SIMBA_CLI"), "lock", "--backend", uri(), "--ttl", "700ms", "--transition", "300ms",
                            mutex, "--", "sleep", "600"}};
  std::shared_ptr<tck::Recorder> successor = std::make_shared<tck::Recorder>(mutex);
  std::unique_ptr<MutexContendService> waiter;
  std::chrono::steady_clock::time_point signaled_at;  // by signal_and_expect_followed
  // When an observer of our own (another connection) first heard the mutex freed after the
  // signal: etcd deletes the owner's key when it revokes its lease.
  std::shared_ptr<Backend> observer_backend = open_backend(uri());
  std::shared_ptr<Subscription> observing;
  std::atomic<bool> signaled{false};
  std::atomic<std::int64_t> freed_ns{0};  // steady_clock, since its epoch; 0: not yet

  void start() {
    ASSERT_TRUE(wait_until([&] { return !client.owner(mutex).empty(); }, 10s)) << "simba lock never owned";
    observing = observer_backend->watch(mutex, "", [this](WatchEvent event) {
      if (event != WatchEvent::released || !signaled.load()) return;
      std::int64_t none = 0;
      freed_ns.compare_exchange_strong(none, std::chrono::steady_clock::now().time_since_epoch().count());
    });
    observing->wait_ready();
    waiter = client.contend_service(successor);
    waiter->start();
    ASSERT_TRUE(wait_until([&] { return !waiter->after_owner().empty(); }, 5s));
  }

  // Sends the owner `signal` (SIGKILL, SIGSTOP) at `signaled_at` and expects the waiter to
  // follow within 0.5 s, and what a control took at the same moment on the machine as loaded,
  // of the lease's end. The owner's lease is checked as the server granted it (1 s, as asked:
  // not rounded up). etcd ends it when it revokes it: at its lessor's next scan (every 500 ms)
  // after it ran out, but a revocation its revoker was too busy to take waits for a retry 3 s
  // later (etcd 3.4 lease/lessor.go, expiredLeaseRetryInterval), as often as it stays busy. So
  // the end is when our observer heard the key go; if it heard nothing, the first scan's.
  void signal_and_expect_followed(int signal) {
    const int ttl = granted_ttl();
    EXPECT_EQ(ttl, 1);
    signaled = true;
    owner.signal(signal);
    signaled_at = std::chrono::steady_clock::now();
    Control control;
    ASSERT_TRUE(wait_until([&] { return successor->acquired_count() == 1; }, 15s));
    const auto followed_at = std::chrono::steady_clock::now();
    const auto control_took = control.took();
    const std::int64_t freed = freed_ns.load();
    const auto ended_at = freed != 0 ? std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(freed))
                                     : signaled_at + std::chrono::seconds(ttl) + 500ms;
    EXPECT_LE(followed_at - ended_at, 500ms + control_took)
        << "followed " << ((followed_at - signaled_at) / 1ms) << " ms after the signal; control took "
        << (control_took / 1ms) << " ms; "
        << (freed != 0 ? "the observer heard the key go after " + std::to_string((ended_at - signaled_at) / 1ms) + " ms"
                       : std::string("the observer heard nothing"));
  }

  // The TTL the server granted the owner's lease, in seconds ("granted with TTL(1s)" of
  // `etcdctl lease timetolive`, the lease named by the owner's key, the first in line), or -1.
  int granted_ttl() const {
    const std::string keys = keys_under(etcd::mutex_keys("simba", mutex).contended);
    const std::string first = keys.substr(0, keys.find('\n'));
    const std::string lease = first.substr(first.rfind('/') + 1);
    const std::string said = run("ETCDCTL_API=3 etcdctl --endpoints=" + endpoint() + " lease timetolive " + lease);
    const auto at = said.find("granted with TTL(");
    return at == std::string::npos ? -1 : std::atoi(said.c_str() + at + 17);
  }
};

void kill_server() {
  std::ifstream file(env("SIMBA_TEST_ETCD_PIDFILE"));
  pid_t pid = 0;
  file >> pid;
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_until([&] { return ::kill(pid, 0) != 0; }, 10s));
}
void start_server() { ASSERT_EQ(std::system(env("SIMBA_TEST_ETCD_START").c_str()), 0); }

TEST(EtcdServerTest, ARestartRevokesAtOnceAndTheOwnerContendsAgainWithARisingToken) {
  std::uint64_t token_before = 0, token_after = 0;
  test::expect_restart_revokes_and_resumes(uri("dial_timeout=2s&command_timeout=1s"), kill_server, start_server,
                                           &token_before, &token_after);
  EXPECT_GT(token_before, 0u);
  // The lease outlived the restart (etcd keeps leases on disk), or a new key was made: either
  // way the token never goes back.
  EXPECT_GE(token_after, token_before);
}

TEST(EtcdServerTest, AKilledOwnerProcessIsFollowedWithinItsLeaseAsGrantedAndARevocationScan) {
  ASSERT_TRUE(have_cli()) << "needs the simba CLI in $SIMBA_CLI (ctest sets it)";
  ProcessOwnerScene scene;
  ASSERT_NO_FATAL_FAILURE(scene.start());
  // (simba-bench --workload kill measures the same on a quiet machine.)
  ASSERT_NO_FATAL_FAILURE(scene.signal_and_expect_followed(SIGKILL));
  scene.waiter->stop();
}

TEST(EtcdServerTest, AStoppedOwnerPastItsLeaseWakesKnowingItLost) {
  ASSERT_TRUE(have_cli()) << "needs the simba CLI in $SIMBA_CLI (ctest sets it)";
  ProcessOwnerScene scene;
  ASSERT_NO_FATAL_FAILURE(scene.start());
  ASSERT_NO_FATAL_FAILURE(scene.signal_and_expect_followed(SIGSTOP));  // as for a killed owner
  std::this_thread::sleep_until(scene.signaled_at + 2500ms);
  scene.owner.signal(SIGCONT);
  EXPECT_EQ(scene.owner.exit_status(10s), 75);  // "lease lost": it stopped its command and said so
  EXPECT_TRUE(scene.waiter->is_owner());
  EXPECT_EQ(scene.successor->released_count(), 0);
  scene.waiter->stop();
}

// etcd 3.4's concurrency.Mutex could tell a waiter whose key had gone (its lease expired while
// it waited) that it held the lock once the keys before it went. Here the waiter looks at its
// own key in the transaction that decides: its key gone, it joins again at the back, behind a
// contender that came meanwhile, and does not own.
TEST(EtcdServerTest, AWaiterWhoseKeyWentWhileItWaitedDoesNotOwnWhenItsPredecessorGoes) {
  auto backend = open_backend(uri());
  const std::string mutex = tck::unique_mutex();
  const auto keys = etcd::mutex_keys("simba", mutex);
  ASSERT_EQ(backend->acquire(mutex, "first", 5s, 0ms).owner.owner_id, "first");
  ASSERT_EQ(backend->acquire(mutex, "waiter", 5s, 0ms).owner.owner_id, "first");
  // The waiter's key goes behind its back (as when its lease expired on the server).
  const std::string lines = keys_under(keys.contended);
  ASSERT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << lines;
  const std::string waiter_key = lines.substr(lines.find('\n') + 1, lines.rfind('\n') - lines.find('\n') - 1);
  run("ETCDCTL_API=3 etcdctl --endpoints=" + endpoint() + " del '" + waiter_key + "' >/dev/null");
  auto other = open_backend(uri());
  ASSERT_EQ(other->acquire(mutex, "latecomer", 5s, 0ms).owner.owner_id, "first");
  ASSERT_TRUE(backend->release(mutex, "first"));
  const OwnerSnapshot woken = backend->acquire(mutex, "waiter", 5s, 0ms);
  EXPECT_EQ(woken.owner.owner_id, "latecomer") << "the waiter believed it owns though its key was gone";
  EXPECT_EQ(other->acquire(mutex, "latecomer", 5s, 0ms).owner.owner_id, "latecomer");
  backend->release(mutex, "waiter");
  other->release(mutex, "latecomer");
  EXPECT_EQ(keys_under(keys.contended), "");
}

// Backend::end_sessions (simba's exit on a signal): our leases are revoked, and with them every
// key of ours, at once, not when the lease runs out (16 s here); another contender's key stays;
// calls after it are unavailable.
TEST(EtcdServerTest, EndingTheSessionsRevokesOurLeasesAndTheirKeysAtOnceAndLaterCallsAreUnavailable) {
  auto ours = open_backend(uri());
  auto theirs = open_backend(uri());
  const std::string owned = tck::unique_mutex("owned"), queued = tck::unique_mutex("queued");
  const auto owned_keys = etcd::mutex_keys("simba", owned), queued_keys = etcd::mutex_keys("simba", queued);
  ASSERT_EQ(ours->acquire(owned, "ours", 10s, 6s).owner.owner_id, "ours");
  ASSERT_EQ(theirs->acquire(queued, "theirs", 10s, 6s).owner.owner_id, "theirs");
  ASSERT_EQ(ours->acquire(queued, "ours", 10s, 6s).owner.owner_id, "theirs");  // ours waits behind
  auto lines = [](const std::string& keys) {
    const std::string listed = keys_under(keys);
    return std::count(listed.begin(), listed.end(), '\n');
  };
  ASSERT_EQ(lines(owned_keys.contended), 1);
  ASSERT_EQ(lines(queued_keys.contended), 2);

  ours->end_sessions();
  EXPECT_EQ(lines(owned_keys.contended), 0);
  EXPECT_EQ(lines(queued_keys.contended), 1);
  EXPECT_TRUE(theirs->read(owned).owner.empty());
  EXPECT_EQ(theirs->read(queued).owner.owner_id, "theirs");
  test::expect_acquire_refused_after_end(*ours, owned);
  EXPECT_EQ(lines(owned_keys.contended), 0);  // it put no key
  theirs->release(queued, "theirs");
}

// Each waiter watches the key created just before its own: a release wakes the next in line,
// and nobody else looks (no herd).
TEST(EtcdServerTest, AReleaseWakesOnlyTheNextWaiter) {
  test::expect_release_wakes_only_the_next_waiter(open_backend(uri()));
}

TEST(EtcdServerTest, NamesThatWouldAliasGetTheirOwnKeysAndPlainNamesKeepTheRecipesKeys) {
  EXPECT_EQ(etcd::mutex_keys("simba", "orders").contended, "simba/orders/");
  EXPECT_EQ(etcd::mutex_keys("simba", "a/b").contended, "simba/a%2Fb/");
  EXPECT_EQ(etcd::mutex_keys("simba", "a").record, "simba/a");
  for (const std::string& name :
       std::vector<std::string>{"a/b", "a%2Fb", "a b", std::string("a\0b", 3), "%", "//", "é"}) {
    EXPECT_EQ(etcd::decode_name(etcd::encode_name(name)), name);
  }
  auto backend = open_backend(uri());
  const std::string base = tck::unique_mutex();
  ASSERT_EQ(backend->acquire(base, "one", 5s, 0ms).owner.owner_id, "one");
  EXPECT_EQ(backend->acquire(base + "/x", "two", 5s, 0ms).owner.owner_id, "two") << "a/x shares the line of a";
  EXPECT_EQ(backend->acquire(base + "%2Fx", "three", 5s, 0ms).owner.owner_id, "three");
  for (const auto& [name, id] : std::vector<std::pair<std::string, std::string>>{
           {base, "one"}, {base + "/x", "two"}, {base + "%2Fx", "three"}}) {
    EXPECT_TRUE(backend->release(name, id)) << name;
  }
}

TEST(EtcdServerTest, AnUnreachableEndpointInAListOfThreeIsSkipped) {
  // Two ports nobody listens on (a listener bound and closed), around the real one.
  const std::string hosts = "127.0.0.1:1," + endpoint() + ",127.0.0.1:2";
  auto backend = open_backend(uri("dial_timeout=3s", hosts));
  const std::string mutex = tck::unique_mutex();
  EXPECT_EQ(backend->acquire(mutex, "one", 5s, 0ms).owner.owner_id, "one");
  EXPECT_TRUE(backend->release(mutex, "one"));
}

TEST(EtcdServerTest, NoEndpointAnsweringIsUnavailableWithinTheDialTimeout) {
  const auto started = std::chrono::steady_clock::now();
  try {
    open_backend(uri("dial_timeout=500ms", "127.0.0.1:1,127.0.0.1:2"));
    FAIL() << "opened without a server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::unavailable)) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
}

TEST(EtcdServerTest, AWrongPasswordIsPermissionDeniedAndTheRightOneLocks) {
  const std::string ctl = "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint();
  run(ctl + " user add root:rootpw >/dev/null 2>&1");
  run(ctl + " user add app:secret >/dev/null 2>&1");
  run(ctl + " role add app >/dev/null 2>&1");
  run(ctl + " role grant-permission app --prefix=true readwrite simba/ >/dev/null 2>&1");
  run(ctl + " user grant-role app app >/dev/null 2>&1");
  ASSERT_NE(run(ctl + " auth enable 2>&1").find("Authentication Enabled"), std::string::npos);
  struct Disable {
    std::string ctl;
    ~Disable() { run(ctl + " --user root:rootpw auth disable >/dev/null 2>&1"); }
  } disable{ctl};
  try {
    open_backend(uri("", "app:wrong@" + endpoint()));
    ADD_FAILURE() << "a wrong password opened the backend";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::permission_denied)) << e.what();
    EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos) << "the password is in the message";
  }
  auto backend = open_backend(uri("", "app:secret@" + endpoint()));
  const std::string mutex = tck::unique_mutex();
  EXPECT_EQ(backend->acquire(mutex, "one", 5s, 0ms).owner.owner_id, "one");
  EXPECT_TRUE(backend->release(mutex, "one"));
  EXPECT_EQ(backend->describe().find("secret"), std::string::npos);
  // The test server's tokens expire after 1 s unused (--auth-token-ttl 1): the backend gets a
  // new one and the call goes through.
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(backend->acquire(mutex, "two", 5s, 0ms).owner.owner_id, "two");
  // A watch made on a stream opened with the old token: the release still wakes the waiter.
  std::atomic<int> woken{0};
  auto watch = backend->watch(mutex, "three", [&](WatchEvent event) { woken += event == WatchEvent::released; });
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(backend->acquire(mutex, "three", 5s, 0ms).owner.owner_id, "two");
  EXPECT_TRUE(backend->release(mutex, "two"));
  EXPECT_TRUE(wait_until([&] { return woken.load() > 0; }, 3s)) << "the waiter was not woken";
  EXPECT_EQ(backend->acquire(mutex, "three", 5s, 0ms).owner.owner_id, "three");
  EXPECT_TRUE(backend->release(mutex, "three"));
}

}  // namespace
}  // namespace simba
