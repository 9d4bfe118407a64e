// The ZooKeeper backend against a server of its own (src/backends/zookeeper/test_server.sh): path encoding,
// sessions (a server restart mid-run, a killed owner process, a stalled owner), digest ACLs,
// chroots and fencing across sessions. The process cases run `simba lock` ($SIMBA_CLI).
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "backends/zookeeper/latch_book.h"
#include "backends/zookeeper/latch_names.h"
#include "backends/zookeeper/session.h"
#include "kit.h"
#include "server_test.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;
using test::env;

std::string uri(const std::string& query = "session_timeout=4s", const std::string& userinfo = "",
                const std::string& chroot = "") {
  const std::string base = env("SIMBA_TEST_ZK_URI");
  return "zookeeper://" + userinfo + base.substr(std::string("zookeeper://").size()) + chroot + "?" + query;
}

// A bare session of the C client, for looking at what the backend left on the server.
class RawSession {
 public:
  RawSession() {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(("127.0.0.1:" + env("SIMBA_TEST_ZK_PORT")).c_str(), nullptr, 10000, nullptr, nullptr, 0);
    wait_until([&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }, 5s);
  }
  ~RawSession() { zookeeper_close(zh_); }
  // Children of `path`; -1 if it does not exist.
  int children(const std::string& path) {
    String_vector names{};
    if (zoo_get_children(zh_, path.c_str(), 0, &names) != ZOK) return -1;
    int count = names.count;
    deallocate_String_vector(&names);
    return count;
  }
  int create(const std::string& path) {
    return zoo_create(zh_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  }
  // Deletes both nodes in one multi (the first, then the second).
  int remove_both(const std::string& first, const std::string& second) {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    zoo_delete_op_init(&ops[0], first.c_str(), -1);
    zoo_delete_op_init(&ops[1], second.c_str(), -1);
    return zoo_multi(zh_, 2, ops, results);
  }
  // The names of `path`'s children.
  std::vector<std::string> names(const std::string& path) {
    String_vector names{};
    if (zoo_get_children(zh_, path.c_str(), 0, &names) != ZOK) return {};
    std::vector<std::string> out(names.data, names.data + names.count);
    deallocate_String_vector(&names);
    return out;
  }

 private:
  zhandle_t* zh_ = nullptr;
};

// `simba lock ARGS -- COMMAND`, whose command creates `marker` (it runs once simba holds what it
// waited for) and then sleeps until killed.
std::vector<std::string> lock_and_mark(std::vector<std::string> args, const std::filesystem::path& marker) {
  args.insert(args.begin(), {env("SIMBA_CLI"), "lock"});
  args.insert(args.end(), {"--", "sh", "-c", "touch '" + marker.string() + "'; exec sleep 600"});
  return args;
}

// `simba lock` holding a mutex until killed, in a process group of its own. Its command
// creates `started` first: simba runs it only once it knows it holds the mutex (the server
// shows the process as owner a round trip or so earlier).
class LockProcess : public test::ChildProcess {
 public:
  LockProcess(const std::string& backend, const std::string& mutex, const std::filesystem::path& started)
      : ChildProcess(lock_and_mark({"--backend", backend, "--ttl", "10s", "--transition", "6s", mutex}, started)) {}
};

bool have_cli() { return !env("SIMBA_CLI").empty(); }

// The wrapper's server, SIGKILLed (it keeps its data), and started again on the same port.
void kill_server() {
  std::ifstream file(env("SIMBA_TEST_ZK_PIDFILE"));
  pid_t pid = 0;
  file >> pid;
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_until([&] { return ::kill(pid, 0) != 0; }, 10s));
}
void start_server() { ASSERT_EQ(std::system(env("SIMBA_TEST_ZK_START").c_str()), 0); }
// The killed server's data gone (its sessions with it): started again, it answers every
// session's reconnect "expired".
void wipe_server_data() {
  std::filesystem::remove_all(std::filesystem::path(env("SIMBA_TEST_ZK_START")).parent_path() / "data" / "version-2");
}

// A `simba lock` process holding a fresh mutex on a 1 s session, and a client of ours.
struct ProcessOwnerScene {
  const std::string mutex = tck::unique_mutex();
  const std::filesystem::path started =
      std::filesystem::temp_directory_path() / ("simba-owner-" + contender_id::uuid());
  Client client = connect(uri("session_timeout=1s"));
  LockProcess owner{uri("session_timeout=1s"), mutex, started};

  ~ProcessOwnerScene() { std::filesystem::remove(started); }

  // Whether the process came to own the mutex and knows it: its command runs.
  bool owns() {
    return wait_until([&] { return std::filesystem::exists(started) && !client.owner(mutex).empty(); }, 10s);
  }
};

