// The SQLite backend: one row per mutex in `simba_mutex`, shared by the processes of a host.
#include "simba/sqlite_backend.h"
#include "base/thread_annotations.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "backends/common/lease_row.h"
#include "backends/common/sweep.h"
#include "backends/sqlite/wake_board.h"
#include "simba/error.h"

namespace simba {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS simba_mutex (
  mutex         TEXT    NOT NULL PRIMARY KEY,
  acquired_at   INTEGER NOT NULL DEFAULT 0,
  ttl_at        INTEGER NOT NULL DEFAULT 0,
  transition_at INTEGER NOT NULL DEFAULT 0,
  owner_id      TEXT    NOT NULL DEFAULT '',
  version       INTEGER NOT NULL DEFAULT 0,
  fencing_token INTEGER NOT NULL DEFAULT 0,
  wanted_until  INTEGER NOT NULL DEFAULT 0,
  idle_token    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID)sql";

// wanted_until (a demand: another contender asked until then, simba/backend.h) and idle_token
// (the token of the lease its owner marked idle, mark_idle) came later: added to an older
// table. Two processes may race to add one; the loser sees it there.
constexpr const char* kHasColumn = "SELECT count(*) FROM pragma_table_info('simba_mutex') WHERE name = ?1";
constexpr const char* kAddWanted = "ALTER TABLE simba_mutex ADD COLUMN wanted_until INTEGER NOT NULL DEFAULT 0";
constexpr const char* kAddIdle = "ALTER TABLE simba_mutex ADD COLUMN idle_token INTEGER NOT NULL DEFAULT 0";

// Acquire-or-renew in one statement: take a free or expired row, renew our own live one; the
// fencing token rises only when the owner id changes, a demand goes with the old owner and an
// idle mark with the old lease (only a renewal keeps it). A released row (owner_id '') is free
// whatever its transition_at: the clock is read before the statement, and a release that lands
// in between leaves a time (its now - 1) that may not be before ours. All SET expressions see
// the old row. A new row's token starts at ?6 = now x 1000 (common/sweep.h).
// The statement also says, as the write lock lets it see the table (OwnerSnapshot), whether any
// record derived from ?1 ("?1#<suffix>") is held (if ?8, not for a renewal) and, for a derived
// record, the state of its primitive ?7 (NULL for a primitive and for a renewal; a primitive
// without a row reads as free, token 0).
constexpr const char* kAcquire = R"sql(
INSERT INTO simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version, fencing_token)
VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)
ON CONFLICT (mutex) DO UPDATE SET
  fencing_token = fencing_token + (owner_id <> excluded.owner_id),
  wanted_until = CASE WHEN owner_id <> excluded.owner_id THEN 0 ELSE wanted_until END,
  idle_token = CASE WHEN owner_id = excluded.owner_id AND transition_at > excluded.acquired_at THEN idle_token ELSE 0 END,
  acquired_at = excluded.acquired_at,
  ttl_at = excluded.ttl_at,
  transition_at = excluded.transition_at,
  owner_id = excluded.owner_id,
  version = version + 1
WHERE owner_id = ''
   OR transition_at < excluded.acquired_at
   OR (owner_id = excluded.owner_id AND transition_at > excluded.acquired_at)
RETURNING owner_id, acquired_at, ttl_at, transition_at, fencing_token, wanted_until,
  ?8 AND NOT EXISTS (SELECT 1 FROM simba_mutex d
              WHERE d.mutex >= ?1 || '#' AND d.mutex < ?1 || '$' AND instr(substr(d.mutex, length(?1) + 2), '#') = 0
                AND d.owner_id <> '' AND d.transition_at >= ?2),
  (SELECT p.owner_id <> '' AND p.transition_at >= ?2 FROM simba_mutex p WHERE p.mutex = ?7),
  (SELECT p.fencing_token FROM simba_mutex p WHERE p.mutex = ?7))sql";

