// The kit's semaphore group (simba/semaphore.h): never more than N holders, each of N+1
// contenders gets in, a dead holder's permit comes back after its lease, tokens rise per
// slot, threads of one process share its permits, bad input is refused clearly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// Counts the holders inside it. Entering while N others are in is a violation unless one of
// those in has lost its lease (a lease that ran out may be taken over: that is what fencing
// tokens are for, and a loaded machine may stall a holder past its lease).
class HolderRegister {
 public:
  explicit HolderRegister(std::size_t limit) : limit_(limit) {}

  void enter(const Permit& permit) {
    std::lock_guard lock(mutex_);
    in_.push_back(permit.lost());
    most_ = std::max(most_, in_.size());
    if (in_.size() > limit_ &&
        std::none_of(in_.begin(), in_.end(), [](const std::stop_token& lost) { return lost.stop_requested(); })) {
      ++violations_;
    }
  }
  void leave(const Permit& permit) {
    std::lock_guard lock(mutex_);
    const auto lost = permit.lost();
    auto it = std::find_if(in_.begin(), in_.end(), [&](const std::stop_token& t) { return t == lost; });
    if (it != in_.end()) in_.erase(it);
  }
  int violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }
  std::size_t most() const {
    std::lock_guard lock(mutex_);
    return most_;
  }

 private:
  const std::size_t limit_;
  mutable std::mutex mutex_;
  std::vector<std::stop_token> in_;
  std::size_t most_ = 0;
  int violations_ = 0;
};

