// The MySQL/MariaDB backend against a server of its own (run through with_mariadb.sh): the UTC
// database clock whatever the server's zone, a restart mid-run. (The race to create one row
// is a kit case.)
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>

#include "kit.h"
#include "server_test.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

using test::env;

// SQL as the server's root, over its socket.
int as_root(const std::string& sql) {
  return std::system(("mariadb --no-defaults -S " + env("SIMBA_TEST_MYSQL_SOCKET") + " -u root -e \"" + sql + "\"").c_str());
}

class MysqlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("SIMBA_TEST_MYSQL_URI");
    if (uri_.empty()) GTEST_FAIL() << "run through tests/with_mariadb.sh";
  }
  std::string uri_;
};

TEST_F(MysqlTest, LeaseTimesAreUtcMillisecondsWhateverTheServerZone) {
  ASSERT_EQ(as_root("SET GLOBAL time_zone = '-05:00'"), 0);
  auto backend = open_backend(uri_);  // new connections take the shifted zone
  const auto before = epoch_millis_now();
  auto snapshot = backend->acquire(tck::unique_mutex("clock"), "me", 10s, 5s);
  const auto after = epoch_millis_now();
  EXPECT_GE(snapshot.now, before - 1000);  // a zone shift would be hours off
  EXPECT_LE(snapshot.now, after + 1000);
  EXPECT_EQ(snapshot.owner.ttl_at, snapshot.owner.acquired_at + 10'000);
  EXPECT_EQ(snapshot.owner.transition_at, snapshot.owner.ttl_at + 5'000);
  as_root("SET GLOBAL time_zone = SYSTEM");
}

// The monitor connection drops at once; the row survives in InnoDB.
TEST_F(MysqlTest, RestartMidRunRevokesOwnersAtOnceAndResumes) {
  test::expect_restart_revokes_and_resumes(
      uri_,
      [] {
        // "[m]" keeps pkill from matching the shell that runs it.
        ASSERT_EQ(std::system(("pkill -KILL -f -- '[m]ariadbd.*--socket=" + env("SIMBA_TEST_MYSQL_SOCKET") + "'").c_str()), 0);
      },
      [] { ASSERT_EQ(std::system((env("SIMBA_TEST_MYSQL_START") + " >/dev/null 2>&1 &").c_str()), 0); });
}

}  // namespace
}  // namespace simba
