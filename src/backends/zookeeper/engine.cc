// "zookeeper://[user:password@]host:port[,host:port...][/chroot][?session_timeout=10s]".
#include "backends/engine.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/zookeeper_backend.h"

namespace simba::internal {
namespace {

// One host (its port parsed by the URI parser) or a list "h1:2181,h2" kept whole: every host
// without a port gets 2181.
std::string host_list(const Uri& uri) {
  const std::string hosts = uri.host + (uri.port != 0 ? ":" + std::to_string(uri.port) : "");
  std::string out;
  for (std::size_t start = 0; start <= hosts.size();) {
    auto comma = hosts.find(',', start);
    std::string host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto colon = host.find(':');
    if (colon == 0 || host.empty())
      throw Error(errc::invalid_argument, "zookeeper URI has an empty host: " + uri.redacted());
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
    out += (out.empty() ? "" : ",") + host;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

using Options = ZookeeperOptions;

const OptionTable<Options>& options_table() {
  static const auto table =
      OptionTable<Options>()
          .duration("session_timeout", "asked of the server; caps the lease at 9/10 of it (default 10s)",
                    &Options::session_timeout)
          .duration("connect_timeout", "how long a call waits for the session to be connected (default 5s)",
                    &Options::connect_timeout)
          .duration(kSweepIdleKey, kSweepIdleHelp, &Options::sweep_idle);
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  Options options;
  if (uri.host.empty()) throw Error(errc::invalid_argument, "zookeeper URI needs host:port: " + uri.redacted());
  options.hosts = host_list(uri);
  options.user = uri.user;
  options.password = uri.password;
  if (uri.path.size() > 1) options.chroot = uri.path;
  options_table().apply(query, options);
  return make_zookeeper_backend(options);
}

}  // namespace

const Engine& zookeeper_engine() {
  static const Engine engine{"zookeeper://[user:password@]host:port[,host:port...][/chroot]", options_table().keys(),
                             &open};
  return engine;
}

}  // namespace simba::internal
