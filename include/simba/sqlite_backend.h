// simba/sqlite_backend.h: the embedded default backend ("sqlite:///path/to/file.db").
//
// Many processes on one host share a mutex through one SQLite file: WAL journal, a busy
// timeout, the table `simba_mutex` created if missing. Leases are judged by the host clock.
// No push channel: waiters poll with a cheap read. Thread-safe (one connection, serialised).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "simba/backend.h"

namespace simba {

struct SqliteOptions {
  std::string path;  // Database file; created if missing (its folder must exist).
  // How long a statement waits for another process's write lock. Default: 5s.
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(5)};
  // Suggested poll interval for waiters and observers. Default: 25ms.
  std::chrono::milliseconds poll_interval{25};
  // Rows of mutexes idle this long are deleted (see Backend::sweep); 0: never. Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
};

// Opens (and if needed creates) the database. Throws Error(errc::unavailable) naming the
// path if it cannot be opened.
std::shared_ptr<Backend> make_sqlite_backend(const SqliteOptions& options);

}  // namespace simba
