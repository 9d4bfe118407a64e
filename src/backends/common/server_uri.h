// What every SQL server URI carries: user:password@host:port/database and the two timeouts.
// Internal to the SQL engines' URI openers.
#pragma once

#include "backends/common/sweep.h"
#include "backends/engine.h"
#include "simba/error.h"

namespace simba::internal {

inline const EngineOption kConnectTimeoutOption{"connect_timeout", "bound on connecting (default 2s)"};
inline const EngineOption kCommandTimeoutOption{"command_timeout", "bound on one statement (default 2s)"};
inline const EngineOption kSweepIdleOption{kSweepIdleKey, kSweepIdleHelp};

template <class Options>
void take_server_basics(const Uri& uri, const EngineQuery& query, Options& options) {
  if (uri.host.empty()) throw Error(errc::invalid_argument, uri.scheme + " URI needs a host: " + uri.redacted());
  options.host = uri.host;
  if (uri.port != 0) options.port = uri.port;
  options.user = uri.user;
  options.password = uri.password;
  options.database = uri.path.size() > 1 ? uri.path.substr(1) : "";
  options.connect_timeout = duration_option(query, "connect_timeout", options.connect_timeout);
  options.command_timeout = duration_option(query, "command_timeout", options.command_timeout);
  options.sweep_idle = duration_option(query, kSweepIdleKey, options.sweep_idle);
}

}  // namespace simba::internal
