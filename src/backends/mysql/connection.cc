// Talking to MariaDB/MySQL through Connector/C's prepared statements.
#include "backends/mysql/connection.h"

#include <errmsg.h>
#include <mysqld_error.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "simba/error.h"

namespace simba::mysql {
namespace {

unsigned int whole_seconds(std::chrono::milliseconds ms) {
  return static_cast<unsigned int>(std::max<long>(1, (ms.count() + 999) / 1000));
}

}  // namespace

Connection::Connection(const MysqlOptions& options, const std::string& where, std::chrono::milliseconds read_timeout)
    : mysql_(mysql_init(nullptr)), where_(where) {
  if (!mysql_) throw Error(errc::unavailable, where_ + ": cannot allocate a connection");
  unsigned int connect = whole_seconds(options.connect_timeout);
  unsigned int read = whole_seconds(read_timeout);
  unsigned int write = whole_seconds(options.command_timeout);
  mysql_options(mysql_.get(), MYSQL_OPT_CONNECT_TIMEOUT, &connect);
  mysql_options(mysql_.get(), MYSQL_OPT_READ_TIMEOUT, &read);
  mysql_options(mysql_.get(), MYSQL_OPT_WRITE_TIMEOUT, &write);
  mysql_options(mysql_.get(), MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (options.ssl) {
    my_bool enforce = 1, verify = options.ssl_verify ? 1 : 0;
    mysql_options(mysql_.get(), MYSQL_OPT_SSL_ENFORCE, &enforce);
    mysql_options(mysql_.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (!options.ssl_ca.empty()) mysql_options(mysql_.get(), MYSQL_OPT_SSL_CA, options.ssl_ca.c_str());
    if (!options.ssl_cert.empty()) mysql_options(mysql_.get(), MYSQL_OPT_SSL_CERT, options.ssl_cert.c_str());
    if (!options.ssl_key.empty()) mysql_options(mysql_.get(), MYSQL_OPT_SSL_KEY, options.ssl_key.c_str());
  }
  if (!mysql_real_connect(mysql_.get(), options.host.c_str(), options.user.c_str(), options.password.c_str(),
                          options.database.c_str(), static_cast<unsigned int>(options.port), nullptr,
                          CLIENT_FOUND_ROWS)) {
    fail("connecting", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  }
}

std::string Connection::server_info() const { return mysql_get_server_info(mysql_.get()); }

void Connection::prepare(const std::string& name, const std::string& sql) {
  Stmt stmt(mysql_stmt_init(mysql_.get()));
  if (!stmt) fail("preparing a statement", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  if (mysql_stmt_prepare(stmt.get(), sql.data(), sql.size()) != 0) {
    fail("preparing a statement", mysql_stmt_errno(stmt.get()), mysql_stmt_error(stmt.get()));
  }
  statements_[name] = std::move(stmt);
}

MYSQL_STMT* Connection::bound(const std::string& name, const std::vector<Param>& params, std::vector<MYSQL_BIND>& binds,
                              std::vector<unsigned long>& lengths) {
  MYSQL_STMT* stmt = statements_.at(name).get();
  binds.assign(params.size(), MYSQL_BIND{});
  lengths.assign(params.size(), 0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (auto* text = std::get_if<std::string>(&params[i])) {
      binds[i].buffer_type = MYSQL_TYPE_STRING;
      binds[i].buffer = const_cast<char*>(text->data());
      binds[i].buffer_length = text->size();
      lengths[i] = text->size();
      binds[i].length = &lengths[i];
    } else {
      binds[i].buffer_type = MYSQL_TYPE_LONGLONG;
      binds[i].buffer = const_cast<std::int64_t*>(&std::get<std::int64_t>(params[i]));
    }
  }
  if (mysql_stmt_bind_param(stmt, binds.data()) != 0 || mysql_stmt_execute(stmt) != 0) {
    fail(name.c_str(), mysql_stmt_errno(stmt), mysql_stmt_error(stmt));
  }
  return stmt;
}

std::uint64_t Connection::execute(const std::string& name, const std::vector<Param>& params) {
  std::vector<MYSQL_BIND> binds;
  std::vector<unsigned long> lengths;
  MYSQL_STMT* stmt = bound(name, params, binds, lengths);
  auto affected = mysql_stmt_affected_rows(stmt);
  mysql_stmt_free_result(stmt);
  return affected;
}

std::optional<LeaseRow> Connection::query_lease(const std::string& name, const std::vector<Param>& params) {
  auto rows = query_leases(name, params, false);
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

std::vector<LeaseRow> Connection::query_leases(const std::string& name, const std::vector<Param>& params, bool named) {
  std::vector<MYSQL_BIND> binds;
  std::vector<unsigned long> lengths;
  MYSQL_STMT* stmt = bound(name, params, binds, lengths);
  char owner[513] = {}, mutex[513] = {};
  unsigned long owner_length = 0, mutex_length = 0;
  long long numbers[5] = {}, idle = 0, asked = 0, fresh = 0;
  my_bool nulls[10] = {};
  MYSQL_BIND result[10] = {};
  result[0].buffer_type = MYSQL_TYPE_STRING;
  result[0].buffer = owner;
  result[0].buffer_length = sizeof owner - 1;
  result[0].length = &owner_length;
  result[0].is_null = &nulls[0];
  for (int i = 0; i < 5; ++i) {
    result[i + 1].buffer_type = MYSQL_TYPE_LONGLONG;
    result[i + 1].buffer = &numbers[i];
    result[i + 1].is_null = &nulls[i + 1];
  }
  result[6].buffer_type = MYSQL_TYPE_STRING;
  result[6].buffer = mutex;
  result[6].buffer_length = sizeof mutex - 1;
  result[6].length = &mutex_length;
  result[6].is_null = &nulls[6];
  result[7].buffer_type = MYSQL_TYPE_LONGLONG;
  result[7].buffer = &idle;
  result[7].is_null = &nulls[7];
  result[8].buffer_type = MYSQL_TYPE_LONGLONG;
  result[8].buffer = &asked;
  result[8].is_null = &nulls[8];
  result[9].buffer_type = MYSQL_TYPE_LONGLONG;
  result[9].buffer = &fresh;
  result[9].is_null = &nulls[9];
  if (mysql_stmt_bind_result(stmt, result) != 0) fail(name.c_str(), mysql_stmt_errno(stmt), mysql_stmt_error(stmt));
  std::vector<LeaseRow> rows;
  int rc;
  while ((rc = mysql_stmt_fetch(stmt)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
    LeaseRow& row = rows.emplace_back();
    if (!nulls[0]) row.owner.owner_id.assign(owner, std::min<unsigned long>(owner_length, sizeof owner - 1));
    row.owner.acquired_at = numbers[0];
    row.owner.ttl_at = numbers[1];
    row.owner.transition_at = numbers[2];
    row.owner.fencing_token = static_cast<std::uint64_t>(numbers[3]);
    row.now = numbers[4];
    if (!nulls[6] && mysql_stmt_field_count(stmt) > 6) {
      std::string seventh(mutex, std::min<unsigned long>(mutex_length, sizeof mutex - 1));
      if (named) {
        row.mutex = std::move(seventh);
      } else {
        row.wanted_until = std::strtoll(seventh.c_str(), nullptr, 10);
      }
    }
    row.idle = mysql_stmt_field_count(stmt) > 7 && !nulls[7] && idle != 0;
    if (mysql_stmt_field_count(stmt) > 8 && !nulls[8]) row.asked = asked;
    row.fresh = mysql_stmt_field_count(stmt) > 9 && !nulls[9] && fresh != 0;
    if (!named) break;  // one row is asked for: the rest (if any) is drained below
  }
  if (rc != 0 && rc != MYSQL_DATA_TRUNCATED && rc != MYSQL_NO_DATA) {
    // A row RETURNING could not produce (a value too long for its column) fails the fetch with
    // the error on the connection, not on the statement.
    const bool on_stmt = mysql_stmt_errno(stmt) != 0;
    unsigned error = on_stmt ? mysql_stmt_errno(stmt) : mysql_errno(mysql_.get());
    std::string text = on_stmt ? mysql_stmt_error(stmt) : mysql_error(mysql_.get());
    mysql_stmt_free_result(stmt);
    fail(name.c_str(), error, text.c_str());
  }
  while (mysql_stmt_fetch(stmt) == 0) {
  }
  mysql_stmt_free_result(stmt);
  // A statement with RETURNING leaves the connection ready only once every result is read.
  while (mysql_stmt_next_result(stmt) == 0) mysql_stmt_free_result(stmt);
  return rows;
}

std::vector<LeaseRow> Connection::query_text_leases(const std::string& sql) {
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) {
    fail("a batch", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  }
  std::unique_ptr<MYSQL_RES, void (*)(MYSQL_RES*)> result(mysql_store_result(mysql_.get()), mysql_free_result);
  if (!result) fail("a batch", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  if (mysql_num_fields(result.get()) != 9) fail("a batch", 0, "the statement did not return 9 columns");
  const auto number = [](const char* text) { return text ? std::strtoll(text, nullptr, 10) : 0; };
  std::vector<LeaseRow> rows;
  rows.reserve(mysql_num_rows(result.get()));
  while (MYSQL_ROW fields = mysql_fetch_row(result.get())) {
    const unsigned long* lengths = mysql_fetch_lengths(result.get());
    LeaseRow& row = rows.emplace_back();
    if (fields[0]) row.owner.owner_id.assign(fields[0], lengths[0]);
    row.owner.acquired_at = number(fields[1]);
    row.owner.ttl_at = number(fields[2]);
    row.owner.transition_at = number(fields[3]);
    row.owner.fencing_token = static_cast<std::uint64_t>(number(fields[4]));
    row.now = number(fields[5]);
    row.wanted_until = number(fields[6]);
    if (fields[7]) row.mutex.assign(fields[7], lengths[7]);
    row.fresh = number(fields[8]) != 0;
  }
  if (mysql_errno(mysql_.get()) != 0) fail("a batch", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  return rows;
}

std::string Connection::quoted(const std::string& text) {
  std::string out(2 * text.size() + 3, '\0');
  out[0] = '\'';
  const auto length = mysql_real_escape_string(mysql_.get(), out.data() + 1, text.data(), text.size());
  out.resize(length + 1);
  out += '\'';
  return out;
}

void Connection::run(const std::string& sql) { run_tolerating(sql, 0); }

bool Connection::run_tolerating(const std::string& sql, unsigned tolerated) {
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) {
    if (tolerated != 0 && mysql_errno(mysql_.get()) == tolerated) return false;
    fail("a statement", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  }
  if (MYSQL_RES* result = mysql_store_result(mysql_.get())) mysql_free_result(result);
  return true;
}

std::int64_t Connection::scalar(const std::string& sql) {
  send(sql);
  return read_scalar();
}

void Connection::send(const std::string& sql) {
  if (mysql_send_query(mysql_.get(), sql.data(), static_cast<unsigned long>(sql.size())) != 0) {
    fail("a query", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  }
}

std::int64_t Connection::read_scalar() {
  if (mysql_read_query_result(mysql_.get()) != 0) fail("a query", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  std::unique_ptr<MYSQL_RES, void (*)(MYSQL_RES*)> result(mysql_store_result(mysql_.get()), mysql_free_result);
  if (!result) fail("a query", mysql_errno(mysql_.get()), mysql_error(mysql_.get()));
  MYSQL_ROW row = mysql_fetch_row(result.get());
  return row && row[0] ? std::strtoll(row[0], nullptr, 10) : 0;
}

void Connection::fail(const char* doing, unsigned error, const char* text) {
  const std::string message = where_ + ": " + doing + ": " + (text ? text : "unknown error");
  if (error >= 2000 && error < 3000) broken_ = true;  // the client's own errors: the connection is gone
  switch (error) {
    case ER_ACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
    case ER_TABLEACCESS_DENIED_ERROR: broken_ = true; throw Error(errc::permission_denied, message);
    case ER_BAD_DB_ERROR: broken_ = true; throw Error(errc::invalid_argument, message);
    case ER_DATA_TOO_LONG: throw Error(errc::invalid_argument, message);
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_CON_COUNT_ERROR: throw Error(errc::unavailable, message);
    case ER_SERVER_SHUTDOWN: broken_ = true; throw Error(errc::unavailable, message);
    default:
      if (broken_) throw Error(errc::unavailable, message);
      throw Error(errc::internal, message);
  }
}

}  // namespace simba::mysql
