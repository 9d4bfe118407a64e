// The fault proxy: one poll() loop over the listening socket, a wake-up pipe and both sockets
// of every connection. Each direction of a connection is a queue of chunks with the time each
// may leave; a blackhole or a half-open connection simply does not send.
#include "faults/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <list>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

namespace simba::test {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Closes with RST rather than FIN.
void close_with_reset(int fd) {
  if (fd < 0) return;
  linger hard{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  close(fd);
}

int connect_to(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(fd);
  return fd;
}

struct Chunk {
  std::string bytes;
  Clock::time_point due;
};

// One direction of a connection.
struct Flow {
  std::deque<Chunk> queue;
  std::size_t sent = 0;  // of queue.front()
  std::size_t held = 0;  // bytes in the queue
};

struct Connection {
  int client = -1;
  int server = -1;  // -1 once half-open
  // The client closed its side: what it sent before is still delivered (late, if delayed or
  // held), as TCP would, then the connection closes; answers are dropped.
  bool client_gone = false;
  Flow up;    // client -> server
  Flow down;  // server -> client
};

constexpr std::size_t kMaxHeld = 64 << 20;  // per direction; beyond it the proxy stops reading

}  // namespace

struct FaultProxy::State {
  std::string upstream_host;
  int upstream_port = 0;
  int listener = -1;
  int port = 0;
  int wake[2] = {-1, -1};

  mutable std::mutex mutex;
  std::list<Connection> open;
  bool hold_up = false;
  bool hold_down = false;
  std::chrono::milliseconds delay{0};
  bool refusing = false;
  bool stopping = false;
  std::size_t accepted = 0;
  std::jthread thread;

