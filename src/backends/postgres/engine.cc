// "postgresql://user:password@host:port/db[?sslmode=...&sslrootcert=...]" (or postgres://).
#include "backends/common/server_uri.h"
#include "simba/postgres_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  PostgresOptions options;
  take_server_basics(uri, query, options);
  options.sslmode = text_option(query, "sslmode");
  options.sslrootcert = text_option(query, "sslrootcert");
  options.sslcert = text_option(query, "sslcert");
  options.sslkey = text_option(query, "sslkey");
  return make_postgres_backend(options);
}

}  // namespace

const Engine& postgres_engine() {
  static const Engine engine{
      "postgresql://user:password@host:port/db",
      {{"sslmode", "passed to libpq (disable, prefer, require, verify-ca, verify-full)"},
       {"sslrootcert", "the CA file that signed the server's certificate (verify-ca, verify-full)"},
       {"sslcert", "a client certificate file"},
       {"sslkey", "the client certificate's key file"},
       kConnectTimeoutOption,
       kCommandTimeoutOption,
       kSweepIdleOption},
      &open};
  return engine;
}

}  // namespace simba::internal
