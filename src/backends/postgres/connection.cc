// Connecting to PostgreSQL and turning its failures into simba errors.
#include "backends/postgres/connection.h"

#include <algorithm>

#include "base/log.h"
#include "simba/error.h"

namespace simba::postgres {

Connection::Connection(const PostgresOptions& options, const std::string& where) : where_(where) {
  const std::string port = std::to_string(options.port);
  // libpq counts whole seconds and takes at least 2.
  const std::string connect_timeout =
      std::to_string(std::max<long>(2, (options.connect_timeout.count() + 999) / 1000));
  const std::string command_ms = std::to_string(options.command_timeout.count());
  const std::string server_options = "-c statement_timeout=" + command_ms + " -c lock_timeout=" + command_ms;
  std::vector<const char*> keys = {"host", "port", "dbname", "user", "connect_timeout", "options",
                                   "application_name", "tcp_user_timeout", "keepalives", "keepalives_idle"};
  std::vector<const char*> values = {options.host.c_str(), port.c_str(), options.database.c_str(),
                                     options.user.c_str(), connect_timeout.c_str(), server_options.c_str(),
                                     "simba", command_ms.c_str(), "1", "5"};
  if (!options.password.empty()) {
    keys.push_back("password");
    values.push_back(options.password.c_str());
  }
  if (!options.sslmode.empty()) {
    keys.push_back("sslmode");
    values.push_back(options.sslmode.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  connection_.reset(PQconnectdbParams(keys.data(), values.data(), 0));
  if (!connection_) throw Error(errc::unavailable, where_ + ": cannot allocate a connection");
  if (PQstatus(connection_.get()) != CONNECTION_OK) fail("connecting", nullptr);
  // Server notices ("relation already exists, skipping") go to the debug log, not stderr.
  PQsetNoticeProcessor(
      connection_.get(), [](void*, const char* message) { internal::log_debug(std::string("postgresql: ") + message); },
      nullptr);
}

void Connection::prepare(const char* name, const char* sql) {
  check(PQprepare(connection_.get(), name, sql, 0, nullptr), "preparing a statement");
}

Result Connection::execute(const char* name, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const auto& p : params) {
    values.push_back(p.c_str());
    lengths.push_back(static_cast<int>(p.size()));
  }
  return check(PQexecPrepared(connection_.get(), name, static_cast<int>(params.size()), values.data(),
                              lengths.data(), nullptr, 0),
               name);
}

Result Connection::run(const char* sql) { return check(PQexec(connection_.get(), sql), "a statement"); }

Result Connection::check(PGresult* raw, const char* doing) {
  Result result(raw);
  auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  fail(doing, result.get());
}

void Connection::fail(const char* doing, const PGresult* result) {
  std::string text = result ? PQresultErrorMessage(result) : PQerrorMessage(connection_.get());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (auto newline = text.find('\n'); newline != std::string::npos) text.resize(newline);  // one line
  const std::string message = where_ + ": " + doing + ": " + text;
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state ? state : "";
  if (PQstatus(connection_.get()) != CONNECTION_OK || sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0) {
    broken_ = true;
    if (text.find("password authentication failed") != std::string::npos ||
        text.find("no password supplied") != std::string::npos) {
      throw Error(errc::permission_denied, message);
    }
    if (text.find("does not exist") != std::string::npos) throw Error(errc::invalid_argument, message);
    throw Error(errc::unavailable, message);
  }
  if (sqlstate.rfind("28", 0) == 0 || sqlstate == "42501") throw Error(errc::permission_denied, message);
  if (sqlstate == "22001") throw Error(errc::invalid_argument, message);  // value too long
  // Serialization failure, deadlock, statement or lock timeout, too many connections: retry.
  if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "57014" || sqlstate == "55P03" ||
      sqlstate.rfind("53", 0) == 0) {
    throw Error(errc::unavailable, message);
  }
  throw Error(errc::internal, message);
}

}  // namespace simba::postgres
