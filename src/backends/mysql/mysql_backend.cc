// The MySQL/MariaDB backend: Simba's table, one conditional upsert per acquire, the database
// clock in UTC milliseconds, cheap polls by waiters only, a monitor connection for loss.
#include "simba/mysql_backend.h"
#include "base/thread_annotations.h"

#include <mysqld_error.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/common/alone.h"
#include "backends/common/server.h"
#include "backends/common/sql_backend.h"
#include "backends/mysql/connection.h"
#include "backends/mysql/monitor.h"
#include "backends/mysql/wake_locks.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba {
namespace {

using mysql::Connection;

// Epoch milliseconds of the database clock, computed in UTC: UNIX_TIMESTAMP(CURRENT_TIMESTAMP)
// would go through the session time zone (and its daylight-saving gaps). UTC_TIMESTAMP is one
// value for the whole statement.
#define SIMBA_MY_NOW "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"

// Simba's table (on InnoDB), plus the fencing token with a default so Simba's inserts work.
// Names and ids compare exactly: the server's default collation would make "a", "A" and "a "
// one lease. The exact collation is utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL 8.
std::string schema(const char* collation) {
  const std::string text = std::string("CHARACTER SET utf8mb4 COLLATE ") + collation;
  return "CREATE TABLE IF NOT EXISTS simba_mutex ("
         "  mutex         varchar(66)  " +
         text +
         " NOT NULL PRIMARY KEY,"
         "  acquired_at   bigint unsigned NOT NULL DEFAULT 0,"
         "  ttl_at        bigint unsigned NOT NULL DEFAULT 0,"
         "  transition_at bigint unsigned NOT NULL DEFAULT 0,"
         "  owner_id      varchar(128) " +
         text +
         " NOT NULL DEFAULT '',"
         "  version       int unsigned    NOT NULL DEFAULT 0,"
         "  fencing_token bigint unsigned NOT NULL DEFAULT 0,"
         "  wanted_until  bigint unsigned NOT NULL DEFAULT 0,"
         "  idle_token    bigint unsigned NOT NULL DEFAULT 0,"
         "  derived_epoch bigint unsigned NOT NULL DEFAULT 0"
         ") ENGINE=InnoDB";
}

// Our columns beyond Simba's, added to a table made without them: fencing_token (a JVM Simba
// deployment made the table), wanted_until (a demand on the current owner, simba/backend.h,
// until then by the database clock; cleared when the owner changes), idle_token (the token
// of the lease its owner marked idle, mark_idle; cleared by a new lease) and derived_epoch
// (a count that rises whenever a record derived from the row's name is made: kRegister).
// Simba's statements name their columns: unaffected. MariaDB has IF NOT EXISTS (a concurrent add then only
// warns); MySQL 8.0 has not.
// One query says which are there: bit i set for kOurColumns[i].
constexpr const char* kOurColumns[] = {"fencing_token", "wanted_until", "idle_token", "derived_epoch"};
constexpr const char* kOurColumnsPresent =
    "SELECT COALESCE(SUM(CASE column_name WHEN 'fencing_token' THEN 1 WHEN 'wanted_until' THEN 2 "
    "WHEN 'idle_token' THEN 4 WHEN 'derived_epoch' THEN 8 ELSE 0 END), 0) FROM information_schema.columns "
    "WHERE table_schema = DATABASE() AND table_name = 'simba_mutex'";
std::string add_column(const std::string& column, bool if_missing) {
  return "ALTER TABLE simba_mutex ADD COLUMN " + std::string(if_missing ? "IF NOT EXISTS " : "") + column +
         " bigint unsigned NOT NULL DEFAULT 0";
}
constexpr const char* kMutexCollation =
    "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
    "AND table_name = 'simba_mutex' AND column_name = 'mutex' "
    "AND collation_name NOT IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')";

// The condition of Simba's UPDATE: the lease is free or expired, or ours and live. In
// ON DUPLICATE KEY UPDATE, VALUES(col) is what the INSERT would have written.
#define SIMBA_MY_MAY_TAKE \
  "(transition_at < VALUES(acquired_at) OR (owner_id = VALUES(owner_id) AND transition_at > VALUES(acquired_at)))"

// Acquire-or-renew in one statement: create the row, take or renew it, or leave it; RETURNING
// gives the row after the call whichever happened. Assignments run left to right and see the
// columns already assigned, so the ones the condition reads (owner_id, transition_at) come
// last (with owner_id changed, the condition still holds exactly when it held before).
// A new row's token starts at now x 1000 (see common/sweep.h), and so does its derived_epoch;
// rows JVM Simba inserts start at 0. Without RETURNING (MySQL) the same upsert is followed by
// kRead: the row read then is the owner after the call (or a later one). A batch
// (acquire_batch) is the same statement over many rows: each row is upserted in turn and
// RETURNING gives one row per row given, in order.
constexpr const char* kUpsertInto =
    "INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version, fencing_token, "
    "derived_epoch) VALUES ";

// One row of the upsert's VALUES from its mutex, ttl (ms), transition (ms) and contender id as
// SQL: placeholders (params: mutex, ttl, ttl, transition, contender id) or a batch's literals.
std::string upsert_row(const std::string& mutex, const std::string& ttl, const std::string& transition,
                       const std::string& contender_id) {
  return "(" + mutex + ", " SIMBA_MY_NOW ", " SIMBA_MY_NOW " + " + ttl + ", " SIMBA_MY_NOW " + " + ttl + " + " +
         transition + ", " + contender_id + ", 1, " SIMBA_MY_NOW " * 1000, " SIMBA_MY_NOW " * 1000)";
}

#define SIMBA_MY_ON_DUPLICATE                                                        \
  " ON DUPLICATE KEY UPDATE "                                                        \
  "wanted_until = IF(" SIMBA_MY_MAY_TAKE                                             \
  " AND owner_id <> VALUES(owner_id), 0, wanted_until), "                            \
  "idle_token = IF(" SIMBA_MY_MAY_TAKE                                               \
  " AND NOT (owner_id = VALUES(owner_id) AND transition_at > VALUES(acquired_at)), " \
  "0, idle_token), "                                                                 \
  "fencing_token = IF(" SIMBA_MY_MAY_TAKE                                            \
  ", fencing_token + (owner_id <> VALUES(owner_id)), fencing_token), "               \
  "version = IF(" SIMBA_MY_MAY_TAKE                                                  \
  ", version + 1, version), "                                                        \
  "acquired_at = IF(" SIMBA_MY_MAY_TAKE                                              \
  ", VALUES(acquired_at), acquired_at), "                                            \
  "ttl_at = IF(" SIMBA_MY_MAY_TAKE                                                   \
  ", VALUES(ttl_at), ttl_at), "                                                      \
  "owner_id = IF(" SIMBA_MY_MAY_TAKE                                                 \
  ", VALUES(owner_id), owner_id), "                                                  \
  "transition_at = IF(" SIMBA_MY_MAY_TAKE ", VALUES(transition_at), transition_at)"
#define SIMBA_MY_RETURNING \
  " RETURNING owner_id, acquired_at, ttl_at, transition_at, fencing_token, " SIMBA_MY_NOW ", wanted_until"

const std::string kUpsert = kUpsertInto + upsert_row("?", "?", "?", "?") + SIMBA_MY_ON_DUPLICATE;

// The upsert with RETURNING, then `asked` (SQL, NULL for nothing) as the ninth column
// (LeaseRow::asked) and whether the call made the row as the tenth (LeaseRow::fresh: a new
// row's version is 1, a take of one that was there adds 1 to at least 1).
std::string acquire_asking(const std::string& asked) {
  return kUpsert + SIMBA_MY_RETURNING ", 0, " + asked + ", version = 1";
}
const std::string kAcquire = acquire_asking("NULL");

// Whether the row aliased `t` holds a live lease, by the database clock.
#define SIMBA_MY_HELD(t) "(" t ".owner_id <> '' AND " t ".transition_at >= " SIMBA_MY_NOW ")"

// A derived record's acquire ("<name>#<suffix>": a semaphore's slot, a shared mutex's reader)
// also returns its primitive's row (OwnerSnapshot::parent) as one number, its token x 2 + 1 if
// its lease is held (NULL: no row), read with a share lock held until the record commits: a
// writer's upsert of the primitive in flight is waited for and seen, and one that comes after
// waits for the record's commit, so its look at the readers sees it. Params: kAcquire's, then
// the primitive.
const std::string kAcquireDerived = acquire_asking(
    "(SELECT g.fencing_token * 2 + " SIMBA_MY_HELD("g") " FROM simba_mutex g WHERE g.mutex = ? LOCK IN SHARE MODE)");

// A derived record's row that a take made (LeaseRow::fresh) registers with its primitive's row
// before the take's answer is given: the primitive's derived_epoch rises (kAcquireKnown). The
// epoch follows the database clock (x 1000, as tokens do) so that a primitive's row swept and
// made again never comes back with an epoch it had before. Params: the primitive.
constexpr const char* kRegister =
    "UPDATE simba_mutex SET derived_epoch = GREATEST(derived_epoch, " SIMBA_MY_NOW " * 1000) + 1 WHERE mutex = ?";

// A gate's acquire (a name whose derived records this backend listed: MysqlBackend::gates_)
// also returns, if the caller owns the row after it, whether no record derived from it
// ("<name>#<suffix>", not "<name>#<suffix>#...") is held: 1 none, 0 some (NULL: not owned).
// The range is read with share locks, after the take locked the gate's row: a reader's record
// in flight (it locks its own row, then the gate's, kAcquireDerived) is waited for and seen,
// and one that comes after waits for the take's commit and finds the gate held. The two can
// meet the other way round (each holding the row the other wants): InnoDB ends one as a
// deadlock, and it is sent again. InnoDB also share-locks the first row after the range for
// the statement (another name's, in byte order): a take of that row in flight is waited for.
// Params: kAcquire's, then the contender id and the gate three times.
const std::string kAcquireGate = acquire_asking(
    "IF(owner_id = ?, (SELECT NOT EXISTS (SELECT 1 FROM simba_mutex d "
    "WHERE d.mutex >= CONCAT(?, '#') AND d.mutex < CONCAT(?, '$') "
    "AND LOCATE('#', SUBSTRING(d.mutex, CHAR_LENGTH(?) + 2)) = 0 "
    "AND " SIMBA_MY_HELD("d") " LOCK IN SHARE MODE)), NULL)");

// The same answer from what a listing left (KnownRecords): the names of the gate's derived
// records then, and its derived_epoch read just before. While the epoch is the same, no
// record was made since: each one there now is one of those names (a name whose row was swept
// since is read by name all the same), so an equality read of each says whether one is held,
// with share locks as kAcquireGate's range. A record made after the listing raised the epoch
// before its take answered: if that was before this take, the answer is NULL (unknown: the
// writer looks again); if after, this take holds the gate's row and the record's take, whose
// answer says nothing of the gate (fresh), is followed by a read of the gate that finds it held.
// The range read costs about 90 us of server time per take, one equality read about 30.
// Params: kAcquire's, then the contender id, the epoch and each name.
constexpr std::size_t kMostKnown = 2;
std::string acquire_known(std::size_t names) {
  std::string held = "0";
  for (std::size_t i = 0; i < names; ++i) {
    held += " OR COALESCE((SELECT " SIMBA_MY_HELD("d") " FROM simba_mutex d WHERE d.mutex = ? LOCK IN SHARE MODE), 0)";
  }
  return acquire_asking("IF(owner_id = ? AND derived_epoch = ?, NOT (" + held + "), NULL)");
}
std::string acquire_known_name(std::size_t names) { return "acquire_known" + std::to_string(names); }

// Epochs below this one are no clock's (a row JVM Simba made, or one from before the column
// was added): a listing that finds one leaves nothing known, since a row swept and made again
// by JVM Simba would have it again.
constexpr std::uint64_t kLeastEpoch = 1000000000000000;

// Whether the row's lease is marked idle (mark_idle), as a column.
#define SIMBA_MY_IDLE "(m.idle_token <> 0 AND m.idle_token = m.fencing_token)"

// The row (or none), the database clock, the row's wanted_until and idle mark. Params: mutex.
constexpr const char* kRead =
    "SELECT m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, n.now, "
    "m.wanted_until, " SIMBA_MY_IDLE " FROM (SELECT " SIMBA_MY_NOW " AS now) n LEFT JOIN simba_mutex m ON m.mutex = ?";

// Simba's release, except that the row keeps when it became free (transition_at = now - 1)
// for the sweep. Params: mutex, contender id.
constexpr const char* kRelease = "UPDATE simba_mutex SET acquired_at = 0, ttl_at = 0, transition_at = " SIMBA_MY_NOW
                                 " - 1, owner_id = '', "
                                 "version = version + 1 WHERE mutex = ? AND owner_id = ?";

// A contender that did not get the mutex from its owner wants it for a lease (ms) from now.
// Params: lease ms, mutex, owner id.
constexpr const char* kWant = "UPDATE simba_mutex SET wanted_until = GREATEST(wanted_until, " SIMBA_MY_NOW
                              " + ?) "
                              "WHERE mutex = ? AND owner_id = ?";

// The owner marks its live lease idle (first param 1) or in use. Params: idle, mutex, owner id.
constexpr const char* kMarkIdle =
    "UPDATE simba_mutex SET idle_token = IF(? <> 0, fencing_token, 0) "
    "WHERE mutex = ? AND owner_id = ? AND transition_at >= " SIMBA_MY_NOW;

// Names starting with the parameter, in order (the exact collation is byte order), at most
// the limit. Params: prefix, prefix, limit.
constexpr const char* kList =
    "SELECT m.owner_id, m.acquired_at, m.ttl_at, m.transition_at, m.fencing_token, n.now, m.mutex, " SIMBA_MY_IDLE
    " FROM (SELECT " SIMBA_MY_NOW
    " AS now) n JOIN simba_mutex m ON LEFT(m.mutex, CHAR_LENGTH(?)) = ? "
    "ORDER BY m.mutex LIMIT ?";

// Rows free for the idle time (ms) whose token is below now x 1000, at most the limit. Only
// rows simba made (token from the clock, >= 10^15): rows JVM Simba inserted (token 0 and up)
// stay, since older JVM Simba versions insert their row only once, at start. The table has no
// index on these columns: the statement runs READ COMMITTED, so InnoDB keeps locks only on the
// rows it deletes, not on every row it scanned. Params: idle ms, limit.
constexpr const char* kSweep =
    "DELETE FROM simba_mutex WHERE transition_at < " SIMBA_MY_NOW
    " - ? "
    "AND fencing_token < " SIMBA_MY_NOW " * 1000 AND fencing_token >= 1000000000000000 LIMIT ?";

// A row as the skeleton wants it (a demand: wanted until now or later).
internal::SqlLeaseRow sql_row(mysql::LeaseRow row) {
  internal::SqlLeaseRow out;
  out.demanded = row.wanted_until >= row.now;
  out.idle = row.idle;
  out.owner = std::move(row.owner);
  out.now = row.now;
  out.mutex = std::move(row.mutex);
  return out;
}

// What a listing of a gate's derived records left for its takes (kAcquireKnown): their names
// and the gate's derived_epoch read before it; epoch 0: nothing known (more than kMostKnown
// records, a truncated listing, or an epoch no clock made), ask with a range read.
struct KnownRecords {
  std::vector<std::string> names;
  std::uint64_t epoch = 0;
};

// The primitive a derived record ("<name>#<suffix>") belongs to (a name with a '#').
std::string primitive_of(const std::string& record) { return record.substr(0, record.rfind('#')); }

// `run()` again after a deadlock or a lock wait timeout (contenders creating the same new rows
// at once), at most five times, after 1, 2, 4, 8, 16 ms.
template <class Run>
std::invoke_result_t<Run&> retrying_deadlocks(Connection& connection, Run&& run) {
  for (int attempt = 0;; ++attempt) {
    try {
      return run();
    } catch (const Error& e) {
      if (attempt >= 5 || e.code() != errc::unavailable || connection.broken()) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(1 << attempt));
    }
  }
}

