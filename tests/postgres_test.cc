// The PostgreSQL backend against a server of its own (run through src/backends/postgres/test_server.sh): the
// database clock, a restart mid-run, and how a shared mutex's reader and writer order their
// steps against each other's transaction in flight. (The race to create one row is a kit case.)
#include <gtest/gtest.h>

#include <libpq-fe.h>
#include <unistd.h>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

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

// A batch's renewals go in one statement (kTakeMany), and each still gets the answer it would
// get alone: a live lease renewed with its token, one lost to another owner told that owner
// an expired one of another contender taken with a new token; each with its own ttl. Names with the array
// syntax's own characters reach the right rows, and a name twice in the batch is judged in
// turn. A renewal that fails (a name that is not UTF-8) fails alone.
TEST_F(PostgresTest, ABatchOfRenewalsAnswersEachLeaseAsAlone) {
  auto backend = open_backend(uri_);
  auto* batches = backend->batches();
  ASSERT_NE(batches, nullptr);
  const std::string base = tck::unique_mutex("renewals");
  const std::vector<std::string> live = {base + "-plain", base + "-\"quoted\"", base + "-back\\slash",
                                         base + "-{braces},comma", base + "- NULL"};
  const std::string taken_by_other = base + "-other";
  const std::string expired = base + "-expired";
  std::vector<std::uint64_t> tokens;
  for (const auto& name : live) tokens.push_back(backend->acquire(name, "me", 10s, 1s).owner.fencing_token);
  backend->acquire(taken_by_other, "someone", 10s, 1s);
  const auto old_token = backend->acquire(expired, "gone", 1ms, 0ms).owner.fencing_token;
  std::this_thread::sleep_for(20ms);  // by the server's clock too: the lease was 1 ms

  std::vector<AcquireCall> calls;
  for (std::size_t i = 0; i < live.size(); ++i) calls.push_back({live[i], "me", 10s + std::chrono::seconds(i), 1s});
  calls.push_back({taken_by_other, "me", 10s, 1s});
  calls.push_back({expired, "me", 10s, 1s});
  calls.push_back({live[0], "me", 10s, 1s});  // twice
  for (auto& call : calls) call.renewal = true;
  auto results = batches->acquire_batch(calls);
  ASSERT_EQ(results.size(), calls.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    ASSERT_FALSE(results[i].error) << live[i];
    EXPECT_EQ(results[i].snapshot.owner.owner_id, "me") << live[i];
    EXPECT_EQ(results[i].snapshot.owner.fencing_token, tokens[i]) << live[i] << ": a renewal changed the token";
    const auto& owner = results[i].snapshot.owner;
    EXPECT_EQ(owner.transition_at - owner.acquired_at, (calls[i].ttl + calls[i].transition).count())
        << live[i] << ": renewed with another call's ttl";
    EXPECT_EQ(backend->read(live[i]).owner.owner_id, "me") << live[i];
  }
  ASSERT_FALSE(results[5].error);
  EXPECT_EQ(results[5].snapshot.owner.owner_id, "someone") << "a renewal took a lease another contender holds";
  EXPECT_EQ(backend->read(taken_by_other).owner.owner_id, "someone");
  ASSERT_FALSE(results[6].error);
  EXPECT_EQ(results[6].snapshot.owner.owner_id, "me");
  EXPECT_GT(results[6].snapshot.owner.fencing_token, old_token) << "an expired lease was taken with its old token";
  ASSERT_FALSE(results[7].error);
  EXPECT_EQ(results[7].snapshot.owner.owner_id, "me");
  EXPECT_EQ(results[7].snapshot.owner.fencing_token, tokens[0]);

  // A renewal that fails sends the statement's calls one by one: only that call fails.
  calls.push_back({base + "-bad-\xff", "me", 10s, 1s});
  calls.back().renewal = true;
  results = batches->acquire_batch(calls);
  ASSERT_EQ(results.size(), calls.size());
  ASSERT_TRUE(results.back().error) << "a name that is not UTF-8 was taken";
  for (std::size_t i = 0; i < live.size(); ++i) {
    ASSERT_FALSE(results[i].error) << live[i];
    EXPECT_EQ(results[i].snapshot.owner.fencing_token, tokens[i]) << live[i];
  }
  EXPECT_EQ(results[5].snapshot.owner.owner_id, "someone");
  for (const auto& name : live) EXPECT_TRUE(backend->release(name, "me"));
  EXPECT_TRUE(backend->release(expired, "me"));
  EXPECT_TRUE(backend->release(taken_by_other, "someone"));
}