TEST(ZookeeperNamesTest, ForbiddenCharactersAreEncodedAndNoTwoNamesShareAPath) {
  using zookeeper::encode_component;
  EXPECT_EQ(encode_component("my-job"), "my-job");  // Simba's path for ordinary names
  EXPECT_EQ(encode_component("a.b"), "a.b");
  EXPECT_EQ(encode_component("."), "%2E");
  EXPECT_EQ(encode_component(".."), "%2E%2E");
  EXPECT_EQ(encode_component("a/b"), "a%2Fb");
  EXPECT_EQ(encode_component("a%2Fb"), "a%252Fb");
  EXPECT_EQ(encode_component("tab\there"), "tab%09here");
  EXPECT_EQ(encode_component("del\x7f"), "del%7F");
  EXPECT_EQ(encode_component("名前"), "名前");                      // characters ZooKeeper accepts stay
  EXPECT_EQ(encode_component("\xc2\x85"), "%C2%85");                // U+0085: rejected by ZooKeeper
  EXPECT_EQ(encode_component("\xee\x80\x80"), "%EE%80%80");         // U+E000, private use: rejected
  EXPECT_EQ(encode_component("\xf0\x9f\x98\x80"), "%F0%9F%98%80");  // beyond U+FFFF: surrogates in Java
  EXPECT_EQ(encode_component("\xff\xfe"), "%FF%FE");                // not UTF-8
  EXPECT_EQ(zookeeper::latch_path("x/.."), "/simba/x%2F..");
}

TEST(ZookeeperNamesTest, DerivedRecordsLiveInTheFolderOfTheirPrimitive) {
  using zookeeper::latch_path;
  EXPECT_EQ(latch_path("config#r0a1b2c3d"), "/simba/config#derived/r0a1b2c3d");
  EXPECT_EQ(latch_path("a#b#c"), "/simba/a#derived/b#c");  // a record derived from "a#b"
  EXPECT_EQ(latch_path("a/b#."), "/simba/a%2Fb#derived/%2E");
  EXPECT_EQ(latch_path("a#"), "/simba/a#");  // nothing after the '#': a name of its own
  EXPECT_EQ(latch_path("#x"), "/simba/#derived/x");
  EXPECT_EQ(zookeeper::derived_root("config"), "/simba/config#derived");
  EXPECT_EQ(zookeeper::derived_root("a#b"), "/simba/a#derived");
  EXPECT_EQ(zookeeper::primitive_of_derived_root("config#derived"), "config");
  EXPECT_EQ(zookeeper::primitive_of_derived_root("a%2Fb#derived"), "a/b");
  EXPECT_EQ(zookeeper::primitive_of_derived_root("a#b#derived"), std::nullopt);  // would be a#derived/b#derived
  EXPECT_EQ(zookeeper::primitive_of_derived_root("config"), std::nullopt);
  EXPECT_EQ(zookeeper::primitive_of_derived_root("a#"), std::nullopt);
  const std::vector<std::string> children = {"r2", "b", "b#r1", "b#r1#x", "r1", "%zz"};
  EXPECT_EQ(zookeeper::derived_among("a", children), (std::vector<std::string>{"a#b", "a#r1", "a#r2"}));
  EXPECT_EQ(zookeeper::derived_among("a#b", children), (std::vector<std::string>{"a#b#r1"}));
}

// The book keeps an entry packed (its node's path rebuilt from the mutex, the guid, the lease and
// the sequence number): each field comes back as remembered, and an entry it could not rebuild
// exactly is kept whole.
TEST(ZookeeperLatchBookTest, EntriesComeBackAsRememberedWhetherPackedOrKeptWhole) {
  using zookeeper::Entry;
  const auto expect_same = [](const std::optional<Entry>& got, const Entry& want) {
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->generation, want.generation);
    EXPECT_EQ(got->guid, want.guid);
    EXPECT_EQ(got->path, want.path);
    EXPECT_EQ(got->token, want.token);
    EXPECT_EQ(got->lease.ttl, want.lease.ttl);
    EXPECT_EQ(got->lease.transition, want.lease.transition);
    EXPECT_EQ(got->claimed, want.claimed);
    EXPECT_EQ(got->idle, want.idle);
    EXPECT_EQ(got->joined, want.joined);
    EXPECT_EQ(got->watching, want.watching);
  };
  zookeeper::LatchBook book;
  const std::string mutex = "jobs/a b#r1";  // encoded and derived: its folder is not the name
  Entry entry;
  entry.generation = 7;
  entry.guid = zookeeper::new_guid();
  entry.lease = zookeeper::Lease{4321ms, 1234ms};
  entry.token = 0x1234567890;
  entry.joined = std::chrono::steady_clock::now();
  const zookeeper::LatchKey key = zookeeper::key_of(mutex, "worker-1");
  book.remember(key, entry);  // created, its answer not in yet
  expect_same(book.entry(key, 7), entry);

  entry.path = zookeeper::latch_path(mutex) + "/" + zookeeper::node_prefix(entry.guid, entry.lease) + "0000000042";
  entry.watching = zookeeper::latch_path(mutex) + "/_c_other-latch-0000000041";
  book.remember(key, entry);
  expect_same(book.entry(key, 7), entry);
  entry.claimed = entry.idle = true;
  entry.watching.clear();
  book.remember(key, entry);
  expect_same(book.entry(key), entry);

  // Paths the book cannot rebuild (another client's name, a sequence past 32 bits, another
  // folder) and a guid not of new_guid(): each entry is kept whole.
  const std::vector<std::string> odd_paths = {
      zookeeper::latch_path(mutex) + "/_c_other-latch-0000000043",
      zookeeper::latch_path(mutex) + "/" + zookeeper::node_prefix(entry.guid, entry.lease) + "99999999999",
      std::string("/elsewhere/") + zookeeper::node_prefix(entry.guid, entry.lease) + "0000000044"};
  for (const auto& odd : odd_paths) {
    Entry kept_whole = entry;
    kept_whole.path = odd;
    book.remember(key, kept_whole);
    expect_same(book.entry(key, 7), kept_whole);
  }
  Entry odd_guid = entry;
  odd_guid.guid = "not-a-guid";
  odd_guid.path =
      zookeeper::latch_path(mutex) + "/" + zookeeper::node_prefix(odd_guid.guid, entry.lease) + "0000000045";
  book.remember(key, odd_guid);
  expect_same(book.entry(key, 7), odd_guid);

  // An entry of another session is dropped; one forgotten, or gone with an expired session, is gone.
  EXPECT_FALSE(book.entry(key, 8).has_value());
  EXPECT_FALSE(book.entry(key).has_value());
  book.remember(key, entry);
  book.forget(key);
  EXPECT_FALSE(book.entry(key).has_value());
  book.remember(key, entry);
  book.session_changed(/*expired=*/true);
  EXPECT_FALSE(book.entry(key).has_value());
}

