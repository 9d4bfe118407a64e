// Connecting to PostgreSQL and turning its failures into simba errors.
#include "backends/postgres/connection.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba::postgres {

Connection::Connection(const PostgresOptions& options, const std::string& where)
    : where_(where), answer_timeout_(options.command_timeout + std::chrono::milliseconds(500)) {
  const std::string port = std::to_string(options.port);
  // libpq counts whole seconds and takes at least 2.
  const std::string connect_timeout = std::to_string(std::max<long>(2, (options.connect_timeout.count() + 999) / 1000));
  const std::string command_ms = std::to_string(options.command_timeout.count());
  const std::string server_options = "-c statement_timeout=" + command_ms + " -c lock_timeout=" + command_ms;
  std::vector<const char*> keys = {"host",
                                   "port",
                                   "dbname",
                                   "user",
                                   "connect_timeout",
                                   "options",
                                   "application_name",
                                   "tcp_user_timeout",
                                   "keepalives",
                                   "keepalives_idle"};
  std::vector<const char*> values = {options.host.c_str(),
                                     port.c_str(),
                                     options.database.c_str(),
                                     options.user.c_str(),
                                     connect_timeout.c_str(),
                                     server_options.c_str(),
                                     "simba",
                                     command_ms.c_str(),
                                     "1",
                                     "5"};
  if (!options.password.empty()) {
    keys.push_back("password");
    values.push_back(options.password.c_str());
  }
  for (const auto& [key, value] :
       {std::pair{"sslmode", &options.sslmode}, std::pair{"sslrootcert", &options.sslrootcert},
        std::pair{"sslcert", &options.sslcert}, std::pair{"sslkey", &options.sslkey}}) {
    if (value->empty()) continue;
    keys.push_back(key);
    values.push_back(value->c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  connection_.reset(PQconnectdbParams(keys.data(), values.data(), 0));
  if (!connection_) throw Error(errc::unavailable, where_ + ": cannot allocate a connection");
  if (PQstatus(connection_.get()) != CONNECTION_OK) fail("connecting", nullptr);
  if (PQsetnonblocking(connection_.get(), 1) != 0) fail("making the connection non-blocking", nullptr);
  // Server notices ("relation already exists, skipping") go to the debug log, not stderr.
  PQsetNoticeProcessor(
      connection_.get(), [](void*, const char* message) { internal::log_debug(std::string("postgresql: ") + message); },
      nullptr);
}

void Connection::prepare(const char* name, const char* sql) {
  if (!PQsendPrepare(connection_.get(), name, sql, 0, nullptr)) fail("preparing a statement", nullptr);
  check(await("preparing a statement"), "preparing a statement");
}

Result Connection::execute(const char* name, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const auto& p : params) {
    values.push_back(p.c_str());
    lengths.push_back(static_cast<int>(p.size()));
  }
  if (!PQsendQueryPrepared(connection_.get(), name, static_cast<int>(params.size()), values.data(), lengths.data(),
                           nullptr, 0)) {
    fail(name, nullptr);
  }
  return check(await(name), name);
}

Result Connection::run(const char* sql) {
  if (!PQsendQuery(connection_.get(), sql)) fail("a statement", nullptr);
  return check(await("a statement"), "a statement");
}

void Connection::wait_ready(short events, std::chrono::steady_clock::time_point deadline, const char* doing) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      broken_ = true;
      throw Error(errc::unavailable, where_ + ": " + doing + ": no answer within " + format_duration(answer_timeout_) +
                                         " (the server or the network is not answering)");
    }
    pollfd ready{PQsocket(connection_.get()), events, 0};
    int n = ::poll(&ready, 1, static_cast<int>(left.count()));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) {
      broken_ = true;
      throw Error(errc::unavailable, where_ + ": " + doing + ": waiting for the server: " + std::strerror(errno));
    }
  }
}

namespace {
std::vector<std::vector<const char*>> values_of(const std::vector<std::vector<std::string>>& each,
                                                std::vector<std::vector<int>>& lengths) {
  std::vector<std::vector<const char*>> values(each.size());
  lengths.assign(each.size(), {});
  for (std::size_t i = 0; i < each.size(); ++i) {
    for (const auto& p : each[i]) {
      values[i].push_back(p.c_str());
      lengths[i].push_back(static_cast<int>(p.size()));
    }
  }
  return values;
}
}  // namespace