// A session of its own, to hold a transaction open as another process would mid-step.
class Session {
 public:
  explicit Session(const std::string& uri) : connection_(PQconnectdb(uri.c_str()), &PQfinish) {
    if (PQstatus(connection_.get()) != CONNECTION_OK) ADD_FAILURE() << PQerrorMessage(connection_.get());
  }
  // Runs `sql`; the first column of the first row, or "" (a failure fails the test).
  std::string run(const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(connection_.get(), sql.c_str()), &PQclear);
    const auto status = PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(result.get());
      return "";
    }
    return PQntuples(result.get()) > 0 ? PQgetvalue(result.get(), 0, 0) : "";
  }
  // Whether some session waits for a lock on the table's rows.
  bool someone_waits() { return run("SELECT count(*) FROM pg_locks WHERE NOT granted") != "0"; }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection_;
};

constexpr const char* kDbNow = "(extract(epoch FROM statement_timestamp()) * 1000)::bigint";

// Makes the row of `mutex` (taken and released: there, and free).
void make_row(Backend& backend, const std::string& mutex) {
  ASSERT_EQ(backend.acquire(mutex, "before", 10s, 0ms).owner.owner_id, "before");
  ASSERT_TRUE(backend.release(mutex, "before"));
}

// Runs `step` (a backend call that `open`'s transaction should hold up) until it waits for a
// lock, or has finished (the caller's checks then find what it got without waiting); then
// commits `open`. What `step` got; nothing if it did not finish in time (a failure).
std::optional<OwnerSnapshot> across_commit(const std::string& uri, Session& open, std::function<OwnerSnapshot()> step) {
  auto call = std::async(std::launch::async, std::move(step));
  Session look(uri);
  const bool held_up =
      wait_until([&] { return look.someone_waits() || call.wait_for(0ms) == std::future_status::ready; }, 20s);
  EXPECT_TRUE(held_up) << "the step neither waited for a lock nor finished";
  open.run("COMMIT");
  if (call.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "the step did not finish after the commit";
    return std::nullopt;
  }
  return call.get();
}

// A reader's take of its record "<gate>#r1" as the engine makes it, left in flight in `reader`'s
// transaction: the share lock on the gate's row (none if it has no row), then the record.
void begin_read(Session& reader, const std::string& gate) {
  reader.run("BEGIN");
  reader.run("SELECT fencing_token FROM simba_mutex WHERE mutex = '" + gate + "' FOR SHARE");
  reader.run("INSERT INTO simba_mutex (mutex, owner_id, acquired_at, ttl_at, transition_at, version) VALUES ('" + gate +
             "#r1', 'reader', " + kDbNow + ", " + kDbNow + " + 60000, " + kDbNow + " + 60000, 1)");
}

// A batch's grants of existing rows hear their relatives, as acquire()'s do (a shared mutex's
// writer and first reader skip a round trip by them); its renewals do not ask (their answer is
// not heard). (A new row's grant in a batch hears nothing: see acquire_batch.)
TEST_F(PostgresTest, ABatchTellsItsGrantsTheirRelativesAndItsRenewalsNothing) {
  auto backend = open_backend(uri_);
  auto* batches = backend->batches();
  ASSERT_NE(batches, nullptr);
  const std::string free_gate = tck::unique_mutex("batch-free-gate");
  const std::string read_gate = tck::unique_mutex("batch-read-gate");
  const std::string record_gate = tck::unique_mutex("batch-record");
  const std::string record = record_gate + "#r1";
  const std::vector<AcquireCall> grants = {
      {free_gate, "w", 10s, 1s}, {read_gate, "w", 10s, 1s}, {record, "r", 10s, 1s}};
  for (const auto& name : {free_gate, read_gate, record_gate, record}) make_row(*backend, name);
  ASSERT_EQ(backend->acquire(read_gate + "#r1", "reader", 10s, 1s).owner.owner_id, "reader");
  auto results = batches->acquire_batch(grants);
  ASSERT_EQ(results.size(), grants.size());
  for (const auto& result : results) {
    ASSERT_FALSE(result.error);
    ASSERT_FALSE(result.snapshot.owner.empty());
  }
  EXPECT_TRUE(results[0].snapshot.no_derived_held) << "a gate without readers was not said free of them";
  EXPECT_FALSE(results[1].snapshot.no_derived_held) << "a gate with a reader inside was said free of readers";
  ASSERT_TRUE(results[2].snapshot.parent.has_value()) << "a reader's record heard nothing of its gate";
  EXPECT_FALSE(results[2].snapshot.parent->held);

  std::vector<AcquireCall> renewals = grants;
  for (auto& call : renewals) call.renewal = true;
  results = batches->acquire_batch(renewals);
  ASSERT_EQ(results.size(), renewals.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_FALSE(results[i].error);
    EXPECT_EQ(results[i].snapshot.owner.owner_id, renewals[i].contender_id) << "renewal " << i;
  }
  EXPECT_FALSE(results[0].snapshot.no_derived_held) << "a renewal asked about its relatives";
  EXPECT_FALSE(results[2].snapshot.parent.has_value()) << "a renewal asked about its gate";
  for (const auto& call : grants) EXPECT_TRUE(backend->release(call.mutex, call.contender_id));
  EXPECT_TRUE(backend->release(read_gate + "#r1", "reader"));
}

