// "redis://[user:password@]host:port[/db][?prefix=simba]".
#include "backends/engine.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/redis_backend.h"

namespace simba::internal {
namespace {

using Options = RedisOptions;

const OptionTable<Options>& options_table() {
  static const auto table =
      OptionTable<Options>()
          .text("prefix", "first part of every key and channel (default simba)", &Options::prefix)
          .duration("connect_timeout", "bound on connecting (default 2s)", &Options::connect_timeout)
          .duration("command_timeout", "bound on one command (default 2s)", &Options::command_timeout)
          .duration(kSweepIdleKey, kSweepIdleHelp, &Options::sweep_idle);
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  if (uri.scheme == "rediss") {
    throw Error(errc::unsupported, "rediss:// (Redis over TLS) is not supported: Debian's hiredis 0.14 has no TLS");
  }
  Options options;
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
  options_table().apply(query, options);
  return make_redis_backend(options);
}

}  // namespace

const Engine& redis_engine() {
  static const Engine engine{"redis://[user:password@]host:port[/db][?prefix=simba]", options_table().keys(), &open};
  return engine;
}

}  // namespace simba::internal
