// "zookeeper://[user:password@]host:port[,host:port...][/chroot][?session_timeout=10s]".
#include "backends/engine.h"
#include "backends/common/host_list.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/zookeeper_backend.h"

namespace simba::internal {
namespace {

// "h1:2181,h2:2181": every host without a port gets 2181.
std::string host_string(const Uri& uri) {
  std::string out;
  for (const auto& host : host_list(uri, 2181, "zookeeper")) out += (out.empty() ? "" : ",") + host;
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
  options.hosts = host_string(uri);
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
