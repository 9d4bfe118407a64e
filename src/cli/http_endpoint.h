// `--http ADDR:PORT` of lock, leader and schedule: a small HTTP server for an operator's tools.
//
//   GET /metrics   the client's metrics (simba/metrics.h) in Prometheus' text format, and
//                  simba_leader{mutex="..."} 1 while this process owns the mutex, else 0
//   GET /healthz   200 "ok" while the backend answers a read of the mutex; 503 and a one-line
//                  reason when it does not
//   GET /leader    200 only while this process owns the mutex (a readiness probe that routes
//                  traffic to the leader alone); 503 otherwise
//   anything else  404 (a request the server cannot parse: 400)
// No response carries a password: backend errors are said as the library says them, and it
// never shows one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "simba/client.h"
#include "simba/locker.h"

namespace httplib {
class Server;
}

namespace simba::cli {

class HttpEndpoint {
 public:
  // Listens on `address` ("HOST:PORT", "[IPv6]:PORT"; port 0 picks a free one) and says where
  // on stderr. `leads` tells whether this process owns `mutex` now. Throws
  // Error(errc::invalid_argument) naming the address if it is malformed or cannot be listened on.
  HttpEndpoint(const std::string& address, Client client, std::string mutex, std::function<bool()> leads);
  ~HttpEndpoint();  // stops serving; a request under way finishes first
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// With `address` (--http) given: the endpoint of `locker`'s mutex, whose /leader asks the
// locker whether it owns (holding it weakly: keep the endpoint in a variable declared after the
// locker, so that it goes first); else none.
std::unique_ptr<HttpEndpoint> endpoint_of(const std::string& address, const Client& client,
                                          const std::shared_ptr<Locker>& locker);

}  // namespace simba::cli
