// simba/mysql_backend.h: the MySQL/MariaDB backend ("mysql://user:password@host:port/db",
// also "mariadb://").
//
// Simba's own table, so JVM Simba contenders and ours share rows:
//   simba_mutex(mutex varchar(66) primary key, acquired_at, ttl_at, transition_at bigint
//               unsigned, owner_id varchar(128), version int unsigned) ENGINE=InnoDB
// plus our fencing_token column (with a default, so Simba's own inserts still work), added to
// an existing table if missing. Acquire = renew = one conditional upsert; every time comes from
// the database clock in UTC milliseconds (never the session time zone). MySQL has no push
// channel: a release wakes waiters through the server's user-level locks (wake_locks below), and
// waiters also poll with a cheap read (only waiters poll); a monitor connection parked in
// SELECT SLEEP() tells owners at once when the server goes away. MariaDB 10.5+ answers an
// acquire in one statement (INSERT ... RETURNING); MySQL 8.0+ and older MariaDB (10.2+) take
// the same upsert plus a primary-key read. Thread-safe: a small pool of connections serves
// concurrent calls.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "simba/backend.h"

namespace simba {

struct MysqlOptions {
  std::string host = "127.0.0.1";
  int port = 3306;
  std::string user;
  std::string password;  // Never appears in messages or logs.
  std::string database;
  // Bound on connecting (the client counts whole seconds, at least 1). Default: 2s.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  // Bound on reading or writing one statement's packets (whole seconds, at least 1). Default: 2s.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(2)};
  // How often a waiting contender looks again (a primary-key read). Default: 25ms.
  std::chrono::milliseconds poll_interval{25};
  unsigned pool_size = 4;  // Connections kept for statements. Default: 4.
  // Rows of mutexes idle this long are deleted (see Backend::sweep); 0: never. Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
  // Use INSERT ... RETURNING where the server has it (MariaDB 10.5+); false: the upsert plus a
  // read that MySQL gets. Default: true.
  bool returning = true;
  // A release wakes the waiters of its mutex in every process at once: the owner holds a
  // user-level lock of the server (GET_LOCK) per owned mutex on a connection of its own, and
  // waiters wait for it on theirs (one per mutex waited for, at most 32 per backend). Waiters
  // still poll, for owners that hold none (JVM Simba) and what else it cannot see. false:
  // waiters only poll (a server or proxy that does not keep user-level locks). Default: true.
  bool wake_locks = true;
  // TLS (Connector/C): `ssl` encrypts and refuses a server without TLS; the server's
  // certificate is checked against `ssl_ca` (else the system's CAs), host name included,
  // unless `ssl_verify` is false. `ssl_cert`/`ssl_key`: a client certificate. Default: off.
  bool ssl = false;
  bool ssl_verify = true;
  std::string ssl_ca;
  std::string ssl_cert;
  std::string ssl_key;
};

// Connects once to check the server and create or extend the table. Throws Error with
// errc::unavailable (unreachable), errc::permission_denied (access denied),
// errc::invalid_argument (bad options, unknown database) or errc::unsupported (MySQL before
// 8.0, MariaDB before 10.2).
std::shared_ptr<Backend> make_mysql_backend(const MysqlOptions& options);

}  // namespace simba