// The book keeps a 16-byte digest of the mutex and the contender id: every pair has its own
// entry, however the two names split one string, and the same pair always finds its own.
TEST(ZookeeperLatchBookTest, EachContenderOnEachMutexHasAnEntryOfItsOwn) {
  using zookeeper::key_of;
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"ab", "c"}, {"a", "bc"}, {"abc", ""}, {"a", "b"}, {"b", "a"}, {"jobs/x", "worker-1"}, {"jobs/x", "worker-2"}};
  zookeeper::LatchBook book;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [mutex, contender] = pairs[i];
    EXPECT_EQ(key_of(mutex, contender).digest, key_of(mutex, contender).digest) << mutex << " / " << contender;
    EXPECT_EQ(key_of(mutex, contender).mutex, mutex);
    for (std::size_t j = 0; j < i; ++j) {
      EXPECT_NE(key_of(mutex, contender).digest, key_of(pairs[j].first, pairs[j].second).digest)
          << mutex << " / " << contender << " and " << pairs[j].first << " / " << pairs[j].second;
    }
    zookeeper::Entry entry;
    entry.generation = 1;
    entry.guid = zookeeper::new_guid();
    entry.lease = zookeeper::Lease{5000ms, 1000ms};
    entry.token = 100 + i;
    entry.path = zookeeper::latch_path(mutex) + "/" + zookeeper::node_prefix(entry.guid, entry.lease) + "000000000" +
                 std::to_string(i);
    book.remember(key_of(mutex, contender), entry);
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [mutex, contender] = pairs[i];
    const auto got = book.entry(key_of(mutex, contender), 1);
    ASSERT_TRUE(got.has_value()) << mutex << " / " << contender;
    EXPECT_EQ(got->token, 100 + i) << mutex << " / " << contender;
    EXPECT_EQ(got->path.rfind(zookeeper::latch_path(mutex) + "/", 0), 0u) << got->path;
  }
  book.forget(key_of("ab", "c"));
  EXPECT_FALSE(book.entry(key_of("ab", "c")).has_value());
  EXPECT_TRUE(book.entry(key_of("a", "bc")).has_value());
}

TEST(ZookeeperNamesTest, EncodedNamesAreDistinctLeasesOnTheServer) {
  auto client = connect(uri());
  const std::string prefix = tck::unique_mutex("enc");
  std::vector<std::string> names = {prefix + "/a",        prefix + "%2Fa", prefix + "/..",
                                    prefix + "%2F%2E%2E", prefix + "\xff", prefix + "%FF"};
  std::vector<std::unique_ptr<Locker>> held;
  for (auto& name : names) {
    held.push_back(std::make_unique<Locker>(name, client));
    ASSERT_TRUE(held.back()->try_lock_for(5s)) << name;
  }
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(client.owner(names[i]).owner_id, held[i]->contender_id());
}

TEST(ZookeeperLatchTest, AReleaseWakesOnlyTheNextWaiter) {
  test::expect_release_wakes_only_the_next_waiter(open_backend(uri("session_timeout=40s")));
}

