// Conformance cases for Batches (Backend::batches()): a batch answers each call as acquire()
// would answer it alone, and a Client over an engine that takes batches sends its renewals in
// them (one without Batches never batches).
#include <gtest/gtest.h>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

constexpr auto kBatchTtl = 30s;  // the leases these cases hold never run out while they look

// A free mutex, one another contender holds and one the caller holds, in one batch: the first
// is won with a new token, the second stays its owner's (with a demand where the engine keeps
// them), the third is renewed with its token kept; read() agrees with each answer.
TEST(BatchesTest, ABatchAnswersEachCallAsAcquireWouldAlone) {
  auto backend = make_backend();
  auto* batches = backend->batches();
  if (!batches) {
    // Nothing to batch through: a Client over it sends every round alone.
    Client client = make_client();
    auto held = client.contend_service(std::make_shared<Recorder>(unique_mutex("nobatch")));
    held->start();
    ASSERT_TRUE(wait_until([&] { return held->is_owner(); }, 10s));
    std::this_thread::sleep_for(2 * fast_options().ttl);
    EXPECT_EQ(client.metrics().batches, 0u) << backend->describe() << " offers no Batches, yet rounds were batched";
    held->stop();
    return;
  }
  const std::string free = unique_mutex("batch-free"), theirs = unique_mutex("batch-theirs"),
                    ours = unique_mutex("batch-ours");
  ASSERT_EQ(backend->acquire(theirs, "them", kBatchTtl, 1s).owner.owner_id, "them");
  const auto before = backend->acquire(ours, "us", kBatchTtl, 1s).owner;
  ASSERT_EQ(before.owner_id, "us");
  const auto results =
      batches->acquire_batch({{free, "us", kBatchTtl, 1s}, {theirs, "us", kBatchTtl, 1s}, {ours, "us", kBatchTtl, 1s}});
  ASSERT_EQ(results.size(), 3u);
  for (const auto& result : results) ASSERT_FALSE(result.error) << "a call of the batch failed";
  EXPECT_EQ(results[0].snapshot.owner.owner_id, "us") << "the free mutex was not won";
  EXPECT_GT(results[0].snapshot.owner.fencing_token, 0u);
  EXPECT_EQ(results[1].snapshot.owner.owner_id, "them") << "the batch took a mutex another holds";
  EXPECT_EQ(results[2].snapshot.owner.owner_id, "us") << "the renewal lost the lease";
  EXPECT_EQ(results[2].snapshot.owner.fencing_token, before.fencing_token) << "a renewal changed the token";
  EXPECT_GT(results[2].snapshot.owner.ttl_at, 0);
  EXPECT_EQ(backend->read(free).owner.owner_id, "us");
  EXPECT_EQ(backend->read(free).owner.fencing_token, results[0].snapshot.owner.fencing_token);
  EXPECT_EQ(backend->read(theirs).owner.owner_id, "them");
  if (backend->demand_signal()) {
    EXPECT_TRUE(backend->acquire(theirs, "them", kBatchTtl, 1s).demanded) << "the batched call left no demand";
    const auto renewed = batches->acquire_batch({{theirs, "them", kBatchTtl, 1s}});
    ASSERT_FALSE(renewed[0].error);
    EXPECT_EQ(renewed[0].snapshot.owner.owner_id, "them");
    EXPECT_TRUE(renewed[0].snapshot.demanded) << "a batched renewal did not say that someone waits";
  }
  for (const auto& [mutex, id] : {std::pair{free, "us"}, {theirs, "them"}, {ours, "us"}}) {
    EXPECT_TRUE(backend->release(mutex, id)) << mutex;
  }
}

// Rows a batch finds in every state at once: one released (won again, the token risen), one
// whose owner's lease ran out (taken over, the token risen; where a lease lapses by time alone),
// and one name asked twice by two contenders (exactly one wins; the other's answer names the
// winner), besides a renewal.
TEST(BatchesTest, ABatchTakesReleasedAndExpiredRowsAndOneOfTwoCallsOnAName) {
  auto backend = make_backend();
  auto* batches = backend->batches();
  if (!batches) return;  // ABatchAnswersEachCallAsAcquireWouldAlone checks such an engine
  const bool lapses = backend->capabilities().lease_lapses_by_time;
  const std::string released = unique_mutex("batch-released"), expired = unique_mutex("batch-expired"),
                    twice = unique_mutex("batch-twice"), ours = unique_mutex("batch-ours");
  const auto first = backend->acquire(released, "us", kBatchTtl, 1s).owner;
  ASSERT_EQ(first.owner_id, "us");
  ASSERT_TRUE(backend->release(released, "us"));
  const auto renewed = backend->acquire(ours, "us", kBatchTtl, 1s).owner;
  std::vector<AcquireCall> calls = {{released, "us", kBatchTtl, 1s},
                                    {twice, "one", kBatchTtl, 1s},
                                    {ours, "us", kBatchTtl, 1s},
                                    {twice, "other", kBatchTtl, 1s}};
  MutexOwner gone;
  if (lapses) {
    gone = backend->acquire(expired, "them", 100ms, 100ms).owner;
    ASSERT_EQ(gone.owner_id, "them");
    // Past the lease and its transition by the server's clock (read() reports it).
    ASSERT_TRUE(wait_until(
        [&] {
          const auto seen = backend->read(expired);
          return seen.owner.transition_at < seen.now;
        },
        10s))
        << "the 200 ms lease of 'them' never ran out";
    calls.push_back({expired, "us", kBatchTtl, 1s});
  }
  const auto results = batches->acquire_batch(calls);
  ASSERT_EQ(results.size(), calls.size());
  for (const auto& result : results) ASSERT_FALSE(result.error) << "a call of the batch failed";
  EXPECT_EQ(results[0].snapshot.owner.owner_id, "us") << "the released mutex was not won again";
  EXPECT_GT(results[0].snapshot.owner.fencing_token, first.fencing_token) << "a new lease kept the old token";
  EXPECT_EQ(results[2].snapshot.owner.owner_id, "us") << "the renewal lost the lease";
  EXPECT_EQ(results[2].snapshot.owner.fencing_token, renewed.fencing_token) << "a renewal changed the token";
  const auto& a = results[1].snapshot.owner;
  const auto& b = results[3].snapshot.owner;
  EXPECT_TRUE((a.owner_id == "one") != (b.owner_id == "other"))
      << "two calls on one name: 'one' got owner '" << a.owner_id << "', 'other' got '" << b.owner_id << "'";
  EXPECT_EQ(a.owner_id, b.owner_id) << "the two answers on one name disagree on its owner";
  EXPECT_EQ(backend->read(twice).owner.owner_id, a.owner_id);
  if (lapses) {
    EXPECT_EQ(results[4].snapshot.owner.owner_id, "us") << "the expired lease was not taken over";
    EXPECT_GT(results[4].snapshot.owner.fencing_token, gone.fencing_token) << "a takeover kept the old token";
    EXPECT_TRUE(backend->release(expired, "us"));
  }
  for (const auto& [mutex, id] : {std::pair{released, std::string("us")}, {ours, "us"}, {twice, a.owner_id}}) {
    EXPECT_TRUE(backend->release(mutex, id)) << mutex;
  }
  // The loser of the two calls on one name may wait in the engine's line: it leaves it.
  backend->release(twice, a.owner_id == "one" ? "other" : "one");
}

