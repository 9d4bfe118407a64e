// The fault proxy itself, against an echo server of this test: each fault does what it says.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "faults/fault_proxy.h"

namespace simba::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Echoes every byte back; counts connections that reached it and those it saw close.
class EchoServer {
 public:
  EchoServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    listen(listener_, 16);
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        int fd = accept(listener_, nullptr, nullptr);
        if (fd < 0) continue;
        ++reached_;
        workers_.emplace_back([this, fd](std::stop_token stop_worker) {
          char buffer[4096];
          while (!stop_worker.stop_requested()) {
            pollfd q{fd, POLLIN, 0};
            if (poll(&q, 1, 20) <= 0) continue;
            ssize_t n = read(fd, buffer, sizeof buffer);
            if (n <= 0) break;
            if (write(fd, buffer, static_cast<std::size_t>(n)) < 0) break;
          }
          ++closed_;
          close(fd);
        });
      }
    });
  }
  ~EchoServer() {
    thread_.request_stop();
    thread_.join();
    workers_.clear();
    close(listener_);
  }
  int port() const { return port_; }
  int reached() const { return reached_; }
  int closed() const { return closed_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> reached_{0}, closed_{0};
  std::vector<std::jthread> workers_;
  std::jthread thread_;
};

int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  return fd;
}

// What arrives on `fd` within `timeout`: the bytes, or "<eof>" / "<reset>".
std::string receive(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return "";
  char buffer[256];
  ssize_t n = read(fd, buffer, sizeof buffer);
  if (n == 0) return "<eof>";
  if (n < 0) return errno == ECONNRESET ? "<reset>" : "<error>";
  return std::string(buffer, static_cast<std::size_t>(n));
}

void say(int fd, const std::string& text) { ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size())); }

bool eventually(const std::function<bool()>& predicate) {
  auto until = Clock::now() + 2s;
  while (Clock::now() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

TEST(FaultProxyTest, PassesBytesBothWays) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  say(fd, "hello");
  EXPECT_EQ(receive(fd, 2s), "hello");
  close(fd);
}

TEST(FaultProxyTest, APartitionHoldsBytesUntilItHealsAndKeepsTheConnection) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  say(fd, "a");
  EXPECT_EQ(receive(fd, 2s), "a");
  proxy.blackhole();
  say(fd, "b");
  EXPECT_EQ(receive(fd, 300ms), "");
  EXPECT_EQ(proxy.connections(), 1u);
  proxy.pass();
  EXPECT_EQ(receive(fd, 2s), "b");
  close(fd);
}

TEST(FaultProxyTest, AOneWayPartitionHoldsOnlyItsDirection) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  say(fd, "x");
  EXPECT_EQ(receive(fd, 2s), "x");
  // Replies held: the request reaches the server (the echo is written back) but not us.
  proxy.blackhole(FaultProxy::Direction::down);
  say(fd, "y");
  EXPECT_EQ(receive(fd, 300ms), "");
  proxy.pass();
  EXPECT_EQ(receive(fd, 2s), "y");
  // Requests held: nothing reaches the server.
  proxy.blackhole(FaultProxy::Direction::up);
  say(fd, "z");
  EXPECT_EQ(receive(fd, 300ms), "");
  proxy.pass();
  EXPECT_EQ(receive(fd, 2s), "z");
  close(fd);
}

TEST(FaultProxyTest, DelaysEveryChunk) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  proxy.delay(150ms);
  auto sent = Clock::now();
  say(fd, "slow");
  EXPECT_EQ(receive(fd, 2s), "slow");
  EXPECT_GE(Clock::now() - sent, 300ms);  // 150 ms each way
  close(fd);
}

TEST(FaultProxyTest, ResetsEveryConnection) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  say(fd, "1");
  EXPECT_EQ(receive(fd, 2s), "1");
  proxy.reset();
  EXPECT_EQ(receive(fd, 2s), "<reset>");
  EXPECT_TRUE(eventually([&] { return echo.closed() == 1; }));
  close(fd);
}

TEST(FaultProxyTest, RefusesNewConnectionsWhileAsked) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  proxy.refuse(true);
  int fd = dial(proxy.port());
  EXPECT_EQ(receive(fd, 2s), "<reset>");
  close(fd);
  EXPECT_EQ(echo.reached(), 0);
  proxy.refuse(false);
  fd = dial(proxy.port());
  say(fd, "in");
  EXPECT_EQ(receive(fd, 2s), "in");
  close(fd);
}

TEST(FaultProxyTest, AHalfOpenConnectionIsClosedAtTheServerAndSilentAtTheClient) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  int fd = dial(proxy.port());
  say(fd, "1");
  EXPECT_EQ(receive(fd, 2s), "1");
  proxy.half_open();
  EXPECT_TRUE(eventually([&] { return echo.closed() == 1; })) << "the server did not see its client go";
  say(fd, "2");
  EXPECT_EQ(receive(fd, 300ms), "") << "the client's side must stay open and silent";
  int again = dial(proxy.port());
  say(again, "3");
  EXPECT_EQ(receive(again, 2s), "3") << "new connections pass";
  close(fd);
  close(again);
}

TEST(FaultProxyTest, CommandsAsTextNameWhatIsWrong) {
  EchoServer echo;
  FaultProxy proxy("127.0.0.1", echo.port());
  EXPECT_EQ(proxy.command("partition up"), "ok");
  EXPECT_EQ(proxy.command("delay 20"), "ok");
  EXPECT_EQ(proxy.command("pass"), "ok");
  EXPECT_NE(proxy.command("status").find("connections=0"), std::string::npos);
  EXPECT_EQ(proxy.command("delay soon").rfind("error: unknown command 'delay soon'", 0), 0u);
  EXPECT_EQ(proxy.command("partition sideways").rfind("error:", 0), 0u);
  EXPECT_EQ(proxy.command("pass now please").rfind("error: too many words", 0), 0u);
}

}  // namespace
}  // namespace simba::test