#define SIMBA_SQLITE_IDLE "idle_token <> 0 AND idle_token = fencing_token"

constexpr const char* kSelect =
    "SELECT owner_id, acquired_at, ttl_at, transition_at, fencing_token, wanted_until, " SIMBA_SQLITE_IDLE
    " FROM simba_mutex WHERE mutex = ?1";

// The owner ?2 marks its live lease (at ?4) idle (?3 = 1) or in use.
constexpr const char* kMarkIdle =
    "UPDATE simba_mutex SET idle_token = CASE WHEN ?3 THEN fencing_token ELSE 0 END "
    "WHERE mutex = ?1 AND owner_id = ?2 AND transition_at >= ?4";

// A contender that did not get the mutex from owner ?2 wants it until ?3.
constexpr const char* kWant =
    "UPDATE simba_mutex SET wanted_until = max(wanted_until, ?3) WHERE mutex = ?1 AND owner_id = ?2";

// Release if ours; transition_at = ?3 (now - 1) keeps when the row became free, for sweep().
constexpr const char* kRelease =
    "UPDATE simba_mutex SET owner_id = '', acquired_at = 0, ttl_at = 0, transition_at = ?3, "
    "version = version + 1 WHERE mutex = ?1 AND owner_id = ?2";

// Names starting with ?1, in order, at most ?2.
constexpr const char* kList =
    "SELECT owner_id, acquired_at, ttl_at, transition_at, fencing_token, mutex, " SIMBA_SQLITE_IDLE
    " FROM simba_mutex WHERE substr(mutex, 1, length(?1)) = ?1 ORDER BY mutex LIMIT ?2";

// Rows free since before ?1 whose token is below ?2 (now x 1000), at most ?3 of them.
constexpr const char* kSweep =
    "DELETE FROM simba_mutex WHERE mutex IN (SELECT mutex FROM simba_mutex "
    "WHERE transition_at < ?1 AND fencing_token < ?2 LIMIT ?3)";

class Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a statement when a call is done with it, whatever happened.
class Use {
 public:
  explicit Use(const Statement& statement) : stmt_(statement.get()) {}
  ~Use() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  sqlite3_stmt* operator*() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_;
};