// No Push (waiters poll cheaply), but watch() reports the server's loss: owners hear it at once.
class MysqlBackend final : public internal::SqlBackend<Connection, Batches> {
 public:
  MysqlBackend(const MysqlOptions& options, std::string where)
      : SqlBackend("mysql", std::move(where), options.pool_size, options.sweep_idle, options.poll_interval),
        options_(options),
        monitor_(mysql::make_monitor(options, this->where())),
        wake_(options.wake_locks ? std::make_unique<mysql::WakeLocks>(options, this->where()) : nullptr) {
    auto connection = std::make_unique<Connection>(options_, this->where(), options_.command_timeout);
    const std::string server = connection->server_info();
    const bool mariadb = server.find("MariaDB") != std::string::npos;
    const unsigned long version = connection->server_version();
    if (mariadb ? version < 100200 : version < 80000) {
      throw Error(errc::unsupported,
                  this->where() + ": the server is '" + server +
                      "'; this backend needs MariaDB 10.2+ or MySQL 8.0+ (exact, no-pad collations)");
    }
    returning_ = options_.returning && mariadb && version >= 100500;  // INSERT ... RETURNING
    connection->run(schema(mariadb ? "utf8mb4_nopad_bin" : "utf8mb4_0900_bin"));
    // Processes starting at once on a table Simba made may each find the column missing; every
    // add but the first then finds it there, which is success.
    const std::int64_t present = connection->scalar(kOurColumnsPresent);
    for (std::size_t i = 0; i < std::size(kOurColumns); ++i) {
      if ((present & (std::int64_t{1} << i)) == 0) {
        connection->run_tolerating(add_column(kOurColumns[i], mariadb), ER_DUP_FIELDNAME);
      }
    }
    if (connection->scalar(kMutexCollation) != 0) {
      internal::log_warn_once_per_host(
          "mysql-collation " + options_.host + ":" + std::to_string(options_.port) + "/" + options_.database,
          this->where() +
              ": table simba_mutex (made elsewhere) compares mutex names without case and trailing spaces; "
              "names that differ only so share one lease (said once on this host; again with SIMBA_LOG=info)");
    }
    prepare(*connection);
    pool().seed(std::move(connection));
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    return take(mutex, contender_id, ttl, transition, true);
  }

