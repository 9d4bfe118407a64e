// "postgresql://user:password@host:port/db[?sslmode=...&sslrootcert=...]" (or postgres://).
#include "backends/common/server_uri.h"
#include "simba/postgres_backend.h"

namespace simba::internal {
namespace {

using Options = PostgresOptions;

const OptionTable<Options>& options_table() {
  static const auto table =
      OptionTable<Options>()
          .text("sslmode", "passed to libpq (disable, prefer, require, verify-ca, verify-full)", &Options::sslmode)
          .text("sslrootcert", "the CA file that signed the server's certificate (verify-ca, verify-full)",
                &Options::sslrootcert)
          .text("sslcert", "a client certificate file", &Options::sslcert)
          .text("sslkey", "the client certificate's key file", &Options::sslkey)
          .append(server_options<Options>());
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  Options options;
  take_server_basics(uri, options);
  options_table().apply(query, options);
  return make_postgres_backend(options);
}

}  // namespace

const Engine& postgres_engine() {
  static const Engine engine{"postgresql://user:password@host:port/db", options_table().keys(), &open};
  return engine;
}

}  // namespace simba::internal
