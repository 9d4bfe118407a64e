// Faults on the wire between one owner and its server (tests/faults/fault_proxy.h), on a real
// server: the owner reaches it through the fault proxy, a rival contender directly.
//
//   simba_wire_fault_tests --backend URI     (run through src/backends/<engine>/test_server.sh)
//
// Every case samples both contenders' is_owner() every millisecond for its whole length: the
// two never believe at once. Figures (ms from the fault) go to stdout as JSON lines.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>

#include "core/service_core.h"
#include "core/uri.h"
#include "faults/fault_proxy.h"
#include "kit.h"

namespace simba::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tck::wait_until;

std::string g_uri;  // the server's own

long ms_since(Clock::time_point from) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - from).count());
}

// The lease every case uses: short, so a case takes seconds.
ContendOptions lease_options() {
  ContendOptions options;
  options.ttl = 1000ms;
  options.transition = 500ms;
  options.backoff_initial = 20ms;
  return options;
}

// Reads a mutex through a backend every 100 ms and keeps the slowest answer and the errors:
// whether that backend's own wire (the "healthy" one) stayed healthy while a case ran.
class WireProbe {
 public:
  WireProbe(Backend& backend, const std::string& mutex)
      : thread_([this, &backend, mutex](std::stop_token stop) {
          while (!stop.stop_requested()) {
            const auto sent = Clock::now();
            try {
              backend.read(mutex);
            } catch (const std::exception&) {
              errors_.fetch_add(1);
            }
            const long took = ms_since(sent);
            if (took > slowest_ms_.load()) slowest_ms_.store(took);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  long slowest_ms() const { return slowest_ms_.load(); }
  long errors() const { return errors_.load(); }

 private:
  std::atomic<long> slowest_ms_{0};
  std::atomic<long> errors_{0};
  std::jthread thread_;
};

// Samples two services' beliefs every millisecond; counts the instants both believed. `a` is
// read before and after `b`: only `a` true on both sides of a true `b` is an overlap, so a
// sampler thread preempted between two reads never reports one that was not there.
class Sampler {
 public:
  Sampler(MutexContendService& a, MutexContendService& b)
      : thread_([this, &a, &b](std::stop_token stop) {
          auto now = [] { return Clock::now().time_since_epoch().count(); };
          while (!stop.stop_requested()) {
            const bool a_before = a.is_owner();
            if (a_before) last_a_owned_.store(now());
            const bool b_owns = b.is_owner();
            if (b_owns && first_b_owned_.load() == 0) first_b_owned_.store(now());
            const bool a_after = a.is_owner();
            if (a_after) last_a_owned_.store(now());
            if (a_before && b_owns && a_after) ++overlaps_;
            std::this_thread::sleep_for(1ms);
          }
        }) {}
  ~Sampler() { stop(); }
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  int overlaps() const { return overlaps_.load(); }
  // When `a` was last seen owning and `b` first seen owning (time_since_epoch ticks; 0: never).
  Clock::rep last_a_owned() const { return last_a_owned_.load(); }
  Clock::rep first_b_owned() const { return first_b_owned_.load(); }
  void forget_b() { first_b_owned_.store(0); }

 private:
  std::atomic<int> overlaps_{0};
  std::atomic<Clock::rep> last_a_owned_{0};
  std::atomic<Clock::rep> first_b_owned_{0};
  std::jthread thread_;
};

void report(const std::string& scenario, const std::string& figures) {
  std::cout << "{\"scenario\":\"" << scenario << "\",\"backend\":\"" << internal::parse_uri(g_uri).scheme << "\","
            << figures << "}" << std::endl;
}

// Opens a backend before any fault, trying again while connecting times out: on a busy machine
// a server's new session can take longer than the 2 s connect timeout the cases keep (seen
// in CI on PostgreSQL, which forks a process per connection). The faults come later.
std::shared_ptr<Backend> open_patiently(const std::string& uri) {
  for (int attempt = 1;; ++attempt) {
    try {
      return open_backend(uri);
    } catch (const Error& e) {
      if (e.code() != errc::unavailable || attempt == 5) throw;
      std::cout << "[ NOTE     ] opening the backend, attempt " << attempt << ": " << e.what() << "\n";
    }
  }
}

class WireFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ZooKeeper's host list keeps its port in `host`.
    auto uri = internal::parse_uri(g_uri);
    std::string from = uri.port > 0 ? uri.host + ":" + std::to_string(uri.port) : uri.host;
    auto colon = from.rfind(':');
    ASSERT_TRUE(colon != std::string::npos && from.find(',') == std::string::npos)
        << "the URI names no single host:port: " << uri.redacted();
    proxy_ = std::make_unique<FaultProxy>(from.substr(0, colon), std::stoi(from.substr(colon + 1)));
    proxied_uri_ = g_uri;
    auto at = proxied_uri_.find(from);
    ASSERT_NE(at, std::string::npos);
    proxied_uri_.replace(at, from.size(), "127.0.0.1:" + std::to_string(proxy_->port()));
    mutex_ = tck::unique_mutex();
    owner_client_.emplace(open_patiently(proxied_uri_), lease_options(), std::make_shared<Runtime>());
    rival_client_.emplace(open_patiently(g_uri), lease_options(), std::make_shared<Runtime>());
    owner_ = std::make_shared<tck::Recorder>(mutex_, "owner-behind-the-proxy");
    rival_ = std::make_shared<tck::Recorder>(mutex_, "rival-on-a-healthy-wire");
    owner_service_ = owner_client_->contend_service(owner_);
    rival_service_ = rival_client_->contend_service(rival_);
  }
  void TearDown() override {
    sampler_.reset();
    if (proxy_) proxy_->pass();
    for (auto* service : {owner_service_.get(), rival_service_.get()}) {
      if (service && service->status() == ServiceStatus::running) service->stop();
    }
  }

  // The owner takes the mutex through the proxy; the rival then waits on a healthy wire.
  void start_owned() {
    owner_service_->start();
    ASSERT_TRUE(wait_until([&] { return owner_service_->is_owner(); }, 10s)) << "no ownership through the proxy";
    rival_service_->start();
    sampler_ = std::make_unique<Sampler>(*owner_service_, *rival_service_);
    std::this_thread::sleep_for(300ms);  // a few renewals, the rival waiting
    ASSERT_TRUE(owner_service_->is_owner());
  }

  // Whether the successor (the rival) kept its own time, so its belief shows what the old
  // owner's late bytes did to it: its own wire answered every read within the transition (the
  // time a renewal has between falling due and the lease's end by the owner's clock), and it
  // lost no lease by its own doing (LostReason::stall: a renewal its process ran too late on a
  // busy machine; LostReason::error: its backend calls failed). A successor that did not ends
  // its belief by its own clock, whatever the late bytes did; what they did is then judged by
  // the server's record alone. Seen in CI: a 1.3 s read on the direct connection (PostgreSQL);
  // a renewal that ran out by the rival's clock though its wire answered within 334 ms (a
  // fresh CI run beside a build).
  bool rival_kept_time(WireProbe& rival_wire) const {
    const auto lost = rival_client_->metrics().lost;
    const auto stalls = lost[static_cast<std::size_t>(LostReason::stall)];
    const auto errors = lost[static_cast<std::size_t>(LostReason::error)];
    const bool kept = rival_wire.errors() == 0 && rival_wire.slowest_ms() < lease_options().transition.count() &&
                      stalls == 0 && errors == 0;
    if (!kept) {
      std::cout << "[ NOTE     ] the rival did not keep its own time (slowest read " << rival_wire.slowest_ms()
                << " ms, " << rival_wire.errors() << " read errors, " << stalls << " leases run out by its clock, "
                << errors << " lost to errors): its belief is not checked, the server's record is\n";
    }
    return kept;
  }

  // After the fault healed: the two never overlap, and the old owner, never restarted, owns
  // again once the rival lets go.
  void expect_recovers(const std::string& scenario, const std::string& figures) {
    proxy_->pass();
    std::this_thread::sleep_for(1000ms);  // late bytes land; beliefs settle
    // The rival lets go: stopped whether or not it owns right now (on a loaded machine its
    // lease may lapse between renewals and be won again a round later).
    if (rival_service_->status() == ServiceStatus::running) rival_service_->stop();
    auto healed = Clock::now();
    EXPECT_TRUE(wait_until([&] { return owner_service_->is_owner(); }, 15s))
        << scenario << ": the old owner did not own again after the fault healed";
    const long recovered = ms_since(healed);
    sampler_->stop();
    EXPECT_EQ(sampler_->overlaps(), 0) << scenario << ": both contenders believed they owned at once";
    report(scenario, figures + ",\"owns_again_ms\":" + std::to_string(recovered) +
                         ",\"overlaps\":" + std::to_string(sampler_->overlaps()));
  }

  // A fault the owner cannot renew through: it stops believing by its own deadline (ttl +
  // transition after its last renewal left, so at most that after the fault; the server lets
  // others in that long after the renewal arrived); when `takeover`, the rival wins, and only
  // after the owner stopped believing.
  void expect_partition(const std::string& scenario, const std::function<void()>& fault, bool takeover) {
    ASSERT_NO_FATAL_FAILURE(start_owned());
    const auto lease = lease_options().ttl + lease_options().transition;
    auto at = Clock::now();
    fault();
    ASSERT_TRUE(wait_until([&] { return !owner_service_->is_owner(); }, lease + 2s))
        << scenario << ": the owner still believes";
    const long revoked = ms_since(at);
    EXPECT_LE(revoked, lease.count() + 100) << scenario << ": the owner believed past its own deadline";
    std::string figures = "\"revoked_ms\":" + std::to_string(revoked);
    if (takeover) {
      ASSERT_TRUE(wait_until([&] { return rival_service_->is_owner(); }, 15s)) << scenario << ": no takeover";
      figures += ",\"takeover_ms\":" + std::to_string(ms_since(at));
      ASSERT_TRUE(wait_until([&] { return sampler_->first_b_owned() != 0; }, 1s));  // sampled too
      EXPECT_GT(sampler_->first_b_owned(), sampler_->last_a_owned())
          << scenario << ": the rival won before the owner stopped believing (owner last seen "
          << std::chrono::duration_cast<std::chrono::milliseconds>(
                 Clock::duration(sampler_->last_a_owned() - sampler_->first_b_owned()))
                 .count()
          << " ms after the rival first was)";
    } else {
      std::this_thread::sleep_for(1500ms);  // whoever holds the server's lease keeps it
      figures += ",\"takeover\":" + std::string(rival_service_->is_owner() ? "true" : "false");
    }
    expect_recovers(scenario, figures);
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::string proxied_uri_;
  std::string mutex_;
  std::optional<Client> owner_client_, rival_client_;
  std::shared_ptr<tck::Recorder> owner_, rival_;
  std::unique_ptr<MutexContendService> owner_service_, rival_service_;
  std::unique_ptr<Sampler> sampler_;
};

TEST_F(WireFaultTest, APartitionedOwnerStopsBelievingBeforeTheRivalWinsAndRecoversAfter) {
  expect_partition(
      "partition", [&] { proxy_->blackhole(); }, true);
}

TEST_F(WireFaultTest, AOneWayPartitionOfRequestsIsTheSame) {
  expect_partition(
      "partition_up", [&] { proxy_->blackhole(FaultProxy::Direction::up); }, true);
}

TEST_F(WireFaultTest, AOneWayPartitionOfRepliesNeverLetsTwoBelieve) {
  // Requests still arrive: the server may keep renewing a lease its owner cannot hear about.
  // Safety holds; the mutex may stay with the deaf owner until the fault heals.
  expect_partition(
      "partition_down", [&] { proxy_->blackhole(FaultProxy::Direction::down); }, false);
}

TEST_F(WireFaultTest, AHalfOpenConnectionNeverLetsTwoBelieveAndTheOwnerReconnects) {
  expect_partition(
      "half_open", [&] { proxy_->half_open(); }, false);
}

TEST_F(WireFaultTest, ARenewalAnsweredAfterTheLeaseRanOutIsALoss) {
  // Every byte arrives, 2 s late (longer than ttl + transition): the renewals land after the
  // lease ended at the server and their answers after it ended here.
  const auto lease = lease_options().ttl + lease_options().transition;
  ASSERT_NO_FATAL_FAILURE(start_owned());
  WireProbe rival_wire(*rival_client_->backend(), mutex_);  // the rival's own connection
  auto at = Clock::now();
  proxy_->delay(2000ms);
  ASSERT_TRUE(wait_until([&] { return !owner_service_->is_owner(); }, lease + 2s));
  const long revoked = ms_since(at);
  EXPECT_LE(revoked, lease.count() + 100);
  ASSERT_TRUE(wait_until([&] { return rival_service_->is_owner(); }, 15s)) << "no takeover";
  const long takeover = ms_since(at);
  // The late renewals and answers keep landing: neither makes the owner believe again nor
  // ends the rival's lease.
  const auto rival_token = rival_service_->fencing_token();
  std::this_thread::sleep_for(3s);  // more than the 2 s delay: every late byte has landed
  rival_wire.stop();
  EXPECT_FALSE(owner_service_->is_owner());
  EXPECT_EQ(owner_->acquired_count(), 1) << "a late answer made the old owner believe again";
  // The successor's belief, if it kept its own time (rival_kept_time). The old owner's belief
  // and the sampler's overlaps are checked either way.
  if (rival_kept_time(rival_wire)) {
    EXPECT_TRUE(rival_service_->is_owner()) << "a late renewal ended the successor's lease";
    EXPECT_EQ(rival_service_->fencing_token(), rival_token);
    EXPECT_EQ(rival_->released_count(), 0);
  }
  EXPECT_EQ(sampler_->overlaps(), 0);
  expect_recovers("delay_past_lease",
                  "\"revoked_ms\":" + std::to_string(revoked) + ",\"takeover_ms\":" + std::to_string(takeover));
}

TEST_F(WireFaultTest, ALateReleaseByAnExpiredHolderLeavesItsSuccessorsLeaseAlone) {
  ASSERT_NO_FATAL_FAILURE(start_owned());
  WireProbe rival_wire(*rival_client_->backend(), mutex_);  // the rival's own connection
  proxy_->delay(2500ms);
  // The release leaves now and lands 2.5 s later, after the rival took over at ttl+transition.
  std::jthread releasing([&] { owner_service_->stop(); });
  ASSERT_TRUE(wait_until([&] { return rival_service_->is_owner(); }, 15s)) << "no takeover";
  const auto token = rival_service_->fencing_token();
  auto snapshot = rival_client_->backend()->read(mutex_);
  releasing.join();
  std::this_thread::sleep_for(2s);  // the late release has landed (the proxy delivers it after the client gave up)
  auto after = rival_client_->backend()->read(mutex_);
  rival_wire.stop();
  // The property, by the server's record: the successor's lease, with its token, is untouched.
  EXPECT_EQ(after.owner.owner_id, "rival-on-a-healthy-wire") << "the late release freed the successor's lease";
  EXPECT_EQ(after.owner.fencing_token, snapshot.owner.fencing_token);
  // The successor's own belief as well, if it kept its own time (rival_kept_time; seen in CI on
  // ZooKeeper: the rival's direct connection timed out meanwhile).
  if (rival_kept_time(rival_wire)) {
    EXPECT_TRUE(rival_service_->is_owner());
    EXPECT_EQ(rival_service_->fencing_token(), token);
    EXPECT_EQ(rival_->released_count(), 0);
  }
  sampler_->stop();
  EXPECT_EQ(sampler_->overlaps(), 0);
  report("late_release",
         "\"successor_kept\":" + std::string(after.owner.owner_id == rival_->contender_id() ? "true" : "false") +
             ",\"rival_wire_slowest_ms\":" + std::to_string(rival_wire.slowest_ms()) +
             ",\"rival_wire_errors\":" + std::to_string(rival_wire.errors()));
}

TEST_F(WireFaultTest, ResetsDuringAcquireRenewAndReleaseLeaveNoLeaseBehind) {
  // 12 rounds; in each, every connection is reset while an acquire, then a renewal, then a
  // release is on the wire (the proxy delays each chunk 60 ms, so a request or its answer is
  // in flight when the reset comes, 0-100 ms in). The owner still owns after the acquire and
  // keeps that lease through the renewal (the same token on the server), the release still frees the
  // mutex (sent again on a new connection), and a rival that waits on a healthy wire from the
  // acquire on never believes while the owner does: it takes the mutex only after the release.
  // The retry of a reset renewal needs a new session first, which on a busy machine took over
  // 2 s (PostgreSQL forks a process per session; see open_patiently; a fresh-clone run lost
  // the lease so with a transition of 500 ms, its rounds 4 times as slow as on a quiet
  // machine): the leases here have a transition of 4 s. Renewals still leave every ~ttl/3,
  // and nothing in a round waits for a lease to run out; a renewal taken for a loss (given up,
  // or taken again with a new token) still fails the round.
  auto options = lease_options();
  options.transition = 4000ms;
  const auto lease = options.ttl + options.transition;
  rival_service_.reset();
  unsigned seed = 12345;
  auto random_ms = [&](unsigned bound) {
    seed = seed * 1103515245 + 12345;
    return std::chrono::milliseconds((seed >> 16) % bound);
  };
  auto reset_in_flight = [&](unsigned within) {
    std::this_thread::sleep_for(random_ms(within));
    proxy_->reset();
    proxy_->pass();
  };
  // A release is sent at most ServiceCore::kReleaseAttempts times, each on a new connection
  // after a broken one; if every one failed (a new session not made within the connect
  // timeout, on a busy machine), the lease is left to run out, as the library says in its
  // log. Such a round is counted apart (`unreachable`), not as a lease left behind.
  constexpr auto kReleaseAttempts = static_cast<std::uint64_t>(internal::ServiceCore::kReleaseAttempts);
  auto release_errors = [&] {
    return owner_client_->metrics().backend_errors[static_cast<std::size_t>(BackendOp::release)];
  };
  int owned = 0, kept = 0, left_behind = 0, unreachable = 0, overlaps = 0, rival_took = 0;
  for (int round = 0; round < 12; ++round) {
    auto service = owner_client_->contend_service(owner_, options);
    auto rival = rival_client_->contend_service(rival_, options);
    proxy_->delay(60ms);
    service->start();
    reset_in_flight(100);
    const bool owns = wait_until([&] { return service->is_owner(); }, 5s);
    owned += owns;
    rival->start();
    Sampler sampler(*service, *rival);
    const auto token = rival_client_->backend()->read(mutex_).owner.fencing_token;
    proxy_->delay(60ms);
    reset_in_flight(400);  // renewals leave every ~ttl/3
    // Kept: the owner owns again within a lease and the server still holds the lease it had,
    // by its fencing token (the owner may stop believing while its wire is down; a lease that
    // ran out and was taken again would have a new token).
    const bool owns_again = wait_until([&] { return service->is_owner(); }, lease);
    const auto record = rival_client_->backend()->read(mutex_).owner;
    const bool kept_lease =
        owns && owns_again && record.owner_id == owner_->contender_id() && record.fencing_token == token;
    kept += kept_lease;
    if (!kept_lease) {
      ADD_FAILURE() << "round " << round << ": the renewal reset in flight cost the lease (token " << token
                    << " before, the record now: '" << record.owner_id << "' token " << record.fencing_token << ")";
    }
    proxy_->delay(60ms);
    const auto errors_before = release_errors();
    std::jthread stopping([&] { service->stop(); });
    reset_in_flight(100);
    stopping.join();
    const auto failed_releases = release_errors() - errors_before;
    auto after = rival_client_->backend()->read(mutex_);
    if (after.owner.has_owner(after.now) && after.owner.owner_id == owner_->contender_id()) {
      if (failed_releases >= kReleaseAttempts) {
        ++unreachable;
        std::cout << "[ NOTE     ] round " << round << ": every release attempt failed (" << failed_releases
                  << "): the server could not be reached in time; the lease runs out\n";
      } else {
        ++left_behind;
        ADD_FAILURE() << "round " << round << ": the stopped owner's lease is still there (token "
                      << after.owner.fencing_token << ", " << failed_releases << " release attempts failed)";
      }
    }
    // After the release, or once a lease left to run out has (an unreachable round).
    rival_took += wait_until([&] { return rival->is_owner(); }, lease + 5s);
    sampler.stop();
    overlaps += sampler.overlaps();
    rival->stop();
  }
  EXPECT_EQ(owned, 12) << "an acquire reset in flight was not retried";
  EXPECT_EQ(kept, 12) << "a renewal reset in flight lost the lease";
  EXPECT_EQ(left_behind, 0) << "releases reset in flight that left a lease behind";
  EXPECT_LT(unreachable, 12) << "no release reset in flight ever landed";
  EXPECT_EQ(overlaps, 0) << "the rival believed it owned while the owner did";
  EXPECT_EQ(rival_took, 12) << "the waiting rival did not get the mutex after the owner's release";
  report("resets", "\"owned\":" + std::to_string(owned) + ",\"kept\":" + std::to_string(kept) + ",\"left_behind\":" +
                       std::to_string(left_behind) + ",\"unreachable\":" + std::to_string(unreachable) +
                       ",\"overlaps\":" + std::to_string(overlaps) + ",\"rival_took\":" + std::to_string(rival_took) +
                       ",\"connections\":" + std::to_string(proxy_->accepted()));
}

}  // namespace
}  // namespace simba::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc) simba::test::g_uri = argv[++i];
  }
  if (simba::test::g_uri.empty()) {
    std::cerr << "usage: simba_wire_fault_tests --backend URI (a server's)\n";
    return 64;
  }
  return RUN_ALL_TESTS();
}
