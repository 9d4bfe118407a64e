// Conformance cases for the lock manager (client.mutex(name)) on the backend under test.
//
// "Another process" is a Client constructed apart (here over its own backend object): it has
// its own lock table, so its own remote contender, exactly as a second process would. The exclusion case also runs
// real processes (this binary again) where the engine is shared between processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <iostream>
#include <mutex>

#include "cases.h"
#include "fencing_register.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// `threads` threads of `client` take `mutex` over and over for `duration`, each hold checked by
// the register. Returns the number of holds.
long hammer(const Client& client, const std::string& mutex, FencingRegister& reg, int threads,
            std::chrono::milliseconds duration) {
  std::atomic<long> holds{0};
  std::vector<std::thread> pool;
  const auto end = std::chrono::steady_clock::now() + duration;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto m = client.mutex(mutex);
      while (std::chrono::steady_clock::now() < end) {
        if (!m.try_lock_for(kSoon)) continue;
        reg.enter(m.fencing_token());
        std::this_thread::sleep_for(500us);
        reg.leave();
        m.unlock();
        holds.fetch_add(1);
      }
    });
  }
  for (auto& thread : pool) thread.join();
  return holds.load();
}

// The message of the errc::timeout the request (made with `timeout`) must fail with ("" and a
// failure otherwise).
std::string timeout_message_of(std::future<Hold> future, std::chrono::milliseconds timeout) {
  if (future.wait_for(timeout + kSoon) != std::future_status::ready) {
    ADD_FAILURE() << "the request neither completed nor timed out";
    return "";
  }
  try {
    future.get();
    ADD_FAILURE() << "the request should have timed out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::timeout);
    return e.what();
  }
  return "";
}

// The worker of the exclusion case, run in a child process (never on its own).
TEST(LockManagerTest, DISABLED_ExclusionWorkerProcess) {
  const char* mutex = std::getenv("SIMBA_TCK_LOCK_MUTEX");
  const char* path = std::getenv("SIMBA_TCK_LOCK_REGISTER");
  ASSERT_TRUE(mutex && path) << "run by LockManagerTest.ExclusionThreeProcessesFourThreads";
  FencingRegister reg(path);
  EXPECT_GT(hammer(make_client(), mutex, reg, 4, 2s), 0);  // never starved
}

// Starts this binary's worker case as a child process.
pid_t spawn_worker(const std::string& mutex, const std::string& reg) {
  pid_t pid = spawn_case("LockManagerTest.DISABLED_ExclusionWorkerProcess",
                         {"SIMBA_TCK_LOCK_MUTEX=" + mutex, "SIMBA_TCK_LOCK_REGISTER=" + reg});
  EXPECT_GT(pid, 0) << "could not start a worker process";
  return pid;
}

