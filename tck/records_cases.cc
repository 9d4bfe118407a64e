// Conformance cases for what an engine keeps between uses: list() finds the records of a
// prefix, sweep() deletes those of idle mutexes and nothing else, and a swept mutex's next
// owner still gets a larger fencing token than any before.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

constexpr auto kRecordsTtl = 60s;  // the leases these cases hold never run out while they look
constexpr auto kIdle = 1s;

// How many names the sweep case locks: SIMBA_TCK_SWEEP_NAMES, default 10,000 (5,000 in the
// sanitizer builds; see tck/CMakeLists.txt).
std::size_t sweep_names() {
  const char* text = std::getenv("SIMBA_TCK_SWEEP_NAMES");
  return text ? std::strtoull(text, nullptr, 10) : SIMBA_TCK_SWEEP_NAMES_DEFAULT;
}

// The optional interfaces these cases are about (every engine of this repository offers both).
Administration& admin(Backend& backend) { return administration_of(backend); }
IdleMarks& marks(Backend& backend) {
  auto* idle_marks = backend.idle_marks();
  if (!idle_marks) throw std::runtime_error(backend.describe() + " offers no Backend::idle_marks()");
  return *idle_marks;
}

// A client on `backend` that looks of itself only a minute apart (its ttl, and its poll where
// `pushed`: the engine pushes what the case is about), and the wait within which news must
// reach it: 5 s, plus the engine's poll where it is not pushed. News within the wait comes by
// push or at a poll, never at a round of the client's own.
struct SlowToLook {
  Client client;
  std::chrono::milliseconds wait;
};
SlowToLook slow_to_look(const std::shared_ptr<Backend>& backend, bool pushed) {
  auto options = fast_options();
  options.ttl = 60s;
  if (pushed) options.poll_interval = 60s;
  return {Client(backend, options, std::make_shared<Runtime>()),
          5s + (pushed ? 0ms : backend->capabilities().poll_interval)};
}

// Runs fn(i) for i in [0, n) on `threads` threads.
void in_parallel(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  std::exception_ptr failed;
  std::mutex failed_mutex;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      try {
        for (std::size_t i; (i = next.fetch_add(1)) < n;) fn(i);
      } catch (...) {
        std::lock_guard lock(failed_mutex);
        failed = std::current_exception();
        next = n;
      }
    });
  }
  for (auto& worker : workers) worker.join();
  if (failed) std::rethrow_exception(failed);
}

TEST(RecordsTest, ListFindsARecordPerMutexOfThePrefixInNameOrder) {
  auto backend = make_backend();
  const std::string prefix = unique_mutex() + "/";
  for (const char* tail : {"c", "a", "b"}) {
    backend->acquire(prefix + tail, "lister", kRecordsTtl, 0ms);
  }
  ASSERT_TRUE(backend->release(prefix + "b", "lister"));
  backend->acquire(prefix.substr(0, prefix.size() - 1) + "-x", "lister", kRecordsTtl, 0ms);

  const MutexListing all = admin(*backend).list(prefix, 10);
  ASSERT_EQ(all.records.size(), 3u);
  EXPECT_FALSE(all.truncated);
  EXPECT_GT(all.now, 0);
  EXPECT_EQ(all.records[0].mutex, prefix + "a");
  EXPECT_EQ(all.records[1].mutex, prefix + "b");
  EXPECT_EQ(all.records[2].mutex, prefix + "c");
  EXPECT_EQ(all.records[0].owner.owner_id, "lister");
  EXPECT_TRUE(all.records[1].owner.empty());  // released: a record, free
  EXPECT_GT(all.records[1].owner.fencing_token, 0u);
  EXPECT_EQ(all.records[2].owner.fencing_token, backend->read(prefix + "c").owner.fencing_token);

  const MutexListing two = admin(*backend).list(prefix, 2);
  ASSERT_EQ(two.records.size(), 2u);
  EXPECT_TRUE(two.truncated);
  EXPECT_EQ(two.records[1].mutex, prefix + "b");
  EXPECT_TRUE(admin(*backend).list(prefix + "zz", 10).records.empty());
  for (const char* tail : {"a", "c"}) backend->release(prefix + tail, "lister");
  backend->release(prefix.substr(0, prefix.size() - 1) + "-x", "lister");
}

