// "mysql://user:password@host:port/db[?ssl=on&ssl_ca=...]" (or mariadb://).
#include "backends/common/server_uri.h"
#include "simba/mysql_backend.h"

namespace simba::internal {
namespace {

using Options = MysqlOptions;

// Whether the query names a TLS file (a CA or a client certificate): that asks for TLS by itself.
bool names_tls_files(const EngineQuery& query) {
  for (const char* key : {"ssl_ca", "ssl_cert", "ssl_key"}) {
    if (!text_option(query, key).empty()) return true;
  }
  return false;
}

const OptionTable<Options>& options_table() {
  static const auto table =
      server_options<Options>()
          .on_off("returning", "off: the upsert + read that servers without INSERT ... RETURNING get (default on)",
                  &Options::returning)
          .on_off("wake_locks",
                  "off: waiters only poll; on: a release wakes them through GET_LOCK wake locks (default on)",
                  &Options::wake_locks)
          .custom("ssl", "on: TLS, a server without it is refused (default off; on when a TLS file is given)",
                  [](const EngineQuery& query, const std::string& key, Options& options) {
                    options.ssl = switch_option(query, key, names_tls_files(query));
                  })
          .text("ssl_ca", "the CA file that signed the server's certificate (default: the system's)", &Options::ssl_ca)
          .on_off("ssl_verify", "off: do not check the server's certificate and name (default on)",
                  &Options::ssl_verify)
          .text("ssl_cert", "a client certificate file", &Options::ssl_cert)
          .text("ssl_key", "the client certificate's key file", &Options::ssl_key);
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  Options options;
  take_server_basics(uri, options);
  options_table().apply(query, options);
  if (names_tls_files(query) && !options.ssl)
    throw Error(errc::invalid_argument, "ssl=off with TLS files (ssl_ca, ssl_cert, ssl_key): " + uri.redacted());
  return make_mysql_backend(options);
}

}  // namespace

const Engine& mysql_engine() {
  static const Engine engine{"mysql://user:password@host:port/db (or mariadb://)", options_table().keys(), &open};
  return engine;
}

}  // namespace simba::internal