TEST(ZookeeperSessionTest, ServerRestartRevokesAtOnceAndTheSurvivingSessionOwnsAgainWithItsToken) {
  std::uint64_t token_before = 0, token_after = 0;
  test::expect_restart_revokes_and_resumes(uri("session_timeout=20s&connect_timeout=2s"), kill_server, start_server,
                                           &token_before, &token_after);
  EXPECT_GT(token_before, 0u);
  EXPECT_EQ(token_after, token_before);  // the session survived: the same node, the same token
}

TEST(ZookeeperSessionTest, AnOwnerWhoseSessionExpiredContendsAgainOnANewSession) {
  // A server restarted on an empty data folder has forgotten every session: the client's
  // reconnect is answered "expired".
  // A lease (10 s + 6 s) far longer than the 2 s wait below: the owner hears of its loss at the
  // disconnection, not at the end of a lease it can no longer renew.
  auto options = tck::fast_options();
  options.ttl = 10s;
  options.transition = 6s;
  auto client =
      Client(open_backend(uri("session_timeout=2s&connect_timeout=2s")), options, std::make_shared<Runtime>());
  const std::string mutex = tck::unique_mutex();
  auto owner = std::make_shared<tck::Recorder>(mutex);
  auto service = client.contend_service(owner);
  service->start();
  ASSERT_TRUE(wait_until([&] { return owner->acquired_count() == 1; }, 5s));
  ASSERT_NO_FATAL_FAILURE(kill_server());
  ASSERT_TRUE(wait_until([&] { return owner->released_count() == 1; }, 2s));  // revoked at once
  wipe_server_data();
  ASSERT_NO_FATAL_FAILURE(start_server());
  ASSERT_TRUE(wait_until([&] { return owner->acquired_count() == 2; }, 20s));  // a new node, a new session
  EXPECT_TRUE(service->is_owner());
  RawSession raw;
  EXPECT_EQ(raw.children(zookeeper::latch_path(mutex)), 1);
  EXPECT_EQ(client.owner(mutex).owner_id, owner->contender_id());
  service->stop();
  EXPECT_EQ(raw.children(zookeeper::latch_path(mutex)), 0);
}

// Backend::end_sessions (simba's exit on a signal): the session closes, and with it every node
// of ours, at once, not at the session's timeout (20 s here); another contender's node stays;
// calls after it are unavailable.
TEST(ZookeeperSessionTest, EndingTheSessionsRemovesEveryNodeOfOursAtOnceAndLaterCallsAreUnavailable) {
  auto ours = open_backend(uri("session_timeout=20s"));
  auto theirs = open_backend(uri("session_timeout=20s"));
  const std::string owned = tck::unique_mutex("owned"), queued = tck::unique_mutex("queued");
  ASSERT_EQ(ours->acquire(owned, "ours", 10s, 6s).owner.owner_id, "ours");
  ASSERT_EQ(theirs->acquire(queued, "theirs", 10s, 6s).owner.owner_id, "theirs");
  ASSERT_EQ(ours->acquire(queued, "ours", 10s, 6s).owner.owner_id, "theirs");  // ours waits behind
  RawSession raw;
  ASSERT_EQ(raw.children(zookeeper::latch_path(owned)), 1);
  ASSERT_EQ(raw.children(zookeeper::latch_path(queued)), 2);

  ours->end_sessions();
  EXPECT_EQ(raw.children(zookeeper::latch_path(owned)), 0);
  EXPECT_EQ(raw.children(zookeeper::latch_path(queued)), 1);
  EXPECT_TRUE(theirs->read(owned).owner.empty());
  EXPECT_EQ(theirs->read(queued).owner.owner_id, "theirs");
  test::expect_acquire_refused_after_end(*ours, owned);
  EXPECT_EQ(raw.children(zookeeper::latch_path(owned)), 0);  // it made no node
  theirs->release(queued, "theirs");
}

TEST(ZookeeperSessionTest, AKilledOwnersNodeGoesWhenItsSessionExpires) {
  ASSERT_TRUE(have_cli()) << "needs the simba CLI in $SIMBA_CLI (ctest sets it)";
  ProcessOwnerScene scene;
  ASSERT_TRUE(scene.owns());
  RawSession raw;
  const std::string folder = zookeeper::latch_path(scene.mutex);
  ASSERT_EQ(raw.children(folder), 1);
  scene.owner.signal(SIGKILL);
  // The server ends the 1 s session within a tick (100 ms) of its timeout; nothing else would
  // remove the node before the lease's 16 s (ttl + transition) end: gone within 5 s is by the
  // session's expiry, however loaded the machine.
  ASSERT_TRUE(wait_until([&] { return raw.children(folder) == 0; }, 5s));
  Locker next(scene.mutex, scene.client);
  EXPECT_TRUE(next.try_lock_for(1s));
}