// list_derived() reports every held record derived from a name ("<name>#<suffix>", no '#' in
// the suffix), in name order: not another name's, not one released, evicted or run out.
TEST(RecordsTest, ListDerivedReportsEveryHeldRecordOfTheName) {
  auto backend = make_backend();
  const std::string name = unique_mutex();
  const std::vector<std::string> held{name + "#0of2", name + "#1of2", name + "#r0123abcd", name + "#wait"};
  for (const auto& record : held)
    ASSERT_EQ(backend->acquire(record, "holder", kRecordsTtl, 0ms).owner.owner_id, "holder");
  const std::vector<std::string> others{name + "x#wait", name + "#a#b", name};
  for (const auto& record : others) backend->acquire(record, "holder", kRecordsTtl, 0ms);
  const std::string released = name + "#r00000001", evicted = name + "#r00000002", ran_out = name + "#r00000003";
  for (const auto& record : {released, evicted}) backend->acquire(record, "holder", kRecordsTtl, 0ms);
  ASSERT_TRUE(backend->release(released, "holder"));
  ASSERT_TRUE(admin(*backend).evict(evicted, "holder"));
  const bool lapses = backend->capabilities().lease_lapses_by_time;
  constexpr auto kShort = 300ms;
  if (lapses) backend->acquire(ran_out, "gone", kShort, 0ms);  // its holder never renews

  auto names_held = [&](const MutexListing& listing) {
    std::vector<std::string> out;
    for (const auto& record : listing.records) {
      if (!record.owner.empty()) out.push_back(record.mutex);
    }
    return out;
  };
  auto listing = admin(*backend).list_derived(name, 100);
  EXPECT_GT(listing.now, 0);
  EXPECT_FALSE(listing.truncated);
  auto expected = held;
  if (lapses) expected.insert(expected.begin() + 2, ran_out);  // "#r00000003" < "#r0123abcd"
  EXPECT_EQ(names_held(listing), expected);
  ASSERT_FALSE(listing.records.empty());
  EXPECT_EQ(listing.records.front().owner.fencing_token, backend->read(held[0]).owner.fencing_token);
  if (lapses) {
    std::this_thread::sleep_for(kShort + 200ms);
    EXPECT_EQ(names_held(admin(*backend).list_derived(name, 100)), held) << "a lease that ran out is still listed";
  }
  const auto two = admin(*backend).list_derived(name, 2);
  EXPECT_EQ(two.records.size(), 2u);
  EXPECT_TRUE(two.truncated);
  for (const auto& record : held) backend->release(record, "holder");
  for (const auto& record : others) backend->release(record, "holder");
  EXPECT_TRUE(names_held(admin(*backend).list_derived(name, 100)).empty());
}