  void poke() const {
    char byte = 1;
    [[maybe_unused]] auto n = write(wake[1], &byte, 1);
  }
  void loop();
  // Accepts one pending connection; false when none was pending.
  bool accept_one();
  // Reads what `from` has into `flow`; false when `from` is closed.
  bool read_into(int from, Flow& flow, bool drop);
  // Sends what is due; false when `to` is closed.
  bool send_from(Flow& flow, int to, Clock::time_point now);
  static void close_connection(Connection& c) {
    close_with_reset(c.client);
    close_with_reset(c.server);
    c.client = c.server = -1;
  }
};

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, int listen_port)
    : state_(std::make_unique<State>()) {
  auto& s = *state_;
  s.upstream_host = std::move(upstream_host);
  s.upstream_port = upstream_port;
  s.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.listener < 0) fail("fault proxy: socket");
  int one = 1;
  setsockopt(s.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(listen_port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s.listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fail("fault proxy: bind");
  if (listen(s.listener, 128) != 0) fail("fault proxy: listen");
  socklen_t length = sizeof address;
  getsockname(s.listener, reinterpret_cast<sockaddr*>(&address), &length);
  s.port = ntohs(address.sin_port);
  set_nonblocking(s.listener);
  if (pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) fail("fault proxy: pipe");
  s.thread = std::jthread([&s] { s.loop(); });
}

FaultProxy::~FaultProxy() {
  auto& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  s.poke();
  s.thread.join();
  for (auto& c : s.open) State::close_connection(c);
  close(s.listener);
  close(s.wake[0]);
  close(s.wake[1]);
}

int FaultProxy::port() const { return state_->port; }

void FaultProxy::pass() {
  std::lock_guard lock(state_->mutex);
  state_->hold_up = state_->hold_down = false;
  state_->delay = std::chrono::milliseconds(0);
  state_->refusing = false;
  state_->poke();
}

void FaultProxy::blackhole(Direction direction) {
  std::lock_guard lock(state_->mutex);
  if (direction != Direction::down) state_->hold_up = true;
  if (direction != Direction::up) state_->hold_down = true;
  state_->poke();
}

void FaultProxy::delay(std::chrono::milliseconds each) {
  std::lock_guard lock(state_->mutex);
  state_->delay = std::max(each, std::chrono::milliseconds(0));
  state_->poke();
}

void FaultProxy::half_open() {
  std::lock_guard lock(state_->mutex);
  for (auto& c : state_->open) {
    if (c.server < 0) continue;
    close(c.server);  // a FIN: the server sees its client go
    c.server = -1;
    c.up = Flow();
    c.down = Flow();
  }
  state_->poke();
}

void FaultProxy::reset() {
  std::lock_guard lock(state_->mutex);
  for (auto& c : state_->open) State::close_connection(c);
  state_->open.clear();
  state_->poke();
}

void FaultProxy::refuse(bool on) {
  std::lock_guard lock(state_->mutex);
  state_->refusing = on;
  state_->poke();
}

std::size_t FaultProxy::connections() const {
  std::lock_guard lock(state_->mutex);
  return state_->open.size();
}

std::size_t FaultProxy::accepted() const {
  std::lock_guard lock(state_->mutex);
  return state_->accepted;
}

std::string FaultProxy::command(const std::string& line) {
  std::istringstream in(line);
  std::string verb, arg, extra;
  in >> verb >> arg >> extra;
  if (!extra.empty()) return "error: too many words in '" + line + "'";
  if (verb == "pass" && arg.empty()) {
    pass();
  } else if (verb == "partition" && (arg.empty() || arg == "both")) {
    blackhole(Direction::both);
  } else if (verb == "partition" && (arg == "up" || arg == "down")) {
    blackhole(arg == "up" ? Direction::up : Direction::down);
  } else if (verb == "delay" && !arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos &&
             arg.size() < 9) {
    delay(std::chrono::milliseconds(std::stol(arg)));
  } else if (verb == "half-open" && arg.empty()) {
    half_open();
  } else if (verb == "reset" && arg.empty()) {
    reset();
  } else if (verb == "refuse" && (arg == "on" || arg == "off")) {
    refuse(arg == "on");
  } else if (verb == "status" && arg.empty()) {
    std::lock_guard lock(state_->mutex);
    auto& s = *state_;
    std::ostringstream out;
    out << "connections=" << s.open.size() << " accepted=" << s.accepted << " hold_up=" << s.hold_up
        << " hold_down=" << s.hold_down << " delay_ms=" << s.delay.count() << " refusing=" << s.refusing;
    return out.str();
  } else {
    return "error: unknown command '" + line +
           "' (pass, partition [both|up|down], delay MS, half-open, reset, refuse on|off, status)";
  }
  return "ok";
}

bool FaultProxy::State::accept_one() {
  int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return false;
  ++accepted;
  int server = refusing ? -1 : connect_to(upstream_host, upstream_port);
  if (server < 0) {
    close_with_reset(client);
    return true;
  }
  int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(client);
  Connection c;
  c.client = client;
  c.server = server;
  open.push_back(std::move(c));
  return true;
}

bool FaultProxy::State::read_into(int from, Flow& flow, bool drop) {
  char buffer[65536];
  for (;;) {
    ssize_t n = recv(from, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (drop) continue;
    flow.queue.push_back({std::string(buffer, static_cast<std::size_t>(n)), Clock::now() + delay});
    flow.held += static_cast<std::size_t>(n);
    if (flow.held > kMaxHeld) return true;
  }
}

bool FaultProxy::State::send_from(Flow& flow, int to, Clock::time_point now) {
  while (!flow.queue.empty() && flow.queue.front().due <= now) {
    auto& chunk = flow.queue.front();
    ssize_t n = send(to, chunk.bytes.data() + flow.sent, chunk.bytes.size() - flow.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    flow.sent += static_cast<std::size_t>(n);
    if (flow.sent < chunk.bytes.size()) return true;
    flow.held -= chunk.bytes.size();
    flow.queue.pop_front();
    flow.sent = 0;
  }
  return true;
}

void FaultProxy::State::loop() {
  std::unique_lock lock(mutex);
  while (!stopping) {
    const auto now = Clock::now();
    // Send what is due, then decide what to wait for.
    for (auto it = open.begin(); it != open.end();) {
      bool alive = true;
      if (it->server >= 0) {
        if (!hold_up) alive = send_from(it->up, it->server, now);
        if (alive && !hold_down && !it->client_gone) alive = send_from(it->down, it->client, now);
      }
      if (it->client_gone && (it->up.queue.empty() || it->server < 0)) alive = false;
      if (!alive) {
        close_connection(*it);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<pollfd> fds{{wake[0], POLLIN, 0}, {listener, POLLIN, 0}};
    auto next = Clock::time_point::max();
    auto consider = [&](const Flow& flow, bool held_back) {
      if (!held_back && !flow.queue.empty()) next = std::min(next, flow.queue.front().due);
    };
    for (auto& c : open) {
      short client_events = !c.client_gone && c.up.held < kMaxHeld ? POLLIN : 0;
      short server_events = c.server >= 0 && c.down.held < kMaxHeld ? POLLIN : 0;
      if (c.server >= 0) {
        consider(c.up, hold_up);
        consider(c.down, hold_down);
        if (!hold_up && !c.up.queue.empty() && c.up.queue.front().due <= now) server_events |= POLLOUT;
        if (!hold_down && !c.down.queue.empty() && c.down.queue.front().due <= now) client_events |= POLLOUT;
      }
      fds.push_back({c.client_gone ? -1 : c.client, client_events, 0});
      fds.push_back({c.server, server_events, 0});  // fd -1 is ignored by poll()
    }
    int timeout = -1;
    if (next != Clock::time_point::max()) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      timeout = static_cast<int>(std::clamp<long>(wait, 0, 1000));
    }
    lock.unlock();
    poll(fds.data(), fds.size(), timeout);
    lock.lock();
    if (fds[0].revents) {
      char drain[64];
      while (read(wake[0], drain, sizeof drain) > 0) {
      }
    }
    if (stopping) break;
    // The connections may have changed while unlocked (reset, half-open): match by fd.
    if (fds[1].revents & POLLIN) {
      while (accept_one()) {
      }
    }
    std::size_t index = 2;
    for (auto it = open.begin(); it != open.end() && index + 1 < fds.size();) {
      const auto& client_fd = fds[index];
      const auto& server_fd = fds[index + 1];
      if (client_fd.fd != (it->client_gone ? -1 : it->client)) break;  // the list changed: next round
      index += 2;
      bool alive = true;
      if (client_fd.fd >= 0 && (client_fd.revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!read_into(it->client, it->up, it->server < 0)) {
          it->client_gone = true;  // deliver what it sent first (the send pass closes it)
          poke();
        }
      }
      if (it->server >= 0 && server_fd.fd == it->server && (server_fd.revents & (POLLIN | POLLHUP | POLLERR))) {
        alive = read_into(it->server, it->down, it->client_gone);
      }
      if (!alive) {
        close_connection(*it);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace simba::test
