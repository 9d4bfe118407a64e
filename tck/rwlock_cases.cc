// The kit's read-write group (simba/shared_mutex.h): readers overlap and a writer excludes them,
// a waiting writer blocks new readers, write tokens rise and readers carry the last, a dead
// reader's lease lets the writer in, an upgrade is refused and a downgrade works.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// Who is inside: readers and writers. A writer with anyone else inside, or a reader with a
// writer inside, is a violation, unless one of them has lost its lease (a lease that ran out
// may be taken over; a loaded machine may stall a holder past it).
class RwRegister {
 public:
  void enter(LockMode mode, std::stop_token lost) {
    std::lock_guard lock(mutex_);
    in_.push_back({mode, std::move(lost)});
    int writers = 0;
    for (auto& [m, t] : in_) writers += m == LockMode::exclusive;
    const bool bad = writers > 1 || (writers == 1 && in_.size() > 1);
    if (bad && std::none_of(in_.begin(), in_.end(), [](auto& e) { return e.second.stop_requested(); })) {
      ++violations_;
    }
    if (writers == 0) most_readers_ = std::max(most_readers_, in_.size());
  }
  void leave(const std::stop_token& lost) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(in_.begin(), in_.end(), [&](auto& e) { return e.second == lost; });
    if (it != in_.end()) in_.erase(it);
  }
  int violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<LockMode, std::stop_token>> in_;
  std::size_t most_readers_ = 0;
  int violations_ = 0;
};

// 3 processes of 2 threads: each thread takes the lock 6 times, a write every third time, a
// read else (2 ms inside): no writer ever shares it, every thread gets in every time.
TEST(RwLockTest, AWriterExcludesEveryoneAndEveryoneGetsIn) {
  auto client = make_client();
  const auto name = unique_mutex("rw-exclusion");
  std::vector<Client> processes{client, other_process(client), other_process(client)};
  RwRegister reg;
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (auto& process : processes) {
    auto rw = process.shared_mutex(name);
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, rw, t]() mutable {
        for (int i = 0; i < 6; ++i) {
          try {
            const bool write = (i + t) % 3 == 0;
            SharedHold hold = write ? rw.acquire(60s) : rw.acquire_shared(60s);
            EXPECT_EQ(hold.mode(), write ? LockMode::exclusive : LockMode::shared);
            reg.enter(hold.mode(), hold.lost());
            ++granted;
            std::this_thread::sleep_for(2ms);
            reg.leave(hold.lost());
          } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
          }
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(reg.violations(), 0) << "a writer shared the lock";
  EXPECT_EQ(granted.load(), 36);
}

// Leases lost by any of `clients` so far (a loaded, sanitized machine may stall a renewal past
// its lease; a holder whose lease ran out is rightly passed, so order checks then hold no more).
std::uint64_t leases_lost(const std::vector<Client>& clients) {
  std::uint64_t n = 0;
  for (const auto& c : clients) {
    for (auto count : c.metrics().lost) n += count;
  }
  return n;
}

// Two readers of two processes hold at once; a writer of a third waits for both, and while it
// waits a new reader does not get in (writers are preferred); when the readers go the writer
// gets it, and the new reader after the writer, with the writer's token. (Each order check
// holds while no lease of the case was lost.)
TEST(RwLockTest, AWaitingWriterBlocksNewReaders) {
  auto client = make_client(steady_options());
  const auto name = unique_mutex("rw-prefer");
  auto a = other_process(client), b = other_process(client), w = other_process(client);
  const std::vector<Client> all{client, a, b, w};
  auto lost = [&] { return leases_lost(all) > 0; };
  SharedHold ra = a.shared_mutex(name).acquire_shared(10s);
  SharedHold rb = b.shared_mutex(name).acquire_shared(10s);  // readers overlap
  EXPECT_TRUE(ra.is_owner() || lost());
  EXPECT_TRUE(rb.is_owner() || lost());
  auto writer = std::async(std::launch::async, [&] { return w.shared_mutex(name).acquire(30s); });
  // The writer holds the gate once it waits for the readers.
  ASSERT_TRUE(wait_until([&] { return !client.owner(name).empty(); }, 10s)) << "the writer never waited";
  EXPECT_TRUE(writer.wait_for(100ms) == std::future_status::timeout || lost())
      << "the writer got in with readers inside";
  auto late = client.shared_mutex(name);
  try {
    SharedHold in = late.acquire_shared(300ms);
    EXPECT_TRUE(lost()) << "a new reader got in while a writer waited";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::timeout) << e.what();
  }
  ra.unlock();
  EXPECT_TRUE(writer.wait_for(100ms) == std::future_status::timeout || lost())
      << "the writer got in with a reader inside";
  rb.unlock();
  ASSERT_EQ(writer.wait_for(20s), std::future_status::ready) << "the writer never got in";
  SharedHold written = writer.get();
  EXPECT_EQ(written.mode(), LockMode::exclusive);
  EXPECT_GT(written.fencing_token(), 0u);
  auto reader = std::async(std::launch::async, [&] { return late.acquire_shared(30s); });
  EXPECT_TRUE(reader.wait_for(200ms) == std::future_status::timeout || lost()) << "a reader got in beside the writer";
  const auto token = written.fencing_token();
  written.unlock();
  ASSERT_EQ(reader.wait_for(20s), std::future_status::ready);
  SharedHold read = reader.get();
  if (!lost()) {
    EXPECT_EQ(read.fencing_token(), token) << "a reader carries the token of the last write";
  }
}

