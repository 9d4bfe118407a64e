// The PostgreSQL backend: one row per mutex, one conditional upsert per acquire, the database
// clock in UTC milliseconds, NOTIFY on release.
#include "simba/postgres_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <string_view>
#include <unordered_set>

#include "backends/common/server.h"
#include "backends/common/sql_backend.h"
#include "backends/postgres/connection.h"
#include "backends/postgres/listener.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba {
namespace {

using postgres::Connection;
using postgres::Result;

// Epoch milliseconds of the database clock: extract(epoch ...) of a timestamptz counts from
// 1970-01-01 UTC whatever the session's TimeZone. statement_timestamp() is one value for the
// whole statement, so WHERE, SET and RETURNING agree on it.
#define SIMBA_PG_NOW "(extract(epoch FROM statement_timestamp()) * 1000)::bigint"

// The shape of Simba's MySQL table in PostgreSQL's types, plus the fencing token,
// waiting_until: waiters mark how long they will keep listening, so a release notifies only
// while someone waits (a NOTIFY wakes every listening backend and process), and wanted_until:
// a demand on the current owner (simba/backend.h), cleared when the owner changes, and
// idle_token: the token of the lease its owner marked idle (mark_idle), cleared by a new lease.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS simba_mutex (
  mutex         varchar(66)  NOT NULL PRIMARY KEY,
  acquired_at   bigint       NOT NULL DEFAULT 0,
  ttl_at        bigint       NOT NULL DEFAULT 0,
  transition_at bigint       NOT NULL DEFAULT 0,
  owner_id      varchar(128) NOT NULL DEFAULT '',
  version       integer      NOT NULL DEFAULT 0,
  fencing_token bigint       NOT NULL DEFAULT 0,
  waiting_until bigint       NOT NULL DEFAULT 0,
  wanted_until  bigint       NOT NULL DEFAULT 0,
  idle_token    bigint       NOT NULL DEFAULT 0
);
ALTER TABLE simba_mutex ADD COLUMN IF NOT EXISTS fencing_token bigint NOT NULL DEFAULT 0;
ALTER TABLE simba_mutex ADD COLUMN IF NOT EXISTS waiting_until bigint NOT NULL DEFAULT 0;
ALTER TABLE simba_mutex ADD COLUMN IF NOT EXISTS wanted_until bigint NOT NULL DEFAULT 0;
ALTER TABLE simba_mutex ADD COLUMN IF NOT EXISTS idle_token bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS simba_mutex_bytes ON simba_mutex ((mutex COLLATE "C")))sql";

// Whether kSchema would change nothing: the table (as the search path finds it) with every
// column and index kSchema adds.
constexpr const char* kSchemaComplete = R"sql(
SELECT to_regclass('simba_mutex') IS NOT NULL
  AND (SELECT count(*) FROM pg_attribute
       WHERE attrelid = to_regclass('simba_mutex') AND NOT attisdropped
         AND attname IN ('fencing_token', 'waiting_until', 'wanted_until', 'idle_token')) = 4
  AND EXISTS (SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
              WHERE x.indrelid = to_regclass('simba_mutex') AND i.relname = 'simba_mutex_bytes'))sql";

// The lease may be taken (free, released or expired) or renewed (ours and live); the second
// spelling is for ON CONFLICT, where the new values are EXCLUDED.
#define SIMBA_PG_TAKES                                                                                \
  "(m.transition_at < EXCLUDED.acquired_at OR (m.owner_id = EXCLUDED.owner_id AND m.transition_at > " \
  "EXCLUDED.acquired_at))"