// A write of the gate in flight (another process's take, not yet committed): a reader's record
// of that gate is granted only once it commits, and the reader hears the gate held, with the
// write's token. (Without the reader's share lock on the gate's row, its grant comes at once,
// from a snapshot without the write: the gate free.)
TEST_F(PostgresTest, AReaderWaitsForAWriteInFlightAndHearsIt) {
  auto backend = open_backend(uri_);
  const std::string gate = tck::unique_mutex("rw-order-read");
  make_row(*backend, gate);
  Session writer(uri_);
  writer.run("BEGIN");
  const std::string token =
      writer.run("UPDATE simba_mutex SET owner_id = 'writer', fencing_token = fencing_token + 1, transition_at = " +
                 std::string(kDbNow) + " + 60000 WHERE mutex = '" + gate + "' RETURNING fencing_token");
  ASSERT_FALSE(token.empty());
  const auto got = across_commit(uri_, writer, [&] { return backend->acquire(gate + "#r1", "reader", 10s, 0ms); });
  ASSERT_TRUE(got);
  const OwnerSnapshot& read = *got;
  if (read.owner.owner_id == "reader") {
    ASSERT_TRUE(read.parent.has_value()) << "the gate's row exists: the engine can say what it was";
    EXPECT_TRUE(read.parent->held) << "a reader was told the gate was free while a write of it was in flight";
    EXPECT_EQ(read.parent->fencing_token, std::stoull(token));
    backend->release(gate + "#r1", "reader");
  }
}

// A reader's record in flight (another process's share lock on the gate's row and its record,
// not yet committed): a writer's take of the gate waits for it and hears a reader held. (A look
// at the readers before the take, or in its snapshot, misses the uncommitted record.)
TEST_F(PostgresTest, AWriterWaitsForAReadInFlightAndHearsIt) {
  auto backend = open_backend(uri_);
  const std::string gate = tck::unique_mutex("rw-order-write");
  make_row(*backend, gate);
  ASSERT_TRUE(backend->acquire(gate, "writer", 10s, 0ms).no_derived_held) << "no reader yet";
  ASSERT_TRUE(backend->release(gate, "writer"));
  Session reader(uri_);
  begin_read(reader, gate);
  const auto got = across_commit(uri_, reader, [&] { return backend->acquire(gate, "writer", 10s, 0ms); });
  ASSERT_TRUE(got);
  const OwnerSnapshot& wrote = *got;
  ASSERT_EQ(wrote.owner.owner_id, "writer");
  EXPECT_FALSE(wrote.no_derived_held) << "a writer was told no reader was in while a reader's record was in flight";
  backend->release(gate, "writer");
}

// A reader in flight on a gate that has no row yet (its share lock found nothing to lock, and
// its record is not yet committed): a writer's take that makes the gate's row does not wait for
// it, and must not say that no reader is in. The reader reads the gate once its record has
// committed, which may come before the writer's commit: it finds the gate free, so the writer
// must look at the readers after its own commit. (Said from the take's snapshot, which misses
// the uncommitted record, a writer and a reader were both in: the kit's
// RwLockTest.AWriterExcludesEveryoneAndEveryoneGetsIn, once, on a fresh name.)
TEST_F(PostgresTest, AWriterThatMakesTheGatesRowDoesNotVouchForAReadInFlight) {
  auto backend = open_backend(uri_);
  const std::string gate = tck::unique_mutex("rw-order-new-gate");
  Session reader(uri_);
  EXPECT_EQ(reader.run("SELECT count(*) FROM simba_mutex WHERE mutex = '" + gate + "'"), "0") << "a new name";
  begin_read(reader, gate);
  const auto got = across_commit(uri_, reader, [&] { return backend->acquire(gate, "writer", 10s, 0ms); });
  ASSERT_TRUE(got);
  const OwnerSnapshot& wrote = *got;
  ASSERT_EQ(wrote.owner.owner_id, "writer");
  EXPECT_FALSE(wrote.no_derived_held) << "a writer that made the gate's row vouched for the readers while a "
                                         "reader's record was in flight";
  // Once the row is there, a take of it says so again (the reader's record, committed, is seen).
  ASSERT_TRUE(backend->release(gate, "writer"));
  Session(uri_).run("DELETE FROM simba_mutex WHERE mutex = '" + gate + "#r1'");
  EXPECT_TRUE(backend->acquire(gate, "writer", 10s, 0ms).no_derived_held) << "a gate's row there: no reader in";
  backend->release(gate, "writer");
}

}  // namespace
}  // namespace simba
