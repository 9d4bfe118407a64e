// Unit tests of SQLite's file handling (built with the SQLite engine).
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "backends/sqlite/wake_board.h"
#include "demand_push_spy.h"
#include "kit.h"
#include "simba/sqlite_backend.h"

namespace simba {
namespace {

using namespace std::chrono_literals;

// A database file of this process's own, gone (with its WAL files) at the end of the case.
struct TempDatabase {
  explicit TempDatabase(const std::string& hint)
      : path((std::filesystem::temp_directory_path() / (hint + "-" + std::to_string(getpid()) + ".db")).string()) {
    remove();
  }
  ~TempDatabase() { remove(); }
  void remove() const {
    for (auto suffix : {"", "-wal", "-shm", "-wake"}) std::filesystem::remove(path + suffix);
  }
  SqliteOptions options() const {
    SqliteOptions options;
    options.path = path;
    return options;
  }
  const std::string path;
};

TEST(SqliteBackendTest, TwoConnectionsToOneFileShareTheLease) {
  const TempDatabase database("simba-unit");
  const auto options = database.options();
  auto first = make_sqlite_backend(options);
  auto second = make_sqlite_backend(options);
  EXPECT_EQ(first->push(), nullptr);
  EXPECT_TRUE(first->capabilities().multi_process);
  const MutexOwner held = first->acquire("m", "a", 10s, 0ms).owner;
  EXPECT_EQ(held.owner_id, "a");
  EXPECT_GE(held.fencing_token, 1'000'000'000'000'000u);  // a new row's token starts at the clock (ms x 1000)
  EXPECT_EQ(second->acquire("m", "b", 10s, 0ms).owner.owner_id, "a");
  EXPECT_FALSE(second->release("m", "b"));
  EXPECT_TRUE(first->release("m", "a"));
  auto taken = second->acquire("m", "b", 10s, 0ms).owner;
  EXPECT_EQ(taken.owner_id, "b");
  EXPECT_EQ(taken.fencing_token, held.fencing_token + 1);
}

// A release wakes the watchers of that mutex on this host at once, in another connection (as
// in another process: each backend maps the wake file itself and listens on its own thread).
// Not a Push: callers still poll, for what the wake file cannot see.
TEST(SqliteBackendTest, AReleaseWakesTheWatchersOfItsMutexInAnotherConnection) {
  const TempDatabase database("simba-unit-wake");
  const auto options = database.options();
  auto owner = make_sqlite_backend(options);
  auto waiter = make_sqlite_backend(options);
  EXPECT_EQ(waiter->push(), nullptr);
  ASSERT_EQ(owner->acquire("m", "a", 10s, 0ms).owner.owner_id, "a");
  std::atomic<int> released{0};
  auto watch = waiter->watch("m", "b", [&](WatchEvent event) {
    if (event == WatchEvent::released) released.fetch_add(1);
  });
  ASSERT_NE(watch, nullptr) << "no wake file beside " << database.path;
  EXPECT_TRUE(std::filesystem::exists(database.path + "-wake"));
  ASSERT_EQ(waiter->acquire("m", "b", 10s, 0ms).owner.owner_id, "a");
  EXPECT_FALSE(owner->release("m", "b"));  // not its lease: nothing released, nobody woken
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(released.load(), 0) << "woken without a release";
  ASSERT_TRUE(owner->release("m", "a"));
  EXPECT_TRUE(tck::wait_until([&] { return released.load() >= 1; }, 10s)) << "the release woke nobody";
  // After the handle goes, no call: a release of "m" again reaches nobody.
  watch.reset();
  const int seen = released.load();
  ASSERT_EQ(owner->acquire("m", "a", 10s, 0ms).owner.owner_id, "a");
  ASSERT_TRUE(owner->release("m", "a"));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(released.load(), seen) << "a watch called after its handle was destroyed";
}

// The lock manager over two connections, each polling only every 30 s: a waiter gets the
// mutex at its release, long before its next poll (or the owner's lease's end) could tell it.
TEST(SqliteBackendTest, AWaiterInAnotherClientTakesOverAtTheReleaseNotAtItsPoll) {
  const TempDatabase database("simba-unit-handover");
  const auto options = database.options();
  ContendOptions slow;
  slow.poll_interval = 30s;  // the waiter's next look without a wake-up
  slow.ttl = 30s;            // nor does the owner's lease end meanwhile
  slow.transition = 1s;
  Client owner(make_sqlite_backend(options), slow);
  Client waiter(make_sqlite_backend(options), slow);
  Locker held("handover", owner);
  held.acquire(5s);
  Locker next("handover", waiter);
  std::atomic<bool> taken{false};
  std::string failure;  // read after join()
  std::thread waiting([&] {
    try {
      next.acquire(15s);  // half the poll interval: only a wake-up can make it
      taken = true;
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  // The waiter has looked once and found the mutex held: its demand is on the row.
  ASSERT_TRUE(tck::wait_until([&] { return owner.backend()->read("handover").demanded; }, 10s))
      << "the waiter never tried";
  held.close();
  waiting.join();
  EXPECT_TRUE(taken.load()) << "not taken at the release: " << failure;
  EXPECT_TRUE(next.is_owner());
}

// The demand watch of a cached lease shares its wake-board slot with other names: their
// releases wake the owner, which looks at its record and keeps the lease (it once gave it back,
// 1 run in 1,023 of LockCachingTest.ACachedRelockMakesNoBackendCall under ASan).
TEST(SqliteBackendTest, AReleaseOfANameSharingTheCachedLeasesSlotKeepsTheLease) {
  const TempDatabase database("simba-unit-slot");
  auto spy = std::make_shared<tck::DemandPushSpy>(make_sqlite_backend(database.options()));
  Client owner(spy, tck::fast_options());
  auto cached = owner.mutex("cached").with_linger(30s);
  cached.lock();
  const auto token = cached.fencing_token();
  cached.unlock();
  ASSERT_TRUE(tck::wait_until([&] { return spy->watching(); }, 10s)) << "the caching owner never watched for demands";
  const auto slot = internal::WakeBoard::slot_of(internal::WakeBoard::demand_key("cached"));
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const auto name = "other-" + std::to_string(i);
    if (internal::WakeBoard::slot_of(name) == slot) other = name;
  }
  // Another client of the database (as another process would be) takes and leaves it.
  Client neighbour(make_sqlite_backend(database.options()), tck::fast_options());
  const auto before = spy->counts();
  for (int i = 0; i < 5; ++i) {  // each release rings the slot at once
    Locker locker(other, neighbour);
    locker.acquire(5s);
  }
  ASSERT_TRUE(spy->answered_since(before, 10s)) << "the owner neither read its record nor released";
  EXPECT_FALSE(spy->released_since(before)) << "a neighbour's release gave the cached lease back";
  cached.lock();
  EXPECT_EQ(cached.fencing_token(), token);
  cached.unlock();
  EXPECT_EQ(owner.release_cached(), 1u);
}

// A contender reads the clock before its statements; a release landing in between leaves its
// own time (now - 1), which may be later than the contender's. The row is free all the same:
// the contender takes it, and never reports an owner with an empty id (a lock manager's single
// attempt gave up on such an answer, as if the mutex were owned by a process that never hands
// back).
TEST(SqliteBackendTest, ARowReleasedAfterTheContendersClockReadIsFree) {
  const TempDatabase database("simba-unit-released");
  auto backend = make_sqlite_backend(database.options());
  const auto first = backend->acquire("m", "a", 10s, 0ms).owner;
  ASSERT_EQ(first.owner_id, "a");
  ASSERT_TRUE(backend->release("m", "a"));
  // The release as a releaser whose now was a minute after the contender's.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(database.path.c_str(), &db), SQLITE_OK);
  const auto later =
      std::chrono::duration_cast<std::chrono::milliseconds>((std::chrono::system_clock::now() + 60s).time_since_epoch())
          .count();
  const auto sql = "UPDATE simba_mutex SET transition_at = " + std::to_string(later) + " WHERE mutex = 'm'";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  const auto taken = backend->acquire("m", "b", 10s, 0ms).owner;
  EXPECT_EQ(taken.owner_id, "b") << "a released row read as taken (by '" << taken.owner_id << "')";
  EXPECT_EQ(taken.fencing_token, first.fencing_token + 1);
  EXPECT_EQ(backend->read("m").owner.owner_id, "b");
}

TEST(SqliteBackendTest, UnopenablePathIsUnavailableAndNamesThePath) {
  SqliteOptions options;
  options.path = "/nonexistent-simba-dir/sub/x.db";
  try {
    make_sqlite_backend(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::unavailable);
    EXPECT_NE(std::string(e.what()).find(options.path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace simba
