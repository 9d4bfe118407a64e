// Backend URIs to backends: the one place that knows every engine of this build.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/uri.h"
#include "simba/connect.h"
#include "simba/duration.h"
#include "simba/error.h"
#include "simba/memory_backend.h"
#include "simba/mysql_backend.h"
#include "simba/postgres_backend.h"
#include "simba/redis_backend.h"
#include "simba/sqlite_backend.h"
#include "simba/zookeeper_backend.h"

namespace simba {
namespace {

using internal::Uri;

constexpr const char* kAccepted =
    "memory:, sqlite:///path/to/file.db, redis://[user:password@]host:port[/db][?prefix=simba], "
    "postgresql://user:password@host:port/db, mysql://user:password@host:port/db (or mariadb://), "
    "zookeeper://[user:password@]host:port[,host:port...][/chroot]";
constexpr const char* kTimingOptions = "ttl, transition, initial_delay, poll, backoff";

std::chrono::milliseconds take_duration(std::map<std::string, std::string>& query, const char* key,
                                        std::chrono::milliseconds fallback) {
  auto it = query.find(key);
  if (it == query.end()) return fallback;
  std::chrono::milliseconds value;
  try {
    value = parse_duration(it->second);
  } catch (const Error& e) {
    throw Error(errc::invalid_argument, std::string("option '") + key + "': " + e.what());
  }
  query.erase(it);
  return value;
}

std::shared_ptr<Backend> open_memory(const Uri& uri, std::map<std::string, std::string>& query) {
  internal::reject_unknown_options(uri, query, kTimingOptions);
  if (uri.has_authority) throw Error(errc::invalid_argument, "memory backend URI is 'memory:' or 'memory:NAME'");
  // Every "memory:NAME" of a process is one shared store, so contenders in one process meet.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Backend>> stores;
  std::lock_guard lock(mutex);
  auto& store = stores[uri.path];
  if (!store) store = make_memory_backend();
  return store;
}

std::shared_ptr<Backend> open_sqlite(const Uri& uri, std::map<std::string, std::string>& query) {
  SqliteOptions options;
  options.busy_timeout = take_duration(query, "busy_timeout", options.busy_timeout);
  if (auto it = query.find("poll"); it != query.end()) {
    options.poll_interval = parse_duration(it->second);
  }
  internal::reject_unknown_options(uri, query, std::string(kTimingOptions) + ", busy_timeout");
  if (!uri.user.empty() || uri.has_password || uri.port != 0) {
    throw Error(errc::invalid_argument, "sqlite URI takes a file path, like sqlite:///var/lib/app/simba.db");
  }
  // sqlite:///abs/file.db, sqlite://localhost/abs/file.db, sqlite:rel.db, sqlite://rel.db
  options.path = uri.host == "localhost" ? uri.path : uri.host + uri.path;
  if (options.path.empty()) {
    throw Error(errc::invalid_argument, "sqlite URI has no file path (like sqlite:///tmp/simba.db)");
  }
  return make_sqlite_backend(options);
}

std::shared_ptr<Backend> open_redis(const Uri& uri, std::map<std::string, std::string>& query) {
  RedisOptions options;
  if (uri.host.empty()) throw Error(errc::invalid_argument, "redis URI needs a host: " + uri.redacted());
  options.host = uri.host;
  if (uri.port != 0) options.port = uri.port;
  options.user = uri.user;
  options.password = uri.password;
  if (!uri.path.empty() && uri.path != "/") {
    const std::string db = uri.path.substr(1);
    if (db.empty() || db.size() > 4 || db.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(errc::invalid_argument, "redis URI database '" + db + "' is not a number: " + uri.redacted());
    }
    options.db = std::stoi(db);
  }
  if (auto it = query.find("prefix"); it != query.end()) {
    options.prefix = it->second;
    query.erase(it);
  }
  options.connect_timeout = take_duration(query, "connect_timeout", options.connect_timeout);
  options.command_timeout = take_duration(query, "command_timeout", options.command_timeout);
  query.erase("poll");
  internal::reject_unknown_options(uri, query,
                                   std::string(kTimingOptions) + ", prefix, connect_timeout, command_timeout");
  return make_redis_backend(options);
}

// What every SQL server URI carries: user:password@host:port/database and the two timeouts.
template <class Options>
void take_server_basics(const Uri& uri, std::map<std::string, std::string>& query, Options& options) {
  if (uri.host.empty()) throw Error(errc::invalid_argument, uri.scheme + " URI needs a host: " + uri.redacted());
  options.host = uri.host;
  if (uri.port != 0) options.port = uri.port;
  options.user = uri.user;
  options.password = uri.password;
  options.database = uri.path.size() > 1 ? uri.path.substr(1) : "";
  options.connect_timeout = take_duration(query, "connect_timeout", options.connect_timeout);
  options.command_timeout = take_duration(query, "command_timeout", options.command_timeout);
}

std::shared_ptr<Backend> open_postgres(const Uri& uri, std::map<std::string, std::string>& query) {
  PostgresOptions options;
  take_server_basics(uri, query, options);
  if (auto it = query.find("sslmode"); it != query.end()) {
    options.sslmode = it->second;
    query.erase(it);
  }
  query.erase("poll");
  internal::reject_unknown_options(uri, query,
                                   std::string(kTimingOptions) + ", sslmode, connect_timeout, command_timeout");
  return make_postgres_backend(options);
}

std::shared_ptr<Backend> open_mysql(const Uri& uri, std::map<std::string, std::string>& query,
                                  const ContendOptions& timing) {
  MysqlOptions options;
  take_server_basics(uri, query, options);
  if (query.erase("poll") && timing.poll_interval.count() > 0) options.poll_interval = timing.poll_interval;
  if (auto it = query.find("returning"); it != query.end()) {
    if (it->second != "on" && it->second != "off") {
      throw Error(errc::invalid_argument, "option 'returning' is 'on' or 'off', not '" + it->second + "'");
    }
    options.returning = it->second == "on";
    query.erase(it);
  }
  internal::reject_unknown_options(uri, query,
                                   std::string(kTimingOptions) + ", connect_timeout, command_timeout, returning");
  return make_mysql_backend(options);
}

std::shared_ptr<Backend> open_zookeeper(const Uri& uri, std::map<std::string, std::string>& query) {
  ZookeeperOptions options;
  if (uri.host.empty()) throw Error(errc::invalid_argument, "zookeeper URI needs host:port: " + uri.redacted());
  // One host (its port parsed) or a list "h1:2181,h2" kept whole: every host without a port
  // gets 2181.
  const std::string hosts = uri.host + (uri.port != 0 ? ":" + std::to_string(uri.port) : "");
  options.hosts.clear();
  for (std::size_t start = 0; start <= hosts.size();) {
    auto comma = hosts.find(',', start);
    std::string host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto colon = host.find(':');
    if (colon == 0 || host.empty()) throw Error(errc::invalid_argument, "zookeeper URI has an empty host: " + uri.redacted());
    if (colon == std::string::npos) {
      host += ":2181";
    } else {
      const std::string port = host.substr(colon + 1);
      if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(port) < 1 || std::stoi(port) > 65535) {
        throw Error(errc::invalid_argument, "zookeeper URI: port '" + port + "' of '" + host.substr(0, colon) +
                                                "' is not a number from 1 to 65535");
      }
    }
    options.hosts += (options.hosts.empty() ? "" : ",") + host;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  options.user = uri.user;
  options.password = uri.password;
  if (uri.path.size() > 1) options.chroot = uri.path;
  options.session_timeout = take_duration(query, "session_timeout", options.session_timeout);
  options.connect_timeout = take_duration(query, "connect_timeout", options.connect_timeout);
  query.erase("poll");
  internal::reject_unknown_options(uri, query, std::string(kTimingOptions) + ", session_timeout, connect_timeout");
  return make_zookeeper_backend(options);
}

}  // namespace

std::shared_ptr<Backend> open_backend(std::string_view text, ContendOptions* timing) {
  Uri uri = internal::parse_uri(text);
  auto query = uri.query;
  ContendOptions options;
  options.apply_query(query);
  options.validate();
  if (auto it = uri.query.find("poll"); it != uri.query.end()) query["poll"] = it->second;
  std::shared_ptr<Backend> backend;
  if (uri.scheme == "memory") {
    query.erase("poll");
    backend = open_memory(uri, query);
  } else if (uri.scheme == "sqlite") {
    backend = open_sqlite(uri, query);
  } else if (uri.scheme == "redis") {
    backend = open_redis(uri, query);
  } else if (uri.scheme == "postgresql" || uri.scheme == "postgres") {
    backend = open_postgres(uri, query);
  } else if (uri.scheme == "mysql" || uri.scheme == "mariadb") {
    backend = open_mysql(uri, query, options);
  } else if (uri.scheme == "zookeeper") {
    backend = open_zookeeper(uri, query);
  } else if (uri.scheme == "rediss") {
    throw Error(errc::unsupported, "this build of simba has no '" + uri.scheme +
                                       "' backend; it has: " + kAccepted);
  } else {
    throw Error(errc::invalid_argument,
                "unknown backend scheme '" + uri.scheme + "' in '" + uri.redacted() + "'; accepted: " + kAccepted);
  }
  if (timing) *timing = options;
  return backend;
}

Client connect(std::string_view uri, std::shared_ptr<Runtime> runtime) {
  ContendOptions options;
  auto backend = open_backend(uri, &options);
  return Client(std::move(backend), options, std::move(runtime));
}

std::string default_backend_uri() {
  if (const char* env = std::getenv("SIMBA_BACKEND"); env && *env) return env;
  std::filesystem::path folder;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    folder = std::filesystem::path(state) / "simba";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    folder = std::filesystem::path(home) / ".local" / "state" / "simba";
  } else {
    throw Error(errc::invalid_argument, "no backend given: set --backend, SIMBA_BACKEND or HOME");
  }
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw Error(errc::unavailable, "cannot create state folder '" + folder.string() + "': " + ec.message());
  return "sqlite://" + (folder / "simba.db").string();
}

}  // namespace simba
