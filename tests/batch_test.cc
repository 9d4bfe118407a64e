// Batched rounds (simba::Batches, the Client's RoundBatcher) over the memory engine, through a
// backend that takes batches and records them: renewals of many leases share round trips, and
// a call that fails in a batch fails for its own lease only.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "core/round_batcher.h"
#include "kit.h"
#include "simba/memory_backend.h"
#include "simba/simba.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

// The memory engine, taking batches: each call runs as acquire() alone. Calls for `poisoned`
// fail (errc::unavailable), as a call of a batch that one key's trouble failed would. While
// held (hold()), a batch waits before it is answered, as one on a slow wire would.
class BatchingBackend final : public ForwardingBackend, public Batches {
 public:
  explicit BatchingBackend(bool offers, bool acquisitions = true)
      : ForwardingBackend(make_memory_backend()), offers_(offers), acquisitions_(acquisitions) {}

  Batches* batches() noexcept override { return offers_ ? this : nullptr; }
  bool batches_acquisitions() const noexcept override { return acquisitions_; }

  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    {
      std::unique_lock lock(mutex_);
      sizes_.push_back(calls.size());
      ++waiting_;
      opened_.wait(lock, [&] { return !held_; });
      --waiting_;
    }
    std::vector<AcquireResult> results(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].mutex == poisoned()) {
        results[i].error = std::make_exception_ptr(Error(errc::unavailable, "poisoned: " + calls[i].mutex));
        continue;
      }
      results[i].snapshot = acquire(calls[i].mutex, calls[i].contender_id, calls[i].ttl, calls[i].transition);
    }
    return results;
  }

  std::vector<std::size_t> sizes() const {
    std::lock_guard lock(mutex_);
    return sizes_;
  }
  void poison(std::string mutex) {
    std::lock_guard lock(mutex_);
    poisoned_ = std::move(mutex);
  }
  void hold(bool held) {
    {
      std::lock_guard lock(mutex_);
      held_ = held;
    }
    opened_.notify_all();
  }
  int waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_;
  }

 private:
  std::string poisoned() const {
    std::lock_guard lock(mutex_);
    return poisoned_;
  }

  const bool offers_;
  const bool acquisitions_;
  mutable std::mutex mutex_;
  std::condition_variable opened_;
  std::vector<std::size_t> sizes_;  // guarded by mutex_, as the rest
  std::string poisoned_;
  bool held_ = false;
  int waiting_ = 0;  // batches held
};

constexpr int kLeases = 200;

struct Held {
  std::shared_ptr<BatchingBackend> backend;
  Client client;
  std::vector<std::shared_ptr<tck::Recorder>> recorders;
  std::vector<std::unique_ptr<MutexContendService>> services;

  // `spread`: the leases are taken over one ttl, not at once, so that their renewals would
  // fall apart but for the batcher's grid.
  explicit Held(bool batches, bool spread = false)
      : backend(std::make_shared<BatchingBackend>(batches)), client(backend, tck::fast_options()) {
    const std::string prefix = tck::unique_mutex("batch") + "/";
    for (int i = 0; i < kLeases; ++i) {
      recorders.push_back(std::make_shared<tck::Recorder>(prefix + std::to_string(i)));
      services.push_back(client.contend_service(recorders.back()));
      services.back()->start();
      if (spread) std::this_thread::sleep_for(tck::fast_options().ttl / kLeases);
    }
  }
  ~Held() {
    for (auto& service : services) service->stop();
  }
  int owners() const {
    return static_cast<int>(std::count_if(services.begin(), services.end(), [](auto& s) { return s->is_owner(); }));
  }
  int releases() const {
    int n = 0;
    for (auto& recorder : recorders) n += recorder->released_count();
    return n;
  }
};

// 200 leases, taken one by one over a ttl, renewed for 6 ttl: all stay held, every renewal
// went in a batch, and the metrics count what the backend was sent. (That renewals of leases
// taken apart still go off together is the grid of ContendPeriodTest's renewal_tick.)
TEST(BatchTest, RenewalsOfManyLeasesGoInBatchesAndStayHeld) {
  Held held(true, true);
  ASSERT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s)) << held.owners() << " of " << kLeases;
  const auto before = held.client.metrics();
  std::this_thread::sleep_for(6 * tck::fast_options().ttl);
  const auto after = held.client.metrics();
  EXPECT_EQ(held.owners(), kLeases);
  EXPECT_EQ(held.releases(), 0) << "a lease was lost while renewals were batched";
  // Each lease renews about once a ttl: 6 ttl, at least 4 renewals each.
  EXPECT_GE(after.batched_rounds - before.batched_rounds, 4u * kLeases) << "renewals that went in batches";
  // What the backend was sent, the metrics count once each batch is answered (a batch on the
  // wire now is in the one and not yet in the other: the two agree between batches).
  auto counted = [&] {
    const auto sizes = held.backend->sizes();
    std::size_t sum = 0;
    for (auto size : sizes) sum += size;
    const auto now = held.client.metrics();
    return sum == now.batched_rounds && sizes.size() == now.batches;
  };
  EXPECT_TRUE(wait_until(counted, 10s)) << "the metrics do not count what the backend was sent";
}

