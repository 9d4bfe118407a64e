// A TCP proxy on loopback that breaks the wire on command: the faults of a real network
// between a client and its server (a partition, a one-way partition, a half-open connection,
// delay, resets, refused connections), for the wire-fault tests and the chaos test.
//
//   FaultProxy proxy("127.0.0.1", server_port);   // listens on 127.0.0.1:proxy.port()
//   proxy.blackhole();                            // a partition: connections stay open
//   proxy.pass();                                 // healed: what was held arrives, in order
//
// One thread of its own moves the bytes (poll()); the methods may be called from any thread
// and take effect before they return. Held bytes are kept, not dropped, as TCP would
// retransmit them after a partition heals.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace simba::test {

class FaultProxy {
 public:
  // Which way a fault applies: `up` is client to server, `down` server to client.
  enum class Direction { both, up, down };

  // Listens on 127.0.0.1:`listen_port` (0: a free port) and forwards every connection to
  // `upstream_host`:`upstream_port`. Throws std::system_error if it cannot listen.
  FaultProxy(std::string upstream_host, int upstream_port, int listen_port = 0);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const;

  // Heals everything: no blackhole, no delay, new connections accepted. Bytes held so far are
  // sent (those delayed at their time).
  void pass();
  // Nothing arrives in `direction` (held until healed); connections stay open.
  void blackhole(Direction direction = Direction::both);
  // Every chunk read from now on is sent `each` later (0: no delay), both ways, in order.
  void delay(std::chrono::milliseconds each);
  // Every open connection becomes half-open: the server's side is closed (the server sees the
  // client go), the client's stays open and silent (what it sends is dropped, nothing comes
  // back) until the client closes it. New connections pass.
  void half_open();
  // Resets every open connection on both sides now (RST, not FIN).
  void reset();
  // While on, a new connection is reset as soon as it is accepted.
  void refuse(bool on);

  // Connections open now (half-open ones included).
  std::size_t connections() const;
  // Connections accepted since the start.
  std::size_t accepted() const;

  // The same as a line of text, for a control socket: "pass", "partition [both|up|down]",
  // "delay MS", "half-open", "reset", "refuse on|off", "status". Returns "ok" (or the status
  // line) or "error: ..." naming what is wrong.
  std::string command(const std::string& line);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace simba::test
