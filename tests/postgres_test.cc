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

}  // namespace
}  // namespace simba