// The common case in one plain UPDATE: take a free row or renew our own; the token rises only
// when the owner id changes (and a demand goes with the old owner). Returns the row only if it
// took or renewed it, and whether a demand is pending.
// $1 mutex, $2 contender id, $3 ttl ms, $4 transition ms.
constexpr const char* kTake =
    "UPDATE simba_mutex SET fencing_token = fencing_token + (owner_id <> $2)::int, "
    "wanted_until = CASE WHEN owner_id <> $2 THEN 0 ELSE wanted_until END, "
    "idle_token = CASE WHEN owner_id = $2 AND transition_at > " SIMBA_PG_NOW
    " THEN idle_token ELSE 0 END, "
    "acquired_at = " SIMBA_PG_NOW ", ttl_at = " SIMBA_PG_NOW
    " + $3::bigint, "
    "transition_at = " SIMBA_PG_NOW
    " + $3::bigint + $4::bigint, owner_id = $2, version = version + 1 "
    "WHERE mutex = $1 AND (transition_at < " SIMBA_PG_NOW " OR (owner_id = $2 AND transition_at > " SIMBA_PG_NOW
    "))"
    " RETURNING owner_id, acquired_at, ttl_at, transition_at, fencing_token, acquired_at, wanted_until >= acquired_at";

// kTake over many rows in one statement: $1..$4 are arrays of kTake's parameters, one element
// per call (the names distinct). Rows are locked in byte order of the name, as a batch of kTake
// runs locks them (acquire_batch), so two batches never deadlock. Returns kTake's columns for
// each row taken or renewed, and the call's place in the arrays (from 1); a call that took
// nothing returns no row.
#define SIMBA_PG_MAY_TAKE \
  "(m.transition_at < " SIMBA_PG_NOW " OR (m.owner_id = c.owner_id AND m.transition_at > " SIMBA_PG_NOW "))"
constexpr const char* kTakeMany = R"sql(
WITH c AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
    WITH ORDINALITY AS c(mutex, owner_id, ttl, transition, i)
), locked AS (
  SELECT m.mutex FROM simba_mutex m JOIN c ON m.mutex = c.mutex WHERE )sql" SIMBA_PG_MAY_TAKE R"sql(
  ORDER BY m.mutex COLLATE "C" FOR UPDATE OF m
)
UPDATE simba_mutex m SET fencing_token = m.fencing_token + (m.owner_id <> c.owner_id)::int,
  wanted_until = CASE WHEN m.owner_id <> c.owner_id THEN 0 ELSE m.wanted_until END,
  idle_token = CASE WHEN m.owner_id = c.owner_id AND m.transition_at > )sql" SIMBA_PG_NOW R"sql(
               THEN m.idle_token ELSE 0 END,
  acquired_at = )sql" SIMBA_PG_NOW R"sql(, ttl_at = )sql" SIMBA_PG_NOW R"sql( + c.ttl,
  transition_at = )sql" SIMBA_PG_NOW R"sql( + c.ttl + c.transition, owner_id = c.owner_id, version = m.version + 1
FROM c JOIN locked l ON l.mutex = c.mutex
WHERE m.mutex = c.mutex AND )sql" SIMBA_PG_MAY_TAKE R"sql(
RETURNING m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, m.acquired_at,
  m.wanted_until >= m.acquired_at, c.i)sql";

// Otherwise: create the row race-free, or take it if it became free meanwhile, or note that
// we wait (until two of our leases from now) and want it (a demand, for one lease). Always
// returns the row after the call. A new row's token starts at now x 1000 (see common/sweep.h).
constexpr const char* kTakeOrWait = R"sql(
INSERT INTO simba_mutex AS m (mutex, acquired_at, ttl_at, transition_at, owner_id, version, fencing_token)
SELECT $1, n.now, n.now + $3::bigint, n.now + $3::bigint + $4::bigint, $2, 1, n.now * 1000
FROM (SELECT )sql" SIMBA_PG_NOW R"sql( AS now) n
ON CONFLICT (mutex) DO UPDATE SET
  fencing_token = CASE WHEN )sql" SIMBA_PG_TAKES
                                    R"sql( THEN m.fencing_token + (m.owner_id <> $2)::int ELSE m.fencing_token END,
  acquired_at = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN EXCLUDED.acquired_at ELSE m.acquired_at END,
  ttl_at = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN EXCLUDED.ttl_at ELSE m.ttl_at END,
  transition_at = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN EXCLUDED.transition_at ELSE m.transition_at END,
  owner_id = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN EXCLUDED.owner_id ELSE m.owner_id END,
  version = m.version + ()sql" SIMBA_PG_TAKES R"sql()::int,
  waiting_until = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN m.waiting_until
                  ELSE GREATEST(m.waiting_until, EXCLUDED.acquired_at + 2 * ($3::bigint + $4::bigint) + 1000) END,
  wanted_until = CASE WHEN )sql" SIMBA_PG_TAKES R"sql( THEN (CASE WHEN m.owner_id <> $2 THEN 0 ELSE m.wanted_until END)
                 ELSE GREATEST(m.wanted_until, EXCLUDED.acquired_at + $3::bigint + $4::bigint) END,
  idle_token = CASE WHEN )sql" SIMBA_PG_TAKES
                                    R"sql( AND NOT (m.owner_id = $2 AND m.transition_at > EXCLUDED.acquired_at)
               THEN 0 ELSE m.idle_token END
