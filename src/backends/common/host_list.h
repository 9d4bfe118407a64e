// The "host:port[,host:port...]" of a URI whose engine talks to a cluster (ZooKeeper, etcd).
// Internal to those engines' URI openers.
#pragma once

#include <string>
#include <vector>

#include "core/uri.h"
#include "simba/error.h"

namespace simba::internal {

// Each host of the URI as "host:port": one host (its port parsed by the URI parser) or a list
// "h1:p1,h2" kept whole; a host without a port gets `default_port`. Throws
// Error(errc::invalid_argument) naming `engine` for an empty host or a bad port.
inline std::vector<std::string> host_list(const Uri& uri, int default_port, const std::string& engine) {
  const std::string hosts = uri.host + (uri.port != 0 ? ":" + std::to_string(uri.port) : "");
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= hosts.size();) {
    const auto comma = hosts.find(',', start);
    std::string host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto colon = host.find(':');
    if (colon == 0 || host.empty()) {
      throw Error(errc::invalid_argument, engine + " URI has an empty host: " + uri.redacted());
    }
    if (colon == std::string::npos) {
      host += ":" + std::to_string(default_port);
    } else {
      const std::string port = host.substr(colon + 1);
      if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(port) < 1 || std::stoi(port) > 65535) {
        throw Error(errc::invalid_argument, engine + " URI: port '" + port + "' of '" + host.substr(0, colon) +
                                                "' is not a number from 1 to 65535");
      }
    }
    out.push_back(host);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace simba::internal
