// simba/postgres_backend.h: the PostgreSQL backend ("postgresql://user:password@host:port/db").
//
// One row per mutex in `simba_mutex` (created if missing; the shape of Simba's MySQL table in
// PostgreSQL's types, plus a fencing_token column). Acquire = renew = one conditional upsert;
// every lease is judged by the database clock in UTC milliseconds. A release sends a NOTIFY on
// channel `simba_mutex`; one LISTEN connection per backend wakes that process's waiters.
// Thread-safe: a small pool of connections serves concurrent calls.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "simba/backend.h"

namespace simba {

struct PostgresOptions {
  std::string host = "127.0.0.1";
  int port = 5432;
  std::string user;
  std::string password;  // Never appears in messages or logs.
  std::string database;
  std::string sslmode;  // libpq's sslmode (disable, prefer, require, ...); empty: libpq's default
  // TLS files for libpq (empty: libpq's defaults): the CA that signed the server's
  // certificate (checked with sslmode=verify-ca or verify-full), and a client certificate.
  std::string sslrootcert;
  std::string sslcert;
  std::string sslkey;
  // Bound on connecting (libpq counts whole seconds, at least 2). Default: 2s.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  // Bound on one statement (statement_timeout) and on unacknowledged sends. Default: 2s.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(2)};
  unsigned pool_size = 4;  // Connections kept for statements. Default: 4.
  // Rows of mutexes idle this long are deleted (see Backend::sweep); 0: never. Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
};

// Connects once to check the server and create the table. Throws Error with
// errc::unavailable (unreachable), errc::permission_denied (authentication refused) or
// errc::invalid_argument (bad options, unknown database).
std::shared_ptr<Backend> make_postgres_backend(const PostgresOptions& options);

}  // namespace simba