RETURNING m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, )sql" SIMBA_PG_NOW R"sql()sql";

// Run after a take of $1 in the same transaction (Connection::execute_in_turn), with a snapshot
// of its own: true if no record derived from $1 ("$1#<suffix>", in byte order through the index
// simba_mutex_bytes) is held. A reader of $1 holds its share lock on $1's row (kLockPrimitive)
// until its record commits, so the take waited for that commit and this sees the record.
// Only if the row was there before the take (its version above 1; kTakeOrWait makes a row
// with version 1, every take of one adds 1): a reader in flight that found no row locked
// nothing, and reads the gate once its record has committed, which may be before this take
// commits, so it would find the gate free while this snapshot misses its record. Then false
// (unknown): the writer looks at the readers after its commit.
constexpr const char* kNoDerivedHeld = R"sql(
SELECT (SELECT version > 1 FROM simba_mutex WHERE mutex = $1) AND NOT EXISTS (
  SELECT 1 FROM simba_mutex
  WHERE (mutex COLLATE "C") >= ($1 || '#') AND (mutex COLLATE "C") < ($1 || '$')
    AND strpos(substr(mutex, char_length($1) + 2), '#') = 0
    AND owner_id <> '' AND transition_at >= )sql" SIMBA_PG_NOW R"sql())sql";

// Run before a take of a derived record "$1#<suffix>" in the same transaction: the primitive's
// row, share-locked until the record commits (a writer's take of $1 waits for it; one that
// took $1 first is seen here: the lock waits for its commit and reads its row). No row: no lock,
// and the caller says nothing of the primitive (OwnerSnapshot::parent unset).
constexpr const char* kLockPrimitive = "SELECT owner_id <> '' AND transition_at >= " SIMBA_PG_NOW
                                       ", fencing_token FROM simba_mutex WHERE mutex = $1 FOR SHARE";

// Whether the row's lease is marked idle (mark_idle), as a column.
#define SIMBA_PG_IDLE "m.idle_token <> 0 AND m.idle_token = m.fencing_token"

// The row (or none), the database clock, whether a demand is pending and whether the lease is
// marked idle, in one row. $1 mutex.
constexpr const char* kRead = R"sql(
SELECT m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, n.now, m.wanted_until >= n.now,
  )sql" SIMBA_PG_IDLE R"sql(
FROM (SELECT )sql" SIMBA_PG_NOW R"sql( AS now) n LEFT JOIN simba_mutex m ON m.mutex = $1)sql";

// Release only if ours; says whether a waiter listens (then the caller NOTIFYs). The row keeps
// when it became free (transition_at = now - 1) for the sweep. $1 mutex, $2 contender id.
constexpr const char* kRelease =
    "UPDATE simba_mutex SET owner_id = '', acquired_at = 0, ttl_at = 0, transition_at = " SIMBA_PG_NOW
    " - 1, "
    "version = version + 1 WHERE mutex = $1 AND owner_id = $2 RETURNING waiting_until >= " SIMBA_PG_NOW;