class SqliteBackend final
    : public BackendOffering<DemandSignal, DemandPush, IdleMarks, Administration, RawProbe, Batches> {
 public:
  explicit SqliteBackend(const SqliteOptions& options) : options_(options), sweeps_(options.sweep_idle) {
    int rc = sqlite3_open_v2(options.path.c_str(), &connection_.db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    db_ = connection_.db;
    if (rc != SQLITE_OK) {
      std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      throw Error(errc::unavailable, "cannot open SQLite database '" + options.path + "': " + message);
    }
    {
      internal::MutexLock lock(mutex_);  // nothing else can use it yet: for the analysis
      sqlite3_extended_result_codes(db_, 1);
      sqlite3_busy_timeout(db_, static_cast<int>(options.busy_timeout.count()));
      // Switching a new file to WAL can answer SQLITE_BUSY at once, without the busy handler,
      // while other processes open it too: retry those steps until busy_timeout.
      retry_while_busy([&]() REQUIRES(mutex_) { exec("PRAGMA journal_mode=WAL", "enabling WAL"); });
      exec("PRAGMA synchronous=NORMAL", "setting synchronous");
      retry_while_busy([&]() REQUIRES(mutex_) { exec(kSchema, "creating table simba_mutex"); });
      retry_while_busy([&]() REQUIRES(mutex_) { add_column("wanted_until", kAddWanted); });
      retry_while_busy([&]() REQUIRES(mutex_) { add_column("idle_token", kAddIdle); });
      prepare(acquire_, kAcquire);
      prepare(select_, kSelect);
      prepare(release_, kRelease);
      prepare(list_, kList);
      prepare(sweep_, kSweep);
      prepare(want_, kWant);
      prepare(mark_, kMarkIdle);
    }
    wake_ = internal::WakeBoard::open(options.path);  // after the database file exists
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    internal::MutexLock lock(mutex_);
    return acquire_locked(mutex, contender_id, ttl, transition);
  }

  // Every call in one write transaction: one commit (one WAL append) for the batch instead of
  // one per call. A call's own failure is its answer; a busy database or a failed commit fails
  // the batch. Demands noted meanwhile ring the wake board once committed.
  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    std::vector<AcquireResult> results(calls.size());
    std::vector<std::string> rings;
    {
      internal::MutexLock lock(mutex_);
      exec("BEGIN IMMEDIATE", "beginning a batch");
      batching_ = true;
      try {
        for (std::size_t i = 0; i < calls.size(); ++i) {
          try {
            results[i].snapshot = acquire_locked(calls[i].mutex, calls[i].contender_id, calls[i].ttl,
                                                 calls[i].transition, !calls[i].renewal);
          } catch (const Error& e) {
            if (e.code() == errc::unavailable) throw;  // busy, I/O: the transaction is in doubt
            results[i].error = std::current_exception();
          }
        }
        exec("COMMIT", "committing a batch");
      } catch (...) {
        batching_ = false;
        pending_rings_.clear();
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
      batching_ = false;
      rings.swap(pending_rings_);
    }
    if (wake_) {
      for (const auto& key : rings) wake_->ring(key);
    }
    return results;
  }

 private:
  // `relatives`: also say what an owner hears of its relatives (not for a renewal: only a
  // grant's answer is heard).
  OwnerSnapshot acquire_locked(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                               std::chrono::milliseconds transition, bool relatives = true) REQUIRES(mutex_) {
    // A cheap read first: a waiter that cannot win takes no write lock, except to leave a
    // demand (at most once per half lease).
    EpochMillis now = epoch_millis_now();
    if (auto current = select(mutex)) {
      // Owned by another, live by our clock (a released row is free: see kAcquire).
      const bool taken = !current->owner.owner_id.empty() && current->owner.owner_id != contender_id;
      if (taken && current->owner.transition_at >= now) {
        const EpochMillis lease = ttl.count() + transition.count();
        if (current->wanted_until < now + lease / 2) want(mutex, current->owner.owner_id, now + lease);
        return {current->owner, now};
      }
    }
    // One autocommit statement: atomic on its own. It returns the row only if it took or
    // renewed the lease; otherwise someone else holds it and a read tells who.
    now = epoch_millis_now();
    {
      Use use(acquire_);
      bind_text(*use, 1, mutex);
      sqlite3_bind_int64(*use, 2, now);
      sqlite3_bind_int64(*use, 3, now + ttl.count());
      sqlite3_bind_int64(*use, 4, now + ttl.count() + transition.count());
      bind_text(*use, 5, contender_id);
      sqlite3_bind_int64(*use, 6, now * internal::kTokensPerMilli);
      const auto hash = relatives ? mutex.rfind('#') : std::string::npos;
      if (hash != std::string::npos) {
        check(sqlite3_bind_text(*use, 7, mutex.data(), static_cast<int>(hash), SQLITE_TRANSIENT), SQLITE_OK,
              "binding a parameter");
      }
      sqlite3_bind_int(*use, 8, relatives ? 1 : 0);
      int rc = sqlite3_step(*use);
      if (rc == SQLITE_ROW) {
        OwnerSnapshot snapshot{row_owner(*use), now, sqlite3_column_int64(*use, 5) >= now};
        snapshot.no_derived_held = sqlite3_column_int64(*use, 6) != 0;
        if (hash != std::string::npos) {
          snapshot.parent = OwnerSnapshot::Parent{sqlite3_column_int64(*use, 7) != 0,
                                                  static_cast<std::uint64_t>(sqlite3_column_int64(*use, 8))};
        }
        check(sqlite3_step(*use), SQLITE_DONE, "acquire");
        return snapshot;
      }
      check(rc, SQLITE_DONE, "acquire");
    }
    auto current = select(mutex);
    if (!current) return {MutexOwner::none(), now};
    if (current->owner.owner_id != contender_id) {
      want(mutex, current->owner.owner_id, now + ttl.count() + transition.count());
    }
    return {current->owner, now};
  }

 public:
  bool release(const std::string& mutex, const std::string& contender_id) override {
    internal::MutexLock lock(mutex_);
    bool released;
    {
      Use use(release_);
      bind_text(*use, 1, mutex);
      bind_text(*use, 2, contender_id);
      sqlite3_bind_int64(*use, 3, epoch_millis_now() - 1);
      check(sqlite3_step(*use), SQLITE_DONE, "release");
      released = sqlite3_changes(db_) > 0;
    }
    if (released && wake_) wake_->ring(mutex);  // committed: waiters on this host look now
    // maybe() runs the sweep on this thread, which holds mutex_ (the analysis cannot follow a
    // capability through a template's call).
    sweeps_.maybe(describe(), [&](std::chrono::milliseconds idle)
                                  NO_THREAD_SAFETY_ANALYSIS { sweep_locked(idle, internal::kSweepBatch); });
    return released;
  }

  // Another process's lease ends the way its own release would end it.
  bool evict(const std::string& mutex, const std::string& owner_id) override { return release(mutex, owner_id); }

  MutexListing list(const std::string& prefix, std::size_t limit) override {
    internal::MutexLock lock(mutex_);
    MutexListing out;
    out.now = epoch_millis_now();
    Use use(list_);
    bind_text(*use, 1, prefix);
    sqlite3_bind_int64(*use, 2, static_cast<sqlite3_int64>(std::min<std::size_t>(limit, INT64_MAX - 1) + 1));
    int rc;
    while ((rc = sqlite3_step(*use)) == SQLITE_ROW) {
      if (out.records.size() == limit) {
        out.truncated = true;
        break;
      }
      auto text = reinterpret_cast<const char*>(sqlite3_column_text(*use, 5));
      std::string name(text ? text : "", static_cast<std::size_t>(sqlite3_column_bytes(*use, 5)));
      auto owner = internal::snapshot_of_row(row_owner(*use), out.now).owner;
      owner.idle = !owner.empty() && sqlite3_column_int64(*use, 6) != 0;
      out.records.push_back({std::move(name), std::move(owner)});
    }
    if (!out.truncated) check(rc, SQLITE_DONE, "listing mutexes");
    return out;
  }

  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    internal::MutexLock lock(mutex_);
    return sweep_locked(idle_for, limit);
  }

  OwnerSnapshot read(const std::string& mutex) override {
    internal::MutexLock lock(mutex_);
    EpochMillis now = epoch_millis_now();
    auto row = select(mutex);
    if (!row) return {MutexOwner::none(), now};
    auto snapshot = internal::snapshot_of_row(row->owner, now);
    snapshot.demanded = !snapshot.owner.empty() && row->wanted_until >= now;
    snapshot.owner.idle = !snapshot.owner.empty() && row->idle;
    return snapshot;
  }

  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    internal::MutexLock lock(mutex_);
    Use use(mark_);
    bind_text(*use, 1, mutex);
    bind_text(*use, 2, owner_id);
    sqlite3_bind_int(*use, 3, idle ? 1 : 0);
    sqlite3_bind_int64(*use, 4, epoch_millis_now());
    check(sqlite3_step(*use), SQLITE_DONE, "marking a lease idle");
    return sqlite3_changes(db_) > 0;
  }

  // Releases on this host, through the wake board (wake_board.h); callers still poll (no Push:
  // it cannot see other hosts, nor a process that died between a release and its wake-up).
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string&,
                                      std::function<void(WatchEvent)> on_change) override {
    return wake_ ? wake_->watch(mutex, std::move(on_change)) : nullptr;
  }

  // Demands of this host's processes, through the wake board; the owner still reads them at
  // its poll interval (read()'s `demanded`), which also covers other hosts.
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& /*owner_id*/,
                                             std::function<void()> on_demand) override {
    if (!wake_) return nullptr;
    return wake_->watch(internal::WakeBoard::demand_key(mutex),
                        [on_demand = std::move(on_demand)](WatchEvent) { on_demand(); });
  }
  // Offered only with a wake board.
  DemandPush* demand_push() noexcept override { return wake_ ? this : nullptr; }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = "sqlite";
    caps.poll_interval = options_.poll_interval;
    caps.multi_process = true;
    caps.watch_when_waiting = true;  // the wake board's watch: a local map, and no WatchEvent::lost
    return caps;
  }

  std::string describe() const override { return "sqlite://" + options_.path; }

  // One write transaction updating one row (a private row of simba_mutex), on this
  // backend's connection.
  double raw_once() override {
    internal::MutexLock lock(mutex_);
    if (!raw_.get()) {
      exec("INSERT OR IGNORE INTO simba_mutex (mutex) VALUES ('simba-bench/raw')", "making the raw row");
      prepare(raw_, "UPDATE simba_mutex SET version = version + 1 WHERE mutex = 'simba-bench/raw'");
    }
    const auto start = std::chrono::steady_clock::now();
    Use use(raw_);
    check(sqlite3_step(*use), SQLITE_DONE, "the raw UPDATE");
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  // The one place SQLite result codes become simba errors.
  void check(int rc, int expected, const char* what) REQUIRES(mutex_) {
    if (rc == expected) return;
    std::string message = describe() + ": " + what + ": " + sqlite3_errmsg(db_);
    switch (rc & 0xff) {
      case SQLITE_BUSY:
      case SQLITE_LOCKED: throw Error(errc::unavailable, message + " (still locked after busy_timeout)");
      case SQLITE_CANTOPEN:
      case SQLITE_IOERR:
      case SQLITE_FULL:
      case SQLITE_READONLY:
      case SQLITE_PROTOCOL: throw Error(errc::unavailable, message);
      case SQLITE_TOOBIG: throw Error(errc::invalid_argument, message);
      default: throw Error(errc::internal, message);
    }
  }

  template <class F>
  void retry_while_busy(F&& step) REQUIRES(mutex_) {
    const auto deadline = std::chrono::steady_clock::now() + options_.busy_timeout;
    for (;;) {
      try {
        step();
        return;
      } catch (const Error& e) {
        if (e.code() != errc::unavailable || std::chrono::steady_clock::now() >= deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  void exec(const char* sql, const char* what) REQUIRES(mutex_) {
    check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), SQLITE_OK, what);
  }

  void prepare(Statement& statement, const char* sql) REQUIRES(mutex_) {
    check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, statement.out(), nullptr), SQLITE_OK,
          "preparing a statement");
  }

  void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) REQUIRES(mutex_) {
    check(sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT), SQLITE_OK,
          "binding a parameter");
  }

  std::size_t sweep_locked(std::chrono::milliseconds idle_for, std::size_t limit) REQUIRES(mutex_) {
    const EpochMillis now = epoch_millis_now();
    Use use(sweep_);
    sqlite3_bind_int64(*use, 1, now - idle_for.count());
    sqlite3_bind_int64(*use, 2, now * internal::kTokensPerMilli);
    sqlite3_bind_int64(*use, 3, static_cast<sqlite3_int64>(std::min<std::size_t>(limit, INT64_MAX)));
    check(sqlite3_step(*use), SQLITE_DONE, "sweeping idle mutexes");
    return static_cast<std::size_t>(sqlite3_changes(db_));
  }

  struct Row {
    MutexOwner owner;
    EpochMillis wanted_until = 0;
    bool idle = false;
  };

  std::optional<Row> select(const std::string& mutex) REQUIRES(mutex_) {
    Use use(select_);
    bind_text(*use, 1, mutex);
    int rc = sqlite3_step(*use);
    if (rc == SQLITE_DONE) return std::nullopt;
    check(rc, SQLITE_ROW, "reading the owner");
    return Row{row_owner(*use), sqlite3_column_int64(*use, 5), sqlite3_column_int64(*use, 6) != 0};
  }

  void want(const std::string& mutex, const std::string& owner_id, EpochMillis until) REQUIRES(mutex_) {
    Use use(want_);
    bind_text(*use, 1, mutex);
    bind_text(*use, 2, owner_id);
    sqlite3_bind_int64(*use, 3, until);
    check(sqlite3_step(*use), SQLITE_DONE, "noting a demand");
    if (!wake_) return;
    if (batching_) {
      pending_rings_.push_back(internal::WakeBoard::demand_key(mutex));  // rung once the batch commits
    } else {
      wake_->ring(internal::WakeBoard::demand_key(mutex));  // committed: a caching owner here looks now
    }
  }

  void add_column(const std::string& name, const char* ddl) REQUIRES(mutex_) {
    Statement has;
    prepare(has, kHasColumn);
    Use use(has);
    bind_text(*use, 1, name);
    check(sqlite3_step(*use), SQLITE_ROW, "reading the table's columns");
    if (sqlite3_column_int64(*use, 0) > 0) return;
    const int rc = sqlite3_exec(db_, ddl, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK && std::string(sqlite3_errmsg(db_)).find("duplicate column") == std::string::npos) {
      check(rc, SQLITE_OK, ("adding column " + name).c_str());
    }
  }

  // Columns owner_id, acquired_at, ttl_at, transition_at, fencing_token of the current row.
  static MutexOwner row_owner(sqlite3_stmt* stmt) {
    MutexOwner owner;
    auto text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    owner.owner_id.assign(text ? text : "", static_cast<std::size_t>(sqlite3_column_bytes(stmt, 0)));
    owner.acquired_at = sqlite3_column_int64(stmt, 1);
    owner.ttl_at = sqlite3_column_int64(stmt, 2);
    owner.transition_at = sqlite3_column_int64(stmt, 3);
    owner.fencing_token = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 4));
    return owner;
  }

  // Closes the connection last: members are destroyed in reverse order, statements first.
  struct Connection {
    sqlite3* db = nullptr;
    ~Connection() { sqlite3_close(db); }
  };

  const SqliteOptions options_;
  internal::AnnotatedMutex mutex_;
  Connection connection_ GUARDED_BY(mutex_);
  sqlite3* db_ GUARDED_BY(mutex_) = nullptr;
  internal::SweepSchedule sweeps_;
  Statement acquire_ GUARDED_BY(mutex_), select_ GUARDED_BY(mutex_), release_ GUARDED_BY(mutex_),
      list_ GUARDED_BY(mutex_), sweep_ GUARDED_BY(mutex_), want_ GUARDED_BY(mutex_), mark_ GUARDED_BY(mutex_);
  bool batching_ GUARDED_BY(mutex_) = false;                   // inside acquire_batch's transaction
  std::vector<std::string> pending_rings_ GUARDED_BY(mutex_);  // wake board keys to ring once it commits
  Statement raw_ GUARDED_BY(mutex_);                           // simba-bench's baseline, prepared on first use
  std::shared_ptr<internal::WakeBoard> wake_;                  // set once by the constructor; null: poll only
};

}  // namespace

std::shared_ptr<Backend> make_sqlite_backend(const SqliteOptions& options) {
  if (options.path.empty()) throw Error(errc::invalid_argument, "SQLite backend needs a file path");
  if (options.busy_timeout.count() < 0 || options.busy_timeout.count() > INT32_MAX) {
    throw Error(errc::invalid_argument, "SQLite busy_timeout out of range");
  }
  if (options.sweep_idle.count() < 0) throw Error(errc::invalid_argument, "SQLite sweep_idle must be >= 0");
  return std::make_shared<SqliteBackend>(options);
}

}  // namespace simba