// Three leases renewed in one batch, the middle one force-released meanwhile and taken by
// another: that call alone answers with the new owner; the other two are renewed, their
// tokens kept (an engine that renews many leases in one request must not lose or keep them
// all for one).
TEST(BatchesTest, ABatchReportsALeaseLostMeanwhileForThatLeaseOnly) {
  auto backend = make_backend();
  auto* batches = backend->batches();
  auto* admin = backend->administration();
  if (!batches || !admin) return;
  const std::string first = unique_mutex("batch-kept-1"), lost = unique_mutex("batch-lost"),
                    last = unique_mutex("batch-kept-2");
  std::vector<MutexOwner> before;
  for (const auto& mutex : {first, lost, last}) {
    before.push_back(backend->acquire(mutex, "us", kBatchTtl, 1s).owner);
    ASSERT_EQ(before.back().owner_id, "us") << mutex;
  }
  ASSERT_TRUE(admin->evict(lost, "us"));
  ASSERT_EQ(backend->acquire(lost, "them", kBatchTtl, 1s).owner.owner_id, "them");
  const auto results =
      batches->acquire_batch({{first, "us", kBatchTtl, 1s}, {lost, "us", kBatchTtl, 1s}, {last, "us", kBatchTtl, 1s}});
  ASSERT_EQ(results.size(), 3u);
  for (const auto& result : results) ASSERT_FALSE(result.error) << "a call of the batch failed";
  EXPECT_EQ(results[0].snapshot.owner.owner_id, "us") << "a renewal beside a lost lease was lost too";
  EXPECT_EQ(results[0].snapshot.owner.fencing_token, before[0].fencing_token);
  EXPECT_EQ(results[1].snapshot.owner.owner_id, "them") << "the force-released lease was renewed";
  EXPECT_EQ(results[2].snapshot.owner.owner_id, "us") << "a renewal beside a lost lease was lost too";
  EXPECT_EQ(results[2].snapshot.owner.fencing_token, before[2].fencing_token);
  EXPECT_EQ(backend->read(lost).owner.owner_id, "them");
  EXPECT_TRUE(backend->release(first, "us"));
  EXPECT_TRUE(backend->release(last, "us"));
  EXPECT_TRUE(backend->release(lost, "them"));
  backend->release(lost, "us");  // it may wait in the engine's line
}

// 50 leases of one Client over an engine that takes batches, renewed for 4 ttl while another
// process waits for one of them: they stay held (the waiter never takes one over), and their
// renewals went in batches that carried more than one each.
TEST(BatchesTest, AClientRenewsManyLeasesInBatches) {
  auto backend = make_backend();
  Client client = make_client();
  std::vector<std::unique_ptr<MutexContendService>> services;
  const std::string prefix = unique_mutex("batch-renew") + "/";
  for (int i = 0; i < 50; ++i) {
    services.push_back(client.contend_service(std::make_shared<Recorder>(prefix + std::to_string(i))));
    services.back()->start();
  }
  auto owners = [&] {
    int n = 0;
    for (auto& service : services) n += service->is_owner();
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return owners() == 50; }, 20s)) << owners() << " of 50 held";
  Client other = other_process(client);
  auto waiter = other.contend_service(std::make_shared<Recorder>(prefix + "0"));
  waiter->start();
  const auto before = client.metrics();
  std::this_thread::sleep_for(4 * fast_options().ttl);
  const auto after = client.metrics();
  EXPECT_EQ(owners(), 50);
  EXPECT_FALSE(waiter->is_owner()) << "a waiter took over a lease renewed in batches";
  waiter->stop();
  if (backend->batches()) {
    EXPECT_GE(after.batched_rounds - before.batched_rounds, 100u) << "renewals that went in batches";
    EXPECT_GT(after.batched_rounds - before.batched_rounds, after.batches - before.batches)
        << "no batch carried more than one renewal";
  } else {
    EXPECT_EQ(after.batches, 0u);
  }
  for (auto& service : services) service->stop();
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_batch_cases() { return 0; }

}  // namespace simba::tck