// Names starting with $1, in byte order, at most $2; each row with the database clock.
constexpr const char* kList = R"sql(
SELECT m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, )sql" SIMBA_PG_NOW R"sql(, m.mutex,
  )sql" SIMBA_PG_IDLE R"sql(
FROM simba_mutex m WHERE left(m.mutex, char_length($1)) = $1 ORDER BY m.mutex COLLATE "C" LIMIT $2)sql";

// Rows free and unawaited for $1 ms whose token is below now x 1000, at most $2 of them.
constexpr const char* kSweep = R"sql(
DELETE FROM simba_mutex WHERE mutex IN (
  SELECT mutex FROM simba_mutex
  WHERE transition_at < )sql" SIMBA_PG_NOW R"sql( - $1::bigint AND waiting_until < )sql" SIMBA_PG_NOW
                               R"sql( - $1::bigint
    AND fencing_token < )sql" SIMBA_PG_NOW R"sql( * 1000
  LIMIT $2 FOR UPDATE SKIP LOCKED)
AND transition_at < )sql" SIMBA_PG_NOW R"sql( - $1::bigint AND waiting_until < )sql" SIMBA_PG_NOW
                               R"sql( - $1::bigint)sql";

// The owner marks its live lease idle ($3 true) or in use. $1 mutex, $2 owner id.
constexpr const char* kMarkIdle =
    "UPDATE simba_mutex SET idle_token = CASE WHEN $3::boolean THEN fencing_token ELSE 0 END "
    "WHERE mutex = $1 AND owner_id = $2 AND transition_at >= " SIMBA_PG_NOW;

// simba-bench's baseline (RawProbe): a bare one-row UPDATE. $1 mutex.
constexpr const char* kRawUpdate = "UPDATE simba_mutex SET version = version + 1 WHERE mutex = $1";
constexpr const char* kRawRow = "INSERT INTO simba_mutex (mutex) VALUES ($1) ON CONFLICT DO NOTHING";

// Wakes the waiters of every process. $1 mutex.
constexpr const char* kNotify = "SELECT pg_notify('simba_mutex', 'released@@' || $1)";
// Tells the owner (a caching one listens) that a contender wants the mutex. $1 mutex.
constexpr const char* kNotifyDemand = "SELECT pg_notify('simba_mutex', 'demand@@' || $1)";

// A boolean column, false when absent or NULL.
bool flag(const PGresult* result, int column, int row = 0) {
  return PQnfields(result) > column && !PQgetisnull(result, row, column) && PQgetvalue(result, row, column)[0] == 't';
}

// Column 6 of a take or a read: a demand is pending.
bool demanded(const PGresult* result, int row = 0) { return flag(result, 6, row); }

std::int64_t integer(const PGresult* result, int column, int row = 0) {
  return PQgetisnull(result, row, column) ? 0 : std::strtoll(PQgetvalue(result, row, column), nullptr, 10);
}

// Row `i` of a result with columns owner_id, acquired_at, ttl_at, transition_at, token, now
// (and demanded, the name, idle where the statement has them: see read_row and list_rows).
internal::SqlLeaseRow row_of(const PGresult* result, int i = 0) {
  internal::SqlLeaseRow row;
  if (!PQgetisnull(result, i, 0)) row.owner.owner_id.assign(PQgetvalue(result, i, 0), PQgetlength(result, i, 0));
  row.owner.acquired_at = integer(result, 1, i);
  row.owner.ttl_at = integer(result, 2, i);
  row.owner.transition_at = integer(result, 3, i);
  row.owner.fencing_token = static_cast<std::uint64_t>(integer(result, 4, i));
  row.now = integer(result, 5, i);
  return row;
}