// An engine whose observer watches are counted, by record.
class WatchCounting : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    if (contender_id.empty()) {
      std::lock_guard lock(mutex_);
      observed_.push_back(mutex);
    }
    return ForwardingBackend::watch(mutex, contender_id, std::move(on_change));
  }
  // Whether a record of `name` other than its gate (a reader's record) was watched.
  bool watched_a_record_of(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return std::any_of(observed_.begin(), observed_.end(),
                       [&](const std::string& record) { return record.starts_with(name) && record != name; });
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> observed_;
};

// A writer waiting at the gate watches the records of the readers inside, so that where the
// engine reports changes a reader's release ends its pause rather than its next look; it gets
// in once they leave.
TEST(RwLockTest, AWaitingWriterWatchesTheReadersInside) {
  auto client = make_client();
  const auto name = unique_mutex("rw-watch");
  auto counting = std::make_shared<WatchCounting>(make_backend());
  Client w(counting, client.options(), client.runtime());
  SharedHold read = other_process(client).shared_mutex(name).acquire_shared(10s);
  auto writer = std::async(std::launch::async, [&] { return w.shared_mutex(name).acquire(30s); });
  EXPECT_TRUE(wait_until([&] { return counting->watched_a_record_of(name); }, 10s))
      << "the waiting writer watched no reader's record";
  read.unlock();
  ASSERT_EQ(writer.wait_for(20s), std::future_status::ready) << "the writer never got in";
  EXPECT_EQ(writer.get().mode(), LockMode::exclusive);
}

// Where the engine says with the gate's grant that no reader's record is held
// (OwnerSnapshot::no_derived_held), a writer looks for no readers; with a reader of another
// process inside, it looks, and waits for it. An engine may say so only of a name whose
// derived records it has listed once (ZooKeeper), or whose record was there before the grant
// (PostgreSQL): the probe lists first and asks on its second grant, and the writes are counted
// after a first one.
TEST(RwLockTest, AWriterLooksForReadersOnlyWhereTheEngineCannotSayNoneIsIn) {
  auto client = make_client();
  const auto name = unique_mutex("rw-look");
  bool says = false;
  {
    auto probe = make_backend();
    const auto probe_name = unique_mutex("rw-look-probe");
    if (auto* records = probe->administration()) records->list_derived(probe_name, 16);
    probe->acquire(probe_name, "probe", 10s, 0ms);
    probe->release(probe_name, "probe");
    says = probe->acquire(probe_name, "probe", 10s, 0ms).no_derived_held;
    probe->release(probe_name, "probe");
  }
  auto counting = std::make_shared<AcquireCounting>(make_backend());
  Client w(counting, client.options(), client.runtime());
  SharedMutex writes = w.shared_mutex(name);
  EXPECT_TRUE(writes.acquire(10s)) << "the first write";
  const int first = counting->listings();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(writes.acquire(10s)) << "write " << i;
  if (says) {
    EXPECT_EQ(counting->listings(), first) << "the engine said no reader was in, and the writer looked anyway";
  } else {
    EXPECT_GE(counting->listings() - first, 3) << "a writer took the gate without a look at the readers";
  }
  SharedHold read = other_process(client).shared_mutex(name).acquire_shared(10s);
  const int before = counting->listings();
  auto writer = std::async(std::launch::async, [&] { return writes.acquire(30s); });
  EXPECT_TRUE(wait_until([&] { return counting->listings() > before; }, 10s))
      << "with a reader inside, the writer never looked at the readers";
  EXPECT_EQ(writer.wait_for(100ms), std::future_status::timeout) << "a writer got in with a reader inside";
  read.unlock();
  ASSERT_EQ(writer.wait_for(20s), std::future_status::ready) << "the writer never got in";
  EXPECT_EQ(writer.get().mode(), LockMode::exclusive);
}