// Waits for a child up to `timeout` (then kills it); true if it exited with 0.
bool reap(pid_t pid, std::chrono::milliseconds timeout) {
  int status = 0;
  bool done = wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// With the default options every process here caches its lease between holds (linger: one
// ttl) and gives it back on demand: this is also the caching group's exclusion case. (Every
// engine here has a demand signal; a Backend of one's own without one runs it uncached.)
TEST(LockManagerTest, ExclusionThreeProcessesFourThreadsTokensNeverGoBack) {
  auto client = make_client();
  EXPECT_FALSE(client.lock_options().linger.has_value()) << "the default (caching) options";
  if (!backend_uri().empty()) {
    EXPECT_NE(client.backend()->demand_signal(), nullptr) << "caching is on only with a demand signal";
  }
  auto mutex = unique_mutex();
  auto dir = std::filesystem::temp_directory_path() / ("simba-tck-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  FencingRegister reg((dir / "register").string());
  std::vector<long> holds;
  if (client.backend()->capabilities().multi_process && !backend_uri().empty()) {
    auto a = spawn_worker(mutex, reg.path());
    auto b = spawn_worker(mutex, reg.path());
    holds.push_back(hammer(client, mutex, reg, 4, 2s));
    EXPECT_TRUE(reap(a, 60s)) << "worker process failed";
    EXPECT_TRUE(reap(b, 60s)) << "worker process failed";
  } else {
    // An engine of one process: three lock tables (three remote contenders) in this one.
    std::vector<std::future<long>> runs;
    for (int p = 0; p < 3; ++p) {
      runs.push_back(std::async(std::launch::async,
                                [&, p] { return hammer(p == 0 ? client : other_process(client), mutex, reg, 4, 2s); }));
    }
    for (auto& run : runs) holds.push_back(run.get());
  }
  auto summary = reg.summary();
  std::filesystem::remove_all(dir);
  std::cout << "holds: " << summary.writes << " (this process: " << holds[0] << "), highest token " << summary.highest
            << "\n";
  for (auto h : holds) EXPECT_GT(h, 0) << "a process was starved";
  EXPECT_GT(summary.writes, 20);
  EXPECT_EQ(summary.overlaps, 0) << "two holders at once";
  EXPECT_EQ(summary.stale, 0) << "a fencing token went back";
}

TEST(LockManagerTest, RegisterCatchesOverlapAndStaleTokensWithoutTheLock) {
  // The check above must be able to fail, every time: two threads that skip the lock, the
  // second entering while the first is inside, with a lower token, are caught as an overlap
  // and a stale write.
  auto path = std::filesystem::temp_directory_path() / ("simba-tck-reg-" + std::to_string(getpid()));
  std::filesystem::remove(path);
  FencingRegister reg(path.string());
  std::promise<void> first_inside, second_left;
  std::thread first([&] {
    reg.enter(100);
    first_inside.set_value();
    second_left.get_future().wait();
    reg.leave();
  });
  first_inside.get_future().wait();
  std::thread second([&] {
    reg.enter(99);  // no lock: inside together, and a token below one already written
    reg.leave();
    second_left.set_value();
  });
  second.join();
  first.join();
  auto summary = reg.summary();
  std::filesystem::remove(path);
  EXPECT_EQ(summary.overlaps, 1);
  EXPECT_EQ(summary.stale, 1);
}

// One attempt of ReentrantPerThreadReleasedAtZero on a new name. False when a hold of this
// process lost its lease while the attempt relied on it (the machine stalled past the lease):
// what the other process could take then proves nothing either way.
bool reentrant_per_thread_attempt(const Client& client) {
  const auto mutex = unique_mutex();
  auto m = client.mutex(mutex);
  auto other = other_process(client).mutex(mutex);
  // Whether the other process gets the mutex within `timeout`; a hold it gets goes back at once.
  auto other_takes = [&](std::chrono::milliseconds timeout) {
    return std::async(std::launch::async,
                      [&] {
                        if (!other.try_lock_for(timeout)) return false;
                        other.unlock();
                        return true;
                      })
        .get();
  };
  // A hold whose lease ran out on the backend hears it (time-aware ownership) within a lease.
  auto ran_out = [](const std::stop_token& lease) { return wait_until([&] { return lease.stop_requested(); }, kSoon); };

  m.lock();
  m.lock();
  EXPECT_TRUE(m.held_by_this_thread());
  const auto token = m.fencing_token();
  const std::stop_token lease = m.lease_token();
  EXPECT_GT(token, 0u);
  m.unlock();
  const auto token_held_once = m.fencing_token();
  const bool taken_while_held = other_takes(300ms);
  if ((taken_while_held && ran_out(lease)) || lease.stop_requested()) {
    m.unlock();
    return false;
  }
  EXPECT_EQ(token_held_once, token);  // still held once
  EXPECT_FALSE(taken_while_held) << "the other process took the mutex while this thread held it once";
  m.unlock();
  EXPECT_FALSE(m.held_by_this_thread());
  EXPECT_EQ(m.fencing_token(), 0u);
  std::async(std::launch::async, [&] {
    ASSERT_TRUE(other.try_lock_for(kSoon));
    EXPECT_GT(other.fencing_token(), token);
    other.unlock();
  }).get();

  // unlock() by a thread that holds nothing: a usage error, logged; it never throws and never
  // ends another thread's hold.
  std::promise<std::stop_token> locked;  // the holder's lease, or an empty token: no lock
  std::promise<void> checked;
  std::thread holder([&] {
    if (!m.try_lock_for(kSoon)) {
      locked.set_value({});
      return;
    }
    locked.set_value(m.lease_token());
    checked.get_future().wait_for(2 * kSoon);
    m.unlock();
  });
  const std::stop_token holder_lease = locked.get_future().get();  // within kSoon
  bool conclusive = true;
  if (!holder_lease.stop_possible()) {
    ADD_FAILURE() << "a thread could not lock the free mutex within " << kSoon.count() << " s";
  } else {
    const auto owner = client.owner(mutex);
    m.unlock();
    const auto owner_after = client.owner(mutex);
    const bool taken_from_holder = other_takes(200ms);
    conclusive = !((taken_from_holder && ran_out(holder_lease)) || holder_lease.stop_requested());
    if (conclusive) {
      EXPECT_EQ(owner_after.owner_id, owner.owner_id);
      EXPECT_EQ(owner_after.fencing_token, owner.fencing_token);
      EXPECT_FALSE(taken_from_holder) << "the other process took the mutex from another thread's hold";
    }
  }
  checked.set_value();
  holder.join();
  return conclusive;
}

TEST(LockManagerTest, ReentrantPerThreadReleasedAtZero) {
  auto client = make_client();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (reentrant_per_thread_attempt(client)) return;
  }
  ADD_FAILURE() << "in every attempt a hold of this process lost its lease while the other process took the "
                   "mutex or tried to (a stalled machine, or a grant beside a live lease)";
}

// One attempt of LocalRequestsAreServedInFifoOrderOnOneRemoteLease on a new name. False when a
// hold of the chain was revoked (the machine stalled past the lease, which the entry then took
// again with a new token): whether local handovers keep the token proves nothing then.
bool fifo_on_one_lease_attempt(const Client& client) {
  auto m = client.mutex(unique_mutex());
  auto first = m.acquire(kSoon);
  const auto token = first.fencing_token();
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::uint64_t> tokens;
  std::vector<std::stop_token> losses{first.lost()};  // every hold's, looked at once all are done
  std::promise<void> all_done;
  for (int i = 0; i < 5; ++i) {
    m.lock_async(kSoon, [&, i](std::error_code ec, Hold hold) {
      std::lock_guard lock(order_mutex);
      EXPECT_FALSE(ec) << ec.message();
      order.push_back(i);
      tokens.push_back(hold.fencing_token());
      losses.push_back(hold.lost());
      if (order.size() == 5) all_done.set_value();
      // `hold` ends here: handed over to the next request
    });
  }
  std::this_thread::sleep_for(50ms);
  first.unlock();
  auto served = all_done.get_future();
  const bool done = served.wait_for(kSoon) == std::future_status::ready;
  // (a request not served times out within kSoon of its call: its callback still runs here)
  if (!done) served.wait_for(kSoon);
  std::lock_guard lock(order_mutex);
  if (std::any_of(losses.begin(), losses.end(), [](const std::stop_token& lost) { return lost.stop_requested(); })) {
    return false;
  }
  EXPECT_TRUE(done) << "not every request was served within " << kSoon.count() << " s";
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  for (auto t : tokens) EXPECT_EQ(t, token);  // local handovers keep the remote lease's token
  return true;
}

TEST(LockManagerTest, LocalRequestsAreServedInFifoOrderOnOneRemoteLease) {
  auto client = make_client(steady_options());
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (fifo_on_one_lease_attempt(client)) return;
  }
  ADD_FAILURE() << "in every attempt a hold of the chain lost its lease (a stalled machine)";
}

