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
            received_ += static_cast<int>(n);
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
  int received() const { return received_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> reached_{0}, closed_{0}, received_{0};
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

void say(int fd, const std::string& text) {
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

// An echo server, the proxy in front of it, and a client connection through it that has
// carried one round trip.
class FaultProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = dial(proxy_.port());
    say(fd_, "1");
    ASSERT_EQ(receive(fd_, 2s), "1");
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
  }

  EchoServer echo_;
  FaultProxy proxy_{"127.0.0.1", echo_.port()};
  int fd_ = -1;
};

bool eventually(const std::function<bool()>& predicate) {
  auto until = Clock::now() + 2s;
  while (Clock::now() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

TEST_F(FaultProxyTest, PassesBytesBothWays) {
  say(fd_, "hello");
  EXPECT_EQ(receive(fd_, 2s), "hello");
}

TEST_F(FaultProxyTest, APartitionHoldsBytesUntilItHealsAndKeepsTheConnection) {
  proxy_.blackhole();
  say(fd_, "b");
  EXPECT_EQ(receive(fd_, 300ms), "");
  EXPECT_EQ(proxy_.connections(), 1u);
  proxy_.pass();
  EXPECT_EQ(receive(fd_, 2s), "b");
}

TEST_F(FaultProxyTest, AOneWayPartitionHoldsOnlyItsDirection) {
  // Answers held: the request reaches the server (the echo is written back) but not us.
  proxy_.blackhole(FaultProxy::Direction::down);
  say(fd_, "y");
  EXPECT_EQ(receive(fd_, 300ms), "");
  proxy_.pass();
  EXPECT_EQ(receive(fd_, 2s), "y");
  // Requests held: nothing reaches the server.
  proxy_.blackhole(FaultProxy::Direction::up);
  say(fd_, "z");
  EXPECT_EQ(receive(fd_, 300ms), "");
  proxy_.pass();
  EXPECT_EQ(receive(fd_, 2s), "z");
}

TEST_F(FaultProxyTest, DelaysEveryChunk) {
  proxy_.delay(150ms);
  auto sent = Clock::now();
  say(fd_, "slow");
  EXPECT_EQ(receive(fd_, 2s), "slow");
  EXPECT_GE(Clock::now() - sent, 300ms);  // 150 ms each way
}

TEST_F(FaultProxyTest, WhatAClientSentBeforeClosingStillArrivesLate) {
  proxy_.delay(200ms);
  say(fd_, "late");
  close(fd_);
  fd_ = -1;
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(echo_.received(), 1) << "delivered before its time";
  EXPECT_TRUE(eventually([&] { return echo_.received() == 5; })) << "dropped with the closed connection";
  EXPECT_TRUE(eventually([&] { return proxy_.connections() == 0; }));
}

TEST_F(FaultProxyTest, ResetsEveryConnection) {
  proxy_.reset();
  EXPECT_EQ(receive(fd_, 2s), "<reset>");
  EXPECT_TRUE(eventually([&] { return echo_.closed() == 1; }));
}

TEST_F(FaultProxyTest, RefusesNewConnectionsWhileAsked) {
  proxy_.refuse(true);
  int refused = dial(proxy_.port());
  EXPECT_EQ(receive(refused, 2s), "<reset>");
  close(refused);
  EXPECT_EQ(echo_.reached(), 1);  // the fixture's connection only
  proxy_.refuse(false);
  int again = dial(proxy_.port());
  say(again, "in");
  EXPECT_EQ(receive(again, 2s), "in");
  close(again);
}

TEST_F(FaultProxyTest, AHalfOpenConnectionIsClosedAtTheServerAndSilentAtTheClient) {
  proxy_.half_open();
  EXPECT_TRUE(eventually([&] { return echo_.closed() == 1; })) << "the server did not see its client go";
  say(fd_, "2");
  EXPECT_EQ(receive(fd_, 300ms), "") << "the client's side must stay open and silent";
  int again = dial(proxy_.port());
  say(again, "3");
  EXPECT_EQ(receive(again, 2s), "3") << "new connections pass";
  close(again);
}

TEST_F(FaultProxyTest, CommandsAsTextNameWhatIsWrong) {
  EXPECT_EQ(proxy_.command("partition up"), "ok");
  EXPECT_EQ(proxy_.command("delay 20"), "ok");
  EXPECT_EQ(proxy_.command("pass"), "ok");
  EXPECT_NE(proxy_.command("status").find("connections=1"), std::string::npos);
  EXPECT_EQ(proxy_.command("delay soon").rfind("error: unknown command 'delay soon'", 0), 0u);
  EXPECT_EQ(proxy_.command("partition sideways").rfind("error:", 0), 0u);
  EXPECT_EQ(proxy_.command("pass now please").rfind("error: too many words", 0), 0u);
}

}  // namespace
}  // namespace simba::test
