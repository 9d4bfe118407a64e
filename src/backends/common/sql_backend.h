// The skeleton of an engine on an SQL server (PostgreSQL, MySQL/MariaDB): one table of lease
// rows judged by the database clock, a pool of connections, and every operation but acquire
// and watch written once, over the engine's statements. Internal to backends.
//
// An engine derives from SqlBackend<its Connection, the interfaces it offers beside these>,
// implements acquire() and watch(), and answers the row operations below, each on one
// connection the pool lends it; the skeleton does the rest: release (and the occasional sweep
// after it), evict, list (its limit and truncation), sweep in batches, read, the idle mark,
// the raw probe's timing, capabilities and describe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/common/lease_row.h"
#include "backends/common/pool.h"
#include "backends/common/sweep.h"
#include "simba/backend.h"

namespace simba::internal {

// One row of the table as a statement returned it.
struct SqlLeaseRow {
  MutexOwner owner;  // owner_id empty when the row is missing
  EpochMillis now = 0;
  std::string mutex;      // list: the row's name
  bool demanded = false;  // another contender asked while this lease lasts
  bool idle = false;      // the owner marked the lease unused
};

template <class Connection, class... Offered>
class SqlBackend : public BackendOffering<DemandSignal, IdleMarks, Administration, RawProbe, Offered...> {
 public:
  bool release(const std::string& mutex, const std::string& contender_id) override {
    const bool released = pool_.with([&](Connection& c) { return release_row(c, mutex, contender_id); });
    sweeps_.maybe(where_, [&](std::chrono::milliseconds idle) { sweep(idle, kSweepBatch); });
    return released;
  }

  // Another process's lease ends the way its own release would end it.
  bool evict(const std::string& mutex, const std::string& owner_id) override { return release(mutex, owner_id); }

  MutexListing list(const std::string& prefix, std::size_t limit) override {
    return pool_.with([&](Connection& c) {
      const auto asked = std::min<std::size_t>(limit, INT64_MAX - 1) + 1;  // one more: truncated?
      MutexListing out;
      for (auto& row : list_rows(c, prefix, asked)) {
        if (out.records.size() == limit) {
          out.truncated = true;
          break;
        }
        out.now = row.now;
        auto owner = snapshot_of_row(std::move(row.owner), row.now).owner;
        owner.idle = !owner.empty() && row.idle;
        out.records.push_back({std::move(row.mutex), std::move(owner)});
      }
      if (out.now == 0) out.now = read_row(c, std::string()).now;  // nothing listed: the clock alone
      return out;
    });
  }

  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    return sweep_in_batches(limit, [&](std::size_t batch) {
      return pool_.with([&](Connection& c) { return sweep_rows(c, idle_for, batch); });
    });
  }

  OwnerSnapshot read(const std::string& mutex) override {
    return pool_.with([&](Connection& c) { return snapshot_of(read_row(c, mutex)); });
  }

  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    return pool_.with([&](Connection& c) { return mark_idle_row(c, mutex, owner_id, idle); });
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = engine_;
    caps.poll_interval = poll_interval_;
    caps.multi_process = true;
    caps.multi_host = true;
    caps.max_mutex_bytes = 66;  // varchar(66), as Simba's table
    // An owner hears a lost channel through the engine's watch_channel() (PostgreSQL's LISTEN
    // connection, MariaDB's monitor): a contender's watch waits until it waits.
    caps.watch_when_waiting = true;
    return caps;
  }

  std::string describe() const override { return where_; }

  // The bare primitive: two one-row UPDATEs of a private row.
  double raw_once() override {
    return pool_.with([&](Connection& c) {
      std::call_once(raw_row_made_, [&] { make_raw_row(c, kRawMutex); });
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 2; ++i) raw_update(c, kRawMutex);
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    });
  }

 protected:
  // `engine`: Capabilities::engine. The pool opens connections with open().
  SqlBackend(std::string engine, std::string where, unsigned pool_size, std::chrono::milliseconds sweep_idle,
             std::chrono::milliseconds poll_interval)
      : engine_(std::move(engine)),
        where_(std::move(where)),
        poll_interval_(poll_interval),
        pool_(pool_size, [this] { return open(); }),
        sweeps_(sweep_idle) {}

  // A snapshot of a row: released or expired reads as no owner (lease_row.h).
  static OwnerSnapshot snapshot_of(SqlLeaseRow row) {
    auto snapshot = snapshot_of_row(std::move(row.owner), row.now);
    snapshot.demanded = !snapshot.owner.empty() && row.demanded;
    snapshot.owner.idle = !snapshot.owner.empty() && row.idle;
    return snapshot;
  }

  // The engine's side, each on a connection of the pool. Throw Error on failure.
  // A new connection, its statements prepared.
  virtual std::unique_ptr<Connection> open() = 0;
  // The row of `mutex` with the database clock (a missing row: no owner, and the clock).
  virtual SqlLeaseRow read_row(Connection& c, const std::string& mutex) = 0;
  // Ends `contender_id`'s lease of `mutex` if it has it (and tells waiters); true if it did.
  virtual bool release_row(Connection& c, const std::string& mutex, const std::string& contender_id) = 0;
  // At most `asked` rows whose names start with `prefix`, in name order.
  virtual std::vector<SqlLeaseRow> list_rows(Connection& c, const std::string& prefix, std::size_t asked) = 0;
  // Deletes at most `batch` rows free for `idle_for`; how many it deleted.
  virtual std::size_t sweep_rows(Connection& c, std::chrono::milliseconds idle_for, std::size_t batch) = 0;
  virtual bool mark_idle_row(Connection& c, const std::string& mutex, const std::string& owner_id, bool idle) = 0;
  // The raw probe's private row, made once; one UPDATE of it (throws unless one row changed).
  virtual void make_raw_row(Connection& c, const std::string& name) = 0;
  virtual void raw_update(Connection& c, const std::string& name) = 0;

  const std::string& where() const noexcept { return where_; }
  Pool<Connection>& pool() noexcept { return pool_; }

 private:
  static constexpr const char* kRawMutex = "simba-bench/raw";

  const std::string engine_;
  const std::string where_;
  const std::chrono::milliseconds poll_interval_;
  Pool<Connection> pool_;
  SweepSchedule sweeps_;
  std::once_flag raw_row_made_;  // the baseline's row, made by its first run
};

}  // namespace simba::internal
