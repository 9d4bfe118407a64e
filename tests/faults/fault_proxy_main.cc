// simba-fault-proxy: the fault proxy as a program, for the shell tests (the chaos test).
//
//   simba-fault-proxy HOST:PORT [--listen PORT]
//
// Prints "PROXY_PORT CONTROL_PORT" on its first line, then serves a control socket on
// 127.0.0.1:CONTROL_PORT: a command per line (see FaultProxy::command), a reply per line.
// From bash:  exec 3<>/dev/tcp/127.0.0.1/$control; echo partition >&3; read -r reply <&3
// Runs until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "faults/fault_proxy.h"

namespace {

int usage(const std::string& why) {
  std::cerr << "simba-fault-proxy: " << why << "\nusage: simba-fault-proxy HOST:PORT [--listen PORT]\n";
  return 64;
}

int parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  int port = std::stoi(text);
  return port <= 65535 ? port : -1;
}

// Serves one control connection: a line in, a line out.
void serve(simba::test::FaultProxy& proxy, int fd) {
  std::string pending;
  char buffer[512];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    pending.append(buffer, static_cast<std::size_t>(n));
    for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::string reply = proxy.command(line) + "\n";
      if (write(fd, reply.data(), reply.size()) < 0) return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) return usage("expected HOST:PORT [--listen PORT]");
  std::string upstream = argv[1];
  auto colon = upstream.rfind(':');
  int upstream_port = colon == std::string::npos ? -1 : parse_port(upstream.substr(colon + 1));
  if (upstream_port <= 0) return usage("'" + upstream + "' is not HOST:PORT");
  int listen_port = 0;
  if (argc == 4) {
    if (std::string(argv[2]) != "--listen") return usage(std::string("unknown option '") + argv[2] + "'");
    listen_port = parse_port(argv[3]);
    if (listen_port < 0) return usage(std::string("'") + argv[3] + "' is not a port");
  }
  try {
    simba::test::FaultProxy proxy(upstream.substr(0, colon), upstream_port, listen_port);
    int control = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (control < 0 || bind(control, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(control, 16) != 0) {
      std::perror("simba-fault-proxy: control socket");
      return 71;
    }
    socklen_t length = sizeof address;
    getsockname(control, reinterpret_cast<sockaddr*>(&address), &length);
    std::cout << proxy.port() << ' ' << ntohs(address.sin_port) << std::endl;
    for (;;) {
      int fd = accept4(control, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::thread([&proxy, fd] {
        serve(proxy, fd);
        close(fd);
      }).detach();
    }
  } catch (const std::exception& e) {
    std::cerr << "simba-fault-proxy: " << e.what() << "\n";
    return 71;
  }
}
