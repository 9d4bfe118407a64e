// The operator's HTTP endpoint (http_endpoint.h), on cpp-httplib.
#include "cli/http_endpoint.h"

#include <httplib.h>

#include <charconv>
#include <iostream>

#include "simba/error.h"
#include "simba/metrics.h"

namespace simba::cli {
namespace {

struct HostPort {
  std::string host;
  int port = 0;
};

HostPort parse_address(const std::string& address) {
  const auto bad = [&](const std::string& why) {
    return Error(errc::invalid_argument,
                 "--http '" + address + "': " + why + " (expected HOST:PORT, e.g. 127.0.0.1:9464)");
  };
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("no host and port");
  HostPort out;
  out.host = address.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  const auto port = std::string_view(address).substr(colon + 1);
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || out.port < 0 || out.port > 65535) {
    throw bad("the port is not a number from 0 to 65535");
  }
  return out;
}

// One line, whatever the message holds.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

HttpEndpoint::HttpEndpoint(const std::string& address, Client client, std::string mutex, std::function<bool()> leads)
    : server_(std::make_unique<httplib::Server>()) {
  const auto where = parse_address(address);
  auto& server = *server_;
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_payload_max_length(64 * 1024);
  server.Get("/metrics", [client, mutex, leads](const httplib::Request&, httplib::Response& res) {
    const std::string leader =
        "# HELP simba_leader 1 while this process owns the mutex, else 0.\n"
        "# TYPE simba_leader gauge\n"
        "simba_leader{mutex=\"" +
        prometheus_label_value(mutex) + "\"} " + (leads() ? "1" : "0") + "\n";
    res.set_content(to_prometheus(client.metrics(), leader), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [client, mutex](const httplib::Request&, httplib::Response& res) {
    try {
      client.snapshot(mutex);
      res.set_content("ok\n", "text/plain; charset=utf-8");
    } catch (const std::exception& e) {
      res.status = 503;
      res.set_content("unavailable: " + one_line(e.what()) + "\n", "text/plain; charset=utf-8");
    }
  });
  server.Get("/leader", [mutex, leads](const httplib::Request&, httplib::Response& res) {
    if (leads()) {
      res.set_content("leader of '" + one_line(mutex) + "'\n", "text/plain; charset=utf-8");
    } else {
      res.status = 503;
      res.set_content("not the leader of '" + one_line(mutex) + "'\n", "text/plain; charset=utf-8");
    }
  });
  // Every other path and method: 404, with a body that says so.
  const auto not_found = [](const httplib::Request&, httplib::Response& res) { res.status = 404; };
  server.Post(".*", not_found);
  server.Put(".*", not_found);
  server.Patch(".*", not_found);
  server.Delete(".*", not_found);
  server.Options(".*", not_found);
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found (GET /metrics, /healthz or /leader)\n", "text/plain");
  });
  port_ = where.port == 0 ? server.bind_to_any_port(where.host)
                          : (server.bind_to_port(where.host, where.port) ? where.port : -1);
  if (port_ <= 0) {
    throw Error(
        errc::invalid_argument,
        "--http '" + address + "': cannot listen there (in use, not permitted, or not an address of this host)");
  }
  thread_ = std::thread([&server] { server.listen_after_bind(); });
  std::cerr << "simba: serving http://"
            << (where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host) << ":" << port_
            << "/metrics, /healthz and /leader\n";
}

HttpEndpoint::~HttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<HttpEndpoint> endpoint_of(const std::string& address, const Client& client,
                                          const std::shared_ptr<Locker>& locker) {
  if (address.empty()) return nullptr;
  return std::make_unique<HttpEndpoint>(address, client, locker->mutex(), [weak = std::weak_ptr<Locker>(locker)] {
    auto held = weak.lock();
    return held && held->is_owner();
  });
}

}  // namespace simba::cli