TEST(ZookeeperSessionTest, AnOwnerStalledPastItsSessionFindsOnWakingThatItHasLost) {
  ASSERT_TRUE(have_cli()) << "needs the simba CLI in $SIMBA_CLI (ctest sets it)";
  ProcessOwnerScene scene;
  ASSERT_TRUE(scene.owns());
  auto successor = std::make_shared<tck::Recorder>(scene.mutex);
  auto waiter = scene.client.contend_service(successor);
  waiter->start();
  ASSERT_TRUE(wait_until([&] { return !waiter->after_owner().empty(); }, 5s));
  ASSERT_EQ(successor->acquired_count(), 0);
  scene.owner.signal(SIGSTOP);
  auto stopped = std::chrono::steady_clock::now();
  // By the 1 s session's expiry: the stalled owner's lease (10 s + 6 s) would free it only later.
  ASSERT_TRUE(wait_until([&] { return successor->acquired_count() == 1; }, 5s));
  std::this_thread::sleep_until(stopped + 2500ms);  // well past the 1 s session
  scene.owner.signal(SIGCONT);
  EXPECT_EQ(scene.owner.exit_status(10s), 75);  // "lease lost": it stopped its command and said so
  EXPECT_TRUE(waiter->is_owner());
  EXPECT_EQ(successor->released_count(), 0);
  waiter->stop();
}

// The backend's session alone, on a 4 s session timeout: `seen` turns true once it reports
// the session state `watched`.
struct BareSession {
  BareSession(int watched, std::chrono::milliseconds connect_timeout)
      : options(bare_options(connect_timeout)),
        session(options, "the test's session",
                {[this, watched](int state, bool) {
                   if (state == watched) seen = true;
                 },
                 [](int, const std::string&) {}}) {}
  static ZookeeperOptions bare_options(std::chrono::milliseconds connect_timeout) {
    ZookeeperOptions options;
    options.hosts = "127.0.0.1:" + env("SIMBA_TEST_ZK_PORT");
    options.session_timeout = 4s;
    options.connect_timeout = connect_timeout;
    return options;
  }
  const ZookeeperOptions options;
  std::atomic<bool> seen{false};
  zookeeper::Session session;
};

// The C client's multi, sent on an expired session, frees a path it does not own (session.cc:
// send_multi): it aborted `simba lock` woken from a stall past its session. A multi on an
// expired session is not sent and answers unavailable; the next session takes multis again.
TEST(ZookeeperSessionTest, AMultiOnAnExpiredSessionIsNotSentAndAnswersUnavailable) {
  BareSession bare(ZOO_EXPIRED_SESSION_STATE, 5s);
  auto& session = bare.session;
  const auto& expired = bare.seen;
  const auto first = session.ensure();
  // A server restarted without its data answers the reconnect "expired". (Another client
  // ending the session with its id and password races that client's own session events with
  // its close, where the C client can leak one: zookeeper_close() may end its completion thread
  // before it delivers an event queued meanwhile.)
  ASSERT_NO_FATAL_FAILURE(kill_server());
  wipe_server_data();
  ASSERT_NO_FATAL_FAILURE(start_server());
  ASSERT_TRUE(wait_until([&] { return expired.load(); }, 60s))  // however long the restart takes
      << "the session did not expire";
  // Paths too long to live inside a string: freed twice, they would be a double free.
  const std::string folder = "/simba-test-" + contender_id::uuid() + "-a-folder-with-a-long-name";
  const std::vector<std::pair<std::string, std::string>> writes = {
      {folder + "/first-node", "1"}, {folder + "/second-node", "2"}, {folder + "/third-node", "3"}};
  const zookeeper::Reply removed = session.remove_and_set(folder + "/node-0000000001", -1, folder, "42").wait();
  EXPECT_TRUE(zookeeper::Session::unavailable(removed.rc)) << zerror(removed.rc);
  const zookeeper::Reply written = session.write_all(writes).wait();
  EXPECT_TRUE(zookeeper::Session::unavailable(written.rc)) << zerror(written.rc);
  EXPECT_GT(session.ensure(), first);  // a new session, where the nodes do not exist
  EXPECT_EQ(session.remove_and_set(folder + "/node-0000000001", -1, folder, "42").wait().rc, ZNONODE);
  EXPECT_EQ(session.write_all(writes).wait().rc, ZNONODE);
}

// A call that waits for the session while it is disconnected, and then hears that it expired
// (a server restarted without its data answers the reconnect so), opens a new session and goes
// on waiting, within its connect_timeout, rather than failing at once.
TEST(ZookeeperSessionTest, ACallWaitingForTheSessionWhenItExpiresGoesOnOnANewOne) {
  BareSession bare(ZOO_CONNECTING_STATE, 60s);  // longer than the server's restart, however loaded the machine
  auto& session = bare.session;
  const auto& disconnected = bare.seen;
  const auto first = session.ensure();
  ASSERT_NO_FATAL_FAILURE(kill_server());
  ASSERT_TRUE(wait_until([&] { return disconnected.load(); }, 10s));
  wipe_server_data();
  auto waiting = std::async(std::launch::async, [&] { return session.ensure(); });
  ASSERT_NO_FATAL_FAILURE(start_server());
  ASSERT_EQ(waiting.wait_for(60s), std::future_status::ready);
  try {
    EXPECT_GT(waiting.get(), first);
  } catch (const Error& e) {
    ADD_FAILURE() << "the waiting call failed: " << e.what();
  }
}