// Locks many distinct names once each (a service locking per entity id), lets them idle, and
// sweeps: every record of an idle mutex goes; a held one, and one released just before the
// sweep, stay; the next owner of a swept mutex gets a larger token than its last.
TEST(RecordsTest, SweepDeletesIdleRecordsKeepsLiveOnesAndTokensNeverGoBack) {
  auto backend = make_backend();
  const std::size_t n = sweep_names();
  const std::string prefix = unique_mutex() + "/";
  const std::string held = prefix + "held", recent = prefix + "recent";
  const auto name = [&](std::size_t i) { return prefix + std::to_string(i); };

  std::mutex tokens_mutex;
  std::map<std::size_t, std::uint64_t> tokens;  // a sample: the first 20 and every 997th
  const auto started = std::chrono::steady_clock::now();
  in_parallel(n, 8, [&](std::size_t i) {
    const std::string mutex = name(i);
    const OwnerSnapshot got = backend->acquire(mutex, "sweeper", kRecordsTtl, 0ms);
    ASSERT_EQ(got.owner.owner_id, "sweeper") << mutex;
    ASSERT_TRUE(backend->release(mutex, "sweeper")) << mutex;
    if (i < 20 || i % 997 == 0) {
      std::lock_guard lock(tokens_mutex);
      tokens[i] = got.owner.fencing_token;
    }
  });
  const auto locked_in = std::chrono::steady_clock::now() - started;
  const std::uint64_t held_token = backend->acquire(held, "holder", kRecordsTtl, 0ms).owner.fencing_token;
  // The names left records (a page of them: list reads every record it returns).
  const MutexListing before = admin(*backend).list(prefix, 1000);
  const bool forgets_by_itself = !backend->capabilities().keeps_idle_records;
  if (!forgets_by_itself) {
    ASSERT_EQ(before.records.size(), std::min<std::size_t>(n + 1, 1000));
    EXPECT_EQ(before.truncated, n + 1 > 1000);
  }

  std::this_thread::sleep_for(kIdle + 200ms);
  backend->acquire(held, "holder", kRecordsTtl, 0ms);  // renewed: live, and changed just now

  // The store may hold other idle records too (another run's against the same server): a call
  // that deleted its whole limit may have left some of ours, so sweep until one deletes fewer.
  std::size_t swept = 0;
  const std::size_t limit = n + 1000;
  const auto sweep_started = std::chrono::steady_clock::now();
  for (std::size_t round = 0, last = limit; round < 20 && last == limit; ++round) {
    last = admin(*backend).sweep(kIdle, limit);
    swept += last;
  }
  if (!forgets_by_itself) {
    // (and those of other idle mutexes of the store; a second sweeper of the same store, such
    // as another run of this case against this server, takes some of ours and fails this)
    EXPECT_GE(swept, n);
  }
  std::cout
      << "[ INFO     ] " << backend->capabilities().engine << ": " << n << " names locked in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(locked_in).count() << " ms, " << swept
      << " records swept in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sweep_started).count()
      << " ms\n";
  // Released just now: not idle, so a sweep leaves it.
  backend->acquire(recent, "holder", kRecordsTtl, 0ms);
  ASSERT_TRUE(backend->release(recent, "holder"));
  admin(*backend).sweep(kIdle, 1000);
  const MutexListing left = admin(*backend).list(prefix, 10);
  ASSERT_EQ(left.records.size(), 2u) << "records of idle mutexes left after the sweep, or live ones swept: "
                                     << (left.records.empty() ? "" : left.records[0].mutex);
  EXPECT_EQ(left.records[0].mutex, held);
  EXPECT_EQ(left.records[0].owner.owner_id, "holder");
  EXPECT_EQ(left.records[0].owner.fencing_token, held_token);
  EXPECT_EQ(left.records[1].mutex, recent);

  for (const auto& [i, before] : tokens) {
    const OwnerSnapshot again = backend->acquire(name(i), "next", kRecordsTtl, 0ms);
    ASSERT_EQ(again.owner.owner_id, "next");
    EXPECT_GT(again.owner.fencing_token, before) << name(i) << ": a swept mutex's token went back";
    backend->release(name(i), "next");
  }
  backend->release(held, "holder");
}

// An observer keeps watching a mutex whose record was swept under it (ZooKeeper: its latch
// folder, which the watch was on, is made again) and sees the next owner.
TEST(RecordsTest, AnObserverOfASweptMutexSeesTheNextOwner) {
  // Told as promptly as of any acquisition: by push where the engine pushes acquisitions, else
  // at its next poll. An observer of a free mutex also looks of itself a ttl later (at most a
  // poll): with a minute's ttl (and a minute's poll where acquisitions are pushed), seeing the
  // next owner within the wait below is by push or at a poll, never at a round of its own, as
  // it would be if the watch were lost with the record.
  const auto backend = make_backend();
  const Push* push = backend->push();
  const bool pushed = push && push->pushes_acquisitions();
  auto [client, wait] = slow_to_look(backend, pushed);
  const std::string mutex = unique_mutex();
  backend->acquire(mutex, "first", kRecordsTtl, 0ms);
  ASSERT_TRUE(backend->release(mutex, "first"));
  auto observer = client.retrieval_service(make_retriever(mutex, [](const MutexState&) {}));
  observer->start();
  std::this_thread::sleep_for(kIdle + 200ms);
  // (On ZooKeeper the observer's watch makes the folder again at once.)
  EXPECT_GE(admin(*backend).sweep(kIdle, 1'000'000), 1u) << "the idle record was not swept";
  EXPECT_TRUE(backend->read(mutex).owner.empty());
  std::this_thread::sleep_for(100ms);  // the sweep's events reach the observer
  backend->acquire(mutex, "next", kRecordsTtl, 0ms);
  EXPECT_TRUE(wait_until([&] { return observer->after_owner().owner_id == "next"; }, wait))
      << backend->capabilities().engine << ": the observer still sees '" << observer->after_owner().owner_id
      << "' (its watch was lost with the swept record?)";
  observer->stop();
  backend->release(mutex, "next");
}

