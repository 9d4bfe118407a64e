// The PostgreSQL backend against a server of its own (run through src/backends/postgres/test_server.sh): the
// database clock, and a restart mid-run. (The race to create one row is a kit case.)
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>

#include "kit.h"
#include "server_test.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

using test::env;

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("SIMBA_TEST_PG_URI");
    if (uri_.empty()) GTEST_FAIL() << "run through src/backends/postgres/test_server.sh";
  }
  // pg_ctl as the server's user (PostgreSQL refuses to run as root).
  static int pg_ctl(const std::string& args) {
    std::string command = "runuser -u postgres -- " + env("SIMBA_TEST_PG_BIN") + "/pg_ctl -D " +
                          env("SIMBA_TEST_PG_DATA") + " " + args + " >/dev/null 2>&1";
    if (getuid() != 0) command = env("SIMBA_TEST_PG_BIN") + "/pg_ctl -D " + env("SIMBA_TEST_PG_DATA") + " " + args;
    return std::system(command.c_str());
  }
  std::string uri_;
};

TEST_F(PostgresTest, LeaseTimesComeFromTheDatabaseClockInUtc) {
  auto backend = open_backend(uri_);
  const auto before = epoch_millis_now();
  auto snapshot = backend->acquire(tck::unique_mutex("clock"), "me", 10s, 5s);
  const auto after = epoch_millis_now();
  // Same host, so the database clock is ours: any time-zone shift would be hours off.
  EXPECT_GE(snapshot.now, before - 1000);
  EXPECT_LE(snapshot.now, after + 1000);
  EXPECT_EQ(snapshot.owner.ttl_at, snapshot.owner.acquired_at + 10'000);
  EXPECT_EQ(snapshot.owner.transition_at, snapshot.owner.ttl_at + 5'000);
}

// The LISTEN connection drops at once; the lease survives in the (durable) table.
TEST_F(PostgresTest, RestartMidRunRevokesOwnersAtOnceAndResumes) {
  test::expect_restart_revokes_and_resumes(
      uri_, [] { ASSERT_EQ(pg_ctl("-m immediate stop"), 0); },
      [] {
        ASSERT_EQ(pg_ctl("-w -t 30 -l " + env("SIMBA_TEST_PG_SOCKET_DIR") + "/server.log -o \"-p " +
                         env("SIMBA_TEST_PG_PORT") + " -k " + env("SIMBA_TEST_PG_SOCKET_DIR") +
                         " -c listen_addresses=127.0.0.1 -c fsync=off\" start"),
                  0);
      });
}

// A batch's "take"s run in one transaction; one that fails (a name that is not UTF-8) rolls it
// back, and then each call goes in a transaction of its own: only that call fails, the others
// are taken, and calls on one name are judged in turn.
TEST_F(PostgresTest, ABatchInOneTransactionFailsOnlyTheCallThatFails) {
  auto backend = open_backend(uri_);
  auto* batches = backend->batches();
  ASSERT_NE(batches, nullptr);
  const std::string base = tck::unique_mutex("together");
  const std::string held = base + "-held";
  const auto renewed = backend->acquire(held, "one", 10s, 1s).owner;
  ASSERT_EQ(renewed.owner_id, "one");
  const std::vector<AcquireCall> calls = {
      {held, "one", 10s, 1s},
      {base + "-bad-\xff", "one", 10s, 1s},  // not UTF-8: the server refuses the parameter
      {held, "two", 10s, 1s},
  };
  const auto results = batches->acquire_batch(calls);
  ASSERT_EQ(results.size(), calls.size());
  ASSERT_FALSE(results[0].error);
  EXPECT_EQ(results[0].snapshot.owner.owner_id, "one") << "the renewal beside a failed call was lost";
  EXPECT_EQ(results[0].snapshot.owner.fencing_token, renewed.fencing_token);
  ASSERT_FALSE(results[2].error);
  EXPECT_EQ(results[2].snapshot.owner.owner_id, "one") << "a second contender took a held lease";
  ASSERT_TRUE(results[1].error) << "a name that is not UTF-8 was taken";
  try {
    std::rethrow_exception(results[1].error);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("UTF8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(backend->read(held).owner.owner_id, "one");
  EXPECT_TRUE(backend->release(held, "one"));
}

}  // namespace
}  // namespace simba