TEST(ZookeeperAclTest, DigestUsersSeeButCannotTouchEachOthersMutexes) {
  const std::string mutex = tck::unique_mutex();
  // A chroot of its own: alice may be the first to make /simba there, with her ACL, which
  // would keep the other tests' sweeps out of the server's /simba.
  RawSession raw;
  const std::string chroot = "/acl-" + contender_id::uuid();
  ASSERT_EQ(raw.create(chroot), ZOK);
  auto alice = open_backend(uri("session_timeout=4s", "alice:secret@", chroot));
  auto bob = open_backend(uri("session_timeout=4s", "bob:pw@", chroot));
  auto mallory = open_backend(uri("session_timeout=4s", "alice:guess@", chroot));
  auto anyone = open_backend(uri("session_timeout=4s", "", chroot));
  ASSERT_EQ(alice->acquire(mutex, "alice-1", 10s, 1s).owner.owner_id, "alice-1");
  for (auto* other : {&bob, &mallory, &anyone}) {
    try {
      (*other)->acquire(mutex, "intruder", 10s, 1s);
      ADD_FAILURE() << "another user joined alice's latch";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::permission_denied) << e.what();
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos);
    }
    EXPECT_EQ((*other)->read(mutex).owner.owner_id, "alice-1");  // everyone may look
  }
  EXPECT_EQ(alice->acquire(mutex, "alice-2", 10s, 1s).owner.owner_id, "alice-1");  // her own queue
  EXPECT_TRUE(alice->release(mutex, "alice-1"));
  EXPECT_EQ(alice->acquire(mutex, "alice-2", 10s, 1s).owner.owner_id, "alice-2");
  EXPECT_TRUE(alice->release(mutex, "alice-2"));
  // Bob's own mutexes are his, beside hers under /simba.
  const std::string his = tck::unique_mutex("bob");
  EXPECT_EQ(bob->acquire(his, "bob-1", 10s, 1s).owner.owner_id, "bob-1");
  EXPECT_TRUE(bob->release(his, "bob-1"));
}

TEST(ZookeeperChrootTest, NodesLiveUnderAnExistingChrootAndAMissingOneIsNamed) {
  RawSession raw;
  const std::string chroot = "/chroot-" + contender_id::uuid();
  auto missing = connect(uri("session_timeout=4s", "", chroot));
  try {
    missing.backend()->acquire("job", "me", 10s, 1s);
    ADD_FAILURE() << "a missing chroot went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(chroot), std::string::npos) << e.what();
  }
  ASSERT_EQ(raw.create(chroot), ZOK);
  auto rooted = connect(uri("session_timeout=4s", "", chroot));
  Locker locker("job", rooted);
  ASSERT_TRUE(locker.try_lock_for(5s));
  EXPECT_EQ(raw.children(chroot + "/simba/job"), 1);
  EXPECT_EQ(raw.children("/simba/job"), -1);
}

// A shared mutex's reader records live in the derived root of its name, so that a writer's
// look at them lists that folder, not every latch under /simba; list() shows them, a folder of
// the earlier layout (a derived record's directly under /simba) is not shown but is swept,
// and sweep() removes an idle derived root with its last folder.
TEST(ZookeeperLayoutTest, DerivedRecordsAreListedSweptAndLookedAtInTheirPrimitivesFolder) {
  RawSession raw;
  auto client = connect(uri("session_timeout=4s&sweep_idle=0s"));
  auto* records = client.backend()->administration();
  ASSERT_NE(records, nullptr);
  const std::string name = tck::unique_mutex("layout");
  const std::string root = zookeeper::derived_root(name);
  const std::string stale = zookeeper::kRoot + std::string("/") + zookeeper::encode_component(name + "#r00000000");
  raw.create(zookeeper::kRoot);       // (if this server has none yet)
  ASSERT_EQ(raw.create(stale), ZOK);  // an earlier version's reader folder, left empty
  SharedMutex config = client.shared_mutex(name);
  {
    SharedHold reading = config.acquire_shared(5s);
    const auto readers = raw.names(root);
    ASSERT_EQ(readers.size(), 1u);
    const std::string reader = name + "#" + readers[0];
    EXPECT_EQ(raw.children(zookeeper::latch_path(reader)), 1);  // its lease's node
    const auto derived = records->list_derived(name, 16);
    ASSERT_EQ(derived.records.size(), 1u);
    EXPECT_EQ(derived.records[0].mutex, reader);
    EXPECT_FALSE(derived.records[0].owner.owner_id.empty());
    std::vector<std::string> listed;
    for (const auto& record : records->list(name, 16).records) listed.push_back(record.mutex);
    EXPECT_EQ(listed, std::vector<std::string>{reader}) << "the stale folder is not a record of this version";
    EXPECT_FALSE(config.try_lock_for(300ms));  // the writer finds the reader in its folder
  }
  {
    std::unique_lock writer(config, 5s);
    ASSERT_TRUE(writer.owns_lock());
  }
  // Nothing is held: the reader's folder, the stale one and the derived root go (the gate's
  // folder too; an idle record is one of length 0 here).
  ASSERT_TRUE(wait_until(
      [&] {
        records->sweep(0ms, 1000);
        return raw.children(root) == -1 && raw.children(stale) == -1;
      },
      5s));
  EXPECT_EQ(raw.children(zookeeper::latch_path(name)), -1);
  // And a reader makes them again.
  SharedHold again = config.acquire_shared(5s);
  EXPECT_EQ(raw.children(root), 1);
}

