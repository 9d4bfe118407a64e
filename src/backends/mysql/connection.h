// One MariaDB/MySQL client connection with prepared statements and simba's error vocabulary.
// Internal to the MySQL backend.
#pragma once

#include <mysql.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "simba/mysql_backend.h"
#include "simba/owner.h"

namespace simba::mysql {

using Param = std::variant<std::string, std::int64_t>;

// A row with columns owner_id, acquired_at, ttl_at, transition_at, fencing_token, now.
struct LeaseRow {
  MutexOwner owner;  // owner_id empty when the row is missing
  EpochMillis now = 0;
  std::string mutex;             // query_leases(..., named): a seventh column, the mutex's name
  EpochMillis wanted_until = 0;  // otherwise: a seventh column, if any, is the row's wanted_until
  bool idle = false;             // an eighth column, if any: the lease is marked idle (non-zero)
  // A ninth column, if any and not NULL: what the statement asked beside the row (the
  // backend's statement says how it is encoded).
  std::optional<std::int64_t> asked;
  // A tenth column (a batch's: a ninth), if any and non-zero: the take inserted the row (its
  // version is 1), so the row did not exist before it.
  bool fresh = false;
};

class Connection {
 public:
  // Connects (with CLIENT_FOUND_ROWS, utf8mb4). Throws Error.
  Connection(const MysqlOptions& options, const std::string& where, std::chrono::milliseconds read_timeout);

  void prepare(const std::string& name, const std::string& sql);
  // Executes a prepared statement; returns affected rows.
  std::uint64_t execute(const std::string& name, const std::vector<Param>& params);
  // Executes a prepared statement that returns at most one LeaseRow.
  std::optional<LeaseRow> query_lease(const std::string& name, const std::vector<Param>& params);
  // Every LeaseRow a prepared statement returns; `named`: with the mutex as seventh column.
  std::vector<LeaseRow> query_leases(const std::string& name, const std::vector<Param>& params, bool named);
  // Plain SQL (no parameters) returning LeaseRows with wanted_until as seventh column, the
  // mutex's name as eighth and `fresh` as ninth: a batch's upsert, whose values are literals
  // (quoted()).
  std::vector<LeaseRow> query_text_leases(const std::string& sql);
  // `text` as a string literal for this connection's character set, quotes included.
  std::string quoted(const std::string& text);
  // Plain SQL without parameters (schema); throws Error.
  void run(const std::string& sql);
  // run(), except that the server error `tolerated` (e.g. ER_DUP_FIELDNAME) is no failure:
  // returns false when it occurred.
  bool run_tolerating(const std::string& sql, unsigned tolerated);
  // One integer from plain SQL without parameters.
  std::int64_t scalar(const std::string& sql);
  // scalar() in two halves: send the query now, read its one integer later (when the socket
  // is readable, for a query that waits on the server).
  void send(const std::string& sql);
  std::int64_t read_scalar();

  bool broken() const { return broken_; }
  // The socket, so another thread can shut it down to end a blocking read.
  int socket() const { return static_cast<int>(mysql_get_socket(mysql_.get())); }
  // The server's id of this connection (for KILL QUERY from another one).
  unsigned long thread_id() const { return mysql_thread_id(mysql_.get()); }
  std::string server_info() const;
  unsigned long server_version() const { return mysql_get_server_version(mysql_.get()); }  // 101119 = 10.11.19

  // The one place MySQL failures become simba errors.
  [[noreturn]] void fail(const char* doing, unsigned error, const char* text);

 private:
  struct StmtDeleter {
    void operator()(MYSQL_STMT* stmt) const { mysql_stmt_close(stmt); }
  };
  using Stmt = std::unique_ptr<MYSQL_STMT, StmtDeleter>;
  MYSQL_STMT* bound(const std::string& name, const std::vector<Param>& params, std::vector<MYSQL_BIND>& binds,
                    std::vector<unsigned long>& lengths);

  struct MysqlDeleter {
    void operator()(MYSQL* mysql) const { mysql_close(mysql); }
  };
  std::unique_ptr<MYSQL, MysqlDeleter> mysql_;
  std::map<std::string, Stmt> statements_;
  std::string where_;
  bool broken_ = false;
};

}  // namespace simba::mysql
