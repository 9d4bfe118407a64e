// Metrics and the event hook (simba/metrics.h) on the memory engine: what is counted, the
// losses by reason, the hook's order, a hook that throws or blocks, the per-mutex bound and
// the exposition's shape. promtool and a real Prometheus check the exposition in
// tests/cli_metrics_test.sh.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "kit.h"
#include "simba/memory_backend.h"
#include "simba/testing/fault_injection.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::kSoon;
using tck::wait_until;

std::size_t lost_of(const MetricsSnapshot& m, LostReason reason) { return m.lost[static_cast<std::size_t>(reason)]; }
std::uint64_t op_count(const std::array<HistogramSnapshot, kBackendOps>& h, BackendOp op) {
  return h[static_cast<std::size_t>(op)].count;
}

// Events a hook recorded, for a test to wait on.
class EventRecorder {
 public:
  EventHook hook() {
    return [this](const Event& e) {
      std::lock_guard lock(mutex_);
      events_.push_back(e);
    };
  }
  std::vector<Event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  bool wait_for(EventKind kind, const std::string& mutex) const {
    return wait_until(
        [&] {
          for (const auto& e : events()) {
            if (e.kind == kind && e.mutex == mutex) return true;
          }
          return false;
        },
        kSoon);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

TEST(MetricsTest, HoldsReleasesHandoversCachedRelocksAndRoundTripsAreCounted) {
  Client client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>());
  auto m = client.mutex("counted").with_linger(10s);
  for (int i = 0; i < 5; ++i) {
    std::scoped_lock hold(m);  // the first takes the lease; the others take it from the cache, fast
  }
  {
    auto hold = m.acquire(kSoon);  // the slow path: a counted hold, timed
    // A second request waits behind it and gets the lease by a local handover.
    auto second = std::async(std::launch::async, [&] { return client.mutex("counted").acquire(kSoon); });
    ASSERT_TRUE(wait_until([&] { return client.metrics().waiters == 1; }, kSoon));
    EXPECT_EQ(client.metrics().holders, 1);
    hold.unlock();
    auto next = second.get();
    EXPECT_TRUE(next.owns_lock());
  }
  const auto m1 = client.metrics();
  EXPECT_EQ(m1.backend, "memory");
  EXPECT_EQ(m1.holders, 0);
  EXPECT_EQ(m1.waiters, 0);
  EXPECT_GE(m1.cached_relocks, 4u);
  EXPECT_EQ(m1.local_handovers, 1u);
  EXPECT_EQ(m1.handover.count, 1u);
  // Every hold not taken fast is an acquisition, and ended as a release.
  EXPECT_GE(m1.acquisitions, 3u);
  EXPECT_EQ(m1.acquisitions, m1.releases);
  EXPECT_EQ(m1.hold.count, m1.releases);
  EXPECT_GE(op_count(m1.round_trip, BackendOp::acquire), 1u);
  EXPECT_EQ(m1.backend_errors, (std::array<std::uint64_t, kBackendOps>{}));
  client.release_cached();
  EXPECT_GE(op_count(client.metrics().round_trip, BackendOp::release), 1u);
}

TEST(MetricsTest, ALostLeaseRaisesTheLostCounterWithItsReason) {
  auto memory = make_memory_backend();
  auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(memory);
  Client client(faulty, tck::fast_options(), std::make_shared<Runtime>());
  client = client.with_lock_options(LockOptions{.linger = 0ms});

  {  // max_hold: the hold's own end
    auto hold = client.mutex("lost/max_hold").with_max_hold(50ms).acquire(kSoon);
    ASSERT_TRUE(wait_until([&] { return hold.lost().stop_requested(); }, kSoon));
    EXPECT_EQ(lost_of(client.metrics(), LostReason::max_hold), 1u);
  }
  {  // evicted: another process released it by force
    auto hold = client.mutex("lost/evicted").acquire(kSoon);
    const auto owner = Client(memory).owner("lost/evicted");
    ASSERT_TRUE(memory->administration()->evict("lost/evicted", owner.owner_id));
    ASSERT_TRUE(wait_until([&] { return hold.lost().stop_requested(); }, kSoon));
    EXPECT_EQ(lost_of(client.metrics(), LostReason::evicted), 1u);
  }
  {  // error: the backend stopped answering
    auto hold = client.mutex("lost/error").acquire(kSoon);
    faulty->set_unreachable(true);
    ASSERT_TRUE(wait_until([&] { return hold.lost().stop_requested(); }, kSoon));
    faulty->set_unreachable(false);
    const auto m = client.metrics();
    EXPECT_EQ(lost_of(m, LostReason::error), 1u);
    EXPECT_GE(m.backend_errors[static_cast<std::size_t>(BackendOp::renew)], 1u);
  }
  {  // stall: no renewal came back within the lease (ttl + transition: 800 ms)
    auto hold = client.mutex("lost/stall").acquire(kSoon);
    faulty->set_delay(3s);
    ASSERT_TRUE(wait_until([&] { return hold.lost().stop_requested(); }, kSoon));
    EXPECT_EQ(lost_of(client.metrics(), LostReason::stall), 1u);
    faulty->set_delay(0ms);
  }
  const auto m = client.metrics();
  for (auto reason : {LostReason::error, LostReason::stall, LostReason::evicted, LostReason::max_hold}) {
    EXPECT_EQ(lost_of(m, reason), 1u) << to_string(reason);
  }
}

TEST(MetricsTest, TheHookSeesEveryEventOfAScriptedSequenceInOrder) {
  auto memory = make_memory_backend();
  auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(memory);
  Client client =
      Client(faulty, tck::fast_options(), std::make_shared<Runtime>()).with_lock_options(LockOptions{.linger = 0ms});
  EventRecorder recorder;
  client.on_event(recorder.hook());

  // 1. A backend error, then the retry wins.
  faulty->fail_next(1);
  auto first = client.mutex("seq/error").acquire(kSoon);
  const auto first_token = first.fencing_token();
  first.unlock();
  ASSERT_TRUE(recorder.wait_for(EventKind::released, "seq/error"));
  // 2. A hold that outlives its max_hold.
  auto limited = client.mutex("seq/max_hold").with_max_hold(50ms).acquire(kSoon);
  ASSERT_TRUE(recorder.wait_for(EventKind::lost, "seq/max_hold"));
  limited.unlock();
  // 3. A cached lease another process asks for.
  auto cached = client.mutex("seq/demand").with_linger(30s);
  cached.lock();
  cached.unlock();
  Client other(memory, tck::fast_options(), std::make_shared<Runtime>());
  auto asked = other.mutex("seq/demand").acquire(kSoon);
  ASSERT_TRUE(recorder.wait_for(EventKind::demand, "seq/demand"));

  struct Expected {
    EventKind kind;
    std::string mutex;
  };
  const std::vector<Expected> expected{
      {EventKind::backend_error, "seq/error"}, {EventKind::acquired, "seq/error"}, {EventKind::released, "seq/error"},
      {EventKind::acquired, "seq/max_hold"},   {EventKind::lost, "seq/max_hold"},  {EventKind::acquired, "seq/demand"},
      {EventKind::released, "seq/demand"},     {EventKind::demand, "seq/demand"},
  };
  const auto events = recorder.events();
  ASSERT_EQ(events.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(events[i].kind, expected[i].kind) << i << ": " << to_string(events[i].kind);
    EXPECT_EQ(events[i].mutex, expected[i].mutex) << i;
  }
  EXPECT_EQ(events[0].operation, BackendOp::acquire);
  EXPECT_FALSE(events[0].error.empty());
  EXPECT_EQ(events[1].token, first_token);
  EXPECT_EQ(events[2].token, first_token);
  EXPECT_EQ(events[1].owner, events[2].owner);
  EXPECT_GT(events[1].waited, 0ns);  // the failed call and the backoff came first
  EXPECT_EQ(events[4].reason, LostReason::max_hold);
  EXPECT_GE(events[4].held, 50ms);
  EXPECT_EQ(events[7].owner, events[5].owner);  // the demand is on our lease
}

TEST(MetricsTest, AThrowingOrBlockedHookNeverHoldsUpALock) {
  Client client = Client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>())
                      .with_lock_options(LockOptions{.linger = 0ms});
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<int> seen{0};
  client.on_event([gate, &seen](const Event&) {
    gate.wait();  // blocked until the locks below are all done
    seen.fetch_add(1);
    throw std::runtime_error("a hook that throws");
  });
  auto m = client.mutex("blocked-hook");
  for (int i = 0; i < 50; ++i) {
    auto hold = m.acquire(kSoon);  // done while the hook is stuck on its first event
  }
  go.set_value();
  ASSERT_TRUE(wait_until([&] { return seen.load() == 100; }, kSoon)) << seen.load();
  const auto m1 = client.metrics();
  EXPECT_EQ(m1.hook_errors, 100u);
  EXPECT_EQ(m1.events_dropped, 0u);
  EXPECT_EQ(m1.acquisitions, 50u);
  client.on_event(nullptr);
}