class PostgresBackend final : public internal::SqlBackend<Connection, Push, DemandPush, Batches> {
 public:
  bool pushes_acquisitions() const noexcept override { return false; }  // observers poll for them
  PostgresBackend(const PostgresOptions& options, std::string where)
      : SqlBackend("postgresql", std::move(where), options.pool_size, options.sweep_idle,
                   std::chrono::milliseconds(250)),
        options_(options),
        listener_(postgres::make_listener(options, this->where())) {
    auto connection = std::make_unique<Connection>(options_, this->where());
    create_table(*connection);
    prepare(*connection);
    pool().seed(std::move(connection));
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    return pool().with([&](Connection& connection) {
      const auto params = params_of({mutex, contender_id, ttl, transition});
      auto taken = take_with_relatives(connection, "take", params);
      if (PQntuples(taken.row.get()) == 1) {
        auto snapshot = snapshot_of(row_of(taken.row.get()));
        snapshot.demanded = demanded(taken.row.get());
        taken.answer(snapshot);
        return snapshot;
      }
      auto waited = take_with_relatives(connection, "take_or_wait", params);
      auto snapshot = snapshot_of(row_of(waited.row.get()));
      if (!snapshot.owner.empty() && snapshot.owner.owner_id != contender_id) {
        connection.execute("notify_demand", {mutex});
      } else {
        waited.answer(snapshot);
      }
      return snapshot;
    });
  }

