// What every SQL server URI carries: user:password@host:port/database, the two timeouts and
// the sweep.
// Internal to the SQL engines' URI openers.
#pragma once

#include "backends/common/sweep.h"
#include "backends/engine.h"
#include "simba/error.h"

namespace simba::internal {

// The options every SQL server engine has: its two timeouts and the sweep.
template <class Options>
OptionTable<Options> server_options() {
  return OptionTable<Options>()
      .duration("connect_timeout", "bound on connecting (default 2s)", &Options::connect_timeout)
      .duration("command_timeout", "bound on one statement (default 2s)", &Options::command_timeout)
      .duration(kSweepIdleKey, kSweepIdleHelp, &Options::sweep_idle);
}

// The server, user, password and database of the URI.
template <class Options>
void take_server_basics(const Uri& uri, Options& options) {
  if (uri.host.empty()) throw Error(errc::invalid_argument, uri.scheme + " URI needs a host: " + uri.redacted());
  options.host = uri.host;
  if (uri.port != 0) options.port = uri.port;
  options.user = uri.user;
  options.password = uri.password;
  options.database = uri.path.size() > 1 ? uri.path.substr(1) : "";
}

}  // namespace simba::internal