TEST(MetricsTest, TheLastClientGoesWhileItsHookIsStuckOrHoldsIt) {
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  // The client goes while its hook is stuck on an event: its end waits a second at most.
  auto ended = std::async(std::launch::async, [gate, returned] {
    Client client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>());
    client.on_event([gate, returned](const Event&) {
      gate.wait();
      returned->store(true);
    });
    client.with_lock_options(LockOptions{.linger = 0ms}).mutex("stuck").acquire(kSoon).unlock();
  });
  const bool ended_in_time = ended.wait_for(kSoon) == std::future_status::ready;
  go.set_value();  // the hook returns; its thread ends by itself
  EXPECT_TRUE(ended_in_time) << "the last Client waited for a stuck hook";
  ASSERT_TRUE(wait_until([&] { return returned->load(); }, kSoon));

  // A hook that holds the last copy of its Client and lets go of it while it runs: the Client
  // ends on its own event thread.
  auto holder = std::make_shared<std::optional<Client>>();
  auto seen = std::make_shared<std::atomic<int>>(0);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  {
    Client client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>());
    client.on_event([holder, seen, gone](const Event&) {
      if (seen->fetch_add(1) != 1) return;
      holder->reset();  // at the second event: the last copy goes, here on the event thread
      gone->store(true);
    });
    *holder = client;
    client.with_lock_options(LockOptions{.linger = 0ms}).mutex("held-by-hook").acquire(kSoon).unlock();
  }
  ASSERT_TRUE(wait_until([&] { return gone->load(); }, kSoon));
}

