// The PostgreSQL backend against a server of its own (run through with_postgres.sh): the
// database clock, and a restart mid-run. (The race to create one row is a kit case.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>


#include "kit.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("SIMBA_TEST_PG_URI");
    if (uri_.empty()) GTEST_FAIL() << "run through tests/with_postgres.sh";
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

TEST_F(PostgresTest, RestartMidRunRevokesOwnersAtOnceAndResumes) {
  ContendOptions options = tck::fast_options();
  options.ttl = 3s;  // a revocation well within it cannot be the lease running out
  options.transition = 1s;
  auto client = Client(open_backend(uri_), options, std::make_shared<Runtime>());
  auto owner = std::make_shared<tck::Recorder>(tck::unique_mutex("restart"));
  auto service = client.contend_service(owner);
  service->start();
  ASSERT_TRUE(wait_until([&] { return owner->acquired_count() == 1; }, 5s));
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(pg_ctl("-m immediate stop"), 0);
  // The LISTEN connection drops: the owner stops believing at once, long before its ttl.
  ASSERT_TRUE(wait_until([&] { return !service->is_owner(); }, 2s));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, options.ttl);
  ASSERT_TRUE(wait_until([&] { return owner->released_count() == 1; }, 2s));
  ASSERT_EQ(pg_ctl("-w -t 30 -l " + env("SIMBA_TEST_PG_SOCKET_DIR") + "/server.log -o \"-p " +
                   env("SIMBA_TEST_PG_PORT") + " -k " + env("SIMBA_TEST_PG_SOCKET_DIR") +
                   " -c listen_addresses=127.0.0.1 -c fsync=off\" start"),
            0);
  // Owns again without a restart of anything: the lease was in the (durable) table.
  EXPECT_TRUE(wait_until([&] { return owner->acquired_count() == 2; }, 10s));
  EXPECT_TRUE(service->is_owner());
  service->stop();
}

}  // namespace
}  // namespace simba
