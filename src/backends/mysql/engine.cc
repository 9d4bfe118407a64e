// "mysql://user:password@host:port/db" (or mariadb://).
#include "backends/common/server_uri.h"
#include "simba/mysql_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  MysqlOptions options;
  take_server_basics(uri, query, options);
  options.returning = switch_option(query, "returning", options.returning);
  return make_mysql_backend(options);
}

}  // namespace

const Engine& mysql_engine() {
  static const Engine engine{
      "mysql://user:password@host:port/db (or mariadb://)",
      {kConnectTimeoutOption,
       kCommandTimeoutOption,
       kSweepIdleOption,
       {"returning", "off: the upsert + read that servers without INSERT ... RETURNING get (default on)"}},
      &open};
  return engine;
}

}  // namespace simba::internal