// A sweep deletes an empty derived root at once when told that idle means 0 ms: the first
// record of a name, made between the root's create and its own, finds the root gone and makes
// both again, never failing for it.
TEST(ZookeeperLayoutTest, ASweepRacingTheFirstRecordsOfANameNeverFailsThem) {
  auto backend = open_backend(uri("session_timeout=4s&sweep_idle=0s"));
  auto* records = backend->administration();
  ASSERT_NE(records, nullptr);
  const std::string name = tck::unique_mutex("race");
  std::atomic<bool> done{false};
  std::atomic<int> sweeps{0};
  std::thread sweeper([&] {
    while (!done) {
      try {
        records->sweep(0ms, 100000);
        ++sweeps;
      } catch (const Error& e) {
        ADD_FAILURE() << "sweep: " << e.what();
        return;
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    const std::string record = name + "#r" + std::to_string(i);
    try {
      EXPECT_EQ(backend->acquire(record, "me", 2s, 0ms).owner.owner_id, "me") << record;
      EXPECT_TRUE(backend->release(record, "me")) << record;
    } catch (const Error& e) {
      ADD_FAILURE() << record << ": " << e.what();
    }
  }
  done = true;
  sweeper.join();
  EXPECT_GT(sweeps, 0);
}

// An observer of a derived record whose folder and derived root are swept under it at once
// (as a sweep of another process can) makes both again (as for any latch folder,
// RecordsTest.AnObserverOfASweptMutexSeesTheNextOwner) and hears the next owner by push. An
// observer of a free mutex looks again of itself a ttl later (at most a poll): both a minute
// here, so what it sees within the 5 s wait only a watch can have told it.
TEST(ZookeeperLayoutTest, AnObserverOfASweptDerivedRecordSeesTheNextOwner) {
  auto options = tck::fast_options();
  options.ttl = 60s;
  options.poll_interval = 60s;
  auto client = Client(open_backend(uri("session_timeout=4s&sweep_idle=0s")), options, std::make_shared<Runtime>());
  auto backend = client.backend();
  const std::string name = tck::unique_mutex("swept");
  const std::string record = name + "#r1";
  const std::string folder = zookeeper::latch_path(record), root = zookeeper::derived_root(name);
  ASSERT_EQ(backend->acquire(record, "first", 2s, 0ms).owner.owner_id, "first");
  ASSERT_TRUE(backend->release(record, "first"));
  auto observer = client.retrieval_service(make_retriever(record, [](const MutexState&) {}));
  observer->start();
  std::this_thread::sleep_for(200ms);  // its watch armed
  RawSession raw;
  ASSERT_EQ(raw.remove_both(folder, root), ZOK);  // one multi: no create of ours between them
  ASSERT_TRUE(wait_until([&] { return raw.children(folder) == 0; }, 5s))
      << "the observer did not make the swept folder (and its derived root) again";
  std::this_thread::sleep_for(100ms);  // its watch armed again
  ASSERT_EQ(backend->acquire(record, "next", 2s, 0ms).owner.owner_id, "next");
  EXPECT_TRUE(wait_until([&] { return observer->after_owner().owner_id == "next"; }, 5s))
      << "the observer did not hear of the next owner: its watch of the folder made again is missing";
  observer->stop();
  backend->release(record, "next");
}

// A writer whose last look at the readers saw none held trusts the watches that look left and
// reads nothing at its next grants (relatives.h). A reader's take in a folder the writer
// watches, or a new reader's folder in the derived root, fires a watch whose event comes
// before the answer to the writer's next grant: the writer is kept out. Each client is a
// session of its own, as another process's would be.
TEST(ZookeeperRelativesTest, AWriterThatTrustsItsWatchesIsKeptOutByAReaderThatCameSince) {
  auto writers = connect(uri());
  auto readers = connect(uri());
  auto newcomers = connect(uri());
  const std::string name = tck::unique_mutex("trust");
  SharedMutex writer = writers.shared_mutex(name);
  SharedMutex reader = readers.shared_mutex(name);
  SharedMutex newcomer = newcomers.shared_mutex(name);
  reader.acquire_shared(5s).unlock();  // the reader's folder: the writer's first look finds it
  // A look at the readers (the first write), reads that leave watches (the second), then
  // grants that read nothing.
  auto write_thrice = [&] {
    for (int i = 0; i < 3; ++i) writer.acquire(5s).unlock();
  };
  auto writer_gets_in = [&] {
    const bool got = writer.try_lock_for(300ms);
    if (got) writer.unlock();
    return got;
  };
  write_thrice();
  {
    SharedHold reading = reader.acquire_shared(5s);  // a node in a folder the writer watches
    EXPECT_FALSE(writer_gets_in()) << "the writer got in beside a reader of a folder it knew";
  }
  write_thrice();
  {
    SharedHold reading = newcomer.acquire_shared(5s);  // a folder the writer never saw
    EXPECT_FALSE(writer_gets_in()) << "the writer got in beside a reader of a new folder";
  }
  write_thrice();  // and it writes again once they are gone
}

// A reader whose record found no folder of its gate (no writer ever took it) trusts the watch
// that look left for its making and reads nothing at its next grants (relatives.h). A writer's
// first take makes the folder, whose event comes before the answer to the reader's next grant:
// the reader is kept out.
TEST(ZookeeperRelativesTest, AReaderThatTrustsTheGateIsMissingIsKeptOutByTheFirstWriter) {
  auto readers = connect(uri());
  auto writers = connect(uri());
  const std::string name = tck::unique_mutex("absent");
  SharedMutex reader = readers.shared_mutex(name);
  SharedMutex writer = writers.shared_mutex(name);
  for (int i = 0; i < 3; ++i) reader.acquire_shared(5s).unlock();  // a look, then grants that read nothing
  SharedHold writing = writer.acquire(5s);                         // makes the gate's folder
  const bool got = reader.try_lock_shared_for(300ms);
  if (got) reader.unlock_shared();
  EXPECT_FALSE(got) << "the reader got in beside the first writer";
}

// What a writer's watches would have told is lost with its session: a server that forgot every
// session (restarted on an empty data folder) fires none of them. Any change of the session's
// state ends the trust (Relatives::session_changed), so a reader that came in on the new
// server keeps the writer out. The writer's client is back (a read of another name answers)
// before the reader comes, so a writer kept out is not one still reconnecting. The readers are
// other processes (`simba lock --shared`): two sessions of one process that lose their server at
// once race inside libzookeeper_mt (both log the loss into one buffer), which ThreadSanitizer
// reports. Fails with session_changed() doing nothing.
TEST(ZookeeperRelativesTest, AWritersTrustEndsWithItsSession) {
  ASSERT_TRUE(have_cli()) << "needs the simba CLI in $SIMBA_CLI (ctest sets it)";
  const std::string options = "session_timeout=2s&connect_timeout=2s";
  auto writers = connect(uri(options));
  const std::string name = tck::unique_mutex("session");
  SharedMutex writer = writers.shared_mutex(name);
  {  // a reader that came and went: the writer's looks find the primitive's folder
    test::ChildProcess once({env("SIMBA_CLI"), "lock", "--backend", uri(options), "--shared", name, "--", "true"});
    ASSERT_EQ(once.exit_status(30s), 0) << "the first reader did not get in";
  }
  for (int i = 0; i < 3; ++i) writer.acquire(5s).unlock();  // a look, reads with watches, trust
  ASSERT_NO_FATAL_FAILURE(kill_server());
  wipe_server_data();
  ASSERT_NO_FATAL_FAILURE(start_server());
  const bool back = wait_until(  // on a new session: a read of another name answers
      [&] {
        try {
          writers.owner(tck::unique_mutex("ping"));
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      30s);
  ASSERT_TRUE(back) << "the writer's client did not come back";
  const auto marker = std::filesystem::temp_directory_path() / ("simba-reader-" + contender_id::uuid());
  test::ChildProcess reader(lock_and_mark({"--backend", uri(options), "--shared", name}, marker));
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(marker); }, 30s)) << "the reader did not get in";
  std::filesystem::remove(marker);
  const bool got = writer.try_lock_for(2s);
  if (got) writer.unlock();
  EXPECT_FALSE(got) << "the writer got in beside a reader that came after its session ended";
}

TEST(ZookeeperFencingTest, TokensRiseAcrossSessionsAndAFreeMutexKeepsTheLastOne) {
  const std::string mutex = tck::unique_mutex();
  std::uint64_t last = 0;
  for (int session = 0; session < 3; ++session) {
    auto client = connect(uri());
    Locker locker(mutex, client);
    locker.acquire(5s);
    EXPECT_GT(locker.fencing_token(), last) << "session " << session;
    last = locker.fencing_token();
    locker.unlock();
    EXPECT_EQ(client.owner(mutex).fencing_token, last);
  }
  EXPECT_EQ(connect(uri()).owner(mutex).fencing_token, last);  // seen from yet another session
}

}  // namespace
}  // namespace simba
