// The memory store's records in parts of their own lock (backends/memory/records.h): a mutex and
// every record derived from it share a part, names spread over the parts, and what looks at the
// whole store (a listing, a sweep) sees every part.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>

#include "backends/memory/records.h"
#include "simba/memory_backend.h"

namespace simba::internal {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kParts = 16;

TEST(MemoryRecordsTest, AMutexAndEveryRecordDerivedFromItShareItsRootsPart) {
  for (const std::string root : {"a", "jobs/nightly", "bench/parallel/5807/2/0", "x"}) {
    const auto part = MemoryRecords::part_of<kParts>(root);
    EXPECT_EQ(MemoryRecords::part_of<kParts>(root + "#slot3"), part) << root;
    // A record derived from a derived record (a semaphore named "<root>#y"): the root decides,
    // not the last '#' (whose record's primitive "<root>#y" is in the root's part).
    EXPECT_EQ(MemoryRecords::part_of<kParts>(root + "#y#slot3"), part) << root;
    EXPECT_EQ(MemoryRecords::part_of<kParts>(root + "#"), part) << root;
  }
}

TEST(MemoryRecordsTest, NamesThatDifferAtTheirEndSpreadOverTheParts) {
  // The usual shapes: a common prefix and a number or an id at the end. A part function is
  // deterministic: these counts are the same on every run.
  for (const std::string prefix : {"bench/parallel/5807/2/", "orders/", "q"}) {
    std::set<std::size_t> parts;
    for (int i = 0; i < 64; ++i) parts.insert(MemoryRecords::part_of<kParts>(prefix + std::to_string(i)));
    EXPECT_GE(parts.size(), kParts * 3 / 4) << prefix;
  }
  std::set<std::size_t> parts;
  for (int i = 0; i < 64; ++i) parts.insert(MemoryRecords::part_of<kParts>(std::to_string(i) + "/lock"));
  EXPECT_GE(parts.size(), kParts * 3 / 4) << "a number at the start";
}

// Across parts, an owner still hears of its relatives in its acquisition's step (they are in
// its part) and a derived record of its primitive.
TEST(MemoryRecordsTest, OwnersHearTheirRelativesAtEveryLevel) {
  auto store = make_memory_backend();
  auto gate = store->acquire("sem#y", "a", 1h, 0ms);  // a semaphore named "sem#y": its gate
  ASSERT_EQ(gate.owner.owner_id, "a");
  auto slot = store->acquire("sem#y#slot1", "b", 1h, 0ms);
  ASSERT_EQ(slot.owner.owner_id, "b");
  ASSERT_TRUE(slot.parent.has_value());
  EXPECT_TRUE(slot.parent->held) << "the slot's primitive, sem#y, is held";
  EXPECT_EQ(slot.parent->fencing_token, gate.owner.fencing_token);
  auto root = store->acquire("sem", "c", 1h, 0ms);
  EXPECT_FALSE(root.no_derived_held) << "sem#y, derived from sem, is held";
  ASSERT_TRUE(store->release("sem#y", "a"));
  auto again = store->acquire("sem#y", "d", 1h, 0ms);
  EXPECT_FALSE(again.no_derived_held) << "sem#y#slot1, derived from sem#y, is held";
  auto records = administration_of(*store).list_derived("sem#y", 10).records;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].mutex, "sem#y#slot1");
}

TEST(MemoryRecordsTest, AListingAndASweepSeeEveryPart) {
  auto store = make_memory_backend();
  std::set<std::size_t> parts;
  std::set<std::string> names;
  for (int i = 0; i < 200; ++i) {
    const std::string name = "m/" + std::to_string(i);
    names.insert(name);
    parts.insert(MemoryRecords::part_of<kParts>(name));
    store->acquire(name, "a", 1h, 0ms);
  }
  ASSERT_GT(parts.size(), 1u);
  auto& admin = administration_of(*store);
  auto all = admin.list("m/", 1000);
  ASSERT_EQ(all.records.size(), names.size());
  EXPECT_FALSE(all.truncated);
  auto name = names.begin();
  for (const auto& record : all.records) EXPECT_EQ(record.mutex, *name++) << "sorted by name over every part";
  auto first = admin.list("m/", 50);
  EXPECT_TRUE(first.truncated);
  ASSERT_EQ(first.records.size(), 50u);
  EXPECT_EQ(first.records.back().mutex, *std::next(names.begin(), 49)) << "the first 50 of all, not of a part";
  // Free all; a sweep of records idle for 0 ms takes at most its limit, then the rest.
  for (const auto& each : names) ASSERT_TRUE(store->release(each, "a"));
  EXPECT_EQ(admin.sweep(0ms, 120), 120u);
  EXPECT_EQ(admin.sweep(0ms, 1000), 80u);
  EXPECT_TRUE(admin.list("m/", 1000).records.empty());
}

// A part remembers the record it looked at last (a lock taken and given back in turn looks its
// name up once): a record forgotten by a sweep must not be found that way again, under any
// name. (Under AddressSanitizer a remembered record that was freed fails here at once.)
TEST(MemoryRecordsTest, ARecordSweptAfterItWasLookedAtLastIsGone) {
  MemoryRecords records(/*remembered=*/16);
  const SystemClock clock;
  std::atomic<std::uint64_t> tokens{0};
  OwnerSnapshot answer;
  records.acquire("a", "x", 1h, 0ms, clock, tokens, answer);
  const auto token = answer.owner.fencing_token;
  ASSERT_TRUE(records.release("a", "x", clock));
  ASSERT_EQ(records.read("a", clock).owner.fencing_token, token) << "looked at last: remembered";
  ASSERT_EQ(records.sweep(0ms, 10, clock.now() + 1000), 1u);
  const auto swept = records.read("a", clock);
  EXPECT_TRUE(swept.owner.empty());
  EXPECT_EQ(swept.owner.fencing_token, token) << "a forgotten record's token stays the part's floor";
  EXPECT_FALSE(records.release("a", "x", clock)) << "nothing of a swept record is left to release";
  EXPECT_FALSE(records.mark_idle("a", "x", true, clock));
  // The name again: a new record, a new token; then another name, and the first one's again.
  records.acquire("a", "y", 1h, 0ms, clock, tokens, answer);
  EXPECT_EQ(answer.owner.owner_id, "y");
  EXPECT_GT(answer.owner.fencing_token, token);
  records.acquire("b", "z", 1h, 0ms, clock, tokens, answer);
  EXPECT_EQ(records.read("a", clock).owner.owner_id, "y");
  EXPECT_EQ(records.read("b", clock).owner.owner_id, "z");
}

}  // namespace
}  // namespace simba::internal