// 4 processes of 2 threads each take a semaphore of 3 permits 6 times each (2 ms holds): never
// more than 3 hold at once, every thread gets all its permits (so each of N+1 processes got
// in), and the permits were used together (more than one holder at some point).
TEST(SemaphoreTest, NeverMoreThanNHoldersAndEveryContenderGetsIn) {
  constexpr int kPermits = 3, kProcesses = 4, kThreads = 2, kRounds = 6;
  auto client = make_client();
  const auto name = unique_mutex("sem-exclusion");
  std::vector<Client> processes{client};
  for (int p = 1; p < kProcesses; ++p) processes.push_back(other_process(client));
  HolderRegister reg(kPermits);
  std::atomic<int> granted{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (auto& process : processes) {
    auto semaphore = process.semaphore(name, kPermits);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, semaphore]() mutable {
        for (int i = 0; i < kRounds; ++i) {
          try {
            Permit permit = semaphore.acquire(30s);
            reg.enter(permit);
            ++granted;
            std::this_thread::sleep_for(2ms);
            reg.leave(permit);
            permit.release();
          } catch (const std::exception& e) {
            ++failed;
            ADD_FAILURE() << e.what();
          }
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(reg.violations(), 0) << "more than " << kPermits << " held at once";
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(granted.load(), kProcesses * kThreads * kRounds);
  // A slot granted to a request that another slot settled first is given back right after
  // that grant, on the granting thread: it may still be on its way as the last thread returns.
  // Within a ttl of the end it is gone, or it was kept (renewed) or left to run out.
  for (int k = 0; k < kPermits; ++k) {
    const auto slot = Semaphore::slot_name(name, k, kPermits);
    EXPECT_TRUE(wait_until([&] { return client.owner(slot).empty(); }, client.options().ttl))
        << "slot " << k << " left held";
  }
}

// N processes hold every permit; the N+1st waits, and gets in when one lets go; try_acquire
// finds none while all are held, and acquire's timeout names the semaphore and its holders.
TEST(SemaphoreTest, TheNextContenderWaitsForARelease) {
  auto client = make_client(steady_options());
  const auto name = unique_mutex("sem-wait");
  std::vector<Client> holders;
  std::vector<Permit> permits;
  std::map<unsigned, int> slots;
  for (int p = 0; p < 2; ++p) {
    holders.push_back(other_process(client));
    permits.push_back(holders.back().semaphore(name, 2).acquire(10s));
    ++slots[permits.back().slot()];
    EXPECT_GT(permits.back().fencing_token(), 0u);
    EXPECT_EQ(permits.back().semaphore(), name);
  }
  EXPECT_EQ(slots.size(), 2u) << "two holders share a slot";
  auto lost = [&] { return permits[0].lost().stop_requested() || permits[1].lost().stop_requested(); };
  auto semaphore = client.semaphore(name, 2);
  {
    Permit extra = semaphore.try_acquire();
    EXPECT_TRUE(!extra || lost()) << "a third permit of two";
  }
  try {
    Permit extra = semaphore.acquire(300ms);
    EXPECT_TRUE(lost()) << "a third permit of two";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::timeout);
    const std::string what = e.what();
    EXPECT_NE(what.find("semaphore '" + name + "'"), std::string::npos) << what;
    // Each permit's holder, as its slot's timeout names it (the request led the line and asked
    // every slot) or as the listing names it (the timeout came while it still joined the line,
    // a round trip or two that a loaded machine may stretch past 300 ms).
    for (unsigned slot = 0; slot < 2; ++slot) {
      const bool by_slot = what.find(Semaphore::slot_name(name, slot, 2)) != std::string::npos;
      const bool by_listing = what.find("(permit " + std::to_string(slot) + ")") != std::string::npos;
      EXPECT_TRUE(by_slot || by_listing) << "permit " << slot << "'s holder is not named: " << what;
    }
  }
  auto waiting = semaphore.acquire_async(20s);
  EXPECT_TRUE(waiting.wait_for(100ms) == std::future_status::timeout || lost()) << "granted while every permit is held";
  const unsigned freed = permits[1].slot();
  const bool was_lost = lost();
  permits[1].release();
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  Permit third = waiting.get();
  if (!was_lost) {
    EXPECT_EQ(third.slot(), freed);
  }
  EXPECT_LT(third.slot(), 2u);
  // The callback form.
  std::promise<std::pair<std::error_code, unsigned>> called;
  semaphore.acquire_async(20s, [&](std::error_code error, Permit permit) {
    called.set_value({error, permit ? permit.slot() : 99u});
  });
  auto outcome = called.get_future();
  EXPECT_TRUE(outcome.wait_for(100ms) == std::future_status::timeout || lost() || third.lost().stop_requested());
  permits[0].release();
  ASSERT_EQ(outcome.wait_for(20s), std::future_status::ready);
  auto [error, slot] = outcome.get();
  EXPECT_FALSE(error) << error.message();
  EXPECT_LT(slot, 2u);
}

// A waiting process has one remote contender: while another process's request is at the head
// of the semaphore's line ("<name>#wait") and waits on the slots, a later process waits in the
// line and asks no slot. Permits then go first come, first served: the head first.
TEST(SemaphoreTest, AWaitingProcessWaitsInTheLineAndTheFirstIsServedFirst) {
  auto client = make_client(steady_options());
  const auto name = unique_mutex("sem-line");
  const std::string line = name + "#wait";
  Client holder = other_process(client);
  Semaphore held = holder.semaphore(name, 2);
  Permit a = held.acquire(10s), b = held.acquire(10s);
  auto lost = [&] { return a.lost().stop_requested() || b.lost().stop_requested(); };
  Client first = other_process(client);
  auto head = first.semaphore(name, 2).acquire_async(30s);
  ASSERT_TRUE(wait_until([&] { return !client.owner(line).empty(); }, 10s)) << "the first waiter never led the line";
  auto counting = std::make_shared<AcquireCounting>(make_backend());
  Client second(counting, client.options(), client.runtime());
  auto next = second.semaphore(name, 2).acquire_async(30s);
  ASSERT_TRUE(wait_until([&] { return counting->asked(line) > 0; }, 10s)) << "the second waiter never joined the line";
  for (unsigned slot = 0; slot < 2; ++slot) {
    EXPECT_EQ(counting->asked(Semaphore::slot_name(name, slot, 2)), 0)
        << "the second waiter asked slot " << slot << " while the first led the line";
  }
  // A third that gives up in the line still names the holders of the permits, whichever form
  // it asked with (an async one's timeout comes on a timer's thread).
  auto gives_up_naming_the_holders = [&](auto&& ask) {
    try {
      Permit extra = ask();
      EXPECT_TRUE(lost()) << "a third permit of two";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::timeout);
      const std::string what = e.what();
      EXPECT_NE(what.find(line), std::string::npos) << what;
      EXPECT_NE(what.find("the permits are held by '"), std::string::npos) << what;
      EXPECT_NE(what.find("(permit 0)"), std::string::npos) << what;
      EXPECT_NE(what.find("(permit 1)"), std::string::npos) << what;
    }
  };
  Client third = other_process(client), fourth = other_process(client);
  gives_up_naming_the_holders([&] { return third.semaphore(name, 2).acquire(300ms); });
  gives_up_naming_the_holders([&] {
    auto given_up = fourth.semaphore(name, 2).acquire_async(300ms);
    if (given_up.wait_for(20s) != std::future_status::ready) {
      ADD_FAILURE() << "an async request never timed out in the line";
      return Permit();
    }
    return given_up.get();
  });
  a.release();
  ASSERT_EQ(head.wait_for(20s), std::future_status::ready) << "the first waiter never got the freed permit";
  Permit got = head.get();
  EXPECT_TRUE(got);
  EXPECT_TRUE(next.wait_for(100ms) == std::future_status::timeout || lost() || got.lost().stop_requested())
      << "the second waiter got a permit of two beside two holders";
  b.release();
  ASSERT_EQ(next.wait_for(20s), std::future_status::ready) << "the second waiter never got the next permit";
  EXPECT_TRUE(next.get());
}

// A holder whose backend stops answering (a dead or cut-off process) keeps its slot only until
// its lease runs out (judged by the server's clock); then a waiter gets it, with a larger token.
TEST(SemaphoreTest, ADeadHoldersPermitComesBackAfterItsLease) {
  auto client = make_client();
  const auto name = unique_mutex("sem-dead");
  const auto slot = Semaphore::slot_name(name, 0, 1);
  auto cut = std::make_shared<testing::FaultInjectingBackend>(make_backend());
  Client holder(cut, fast_options(), client.runtime());
  Permit held = holder.semaphore(name, 1).acquire(10s);
  const auto token = held.fencing_token();
  cut->set_unreachable(true);                      // no renewal, no release reaches the server any more
  const auto lease = client.snapshot(slot).owner;  // a renewal in flight can only make it later
  Permit taken = client.semaphore(name, 1).acquire(20s);
  EXPECT_GT(taken.fencing_token(), token);
  if (client.backend()->capabilities().lease_lapses_by_time && !lease.empty()) {
    EXPECT_GE(client.snapshot(slot).owner.acquired_at, lease.transition_at)
        << "taken before the dead holder's lease ran out";
  }
  EXPECT_TRUE(wait_until([&] { return held.lost().stop_requested(); }, 20s)) << "the cut-off holder never heard";
  taken.release();
  held.release();
}

// A request stopped while it waits returns an empty Permit at once, and leaves nothing: when
// the holder lets go, nobody takes the slot.
TEST(SemaphoreTest, AStoppedRequestTakesNothingAndLeavesNothing) {
  auto client = make_client();
  const auto name = unique_mutex("sem-stop");
  auto holder = other_process(client);
  Permit held = holder.semaphore(name, 1).acquire(10s);
  std::stop_source stop;
  auto waiting =
      std::async(std::launch::async, [&] { return client.semaphore(name, 1).acquire(20s, stop.get_token()); });
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout) << "granted while the permit is held";
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "the stop did not end the wait";
  EXPECT_FALSE(waiting.get());
  held.release();
  std::this_thread::sleep_for(fast_options().ttl);
  EXPECT_TRUE(client.owner(Semaphore::slot_name(name, 0, 1)).empty()) << "the stopped request took the slot";
  EXPECT_EQ(client.lock_entries(), 0u) << "the stopped request left an entry waiting";
}