TEST(LockManagerTest, AsyncTimeoutNamesOwnerAndLeavesNoWaiter) {
  // Leases of a second and a second: the holder must keep its lease through the request's
  // timeout, and under ASan on a loaded machine a renewal came over 400 ms late (its lease ran
  // out, and the request got the mutex instead of timing out).
  auto client = make_client(steady_options());
  auto mutex = unique_mutex();
  auto holder_client = other_process(client);
  auto held = holder_client.mutex(mutex).acquire(kSoon);
  auto owner = client.owner(mutex).owner_id;
  {
    // A single attempt first: it ends only after a round of the entry's contender, which
    // learns the owner (a first round's time is the engine's and the machine's: under ASan a
    // new PostgreSQL connection alone took longer than a bound from an observed read).
    auto handle = client.mutex(mutex);
    EXPECT_FALSE(handle.try_lock());
    const auto bound = first_round_bound(client);
    auto what = timeout_message_of(handle.lock_async(bound), bound);
    EXPECT_NE(what.find(mutex), std::string::npos) << what;
    EXPECT_NE(what.find(owner), std::string::npos) << what;
  }
  held.unlock();
  expect_left_nothing(client, mutex);
}

TEST(LockManagerTest, BackendErrorsAreRetriedAndTheTimeoutCarriesTheLastOne) {
  auto client = make_client();
  auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(make_backend());
  Client flaky(faulty, client.options(), client.runtime());
  auto m = flaky.mutex(unique_mutex());
  const auto bound = first_round_bound(flaky);  // timed while the backend answers
  faulty->set_unreachable(true);
  auto what = timeout_message_of(m.lock_async(bound), bound);
  EXPECT_NE(what.find("last backend error"), std::string::npos) << what;
  EXPECT_NE(what.find("injected fault"), std::string::npos) << what;
  // A few errors while waiting are retried within the deadline.
  faulty->set_unreachable(false);
  faulty->fail_next(3);
  auto hold = m.acquire(kSoon);
  EXPECT_GT(hold.fencing_token(), 0u);
}

