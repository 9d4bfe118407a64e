// One libpq connection with simba's error vocabulary. Internal to the PostgreSQL backend.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
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
  // invalid_argument). Every statement then waits for its answer at most command_timeout +
  // 500 ms by this process's clock (the server's statement_timeout ends it first when the
  // server can hear us): a partition or a half-open connection is an unavailable error and a
  // broken connection, never a call that blocks for ever.
  Connection(const PostgresOptions& options, const std::string& where);

  // Prepares `sql` under `name` (once per connection).
  void prepare(const char* name, const char* sql);
  // Runs a prepared statement with text parameters; throws Error on failure.
  Result execute(const char* name, const std::vector<std::string>& params);
  // Runs a prepared statement once per parameter list in pipeline mode, each in its own
  // implicit transaction (a sync after each): one round trip. Each run's result, or the Error
  // that run alone met; a failure of the connection throws.
  struct Answer {
    Result result;
    std::exception_ptr error;
  };
  std::vector<Answer> execute_each(const char* name, const std::vector<std::vector<std::string>>& each);
  // Runs different prepared statements in pipeline mode in one implicit transaction (one sync
  // at the end): one round trip and one commit, each statement with a snapshot of its own (READ
  // COMMITTED).
  struct Run {
    const char* name;
    std::vector<std::string> params;
  };
  // Each statement's result; the first failure throws (the transaction rolled back).
  std::vector<Result> execute_in_turn(const std::vector<Run>& runs);
  // Each statement's result; nothing if a run failed (then the transaction rolled back: none
  // took effect; a deadlock is such a failure). A failure of the connection throws.
  std::optional<std::vector<Result>> execute_together(const std::vector<Run>& runs);
  // Runs plain SQL without parameters (schema, LISTEN); throws Error on failure.
  Result run(const char* sql);

  bool broken() const { return broken_ || PQstatus(connection_.get()) != CONNECTION_OK; }
  PGconn* get() { return connection_.get(); }

  // The one place PostgreSQL failures become simba errors. Marks the connection broken when
  // the failure is the connection's.
  [[noreturn]] void fail(const char* doing, const PGresult* result);

 private:
  Result check(PGresult* result, const char* doing);
  // Sends what libpq queued and collects the statement's results (the last one, or the first
  // failed one) before the deadline; on a timeout the connection is broken.
  PGresult* await(const char* doing);
  // Sends what libpq queued, before the deadline.
  void flush(std::chrono::steady_clock::time_point deadline, const char* doing);
  // The next result of a pipeline (null between statements), before the deadline.
  PGresult* next_result(std::chrono::steady_clock::time_point deadline, const char* doing);
  // A pipeline of runs of `name`: sent with a sync after each run or only after the last;
  // the deadline of its answers.
  std::chrono::steady_clock::time_point send_pipeline(const char* name,
                                                      const std::vector<std::vector<std::string>>& each,
                                                      bool sync_each);
  // execute_in_turn() and execute_together(): the results of the runs that succeeded, and the
  // first failed run's result and name (where every run succeeded: none, and the first name).
  struct Together {
    std::vector<Result> results;
    Result failed;
    const char* failed_name = nullptr;
  };
  Together run_together(const std::vector<Run>& runs);
  // The next run's result (null if none came), and the null that ends it.
  Result next_run(std::chrono::steady_clock::time_point deadline, const char* name);
  // The sync that ends a transaction of the pipeline; out of order: the connection is broken.
  void end_sync(std::chrono::steady_clock::time_point deadline, const char* name);
  // Waits for the socket to be ready for `events` until the deadline; throws on a timeout.
  void wait_ready(short events, std::chrono::steady_clock::time_point deadline, const char* doing);

  struct ConnDeleter {
    void operator()(PGconn* connection) const { PQfinish(connection); }
  };
  std::unique_ptr<PGconn, ConnDeleter> connection_;
  std::string where_;
  std::chrono::milliseconds answer_timeout_;
  bool broken_ = false;
};

}  // namespace simba::postgres