std::chrono::steady_clock::time_point Connection::send_pipeline(const char* name,
                                                                const std::vector<std::vector<std::string>>& each,
                                                                bool sync_each) {
  PGconn* c = connection_.get();
  if (!PQenterPipelineMode(c)) fail(name, nullptr);
  std::vector<std::vector<int>> lengths;
  const auto values = values_of(each, lengths);
  for (std::size_t i = 0; i < each.size(); ++i) {
    const bool last = i + 1 == each.size();
    if (!PQsendQueryPrepared(c, name, static_cast<int>(values[i].size()), values[i].data(), lengths[i].data(), nullptr,
                             0) ||
        ((sync_each || last) && !PQpipelineSync(c))) {
      broken_ = true;  // half a pipeline on the wire: the connection is not reused
      fail(name, nullptr);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + answer_timeout_;
  flush(deadline, name);
  return deadline;
}

// A run's result, the null that ends it; the run's result (null if none came).
Result Connection::next_run(std::chrono::steady_clock::time_point deadline, const char* name) {
  Result result(next_result(deadline, name));
  for (PGresult* rest = next_result(deadline, name); rest; rest = next_result(deadline, name)) PQclear(rest);
  return result;
}

void Connection::end_sync(std::chrono::steady_clock::time_point deadline, const char* name) {
  Result sync(next_result(deadline, name));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    broken_ = true;
    throw Error(errc::unavailable, where_ + ": " + name + ": the pipeline's answers came out of order");
  }
}

Connection::Together Connection::run_together(const std::vector<Run>& runs) {
  Together out;
  out.failed_name = runs.empty() ? "a pipeline" : runs.front().name;
  const char* what = out.failed_name;
  PGconn* c = connection_.get();
  if (!PQenterPipelineMode(c)) fail(what, nullptr);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::vector<const char*> values;
    std::vector<int> lengths;
    for (const auto& p : runs[i].params) {
      values.push_back(p.c_str());
      lengths.push_back(static_cast<int>(p.size()));
    }
    if (!PQsendQueryPrepared(c, runs[i].name, static_cast<int>(values.size()), values.data(), lengths.data(), nullptr,
                             0) ||
        (i + 1 == runs.size() && !PQpipelineSync(c))) {
      broken_ = true;  // half a pipeline on the wire: the connection is not reused
      fail(runs[i].name, nullptr);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + answer_timeout_;
  flush(deadline, what);
  out.results.reserve(runs.size());
  for (const auto& run : runs) {
    Result result = next_run(deadline, run.name);
    const auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      out.results.push_back(std::move(result));
    } else if (!out.failed && status != PGRES_PIPELINE_ABORTED) {
      out.failed = std::move(result);
      out.failed_name = run.name;
    }
  }
  if (!runs.empty()) end_sync(deadline, what);
  if (!PQexitPipelineMode(c)) fail(what, nullptr);
  return out;
}

std::vector<Result> Connection::execute_in_turn(const std::vector<Run>& runs) {
  Together together = run_together(runs);
  if (together.results.size() != runs.size()) fail(together.failed_name, together.failed.get());
  return std::move(together.results);
}

std::optional<std::vector<Result>> Connection::execute_together(const std::vector<Run>& runs) {
  Together together = run_together(runs);
  if (together.results.size() == runs.size()) return std::move(together.results);
  try {
    fail(together.failed_name, together.failed.get());
  } catch (const std::exception& e) {
    if (broken()) throw;
    internal::log_debug(std::string(together.failed_name) +
                        ": a run of a batch failed (the batch goes run by run): " + e.what());
  }
  return std::nullopt;
}

std::vector<Connection::Answer> Connection::execute_each(const char* name,
                                                         const std::vector<std::vector<std::string>>& each) {
  const auto deadline = send_pipeline(name, each, /*sync_each=*/true);
  std::vector<Answer> answers(each.size());
  for (auto& answer : answers) {
    Result result = next_run(deadline, name);
    const auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      answer.result = std::move(result);
    } else {
      try {
        fail(name, result.get());
      } catch (...) {
        if (broken()) throw;
        answer.error = std::current_exception();
      }
    }
    end_sync(deadline, name);
  }
  if (!PQexitPipelineMode(connection_.get())) fail(name, nullptr);
  return answers;
}

void Connection::flush(std::chrono::steady_clock::time_point deadline, const char* doing) {
  PGconn* c = connection_.get();
  for (int flushed = PQflush(c); flushed != 0; flushed = PQflush(c)) {
    if (flushed < 0) fail(doing, nullptr);
    wait_ready(POLLOUT | POLLIN, deadline, doing);
    if (!PQconsumeInput(c)) fail(doing, nullptr);
  }
}

PGresult* Connection::next_result(std::chrono::steady_clock::time_point deadline, const char* doing) {
  PGconn* c = connection_.get();
  while (PQisBusy(c)) {
    wait_ready(POLLIN, deadline, doing);
    if (!PQconsumeInput(c)) fail(doing, nullptr);
  }
  return PQgetResult(c);
}

PGresult* Connection::await(const char* doing) {
  PGconn* c = connection_.get();
  const auto deadline = std::chrono::steady_clock::now() + answer_timeout_;
  flush(deadline, doing);
  PGresult* kept = nullptr;  // the last result, or the first that failed
  for (;;) {
    while (PQisBusy(c)) {
      wait_ready(POLLIN, deadline, doing);
      if (!PQconsumeInput(c)) {
        PQclear(kept);
        fail(doing, nullptr);
      }
    }
    PGresult* next = PQgetResult(c);
    if (!next) return kept;
    const auto status = PQresultStatus(kept);
    if (kept && status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      PQclear(next);
    } else {
      PQclear(kept);
      kept = next;
    }
  }
}

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