  // The derived records of `name` as Administration lists them; from now on a take of `name`
  // answers whether one is held: by their names while none was made since (kAcquireKnown), else
  // by a range read (kAcquireGate).
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    if (!returning_ || name.find('#') != std::string::npos) return SqlBackend::list_derived(name, limit);
    const auto epoch = static_cast<std::uint64_t>(pool().with([&](Connection& connection) {
      return connection.scalar(
          "SELECT COALESCE((SELECT derived_epoch FROM simba_mutex WHERE mutex = " + connection.quoted(name) + "), 0)");
    }));  // before the listing: a record made after this read raised it
    auto listing = SqlBackend::list_derived(name, limit);
    KnownRecords known;
    if (epoch >= kLeastEpoch && !listing.truncated && listing.records.size() <= kMostKnown) {
      known.epoch = epoch;
      for (const auto& record : listing.records) known.names.push_back(record.mutex);
    }
    internal::MutexLock lock(gates_mutex_);
    if (gates_.size() < kMaxGates || gates_.count(name) > 0) gates_[name] = std::move(known);
    return listing;
  }

  // With RETURNING (MariaDB 10.5+): the calls of contenders that do not wait go in one upsert
  // over all their rows, in name order (two batches lock rows in one order: no deadlock between
  // them); each gets the row after its own turn, so two calls on one name are judged as two
  // acquire() calls one after the other. A waiter's call goes alone, as acquire() (a read), and
  // so does a lone call (a renewal's without the relatives' reads).
  // A statement that fails but not for the whole connection (a name too long for the column)
  // sends its calls alone too, so each gets its own answer.
  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    std::vector<AcquireResult> results(calls.size());
    std::vector<std::size_t> together, alone;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      (is_waiting(calls[i].mutex, calls[i].contender_id) ? alone : together).push_back(i);
    }
    std::stable_sort(together.begin(), together.end(),
                     [&](std::size_t a, std::size_t b) { return calls[a].mutex < calls[b].mutex; });
    if (together.size() > 1 && !upsert_together(calls, together, results)) {
      alone.insert(alone.end(), together.begin(), together.end());
    } else if (together.size() == 1) {
      alone.push_back(together.front());
    }
    internal::acquire_alone(calls, alone, results, [&](const AcquireCall& call) {
      return take(call.mutex, call.contender_id, call.ttl, call.transition, !call.renewal);
    });
    return results;
  }

  // Without RETURNING (MySQL) a batch could not tell each call its row: no batches there.
  Batches* batches() noexcept override { return returning_ ? this : nullptr; }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    set_waiting(mutex, contender_id, false);
    // The wake lock goes after the row, whatever the release did: a waiter woken too early
    // only looks once more.
    struct LetWakeLockGo {
      ~LetWakeLockGo() {
        if (wake) wake->owns(mutex, contender_id, false);
      }
      mysql::WakeLocks* wake;
      const std::string& mutex;
      const std::string& contender_id;
    } let_go{wake_.get(), mutex, contender_id};
    return SqlBackend::release(mutex, contender_id);
  }

  // The monitor: its loss (the server went) reaches every owner of a Client through one watch
  // (Capabilities::watch_when_waiting).
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override {
    return monitor_->watch({}, std::move(on_change));
  }

  // The server's loss (the monitor), and releases in any process (the wake locks).
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string&,
                                      std::function<void(WatchEvent)> on_change) override {
    auto lost = monitor_->watch({}, on_change);
    if (!wake_) return lost;
    struct Both final : Subscription {
      void wait_ready() override {
        released->wait_ready();
        lost->wait_ready();
      }
      std::unique_ptr<Subscription> released, lost;
    };
    auto both = std::make_unique<Both>();
    both->released = wake_->watch(mutex, std::move(on_change));
    both->lost = std::move(lost);
    return both;
  }

 private:
  std::unique_ptr<Connection> open() override {
    auto connection = std::make_unique<Connection>(options_, where(), options_.command_timeout);
    prepare(*connection);
    return connection;
  }

  internal::SqlLeaseRow read_row(Connection& connection, const std::string& mutex) override {
    auto row = connection.query_lease("read", {mutex});
    if (!row) throw Error(errc::internal, where() + ": read returned no row");
    return sql_row(std::move(*row));
  }

  bool release_row(Connection& connection, const std::string& mutex, const std::string& contender_id) override {
    return connection.execute("release", {mutex, contender_id}) == 1;
  }

  std::vector<internal::SqlLeaseRow> list_rows(Connection& connection, const std::string& prefix,
                                               std::size_t asked) override {
    std::vector<internal::SqlLeaseRow> rows;
    for (auto& row : connection.query_leases("list", {prefix, prefix, static_cast<std::int64_t>(asked)}, true)) {
      rows.push_back(sql_row(std::move(row)));
    }
    return rows;
  }

  std::size_t sweep_rows(Connection& connection, std::chrono::milliseconds idle_for, std::size_t batch) override {
    connection.run("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");  // the next statement only
    return static_cast<std::size_t>(
        connection.execute("sweep", {std::int64_t{idle_for.count()}, static_cast<std::int64_t>(batch)}));
  }

  bool mark_idle_row(Connection& connection, const std::string& mutex, const std::string& owner_id,
                     bool idle) override {
    return connection.execute("mark_idle", {std::int64_t{idle ? 1 : 0}, mutex, owner_id}) == 1;
  }

  void make_raw_row(Connection& connection, const std::string& name) override { connection.execute("raw_row", {name}); }

  void raw_update(Connection& connection, const std::string& name) override {
    if (connection.execute("raw_update", {name}) != 1) {
      throw Error(errc::internal, where() + ": the raw UPDATE changed no row");
    }
  }

  void prepare(Connection& connection) const {
    connection.prepare(returning_ ? "acquire" : "upsert", returning_ ? kAcquire : kUpsert);
    if (returning_) {
      connection.prepare("acquire_derived", kAcquireDerived);
      connection.prepare("acquire_gate", kAcquireGate);
      for (std::size_t names = 0; names <= kMostKnown; ++names) {
        connection.prepare(acquire_known_name(names), acquire_known(names));
      }
      connection.prepare("register", kRegister);
    }
    connection.prepare("read", kRead);
    connection.prepare("release", kRelease);
    connection.prepare("list", kList);
    connection.prepare("sweep", kSweep);
    connection.prepare("want", kWant);
    connection.prepare("mark_idle", kMarkIdle);
    // simba-bench's baseline (RawProbe): a bare one-row UPDATE of a private row.
    connection.prepare("raw_update", "UPDATE simba_mutex SET version = version + 1 WHERE mutex = ?");
    connection.prepare("raw_row", "INSERT IGNORE INTO simba_mutex (mutex) VALUES (?)");
  }

  // The calls `together` (indexes into `calls`, in name order) in one upsert; each result set.
  // Returns false, setting none, if the statement failed but not for the connection.
  bool upsert_together(const std::vector<AcquireCall>& calls, const std::vector<std::size_t>& together,
                       std::vector<AcquireResult>& results) {
    return pool().with([&](Connection& connection) {
      std::string sql = kUpsertInto;
      for (std::size_t k = 0; k < together.size(); ++k) {
        const AcquireCall& call = calls[together[k]];
        if (k > 0) sql += ", ";
        sql += upsert_row(connection.quoted(call.mutex), std::to_string(call.ttl.count()),
                          std::to_string(call.transition.count()), connection.quoted(call.contender_id));
      }
      sql += SIMBA_MY_ON_DUPLICATE SIMBA_MY_RETURNING ", mutex, version = 1";
      std::vector<mysql::LeaseRow> rows;
      try {
        rows = retrying_deadlocks(connection, [&] { return connection.query_text_leases(sql); });
      } catch (const Error&) {
        if (connection.broken()) throw;
        return false;
      }
      if (rows.size() != together.size()) {
        throw Error(errc::internal, where() + ": a batch of " + std::to_string(together.size()) + " calls returned " +
                                        std::to_string(rows.size()) + " rows");
      }
      for (std::size_t k = 0; k < together.size(); ++k) {
        const AcquireCall& call = calls[together[k]];
        if (rows[k].mutex != call.mutex) {
          throw Error(errc::internal, where() + ": a batch's row " + std::to_string(k) + " is '" + rows[k].mutex +
                                          "', not '" + call.mutex + "'");
        }
        try {
          results[together[k]].snapshot =
              settle(connection, call.mutex, call.contender_id, call.ttl.count() + call.transition.count(), rows[k]);
          registered(connection, call.mutex, call.contender_id, rows[k]);  // a batch's answer says nothing of it
        } catch (...) {
          if (connection.broken()) throw;
          results[together[k]].error = std::current_exception();
        }
      }
      return true;
    });
  }

  // What a take also asks, with RETURNING: of a derived record, its primitive's row; of a gate
  // (a name listed by list_derived), whether a record derived from it is held.
  struct Asks {
    enum What { nothing, primitive, derived } what = nothing;
    KnownRecords known;  // derived: what the gate's last listing left
  };
  Asks asks_about(const std::string& mutex) {
    if (!returning_) return {};
    if (mutex.find('#') != std::string::npos) return {Asks::primitive, {}};
    internal::MutexLock lock(gates_mutex_);
    const auto gate = gates_.find(mutex);
    if (gate == gates_.end()) return {};
    return {Asks::derived, gate->second};
  }

  // After a take that left `contender_id` the owner of `mutex`: a derived record's row the take
  // made (or one whose registration failed before) registers with its primitive (kRegister)
  // before the take answers. Returns false if it did: what the take read of the primitive was
  // read before the registration, and the caller must read it again after.
  bool registered(Connection& connection, const std::string& mutex, const std::string& contender_id,
                  const mysql::LeaseRow& row) {
    if (!returning_ || mutex.find('#') == std::string::npos || row.owner.owner_id != contender_id) return true;
    {
      internal::MutexLock lock(unregistered_mutex_);
      if (!row.fresh && unregistered_.count(mutex) == 0) return true;
      unregistered_.insert(mutex);  // until the registration is done: a failure leaves it here
    }
    connection.execute("register", {primitive_of(mutex)});
    internal::MutexLock lock(unregistered_mutex_);
    unregistered_.erase(mutex);
    return false;
  }

  // acquire(); `relatives`: also say what an owner hears of its relatives (OwnerSnapshot), not
  // for a renewal (only a grant's answer is heard).
  OwnerSnapshot take(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                     std::chrono::milliseconds transition, bool relatives) {
    const std::int64_t lease = ttl.count() + transition.count();
    return pool().with([&](Connection& connection) {
      // A waiter polls with a read: no write, no row lock, while someone else holds it.
      if (is_waiting(mutex, contender_id)) {
        if (auto row = connection.query_lease("read", {mutex})) {
          auto seen = internal::snapshot_of_row(row->owner, row->now);
          if (!seen.owner.empty() && seen.owner.owner_id != contender_id) {
            want(connection, mutex, lease, *row, seen);
            return seen;
          }
        }
      }
      // Creating the same new row from many contenders at once can deadlock in InnoDB: retry.
      return retrying_deadlocks(connection, [&] {
        std::vector<mysql::Param> params = {mutex, ttl.count(), ttl.count(), transition.count(), contender_id};
        std::optional<mysql::LeaseRow> row;
        const auto asks = relatives ? asks_about(mutex) : Asks{};
        if (asks.what == Asks::primitive) {
          params.emplace_back(primitive_of(mutex));
          row = connection.query_lease("acquire_derived", params);
        } else if (asks.what == Asks::derived && asks.known.epoch != 0) {
          params.emplace_back(contender_id);
          params.emplace_back(static_cast<std::int64_t>(asks.known.epoch));
          for (const auto& name : asks.known.names) params.emplace_back(name);
          row = connection.query_lease(acquire_known_name(asks.known.names.size()), params);
        } else if (asks.what == Asks::derived) {
          params.emplace_back(contender_id);
          for (int i = 0; i < 3; ++i) params.emplace_back(mutex);
          row = connection.query_lease("acquire_gate", params);
        } else if (returning_) {
          row = connection.query_lease("acquire", params);
        } else {
          connection.execute("upsert", params);
          row = connection.query_lease("read", {mutex});
        }
        if (!row) throw Error(errc::internal, where() + ": acquire returned no row");
        auto snapshot = settle(connection, mutex, contender_id, lease, *row);
        const bool answer_stands = registered(connection, mutex, contender_id, *row);
        if (row->asked && snapshot.owner.owner_id == contender_id) {
          if (asks.what == Asks::primitive && *row->asked >= 0 && answer_stands) {
            snapshot.parent =
                OwnerSnapshot::Parent{(*row->asked & 1) != 0, static_cast<std::uint64_t>(*row->asked) >> 1};
          } else if (asks.what == Asks::derived) {
            snapshot.no_derived_held = *row->asked != 0;
          }
        }
        return snapshot;
      });
    });
  }

  // What a contender's upsert left (`row`, the row after it) means for it: its snapshot; whether
  // it waits now; its process's wake lock; a demand on the owner if it did not get the mutex.
  OwnerSnapshot settle(Connection& connection, const std::string& mutex, const std::string& contender_id,
                       std::int64_t lease, const mysql::LeaseRow& row) {
    auto result = internal::snapshot_of_row(row.owner, row.now);
    const bool lost = !result.owner.empty() && result.owner.owner_id != contender_id;
    set_waiting(mutex, contender_id, result.owner.owner_id != contender_id);
    if (wake_) {
      wake_->owns(mutex, contender_id, result.owner.owner_id == contender_id);
      if (lost) wake_->met_owner(mutex);
    }
    if (lost) want(connection, mutex, lease, row, result);
    result.demanded = !lost && !result.owner.empty() && row.wanted_until >= row.now;
    return result;
  }

  // A contender that did not get `mutex` from the owner `seen` leaves a demand for `lease` ms
  // (a write at most once per half lease).
  static void want(Connection& connection, const std::string& mutex, std::int64_t lease, const mysql::LeaseRow& row,
                   const OwnerSnapshot& seen) {
    if (row.wanted_until < row.now + lease / 2) connection.execute("want", {lease, mutex, seen.owner.owner_id});
  }

  static std::string waiter(const std::string& mutex, const std::string& contender_id) {
    return mutex + '\0' + contender_id;
  }
  bool is_waiting(const std::string& mutex, const std::string& contender_id) {
    const std::string key = waiter(mutex, contender_id);
    internal::MutexLock lock(waiting_mutex_);
    return waiting_.count(key) > 0;
  }
  void set_waiting(const std::string& mutex, const std::string& contender_id, bool waiting) {
    std::string key = waiter(mutex, contender_id);
    internal::MutexLock lock(waiting_mutex_);
    if (waiting) {
      waiting_.insert(std::move(key));
    } else {
      waiting_.erase(key);
    }
  }

  const MysqlOptions options_;
  bool returning_ = true;  // set once, before the pool opens a connection
  std::unique_ptr<internal::PushChannel> monitor_;
  std::unique_ptr<mysql::WakeLocks> wake_;  // null with wake_locks off
  // Names whose derived records were listed here (a shared mutex's gate, a semaphore): their
  // takes ask whether one is held. At most kMaxGates; a name beyond only goes unanswered.
  static constexpr std::size_t kMaxGates = 4096;
  internal::AnnotatedMutex gates_mutex_;
  std::unordered_map<std::string, KnownRecords> gates_ GUARDED_BY(gates_mutex_);
  // Derived records whose rows a take of this backend made and whose registration has not
  // been done (it failed): a later take of one registers it then.
  internal::AnnotatedMutex unregistered_mutex_;
  std::unordered_set<std::string> unregistered_ GUARDED_BY(unregistered_mutex_);
  internal::AnnotatedMutex waiting_mutex_;
  std::unordered_set<std::string> waiting_
      GUARDED_BY(waiting_mutex_);  // contenders of this process that last saw another owner
};

}  // namespace

std::shared_ptr<Backend> make_mysql_backend(const MysqlOptions& options) {
  auto where = internal::check_server_options("mysql", "MySQL", options);
  if (options.poll_interval.count() <= 0) throw Error(errc::invalid_argument, "MySQL poll interval must be > 0");
  return std::make_shared<MysqlBackend>(options, std::move(where));
}

}  // namespace simba
