// "redis://[user:password@]host:port[/db][?prefix=simba]".
#include "backends/engine.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/redis_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  if (uri.scheme == "rediss") {
    throw Error(errc::unsupported, "rediss:// (Redis over TLS) is not supported: Debian's hiredis 0.14 has no TLS");
  }
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
  options.prefix = text_option(query, "prefix", options.prefix);
  options.connect_timeout = duration_option(query, "connect_timeout", options.connect_timeout);
  options.command_timeout = duration_option(query, "command_timeout", options.command_timeout);
  options.sweep_idle = duration_option(query, kSweepIdleKey, options.sweep_idle);
  return make_redis_backend(options);
}

}  // namespace

const Engine& redis_engine() {
  static const Engine engine{"redis://[user:password@]host:port[/db][?prefix=simba]",
                             {{"prefix", "first part of every key and channel (default simba)"},
                              {"connect_timeout", "bound on connecting (default 2s)"},
                              {"command_timeout", "bound on one command (default 2s)"},
                              {kSweepIdleKey, kSweepIdleHelp}},
                             &open};
  return engine;
}

}  // namespace simba::internal