  // A batch in at most three round trips:
  //  1. The renewals (their names distinct) in one statement, kTakeMany, in its own transaction:
  //     the steady state of a process holding many leases costs the server one statement per
  //     batch, not one per lease.
  //  2. The other calls' "take" pipelined on one connection in one transaction, in name order
  //     (one round trip and one commit; calls on one name run in turn, as acquire() one after
  //     the other). A call that is not a renewal also hears its relatives, as acquire() does
  //     (take_with_relatives' statements around its take; a renewal's answer would not be
  //     heard). If a run fails (a name too long, a deadlock with another statement), the
  //     transaction rolls back and each call's "take" goes in its own transaction, so only that
  //     call fails (and none hears its relatives).
  //  3. The calls that took nothing (a new row, another owner, a lease lost) go on as acquire()
  //     does, "take_or_wait" pipelined, each in its own transaction (a new row's grant there
  //     hears nothing of its relatives).
  // Both kinds of transaction lock rows in byte order of the name, so batches never deadlock.
  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    return pool().with([&](Connection& connection) {
      std::vector<AcquireResult> results(calls.size());
      std::vector<std::size_t> rest;  // calls that took nothing
      std::vector<std::size_t> renewals, others;
      {
        std::unordered_set<std::string_view> names;
        for (std::size_t i = 0; i < calls.size(); ++i) {
          (calls[i].renewal && names.insert(calls[i].mutex).second ? renewals : others).push_back(i);
        }
      }
      if (renewals.size() < 2) {
        others.insert(others.end(), renewals.begin(), renewals.end());
        renewals.clear();
      }
      if (!renewals.empty() && !take_many(connection, calls, renewals, results, rest)) {
        others.insert(others.end(), renewals.begin(), renewals.end());
      }
      if (!others.empty()) take_each(connection, calls, others, results, rest);
      if (rest.empty()) return results;
      std::vector<std::vector<std::string>> rest_params;
      rest_params.reserve(rest.size());
      for (const std::size_t i : rest) rest_params.push_back(params_of(calls[i]));
      auto waited = connection.execute_each("take_or_wait", rest_params);
      for (std::size_t k = 0; k < rest.size(); ++k) {
        const std::size_t i = rest[k];
        try {
          if (waited[k].error) std::rethrow_exception(waited[k].error);
          auto snapshot = snapshot_of(row_of(waited[k].result.get()));
          if (!snapshot.owner.empty() && snapshot.owner.owner_id != calls[i].contender_id)
            connection.execute("notify_demand", {calls[i].mutex});
          results[i].snapshot = snapshot;
        } catch (...) {
          if (connection.broken()) throw;
          results[i].error = std::current_exception();
        }
      }
      return results;
    });
  }

  static std::vector<std::string> params_of(const AcquireCall& call) {
    return {call.mutex, call.contender_id, std::to_string(call.ttl.count()), std::to_string(call.transition.count())};
  }

  // Step 1 of acquire_batch: the calls `which` (renewals, names distinct) in one kTakeMany.
  // Fills the results of the calls that took their row and adds the others to `rest`; false
  // if the statement failed but the connection did not (then nothing was taken: the calls go
  // the way of the others).
  static bool take_many(Connection& connection, const std::vector<AcquireCall>& calls,
                        const std::vector<std::size_t>& which, std::vector<AcquireResult>& results,
                        std::vector<std::size_t>& rest) {
    std::vector<std::string> arrays(4, "{");
    for (const std::size_t i : which) {
      const auto params = params_of(calls[i]);
      for (std::size_t p = 0; p < arrays.size(); ++p) {
        if (arrays[p].size() > 1) arrays[p] += ',';
        append_array_element(arrays[p], params[p]);
      }
    }
    for (auto& array : arrays) array += '}';
    Result taken;
    try {
      taken = connection.execute("take_many", arrays);
    } catch (const Error& e) {
      if (connection.broken()) throw;
      internal::log_warn(std::string("postgresql: a batch of ") + std::to_string(which.size()) +
                         " renewals failed as one statement (they go one by one): " + e.what());
      return false;
    }
    std::vector<bool> answered(which.size(), false);
    for (int row = 0; row < PQntuples(taken.get()); ++row) {
      const auto k = integer(taken.get(), 7, row) - 1;
      if (k < 0 || static_cast<std::size_t>(k) >= which.size() || answered[k]) {
        throw Error(errc::internal, "postgresql: a batch of renewals got an answer for call " + std::to_string(k + 1) +
                                        " of " + std::to_string(which.size()));
      }
      answered[k] = true;
      auto& result = results[which[k]];
      result.snapshot = snapshot_of(row_of(taken.get(), row));
      result.snapshot.demanded = demanded(taken.get(), row);
    }
    for (std::size_t k = 0; k < which.size(); ++k) {
      if (!answered[k]) rest.push_back(which[k]);
    }
    return true;
  }

  // A PostgreSQL array literal's element: quoted, with its quotes and backslashes escaped.
  static void append_array_element(std::string& array, std::string_view element) {
    array += '"';
    for (const char c : element) {
      if (c == '"' || c == '\\') array += '\\';
      array += c;
    }
    array += '"';
  }

  // Step 2 of acquire_batch: the calls `which`, their "take" (and their relatives' statements)
  // pipelined in one transaction. Fills the results of the calls that took their row or
  // failed, and adds the others to `rest`.
  void take_each(Connection& connection, const std::vector<AcquireCall>& calls, std::vector<std::size_t> which,
                 std::vector<AcquireResult>& results, std::vector<std::size_t>& rest) {
    std::stable_sort(which.begin(), which.end(),
                     [&](std::size_t a, std::size_t b) { return calls[a].mutex < calls[b].mutex; });
    std::vector<std::vector<std::string>> each;
    each.reserve(which.size());
    for (const std::size_t i : which) each.push_back(params_of(calls[i]));
    struct Runs {
      std::size_t take = 0;
      std::optional<std::size_t> relatives;  // where it hears them
      bool derived = false;
    };
    std::vector<Runs> at(which.size());
    std::vector<Connection::Run> runs;
    for (std::size_t k = 0; k < which.size(); ++k) {
      std::optional<Look> look;
      if (!calls[which[k]].renewal) look = look_of(calls[which[k]].mutex);
      at[k].derived = look && look->derived;
      if (look && look->derived) {
        at[k].relatives = runs.size();
        runs.push_back(look->run);
      }
      at[k].take = runs.size();
      runs.push_back({"take", each[k]});
      if (look && !look->derived) {
        at[k].relatives = runs.size();
        runs.push_back(look->run);
      }
    }
    std::vector<Connection::Answer> answers(which.size());
    std::vector<Result> relatives(which.size());
    if (auto together = connection.execute_together(runs)) {
      for (std::size_t k = 0; k < which.size(); ++k) {
        answers[k].result = std::move((*together)[at[k].take]);
        if (at[k].relatives) relatives[k] = std::move((*together)[*at[k].relatives]);
      }
    } else {
      answers = connection.execute_each("take", each);
    }
    for (std::size_t k = 0; k < which.size(); ++k) {
      auto& result = results[which[k]];
      if (answers[k].error) {
        result.error = answers[k].error;
      } else if (PQntuples(answers[k].result.get()) == 1) {
        result.snapshot = snapshot_of(row_of(answers[k].result.get()));
        result.snapshot.demanded = demanded(answers[k].result.get());
        if (relatives[k]) answer_relatives(relatives[k].get(), at[k].derived, result.snapshot);
      } else {
        rest.push_back(which[k]);
      }
    }
  }

  // A take (`statement`: "take" or "take_or_wait") together with what an owner hears of its
  // relatives in the same round trip (OwnerSnapshot): for a primitive, whether any record
  // derived from it is held (kNoDerivedHeld, after the take); for a derived record, its
  // primitive's row (kLockPrimitive, before the take).
  static void answer_relatives(const PGresult* relatives, bool derived, OwnerSnapshot& snapshot) {
    if (!derived) {
      snapshot.no_derived_held = flag(relatives, 0);
    } else if (PQntuples(relatives) == 1) {
      snapshot.parent = OwnerSnapshot::Parent{flag(relatives, 0), static_cast<std::uint64_t>(integer(relatives, 1))};
    }
  }
  struct Taken {
    Result row;
    Result relatives;
    bool derived = false;
    void answer(OwnerSnapshot& snapshot) const { answer_relatives(relatives.get(), derived, snapshot); }
  };
  static Taken take_with_relatives(Connection& connection, const char* statement,
                                   const std::vector<std::string>& params) {
    const Look look = look_of(params.front());
    std::vector<Connection::Run> runs = {{statement, params}};
    runs.insert(look.derived ? runs.begin() : runs.end(), look.run);
    auto results = connection.execute_in_turn(runs);
    Taken taken;
    taken.derived = look.derived;
    taken.row = std::move(results[look.derived ? 1 : 0]);
    taken.relatives = std::move(results[look.derived ? 0 : 1]);
    return taken;
  }
  // The statement that tells a take of `mutex` its relatives: for a derived record, its
  // primitive's row locked before the take (kLockPrimitive); for a primitive, its derived
  // records read after it (kNoDerivedHeld).
  struct Look {
    Connection::Run run;
    bool derived = false;  // the run goes before the take
  };
  static Look look_of(const std::string& mutex) {
    const auto hash = mutex.rfind('#');
    if (hash != std::string::npos) return {{"lock_primitive", {mutex.substr(0, hash)}}, true};
    return {{"no_derived_held", {mutex}}, false};
  }

  // A contender's watch opens once it waits (Capabilities::watch_when_waiting), and its LISTEN
  // starts at its wait_ready(): an owner that never waits costs the server no channel (a
  // session's LISTEN grows slower with every channel it has).
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    return listener_->watch({mutex}, std::move(on_change),
                            contender_id.empty() ? internal::PushChannel::Subscribe::before_return
                                                 : internal::PushChannel::Subscribe::lazily);
  }

  // The LISTEN connection itself: its loss reaches every owner of a Client through one watch
  // (Capabilities::watch_when_waiting). Returns once the connection is up (bounded as watch()).
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override {
    return listener_->watch({}, std::move(on_change), internal::PushChannel::Subscribe::before_return);
  }

  // Demands come on the one LISTEN channel too, under a key no mutex has.
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& /*owner_id*/,
                                             std::function<void()> on_demand) override {
    return listener_->watch({postgres::demand_key(mutex)},
                            [on_demand = std::move(on_demand)](WatchEvent) { on_demand(); });
  }

 private:
  std::unique_ptr<Connection> open() override {
    auto connection = std::make_unique<Connection>(options_, where());
    prepare(*connection);
    return connection;
  }

  internal::SqlLeaseRow read_row(Connection& connection, const std::string& mutex) override {
    auto result = connection.execute("read", {mutex});
    auto row = row_of(result.get());
    row.demanded = demanded(result.get());
    row.idle = flag(result.get(), 7);
    return row;
  }

  bool release_row(Connection& connection, const std::string& mutex, const std::string& contender_id) override {
    auto released = connection.execute("release", {mutex, contender_id});
    if (PQntuples(released.get()) != 1) return false;
    if (std::string_view(PQgetvalue(released.get(), 0, 0)) == "t") connection.execute("notify", {mutex});
    return true;
  }

  std::vector<internal::SqlLeaseRow> list_rows(Connection& connection, const std::string& prefix,
                                               std::size_t asked) override {
    auto result = connection.execute("list", {prefix, std::to_string(asked)});
    std::vector<internal::SqlLeaseRow> rows;
    const int count = PQntuples(result.get());
    for (int i = 0; i < count; ++i) {
      auto row = row_of(result.get(), i);
      row.mutex.assign(PQgetvalue(result.get(), i, 6), PQgetlength(result.get(), i, 6));
      row.idle = flag(result.get(), 7, i);
      rows.push_back(std::move(row));
    }
    return rows;
  }

  std::size_t sweep_rows(Connection& connection, std::chrono::milliseconds idle_for, std::size_t batch) override {
    auto deleted = connection.execute("sweep", {std::to_string(idle_for.count()), std::to_string(batch)});
    return static_cast<std::size_t>(std::strtoull(PQcmdTuples(deleted.get()), nullptr, 10));
  }

  bool mark_idle_row(Connection& connection, const std::string& mutex, const std::string& owner_id,
                     bool idle) override {
    auto marked = connection.execute("mark_idle", {mutex, owner_id, idle ? "true" : "false"});
    return std::string_view(PQcmdTuples(marked.get())) == "1";
  }

  void make_raw_row(Connection& connection, const std::string& name) override { connection.execute("raw_row", {name}); }

  void raw_update(Connection& connection, const std::string& name) override {
    auto updated = connection.execute("raw_update", {name});
    if (std::string_view(PQcmdTuples(updated.get())) != "1") connection.fail("the raw UPDATE", updated.get());
  }

  static void prepare(Connection& connection) {
    connection.prepare("take", kTake);
    connection.prepare("take_many", kTakeMany);
    connection.prepare("take_or_wait", kTakeOrWait);
    connection.prepare("read", kRead);
    connection.prepare("release", kRelease);
    connection.prepare("list", kList);
    connection.prepare("sweep", kSweep);
    connection.prepare("notify", kNotify);
    connection.prepare("notify_demand", kNotifyDemand);
    connection.prepare("mark_idle", kMarkIdle);
    connection.prepare("raw_update", kRawUpdate);
    connection.prepare("raw_row", kRawRow);
    connection.prepare("no_derived_held", kNoDerivedHeld);
    connection.prepare("lock_primitive", kLockPrimitive);
  }

  // Two processes creating the table at once can collide in the catalog: the loser retries.
  // Where the table, its columns and its index are there already (every start but the first),
  // no DDL runs: ALTER TABLE and CREATE INDEX lock the table even when they change nothing,
  // and would hold every other process's statements on it meanwhile.
  void create_table(Connection& connection) {
    auto complete = connection.run(kSchemaComplete);
    if (PQntuples(complete.get()) == 1 && flag(complete.get(), 0)) return;
    for (int attempt = 0;; ++attempt) {
      try {
        connection.run(kSchema);
        return;
      } catch (const Error& e) {
        if (attempt >= 3 || e.code() != errc::internal || connection.broken()) throw;
      }
    }
  }

  const PostgresOptions options_;
  std::unique_ptr<internal::PushChannel> listener_;
};

}  // namespace

std::shared_ptr<Backend> make_postgres_backend(const PostgresOptions& options) {
  return std::make_shared<PostgresBackend>(options,
                                           internal::check_server_options("postgresql", "PostgreSQL", options));
}

}  // namespace simba
