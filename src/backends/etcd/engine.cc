// "etcd://[user:password@]host:port[,host:port...][?prefix=simba&dial_timeout=2s&command_timeout=2s]".
#include "backends/engine.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/etcd_backend.h"

namespace simba::internal {
namespace {

// One host (its port parsed by the URI parser) or a list "h1:2379,h2" kept whole: every host
// without a port gets 2379.
std::vector<std::string> endpoints_of(const Uri& uri) {
  const std::string hosts = uri.host + (uri.port != 0 ? ":" + std::to_string(uri.port) : "");
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= hosts.size();) {
    const auto comma = hosts.find(',', start);
    std::string host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto colon = host.find(':');
    if (colon == 0 || host.empty())
      throw Error(errc::invalid_argument, "etcd URI has an empty host: " + uri.redacted());
    if (colon == std::string::npos) {
      host += ":2379";
    } else {
      const std::string port = host.substr(colon + 1);
      if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(port) < 1 || std::stoi(port) > 65535) {
        throw Error(errc::invalid_argument,
                    "etcd URI: port '" + port + "' of '" + host.substr(0, colon) + "' is not a number from 1 to 65535");
      }
    }
    out.push_back(host);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

using Options = EtcdOptions;

const OptionTable<Options>& options_table() {
  static const auto table =
      OptionTable<Options>()
          .custom("prefix", "keys live under <prefix>/ (default simba; etcdctl lock <prefix>/<name> joins a mutex)",
                  [](const EngineQuery& query, const std::string& key, Options& options) {
                    options.prefix = text_option(query, key, options.prefix);
                    while (options.prefix.size() > 1 && options.prefix.back() == '/') options.prefix.pop_back();
                    if (options.prefix.empty() || options.prefix == "/") {
                      throw Error(errc::invalid_argument, "etcd URI: prefix must not be empty");
                    }
                  })
          .duration("dial_timeout", "how long opening waits for an endpoint to answer (default 2s)",
                    &Options::dial_timeout)
          .duration("command_timeout", "bound on one call's round trip (default 2s)", &Options::command_timeout)
          .duration(kSweepIdleKey, kSweepIdleHelp, &Options::sweep_idle);
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  Options options;
  if (uri.host.empty()) throw Error(errc::invalid_argument, "etcd URI needs host:port: " + uri.redacted());
  if (uri.path.size() > 1) {
    throw Error(errc::invalid_argument, "etcd URI takes no path (use ?prefix=): " + uri.redacted());
  }
  options.endpoints = endpoints_of(uri);
  options.user = uri.user;
  options.password = uri.password;
  options_table().apply(query, options);
  return make_etcd_backend(options);
}

}  // namespace

const Engine& etcd_engine() {
  static const Engine engine{"etcd://[user:password@]host:port[,host:port...]", options_table().keys(), &open};
  return engine;
}

}  // namespace simba::internal