// `simba release --force`: another process ends the holder's lease; the holder hears of the loss
// at its next renewal (within a lease), and the next owner gets a larger token.
TEST(RecordsTest, EvictByAnotherProcessEndsTheLeaseAndTheHolderFindsOut) {
  auto client = make_client();
  const std::string mutex = unique_mutex();
  auto recorder = std::make_shared<Recorder>(mutex);
  auto holder = client.contend_service(recorder);
  holder->start();
  ASSERT_TRUE(wait_until([&] { return holder->is_owner(); }, 5s));
  const std::uint64_t token = holder->fencing_token();
  auto operator_backend = other_process(client).backend();
  EXPECT_FALSE(admin(*operator_backend).evict(mutex, "someone-else"));  // only the named owner's lease
  EXPECT_EQ(operator_backend->read(mutex).owner.owner_id, holder->contender_id());
  ASSERT_TRUE(admin(*operator_backend).evict(mutex, holder->contender_id()));
  const auto options = fast_options();
  EXPECT_TRUE(wait_until([&] { return recorder->released_count() >= 1; }, options.ttl + options.transition + 1s))
      << "the holder never found out";
  holder->stop();
  const OwnerSnapshot next = operator_backend->acquire(mutex, "next", kRecordsTtl, 0ms);
  ASSERT_EQ(next.owner.owner_id, "next");
  EXPECT_GT(next.owner.fencing_token, token);
  operator_backend->release(mutex, "next");
}

// An eviction wakes whoever waits for the mutex, as a release does: by push where the engine
// pushes, else at the waiter's next poll. The holder's lease (a minute) is far from its end and
// the waiter's own look comes a minute later (its ttl, and its poll where the engine pushes),
// so taking the mutex within the wait below can only come from the push or the poll.
TEST(RecordsTest, AnEvictionWakesTheNextInLine) {
  const auto backend = make_backend();
  const bool pushed = backend->push() != nullptr;
  auto [client, wait] = slow_to_look(backend, pushed);
  const std::string mutex = unique_mutex();
  auto holder = other_process(client).backend();
  ASSERT_EQ(holder->acquire(mutex, "holder", 60s, 0ms).owner.owner_id, "holder");
  auto recorder = std::make_shared<Recorder>(mutex);
  auto waiter = client.contend_service(recorder);
  waiter->start();
  ASSERT_TRUE(wait_until([&] { return waiter->after_owner().owner_id == "holder"; }, 5s));
  ASSERT_TRUE(admin(*other_process(client).backend()).evict(mutex, "holder"));
  EXPECT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, wait))
      << backend->capabilities().engine << ": the waiter did not take the mutex after its holder was evicted"
      << (pushed ? " (no push?)" : "");
  waiter->stop();
  EXPECT_FALSE(holder->release(mutex, "holder")) << "the evicted holder still had a lease to release";
}

// With sweep_idle on its URI an engine deletes idle records by itself (when a release comes
// by, or by key expiry on Redis), without anyone calling sweep().
TEST(RecordsTest, AnEngineSweepsIdleRecordsByItself) {
  const std::string& uri = backend_uri();
  if (uri.empty() || uri.rfind("memory:", 0) == 0) {
    return;  // no URI option to set (memory forgets idle records by itself: see backend_test.cc)
  }
  auto backend = open_backend(uri + (uri.find('?') == std::string::npos ? "?" : "&") + "sweep_idle=2s");
  const std::string prefix = unique_mutex() + "/";
  for (int i = 0; i < 20; ++i) {
    const std::string mutex = prefix + std::to_string(i);
    backend->acquire(mutex, "self", kRecordsTtl, 0ms);
    ASSERT_TRUE(backend->release(mutex, "self"));
  }
  ASSERT_EQ(admin(*backend).list(prefix, 100).records.size(), 20u);
  // Releases of another mutex give the engine its chances to sweep.
  const std::string other = unique_mutex("other");
  EXPECT_TRUE(wait_until(
      [&] {
        backend->acquire(other, "self", kRecordsTtl, 0ms);
        backend->release(other, "self");
        std::this_thread::sleep_for(50ms);
        return admin(*backend).list(prefix, 100).records.empty();
      },
      15s))
      << admin(*backend).list(prefix, 100).records.size() << " of 20 idle records still there";
}

