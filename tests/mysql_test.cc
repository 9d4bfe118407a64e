// The MySQL/MariaDB backend against a server of its own (run through src/backends/mysql/test_server.sh): the UTC
// database clock whatever the server's zone, a restart mid-run. (The race to create one row
// is a kit case.)
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "kit.h"
#include "server_test.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

using test::env;

// SQL as the server's root, over its socket.
int as_root(const std::string& sql) {
  return std::system(
      ("mariadb --no-defaults -S " + env("SIMBA_TEST_MYSQL_SOCKET") + " -u root -e \"" + sql + "\"").c_str());
}

// SQL as the `simba` user over TCP, as a JVM Simba contender's own session: the last value
// the statements print (e.g. SELECT ROW_COUNT()), "" if none.
std::string as_jvm(const std::string& sql) {
  const std::string command = "mariadb --no-defaults -h 127.0.0.1 -P " + env("SIMBA_TEST_MYSQL_PORT") +
                              " -u simba -psimba-pw simba -N -e \"" + sql + "\"";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe)) out = buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// The statements of Simba's JDBC contender (its UPDATE shapes on the database clock), for a
// JVM contender "7:4242@jvm-host" with ttl 400 ms and transition 300 ms; each says how many
// rows it changed.
#define JVM_NOW "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
std::string jvm_acquire(const std::string& mutex) {
  return as_jvm("UPDATE simba_mutex SET acquired_at = " JVM_NOW ", ttl_at = " JVM_NOW " + 400, transition_at = " JVM_NOW
                " + 700, owner_id = '7:4242@jvm-host', version = version + 1 WHERE mutex = '" +
                mutex +
                "' AND (transition_at < " JVM_NOW " OR (owner_id = '7:4242@jvm-host' AND transition_at > " JVM_NOW
                ")); SELECT ROW_COUNT()");
}
std::string jvm_release(const std::string& mutex) {
  return as_jvm(
      "UPDATE simba_mutex SET acquired_at = 0, ttl_at = 0, transition_at = 0, owner_id = '', "
      "version = version + 1 WHERE mutex = '" +
      mutex + "' AND owner_id = '7:4242@jvm-host'; SELECT ROW_COUNT()");
}

class MysqlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uri_ = env("SIMBA_TEST_MYSQL_URI");
    if (uri_.empty()) GTEST_FAIL() << "run through src/backends/mysql/test_server.sh";
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
        ASSERT_EQ(
            std::system(("pkill -KILL -f -- '[m]ariadbd.*--socket=" + env("SIMBA_TEST_MYSQL_SOCKET") + "'").c_str()),
            0);
      },
      [] { ASSERT_EQ(std::system((env("SIMBA_TEST_MYSQL_START") + " >/dev/null 2>&1 &").c_str()), 0); });
}

// A JVM Simba owner renewing and releasing on the wire, interleaved with one of ours: while
// the JVM lease is renewed ours never owns; after the JVM release ours takes the row; while ours
// holds it the JVM acquire changes nothing. Never two owners.
TEST_F(MysqlTest, AJvmOwnersRenewalsAndReleaseInterleavedWithOursNeverMakeTwoOwners) {
  const std::string mutex = tck::unique_mutex("jvm");
  auto client = Client(open_backend(uri_), tck::fast_options(), std::make_shared<Runtime>());
  ASSERT_EQ(client.owner(mutex).owner_id, "");  // creates the table
  as_jvm(
      "INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version) "
      "VALUES ('" +
      mutex + "', 0, 0, 0, '', 0)");
  ASSERT_EQ(jvm_acquire(mutex), "1");
  auto ours = client.contend_service(std::make_shared<tck::Recorder>(mutex));
  ours->start();
  ASSERT_TRUE(wait_until([&] { return ours->after_owner().owner_id == "7:4242@jvm-host"; }, 5s));
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(200ms);
    ASSERT_EQ(jvm_acquire(mutex), "1") << "the JVM owner's renewal " << i << " failed";
    EXPECT_FALSE(ours->is_owner()) << "ours owns while the JVM lease is renewed (renewal " << i << ")";
  }
  ASSERT_EQ(jvm_release(mutex), "1");
  ASSERT_TRUE(wait_until([&] { return ours->is_owner(); }, 5s));
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(jvm_acquire(mutex), "0") << "the JVM contender took a row ours holds (attempt " << i << ")";
    EXPECT_TRUE(ours->is_owner());
    EXPECT_EQ(client.owner(mutex).owner_id, ours->contender_id());
  }
  EXPECT_EQ(jvm_release(mutex), "0");  // a release by a non-owner touches nothing
  EXPECT_TRUE(ours->is_owner());
  ours->stop();
  EXPECT_EQ(jvm_acquire(mutex), "1");  // free again after our release
  EXPECT_EQ(jvm_release(mutex), "1");
}

}  // namespace
}  // namespace simba
