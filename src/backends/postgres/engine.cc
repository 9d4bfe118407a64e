// "postgresql://user:password@host:port/db[?sslmode=...]" (or postgres://).
#include "backends/common/server_uri.h"
#include "simba/postgres_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  PostgresOptions options;
  take_server_basics(uri, query, options);
  options.sslmode = text_option(query, "sslmode");
  return make_postgres_backend(options);
}

}  // namespace

const Engine& postgres_engine() {
  static const Engine engine{"postgresql://user:password@host:port/db",
                             {{"sslmode", "passed to libpq (disable, prefer, require, ...)"},
                              kConnectTimeoutOption,
                              kCommandTimeoutOption,
                              kSweepIdleOption},
                             &open};
  return engine;
}

}  // namespace simba::internal
