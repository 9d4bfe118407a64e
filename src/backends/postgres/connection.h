// One libpq connection with simba's error vocabulary. Internal to the PostgreSQL backend.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include "simba/postgres_backend.h"

namespace simba::postgres {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

class Connection {
 public:
  // Connects and checks the connection. Throws Error (unavailable / permission_denied /
  // invalid_argument).
  Connection(const PostgresOptions& options, const std::string& where);

  // Prepares `sql` under `name` (once per connection).
  void prepare(const char* name, const char* sql);
  // Runs a prepared statement with text parameters; throws Error on failure.
  Result execute(const char* name, const std::vector<std::string>& params);
  // Runs plain SQL without parameters (schema, LISTEN); throws Error on failure.
  Result run(const char* sql);

  bool broken() const { return broken_ || PQstatus(connection_.get()) != CONNECTION_OK; }
  PGconn* get() { return connection_.get(); }

  // The one place PostgreSQL failures become simba errors. Marks the connection broken when
  // the failure is the connection's.
  [[noreturn]] void fail(const char* doing, const PGresult* result);

 private:
  Result check(PGresult* result, const char* doing);

  struct ConnDeleter {
    void operator()(PGconn* connection) const { PQfinish(connection); }
  };
  std::unique_ptr<PGconn, ConnDeleter> connection_;
  std::string where_;
  bool broken_ = false;
};

}  // namespace simba::postgres