// Where the engine says, with a reader's lease, what the gate was (OwnerSnapshot::parent), a
// process's first reader does not read the gate after; a reader that joins a lease its process
// holds already, or finds the gate held, still reads it.
TEST(RwLockTest, AReaderReadsTheGateOnlyWhereTheEngineCannotSayWithItsLease) {
  auto client = make_client();
  const auto name = unique_mutex("rw-gate");
  bool says = false;
  {
    auto probe = make_backend();
    const auto record = unique_mutex("rw-gate-probe") + "#r00000000";
    says = probe->acquire(record, "probe", 10s, 0ms).parent.has_value();
    probe->release(record, "probe");
  }
  auto counting = std::make_shared<AcquireCounting>(make_backend());
  Client r(counting, client.options(), client.runtime());
  SharedMutex reads = r.shared_mutex(name);
  {
    SharedHold first = reads.acquire_shared(10s);
    if (says) {
      EXPECT_EQ(counting->reads(name), 0) << "the engine said what the gate was, and the reader read it anyway";
    } else {
      EXPECT_GE(counting->reads(name), 1) << "a reader came in without a look at the gate";
    }
    const int before = counting->reads(name);
    SharedHold second = reads.acquire_shared(10s);  // joins this process's lease
    EXPECT_GT(counting->reads(name), before) << "a reader joining its process's lease did not look at the gate";
  }
  SharedHold write = other_process(client).shared_mutex(name).acquire(10s);
  const std::uint64_t written = write.fencing_token();
  auto reader = std::async(std::launch::async, [&] { return reads.acquire_shared(30s); });
  EXPECT_EQ(reader.wait_for(300ms), std::future_status::timeout) << "a reader got in with a writer inside";
  write.unlock();
  ASSERT_EQ(reader.wait_for(20s), std::future_status::ready) << "the reader never got in";
  EXPECT_EQ(reader.get().fencing_token(), written) << "a read carries the last write's token";
}

// Writes of two processes in turn: their tokens rise.
TEST(RwLockTest, WriteTokensRise) {
  auto client = make_client();
  const auto name = unique_mutex("rw-tokens");
  std::vector<SharedMutex> handles{client.shared_mutex(name), other_process(client).shared_mutex(name)};
  std::uint64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    SharedHold hold = handles[i % 2].acquire(10s);
    EXPECT_GT(hold.fencing_token(), last) << "write " << i;
    last = hold.fencing_token();
  }
}

// A reader whose backend stops answering holds the writer off only until its lease runs out.
TEST(RwLockTest, ADeadReadersLeaseLetsTheWriterIn) {
  auto client = make_client();
  const auto name = unique_mutex("rw-dead");
  auto cut = std::make_shared<testing::FaultInjectingBackend>(make_backend());
  Client reader(cut, fast_options(), client.runtime());
  SharedHold read = reader.shared_mutex(name).acquire_shared(10s);
  cut->set_unreachable(true);
  SharedHold write = client.shared_mutex(name).acquire(30s);
  EXPECT_EQ(write.mode(), LockMode::exclusive);
  EXPECT_TRUE(wait_until([&] { return read.lost().stop_requested(); }, 20s)) << "the cut-off reader never heard";
}

// The Lockable interfaces: reentrant per thread for the same mode, a writer may read within
// its write, an upgrade is refused clearly, a write hold downgrades to a read with no writer in
// between, and bad input is refused.
TEST(RwLockTest, ReentryUpgradeAndDowngrade) {
  auto client = make_client();
  const auto name = unique_mutex("rw-modes");
  auto rw = client.shared_mutex(name);
  {
    std::shared_lock outer(rw);
    std::shared_lock inner(rw);  // reentrant
    try {
      rw.lock();
      ADD_FAILURE() << "a reader upgraded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::failed_precondition);
      EXPECT_NE(std::string(e.what()).find("may not upgrade"), std::string::npos) << e.what();
    }
  }
  {
    std::unique_lock writer(rw);
    std::unique_lock again(rw);   // reentrant
    std::shared_lock within(rw);  // a read within the write
    EXPECT_GT(rw.fencing_token(), 0u);
    EXPECT_FALSE(other_process(client).shared_mutex(name).try_lock_shared()) << "a reader beside the writer";
  }
  SharedHold hold = rw.acquire(10s);
  const auto token = hold.fencing_token();
  hold.downgrade();
  EXPECT_EQ(hold.mode(), LockMode::shared);
  EXPECT_EQ(hold.fencing_token(), token);
  auto other = other_process(client).shared_mutex(name);
  SharedHold beside = other.acquire_shared(10s);  // readers share it again
  EXPECT_FALSE(other.try_lock()) << "a writer beside readers";
  EXPECT_THROW(hold.downgrade(), Error);
  beside.unlock();
  hold.unlock();
  EXPECT_TRUE(other.try_lock_for(10s)) << "the lock was left held";
  other.unlock();
  EXPECT_THROW((void)client.shared_mutex(""), Error);
  EXPECT_THROW((void)rw.acquire(-1ms), Error);
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_rwlock_cases() { return 0; }

}  // namespace simba::tck
