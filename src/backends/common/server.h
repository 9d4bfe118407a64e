// What server backends share when they start: checking the address and naming the server
// in messages without its password. Internal to backends.
#pragma once

#include <string>

#include "simba/error.h"

namespace simba::internal {

// Throws Error(errc::invalid_argument) for a missing host or database, a bad port or a
// non-positive timeout; returns "scheme://user:***@host:port/database" (no password).
template <class Options>
std::string check_server_options(const char* scheme, const char* engine, const Options& options) {
  if (options.host.empty()) throw Error(errc::invalid_argument, std::string(engine) + " backend needs a host");
  if (options.database.empty())
    throw Error(errc::invalid_argument, std::string(engine) + " backend needs a database (/db)");
  if (options.port < 1 || options.port > 65535)
    throw Error(errc::invalid_argument, std::string(engine) + " port out of range");
  if (options.connect_timeout.count() <= 0 || options.command_timeout.count() <= 0) {
    throw Error(errc::invalid_argument, std::string(engine) + " timeouts must be > 0");
  }
  if (options.sweep_idle.count() < 0)
    throw Error(errc::invalid_argument, std::string(engine) + " sweep_idle must be >= 0");
  std::string where = std::string(scheme) + "://";
  if (!options.user.empty()) where += options.user + (options.password.empty() ? "" : ":***") + "@";
  return where + options.host + ":" + std::to_string(options.port) + "/" + options.database;
}

}  // namespace simba::internal