TEST(LockManagerTest, LostLeaseReachesHoldAndThreadHold) {
  auto client = make_client();
  auto mutex = unique_mutex();
  auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(make_backend());
  Client flaky(faulty, client.options(), client.runtime());
  auto hold = flaky.mutex(mutex).acquire(kSoon);
  EXPECT_GT(hold.fencing_token(), 0u);
  auto bound = client.options().ttl + client.options().transition + 1s;
  faulty->set_unreachable(true);
  ASSERT_TRUE(wait_until([&] { return hold.lost().stop_requested(); }, bound));
  EXPECT_EQ(hold.fencing_token(), 0u);
  faulty->set_unreachable(false);
  hold.unlock();  // only cleans up

  auto m = flaky.mutex(mutex);
  ASSERT_TRUE(m.try_lock_for(kSoon));
  auto lease = m.lease_token();
  faulty->set_unreachable(true);
  ASSERT_TRUE(wait_until([&] { return lease.stop_requested(); }, bound));
  EXPECT_EQ(m.fencing_token(), 0u);
  EXPECT_FALSE(m.try_lock());  // a thread whose hold was revoked must unlock first
  faulty->set_unreachable(false);
  m.unlock();
  ASSERT_TRUE(m.try_lock_for(kSoon));  // and then can lock again
  EXPECT_GT(m.fencing_token(), 0u);
  m.unlock();
}

TEST(LockManagerTest, MaxHoldRevokesAndReleases) {
  auto client = make_client();
  auto mutex = unique_mutex();
  auto hold = client.mutex(mutex).with_max_hold(300ms).acquire(kSoon);
  auto taken = std::chrono::steady_clock::now();  // just after the grant the 300 ms count from
  auto token = hold.fencing_token();
  auto other = other_process(client).mutex(mutex);
  auto next = other.acquire(kSoon);  // waits until max_hold revokes the first
  EXPECT_GE(std::chrono::steady_clock::now() - taken, 280ms);
  EXPECT_TRUE(hold.lost().stop_requested());
  EXPECT_EQ(hold.fencing_token(), 0u);
  EXPECT_GT(next.fencing_token(), token);
  hold.unlock();  // only cleans up: `next` keeps its hold
  EXPECT_EQ(client.owner(mutex).fencing_token, next.fencing_token());

  // Per client, too.
  auto bounded = make_client().with_lock_options(LockOptions{200ms, 8, {}});
  auto h = bounded.mutex(unique_mutex()).acquire(kSoon);
  EXPECT_TRUE(wait_until([&] { return h.lost().stop_requested(); }, kSoon));
}

// The engine as an owner that never hears a demand sees it: a waiter's demand (a losing
// attempt's mark, a push, a renewal's flag) never reaches it, so only its handover limit can
// end its local handovers.
class DemandDeafBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    auto snapshot = ForwardingBackend::acquire(mutex, contender_id, ttl, transition);
    snapshot.demanded = false;
    return snapshot;
  }
  OwnerSnapshot read(const std::string& mutex) override {
    auto snapshot = ForwardingBackend::read(mutex);
    snapshot.demanded = false;
    return snapshot;
  }
  const DemandSignal* demand_signal() const noexcept override { return nullptr; }
  DemandPush* demand_push() noexcept override { return nullptr; }
};

