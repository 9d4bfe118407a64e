// "etcd://[user:password@]host:port[,host:port...][?prefix=simba&dial_timeout=2s&command_timeout=2s]".
#include "backends/engine.h"
#include "backends/common/host_list.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/etcd_backend.h"

namespace simba::internal {
namespace {

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
  options.endpoints = host_list(uri, 2379, "etcd");
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