TEST(MetricsTest, AServiceCountsItsLeaseAsAnAcquisitionAndItsStopAsARelease) {
  auto memory = make_memory_backend();
  Client client(memory, tck::fast_options(), std::make_shared<Runtime>());
  EventRecorder recorder;
  client.on_event(recorder.hook());
  auto service = client.contend_service(make_contender("service/counted", {}, {}));
  // A standby: another process holds the mutex; the service waits for it.
  Client other(memory, tck::fast_options(), std::make_shared<Runtime>());
  auto held = other.mutex("service/counted").acquire(kSoon);
  service->start();
  EXPECT_EQ(client.metrics().waiters, 1);
  EXPECT_EQ(client.metrics().holders, 0);
  held.unlock();
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, kSoon));
  EXPECT_EQ(client.metrics().holders, 1);
  EXPECT_EQ(client.metrics().waiters, 0);
  const auto token = service->fencing_token();
  // Evicted: lost, then won again (a service contends on).
  ASSERT_TRUE(memory->administration()->evict("service/counted", service->contender_id()));
  ASSERT_TRUE(recorder.wait_for(EventKind::lost, "service/counted"));
  ASSERT_TRUE(wait_until([&] { return client.metrics().acquisitions == 2; }, kSoon));
  service->stop();
  const auto m = client.metrics();
  EXPECT_EQ(m.holders, 0);
  EXPECT_EQ(m.waiters, 0);
  EXPECT_EQ(lost_of(m, LostReason::evicted), 1u);
  EXPECT_EQ(m.releases, 1u);
  EXPECT_EQ(m.hold.count, 2u);  // the lost lease and the released one
  ASSERT_TRUE(recorder.wait_for(EventKind::released, "service/counted"));
  const auto events = recorder.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, EventKind::acquired);
  EXPECT_EQ(events[0].token, token);
  EXPECT_EQ(events[1].kind, EventKind::lost);
  EXPECT_EQ(events[1].reason, LostReason::evicted);
  EXPECT_EQ(events[2].kind, EventKind::acquired);
  EXPECT_GT(events[2].token, token);
  EXPECT_EQ(events[3].kind, EventKind::released);
  EXPECT_EQ(events[3].token, events[2].token);
}

