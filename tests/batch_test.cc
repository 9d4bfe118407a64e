// Batched rounds (simba::Batches, the Client's RoundBatcher) over the memory engine, through a
// backend that takes batches and records them: renewals of many leases share round trips, and
// a call that fails in a batch fails for its own lease only.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "kit.h"
#include "simba/memory_backend.h"
#include "simba/simba.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::wait_until;

// The memory engine, taking batches: each call runs as acquire() alone. Calls for `poisoned`
// fail (errc::unavailable), as a call of a batch that one key's trouble failed would.
class BatchingBackend final : public ForwardingBackend, public Batches {
 public:
  explicit BatchingBackend(bool offers) : ForwardingBackend(make_memory_backend()), offers_(offers) {}

  Batches* batches() noexcept override { return offers_ ? this : nullptr; }

  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override {
    {
      std::lock_guard lock(mutex_);
      sizes_.push_back(calls.size());
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

 private:
  std::string poisoned() const {
    std::lock_guard lock(mutex_);
    return poisoned_;
  }

  const bool offers_;
  mutable std::mutex mutex_;
  std::vector<std::size_t> sizes_;
  std::string poisoned_;
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
// went in a batch, and batches carried 2 renewals or more each on average: the renewals fall
// on a grid of ttl/8 (8 ticks a ttl, 25 leases a tick; 3.9 a batch was seen under TSan, where
// the timer thread fires a tick's renewals slowly enough that batches split). Without the
// grid, leases taken 2 ms apart renew 2 ms apart, one per round trip (1.00-1.04 a batch was
// seen), and this fails.
TEST(BatchTest, RenewalsOfManyLeasesShareRoundTrips) {
  Held held(true, true);
  ASSERT_TRUE(wait_until([&] { return held.owners() == kLeases; }, 10s)) << held.owners() << " of " << kLeases;
  const auto before = held.client.metrics();
  std::this_thread::sleep_for(6 * tck::fast_options().ttl);
  const auto after = held.client.metrics();
  EXPECT_EQ(held.owners(), kLeases);
  EXPECT_EQ(held.releases(), 0) << "a lease was lost while renewals were batched";
  const auto rounds = after.batched_rounds - before.batched_rounds;
  const auto batches = after.batches - before.batches;
  // Each lease renews about once a ttl: 6 ttl, at least 4 renewals each.
  EXPECT_GE(rounds, 4u * kLeases) << "renewals that went in batches";
  EXPECT_GE(rounds, 2 * batches) << rounds << " renewals in " << batches << " round trips";
  const auto sizes = held.backend->sizes();
  EXPECT_GT(*std::max_element(sizes.begin(), sizes.end()), std::size_t{1});
  std::size_t sum = 0;
  for (auto size : sizes) sum += size;
  EXPECT_EQ(sum, after.batched_rounds) << "the metrics count what the backend was sent";
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