// While the batches in flight are on the wire (held at the backend), renewals that come due
// wait in the queue (the queued_rounds gauge counts them), and the next batch carries them
// all in one round trip; every lease stays held. Were each round sent alone, the next batch
// would carry one and this fails (seen with the drain taking one round at a time).
TEST(BatchTest, RenewalsQueuedWhileBatchesAreInFlightShareTheNextRoundTrip) {
  Held held(true, true);
  ASSERT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s)) << held.owners() << " of " << kLeases;
  held.backend->hold(true);
  const int in_flight = static_cast<int>(internal::RoundBatcher::kMaxBatchesInFlight);
  ASSERT_TRUE(wait_until([&] { return held.backend->waiting() == in_flight; }, 10s))
      << held.backend->waiting() << " batches on the wire";
  // 25 leases come due every 50 ms; 10 is a few ms of them.
  constexpr std::int64_t kQueued = 10;
  ASSERT_TRUE(wait_until([&] { return held.client.metrics().queued_rounds >= kQueued; }, 10s))
      << held.client.metrics().queued_rounds << " rounds queued";
  EXPECT_LE(held.client.metrics().queued_rounds, kLeases);
  const auto sent = held.backend->sizes().size();
  EXPECT_EQ(sent, held.client.metrics().batches + in_flight) << "a batch was sent while both were held";
  held.backend->hold(false);
  // The first drain back takes the whole queue; the other may send a round that came later.
  auto largest_since = [&] {
    const auto sizes = held.backend->sizes();
    return sizes.size() > sent ? *std::max_element(sizes.begin() + static_cast<std::ptrdiff_t>(sent), sizes.end())
                               : std::size_t{0};
  };
  EXPECT_TRUE(wait_until([&] { return largest_since() >= static_cast<std::size_t>(kQueued); }, 10s))
      << "the queued renewals went apart: the largest batch since carried " << largest_since();
  std::this_thread::sleep_for(2 * tck::fast_options().ttl);
  EXPECT_EQ(held.owners(), kLeases);
  EXPECT_EQ(held.releases(), 0) << "a queued renewal lost its lease";
  EXPECT_GE(held.client.metrics().queued_rounds, 0);
}

// The same without Batches offered: rounds go one by one, and the metrics say no batch.
TEST(BatchTest, WithoutBatchesEveryRoundGoesAlone) {
  Held held(false);
  ASSERT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s));
  std::this_thread::sleep_for(3 * tck::fast_options().ttl);
  EXPECT_EQ(held.owners(), kLeases);
  EXPECT_EQ(held.client.metrics().batches, 0u);
  EXPECT_TRUE(held.backend->sizes().empty());
}

// An engine that batches renewals only (Batches::batches_acquisitions() false, as ZooKeeper):
// while every batch is held on the wire, a waiter's look still goes alone, and it takes the
// mutex its holder gave back. Were its look batched, it would wait behind the held batches
// and this fails (as it does with `acquisitions` true).
TEST(BatchTest, AnEngineThatBatchesRenewalsOnlySendsAWaitersLookAlone) {
  auto backend = std::make_shared<BatchingBackend>(true, /*acquisitions=*/false);
  Client client(backend, tck::fast_options());
  const std::string mutex = tck::unique_mutex("batch-look");
  ASSERT_EQ(backend->acquire(mutex, "holder", 30s, 1s).owner.owner_id, "holder");
  auto waiter = std::make_shared<tck::Recorder>(mutex);
  auto service = client.contend_service(waiter);
  service->start();
  // Its first round found the holder; renewals of nothing, so no batch yet. Hold them all.
  backend->hold(true);
  ASSERT_TRUE(backend->release(mutex, "holder"));
  EXPECT_TRUE(wait_until([&] { return service->is_owner(); }, 10s))
      << "the waiter's look did not go alone while batches were held";
  backend->hold(false);
  service->stop();
}

// One lease's renewal fails inside its batch: that lease is lost (its contender hears
// on_released), and every other lease of the same batches stays held.
TEST(BatchTest, ACallThatFailsInABatchLosesItsOwnLeaseOnly) {
  Held held(true);
  ASSERT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s));
  const auto& victim = held.recorders[kLeases / 2];
  held.backend->poison(victim->mutex());
  ASSERT_TRUE(wait_until([&] { return victim->released_count() >= 1; }, 10s)) << "the failed renewal lost nothing";
  std::this_thread::sleep_for(3 * tck::fast_options().ttl);
  EXPECT_EQ(held.releases(), victim->released_count()) << "a lease renewed in the same batches was lost";
  EXPECT_EQ(held.owners(), kLeases - 1);
  EXPECT_FALSE(held.services[kLeases / 2]->is_owner());
  EXPECT_GE(held.client.metrics().backend_errors[static_cast<std::size_t>(BackendOp::renew)], 1u);
  held.backend->poison("");
  EXPECT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s)) << "the lease did not come back";
}

}  // namespace
}  // namespace simba