TEST(MetricsTest, PerMutexSeriesAreOptInAndBounded) {
  Client client = Client(make_memory_backend(), tck::fast_options(), std::make_shared<Runtime>())
                      .with_lock_options(LockOptions{.linger = 0ms});
  client.mutex("unlabelled").acquire(kSoon).unlock();
  EXPECT_TRUE(client.metrics().mutexes.empty());
  client.label_mutexes(2);
  for (const char* name : {"a", "b", "c", "d", "e"}) client.mutex(name).acquire(kSoon).unlock();
  const auto m = client.metrics();
  ASSERT_EQ(m.mutexes.size(), 3u);
  EXPECT_EQ(m.mutexes[0].mutex, "a");
  EXPECT_EQ(m.mutexes[1].mutex, "b");
  EXPECT_EQ(m.mutexes[2].mutex, kOtherMutexes);
  EXPECT_EQ(m.mutexes[0].acquisitions, 1u);
  // c, d and e together, and "unlabelled", whose entry was made before labels were asked for.
  EXPECT_EQ(m.mutexes[2].acquisitions, 4u);
  const auto text = to_prometheus(m);
  EXPECT_NE(text.find("simba_mutex_acquisitions_total{mutex=\"a\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("simba_mutex_acquisitions_total{mutex=\"(other)\"} 4\n"), std::string::npos);
}

TEST(MetricsTest, TheExpositionHasTypedFamiliesCumulativeBucketsAndEscapedLabels) {
  MetricsSnapshot m;
  m.backend = "quote\"back\\slash\nnewline";
  m.acquisitions = 7;
  m.acquire_wait.bounds = {0.001, 0.01};
  m.acquire_wait.counts = {2, 3, 1};
  m.acquire_wait.count = 6;
  m.acquire_wait.sum = 0.125;
  const auto text = to_prometheus(m, "my_gauge 1\n");
  EXPECT_NE(text.find("simba_info{backend=\"quote\\\"back\\\\slash\\nnewline\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE simba_acquisitions_total counter\nsimba_acquisitions_total 7\n"), std::string::npos);
  EXPECT_NE(text.find("simba_acquire_wait_seconds_bucket{le=\"0.001\"} 2\n"
                      "simba_acquire_wait_seconds_bucket{le=\"0.01\"} 5\n"
                      "simba_acquire_wait_seconds_bucket{le=\"+Inf\"} 6\n"
                      "simba_acquire_wait_seconds_sum 0.125\n"
                      "simba_acquire_wait_seconds_count 6\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("simba_leases_lost_total{reason=\"max_hold\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("simba_backend_round_trip_seconds_count{operation=\"renew\"} 0\n"), std::string::npos);
  EXPECT_TRUE(text.ends_with("\nmy_gauge 1\n"));
}

}  // namespace
}  // namespace simba