// The idle mark (Backend::mark_idle, lock caching's "cached and unused") is the owner's to set
// and belongs to its lease: read() and list() show it, another contender cannot set it, and a
// later lease, of another owner or of the same id again, starts unmarked.
TEST(RecordsTest, AnIdleMarkBelongsToTheLeaseItWasSetOn) {
  auto backend = make_backend();
  ASSERT_NE(backend->idle_marks(), nullptr) << "the owner record cannot show a cached lease unused";
  const std::string mutex = unique_mutex();
  backend->acquire(mutex, "marker-a", kRecordsTtl, 0ms);
  EXPECT_FALSE(backend->read(mutex).owner.idle) << "a new lease starts in use";
  EXPECT_TRUE(marks(*backend).mark_idle(mutex, "marker-a", true));
  EXPECT_TRUE(backend->read(mutex).owner.idle);
  const MutexListing listing = admin(*backend).list(mutex, 10);
  ASSERT_EQ(listing.records.size(), 1u);
  EXPECT_TRUE(listing.records[0].owner.idle) << "list() shows the mark too";
  backend->acquire(mutex, "marker-a", kRecordsTtl, 0ms);  // a renewal keeps it
  EXPECT_TRUE(backend->read(mutex).owner.idle) << "a renewal dropped the mark";
  EXPECT_TRUE(marks(*backend).mark_idle(mutex, "marker-a", false));
  EXPECT_FALSE(backend->read(mutex).owner.idle);
  EXPECT_FALSE(marks(*backend).mark_idle(mutex, "marker-b", true)) << "a contender that does not own it marked it";
  EXPECT_FALSE(backend->read(mutex).owner.idle);

  EXPECT_TRUE(marks(*backend).mark_idle(mutex, "marker-a", true));
  ASSERT_TRUE(backend->release(mutex, "marker-a"));
  EXPECT_FALSE(backend->read(mutex).owner.idle) << "a free mutex is not idle";
  backend->acquire(mutex, "marker-a", kRecordsTtl, 0ms);  // the same id, a new lease
  EXPECT_FALSE(backend->read(mutex).owner.idle) << "a new lease of the same id inherited the mark";
  // A lease that ran out, taken again by the same id: a new lease, unmarked (the token may
  // stay). An engine whose leases do not lapse by time alone (ZooKeeper: an unrenewed leader's
  // node stays until a waiter removes it) has no such lease, and the same id renews it.
  const std::string brief = unique_mutex("brief");
  backend->acquire(brief, "marker-a", 200ms, 0ms);
  EXPECT_TRUE(marks(*backend).mark_idle(brief, "marker-a", true));
  if (wait_until([&] { return backend->read(brief).owner.empty(); }, 1s)) {
    EXPECT_FALSE(backend->read(brief).owner.idle);
    backend->acquire(brief, "marker-a", kRecordsTtl, 0ms);
    EXPECT_FALSE(backend->read(brief).owner.idle) << "a lease taken after its expiry inherited the mark";
  } else {
    EXPECT_FALSE(backend->capabilities().lease_lapses_by_time) << "the 200 ms lease never ran out";
  }
  backend->release(brief, "marker-a");
  EXPECT_TRUE(marks(*backend).mark_idle(mutex, "marker-a", true));
  ASSERT_TRUE(backend->release(mutex, "marker-a"));
  const auto other = backend->acquire(mutex, "marker-b", kRecordsTtl, 0ms);
  ASSERT_EQ(other.owner.owner_id, "marker-b");
  EXPECT_FALSE(backend->read(mutex).owner.idle) << "the next owner inherited the mark";
  EXPECT_FALSE(marks(*backend).mark_idle(mutex, "marker-a", true)) << "a former owner marked its successor's lease";
  EXPECT_FALSE(backend->read(mutex).owner.idle);
  backend->release(mutex, "marker-b");
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_records_cases() { return 0; }

}  // namespace simba::tck
