// "mysql://user:password@host:port/db[?ssl=on&ssl_ca=...]" (or mariadb://).
#include "backends/common/server_uri.h"
#include "simba/mysql_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  MysqlOptions options;
  take_server_basics(uri, query, options);
  options.returning = switch_option(query, "returning", options.returning);
  options.ssl_ca = text_option(query, "ssl_ca");
  options.ssl_cert = text_option(query, "ssl_cert");
  options.ssl_key = text_option(query, "ssl_key");
  // A CA or a client certificate asks for TLS by itself.
  const bool files = !options.ssl_ca.empty() || !options.ssl_cert.empty() || !options.ssl_key.empty();
  options.ssl = switch_option(query, "ssl", files);
  options.ssl_verify = switch_option(query, "ssl_verify", options.ssl_verify);
  if (files && !options.ssl)
    throw Error(errc::invalid_argument, "ssl=off with TLS files (ssl_ca, ssl_cert, ssl_key): " + uri.redacted());
  return make_mysql_backend(options);
}

}  // namespace

const Engine& mysql_engine() {
  static const Engine engine{
      "mysql://user:password@host:port/db (or mariadb://)",
      {kConnectTimeoutOption,
       kCommandTimeoutOption,
       kSweepIdleOption,
       {"returning", "off: the upsert + read that servers without INSERT ... RETURNING get (default on)"},
       {"ssl", "on: TLS, a server without it is refused (default off; on when a TLS file is given)"},
       {"ssl_ca", "the CA file that signed the server's certificate (default: the system's)"},
       {"ssl_verify", "off: do not check the server's certificate and name (default on)"},
       {"ssl_cert", "a client certificate file"},
       {"ssl_key", "the client certificate's key file"}},
      &open};
  return engine;
}

}  // namespace simba::internal