TEST(LockManagerTest, HandoverLimitLetsOtherProcessesIn) {
  // The busy process hears no demand (and so caches nothing): the limit alone must let the
  // other process in.
  auto base = make_client();
  auto client = Client(std::make_shared<DemandDeafBackend>(make_backend()), base.options(), base.runtime())
                    .with_lock_options(LockOptions{0ms, 2, 0ms});
  EXPECT_TRUE(other_process_gets_past_busy_threads(client, unique_mutex(), kSoon))
      << "three local threads kept the mutex from another process";
}

TEST(LockManagerTest, ClientsOverOneBackendKeepTheirOwnOptionsAndEntries) {
  // Two Clients constructed apart over one backend object: each one's entries contend with its
  // own ContendOptions (the lease the backend records is as long as its ttl), whichever of
  // them named the mutex first. A copy (with_lock_options) shares its Client's entries.
  auto base = make_client();
  ContendOptions long_lease = base.options();
  long_lease.ttl = base.options().ttl * 3;
  const LockOptions no_caching{0ms, 8, 0ms};
  Client first(base.backend(), base.options(), base.runtime());
  Client second(base.backend(), long_lease, base.runtime());
  first = first.with_lock_options(no_caching);
  second = second.with_lock_options(no_caching);
  auto copy = first.with_lock_options(LockOptions{0ms, 2, 0ms});
  const auto name = unique_mutex();
  auto lease_of = [&](const Client& client, Mutex& handle) {
    auto hold = handle.acquire(kSoon);
    auto owner = client.owner(name);
    hold.unlock();
    return std::chrono::milliseconds(owner.ttl_at - owner.acquired_at);
  };
  auto by_first = first.mutex(name);  // made first, and kept: the entry lives on
  const auto first_lease = lease_of(first, by_first);
  auto by_second = second.mutex(name);
  const auto second_lease = lease_of(second, by_second);
  const auto midpoint = (base.options().ttl + long_lease.ttl) / 2;
  EXPECT_LT(first_lease, midpoint) << "the first client's ttl is " << format_duration(base.options().ttl);
  EXPECT_GT(second_lease, midpoint) << "the second client contended with the first one's options (its ttl is "
                                    << format_duration(long_lease.ttl) << ")";
  auto by_copy = copy.mutex(name);
  EXPECT_EQ(first.lock_entries(), 1u);
  EXPECT_EQ(second.lock_entries(), 1u);
  EXPECT_EQ(copy.lock_entries(), 1u) << "a copy shares its client's entries";
  {
    std::scoped_lock guard(by_copy);
    EXPECT_FALSE(by_second.try_lock()) << "two clients' entries are two contenders: the other one waits remotely";
  }
}

TEST(LockManagerTest, BadInputIsRefusedClearly) {
  auto client = make_client();
  EXPECT_THROW(client.mutex(" "), Error);
  auto m = client.mutex(unique_mutex());
  EXPECT_THROW(m.with_max_hold(-1ms), Error);
  EXPECT_THROW(m.acquire(-1ms), Error);
  EXPECT_THROW(m.lock_async(1s, Mutex::Callback()), Error);
  EXPECT_THROW(client.with_lock_options(LockOptions{-5ms, 8, {}}), Error);
  // A name longer than the engine holds: refused when the handle is made, every time (the
  // entry that could not be made leaves no slot behind, and takes no lock on its way out).
  if (const auto max_bytes = client.backend()->capabilities().max_mutex_bytes; max_bytes != 0) {
    const auto too_long = unique_mutex() + std::string(max_bytes, 'x');
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        client.mutex(too_long);
        ADD_FAILURE() << "a name of " << too_long.size() << " bytes was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
      }
    }
    EXPECT_EQ(client.lock_entries(), 1u) << "only the handle above has an entry";
  }
  Hold empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.fencing_token(), 0u);
  empty.unlock();  // nothing to do
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_lock_cases() { return 0; }

}  // namespace simba::tck