// One slot taken again and again by two processes in turn: its token rises with every grant.
TEST(SemaphoreTest, TokensRiseWithEveryGrantOfASlot) {
  auto client = make_client();
  const auto name = unique_mutex("sem-tokens");
  std::vector<Semaphore> semaphores{client.semaphore(name, 1), other_process(client).semaphore(name, 1)};
  std::uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    Permit permit = semaphores[i % 2].acquire(10s);
    EXPECT_EQ(permit.slot(), 0u);
    EXPECT_GT(permit.fencing_token(), last) << "grant " << i;
    last = permit.fencing_token();
  }
}

// 8 threads of one process through one permit: each gets it, one at a time, and a permit
// released while threads wait passes to one of them locally (no round trip).
TEST(SemaphoreTest, ThreadsOfOneProcessShareItsPermits) {
  auto client = make_client();
  auto semaphore = client.semaphore(unique_mutex("sem-local"), 1);
  HolderRegister reg(1);
  std::atomic<int> granted{0};
  Permit first = semaphore.acquire(10s);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        Permit permit = semaphore.acquire(30s);
        reg.enter(permit);
        ++granted;
        std::this_thread::sleep_for(1ms);
        reg.leave(permit);
      }
    });
  }
  const bool queued = wait_until([&] { return client.metrics().waiters >= 8; }, 20s);
  EXPECT_TRUE(queued) << client.metrics().waiters << " requests waiting";
  first.release();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(granted.load(), 24);
  EXPECT_EQ(reg.violations(), 0);
  EXPECT_GT(client.metrics().local_handovers, 0u) << "every permit went back to the backend";
}

// 0, negative and too many permits, a negative timeout, and a contender that asks with
// another count of permits than the holders: each refused with an error that names it.
TEST(SemaphoreTest, BadInputIsRefusedClearly) {
  auto client = make_client();
  const auto name = unique_mutex("sem-bad");
  for (int permits : {0, -1, static_cast<int>(Semaphore::kMaxPermits) + 1}) {
    try {
      (void)client.semaphore(name, permits);
      ADD_FAILURE() << permits << " permits accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("permits must be 1 to"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)client.semaphore("", 2), Error);
  auto three = client.semaphore(name, 3);
  EXPECT_THROW((void)three.acquire(-1ms), Error);
  Permit held = three.acquire(10s);
  if (!client.backend()->administration()) GTEST_SKIP() << "no listing: a mismatch is not seen";
  auto five = other_process(client).semaphore(name, 5);
  try {
    (void)five.acquire(1s);
    ADD_FAILURE() << "a semaphore of 5 permits mixed with one of 3";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("asked with 5 permits"), std::string::npos) << what;
    EXPECT_NE(what.find("of a semaphore of 3"), std::string::npos) << what;
  }
  EXPECT_THROW((void)five.try_acquire(), Error);
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_semaphore_cases() { return 0; }

}  // namespace simba::tck
