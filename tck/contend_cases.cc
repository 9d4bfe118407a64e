// Conformance cases for the contention protocol: Simba's TCK and what simba adds.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// Bound for anything that should happen "soon" on a healthy backend.

std::unique_ptr<MutexContendService> start_contender(const Client& client, std::shared_ptr<Recorder> recorder) {
  auto service = client.contend_service(std::move(recorder));
  service->start();
  return service;
}

// An owner whose backend can be made to fail (through a FaultInjectingBackend over the backend
// under test) and a second contender on the plain backend that has seen it own.
struct FaultyOwnerScene {
  Client client = make_client();
  std::string mutex = unique_mutex();
  std::shared_ptr<simba::testing::FaultInjectingBackend> faulty =
      std::make_shared<simba::testing::FaultInjectingBackend>(client.backend());
  std::shared_ptr<Recorder> a = std::make_shared<Recorder>(mutex);
  std::shared_ptr<Recorder> b = std::make_shared<Recorder>(mutex);
  std::unique_ptr<MutexContendService> owner;
  std::unique_ptr<MutexContendService> successor;

  // Starts the owner; `before_successor` runs before the successor starts.
  void start(const std::function<void()>& before_successor = {}) {
    owner = start_contender(Client(faulty, client.options(), client.runtime()), a);
    ASSERT_TRUE(wait_until([&] { return owner->is_owner(); }, kSoon));
    if (before_successor) before_successor();
    successor = start_contender(client, b);
    ASSERT_TRUE(wait_until([&] { return successor->after_owner().owner_id == a->contender_id(); }, kSoon));
  }
};

TEST(ContendTest, StartAcquiresAndStopReleasesBeforeReturning) {
  auto client = make_client();
  auto mutex = unique_mutex();
  auto recorder = std::make_shared<Recorder>(mutex);
  auto service = start_contender(client, recorder);
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, kSoon));
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, kSoon));
  EXPECT_EQ(service->status(), ServiceStatus::running);
  EXPECT_GT(service->fencing_token(), 0u);
  EXPECT_EQ(client.owner(mutex).owner_id, recorder->contender_id());
  // Callbacks run on the callback executor, never on the thread that talks to the backend.
  EXPECT_EQ(recorder->events()[0].thread.rfind("simba-cb", 0), 0u) << recorder->events()[0].thread;

  service->stop();
  EXPECT_EQ(recorder->released_count(), 1);  // delivered before stop() returned
  EXPECT_EQ(service->status(), ServiceStatus::initial);
  EXPECT_FALSE(service->is_owner());
  EXPECT_TRUE(client.owner(mutex).empty());
}

TEST(ContendTest, RestartAcquiresAgainInANewGeneration) {
  auto client = make_client();
  auto recorder = std::make_shared<Recorder>(unique_mutex());
  auto service = start_contender(client, recorder);
  // Wait for the callback, not just is_owner(): a stop() before on_acquired is delivered
  // makes it stale (dropped, and so is the matching release).
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, kSoon));
  service->stop();
  EXPECT_EQ(recorder->released_count(), 1);
  EXPECT_THROW(service->stop(), Error);
  service->start();
  EXPECT_THROW(service->start(), Error);
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, kSoon));
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 2; }, kSoon));
  EXPECT_EQ(recorder->released_count(), 1);
  service->stop();
  EXPECT_EQ(recorder->released_count(), 2);
}

TEST(ContendTest, GuardStaysOwnerForThreeTtls) {
  auto client = make_client();
  auto recorder = std::make_shared<Recorder>(unique_mutex());
  auto service = start_contender(client, recorder);
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, kSoon));
  auto token = service->fencing_token();
  std::this_thread::sleep_for(3 * client.options().ttl);
  EXPECT_TRUE(service->is_owner());
  EXPECT_EQ(service->fencing_token(), token);  // renewals keep the token
  EXPECT_EQ(recorder->acquired_count(), 1);
  EXPECT_EQ(recorder->released_count(), 0);
  EXPECT_GT(service->after_owner().acquired_at, 0);
}

TEST(ContendTest, TenContendersHaveExactlyOneOwnerAtEveryCallback) {
  // First, so they outlive every callback of the client's runtime.
  std::atomic<int> violations{0};
  std::atomic<bool> checking{true};  // off before teardown: hooks must not see dying services
  std::atomic<int> in_hooks{0};      // hooks past their look at `checking`
  auto client = make_client();
  auto mutex = unique_mutex();
  constexpr int kContenders = 10;
  std::vector<std::shared_ptr<Recorder>> recorders;
  std::vector<std::unique_ptr<MutexContendService>> services;
  for (int i = 0; i < kContenders; ++i) recorders.push_back(std::make_shared<Recorder>(mutex));
  for (auto& recorder : recorders) services.push_back(client.contend_service(recorder));
  auto owners = [&] { return std::count_if(services.begin(), services.end(), [](auto& s) { return s->is_owner(); }); };
  // Owners seen in two consecutive passes. One pass reads is_owner() service by service, so a
  // handover finishing mid-pass could count the old and the new owner though they never
  // overlapped; two services owning in both passes did own at one instant (between the passes).
  auto owners_in_both_passes = [&] {
    std::vector<bool> first(services.size());
    for (std::size_t i = 0; i < services.size(); ++i) first[i] = services[i]->is_owner();
    long both = 0;
    for (std::size_t i = 0; i < services.size(); ++i) both += first[i] && services[i]->is_owner();
    return both;
  };
  for (auto& recorder : recorders) {
    recorder->hook = [&](bool, const MutexState&) {
      in_hooks.fetch_add(1);
      if (checking && owners_in_both_passes() > 1) violations.fetch_add(1);
      in_hooks.fetch_sub(1);
    };
  }
  // Destroyed first, also after a failed assertion: the hooks stop looking at the services
  // (and the lambda they call) before any of those goes away.
  struct StopChecking {
    std::atomic<bool>& checking;
    std::atomic<int>& in_hooks;
    ~StopChecking() {
      checking = false;
      while (in_hooks.load() > 0) std::this_thread::yield();
    }
  } stop_checking{checking, in_hooks};
  for (auto& service : services) service->start();

  // Three handovers: stop whoever owns, someone else must take over.
  std::vector<std::size_t> stopped;
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(wait_until([&] { return owners() == 1; }, kSoon)) << "round " << round;
    auto it = std::find_if(services.begin(), services.end(), [](auto& s) { return s->is_owner(); });
    stopped.push_back(static_cast<std::size_t>(it - services.begin()));
    (*it)->stop();
  }
  ASSERT_TRUE(wait_until([&] { return owners() == 1; }, kSoon));
  auto owner = std::find_if(services.begin(), services.end(), [](auto& s) { return s->is_owner(); });
  const std::string owner_id = (*owner)->contender_id();
  // Every running contender learns who owns.
  EXPECT_TRUE(wait_until(
      [&] {
        return std::all_of(services.begin(), services.end(),
                           [&](auto& s) { return !s->running() || s->after_owner().owner_id == owner_id; });
      },
      kSoon));
  EXPECT_EQ(owners(), 1);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(client.owner(mutex).owner_id, owner_id);
}

TEST(ContendTest, FencingTokensStrictlyRiseOverTwentyOwnerChanges) {
  auto client = make_client();
  auto mutex = unique_mutex();
  std::uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Locker locker(mutex, client);
    locker.acquire(kSoon);
    auto token = locker.fencing_token();
    EXPECT_GT(token, last) << "owner change " << i;
    last = token;
  }
}

TEST(ContendTest, RenewalKeepsTokenAndLateReleaseNeverRemovesSuccessor) {
  auto client = make_client();
  auto& backend = *client.backend();
  // "a" takes a short lease, renews it, and holds it against "b": that needs all three calls
  // within the lease. A machine that stalled for half of it in between (by this test's own
  // clock) proves nothing either way: the case starts again on a new name with the lease doubled.
  std::string mutex;
  MutexOwner first, renewed, blocked;
  auto ttl = 60ms;
  for (int attempt = 0;; ++attempt, ttl *= 2) {
    mutex = unique_mutex();
    EXPECT_TRUE(backend.read(mutex).owner.empty());
    const auto started = std::chrono::steady_clock::now();
    first = backend.acquire(mutex, "a", ttl, 0ms).owner;
    renewed = backend.acquire(mutex, "a", ttl, 0ms).owner;
    blocked = backend.acquire(mutex, "b", ttl, 0ms).owner;
    if (std::chrono::steady_clock::now() - started < ttl / 2) break;
    backend.release(mutex, "a");
    backend.release(mutex, "b");
    ASSERT_LT(attempt, 7) << "every attempt stalled for half its lease (the last: " << ttl.count() << " ms)";
  }
  ASSERT_EQ(first.owner_id, "a");
  EXPECT_EQ(first.ttl_at, first.acquired_at + ttl.count());
  EXPECT_EQ(first.transition_at, first.ttl_at);
  EXPECT_EQ(renewed.owner_id, "a");
  EXPECT_EQ(renewed.fencing_token, first.fencing_token);
  EXPECT_EQ(blocked.owner_id, "a");
  // "a" expires without releasing; "b" takes over with a larger token.
  ASSERT_TRUE(wait_until([&] { return backend.acquire(mutex, "b", 10s, 0ms).owner.owner_id == "b"; }, kSoon));
  auto successor = backend.read(mutex).owner;
  EXPECT_GT(successor.fencing_token, first.fencing_token);
  EXPECT_FALSE(backend.release(mutex, "a"));  // late release by the former owner
  EXPECT_EQ(backend.read(mutex).owner.owner_id, "b");
  EXPECT_TRUE(backend.release(mutex, "b"));
  auto after = backend.read(mutex).owner;
  EXPECT_TRUE(after.empty());
  EXPECT_EQ(after.fencing_token, successor.fencing_token);  // the token is kept for the next owner
  EXPECT_GT(backend.acquire(mutex, "b", 10s, 0ms).owner.fencing_token, successor.fencing_token);
  backend.release(mutex, "b");
}

TEST(ContendTest, TwentyContendersCreatingOneNewMutexAtOnceSeeNoErrorAndOneOwner) {
  auto client = make_client();
  auto backend = client.backend();
  const std::string mutex = unique_mutex();
  std::vector<std::thread> threads;
  std::vector<std::string> owners(20), errors(20);
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      try {
        owners[i] = backend->acquire(mutex, "racer-" + std::to_string(i), 10s, 0ms).owner.owner_id;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors) EXPECT_EQ(error, "");         // no deadlock or duplicate key reaches us
  for (auto& owner : owners) EXPECT_EQ(owner, owners[0]);  // everyone saw the one winner
  EXPECT_EQ(backend->read(mutex).owner.owner_id, owners[0]);
  EXPECT_GT(backend->read(mutex).owner.fencing_token, 0u);
  EXPECT_TRUE(backend->release(mutex, owners[0]));
}

TEST(ContendTest, TakeoverAfterOwnerVanishesWithinTtlPlusTransitionPlusOneSecond) {
  FaultyOwnerScene scene;
  ASSERT_NO_FATAL_FAILURE(scene.start());
  scene.faulty->set_unreachable(true);  // the owner can neither renew nor release
  auto vanished = std::chrono::steady_clock::now();
  auto bound = scene.client.options().ttl + scene.client.options().transition + 1s;
  ASSERT_TRUE(wait_until([&] { return scene.successor->is_owner(); }, bound + 1s));
  auto took = std::chrono::steady_clock::now() - vanished;
  EXPECT_LE(took, bound);
  EXPECT_FALSE(scene.owner->is_owner());
  ASSERT_TRUE(wait_until([&] { return scene.a->released_count() == 1; }, kSoon));  // revoked locally
}

// The handover tests' timing: fast_options() with a longer owner-only window, so that a
// handover by release and one by expiry stay far apart on a loaded, sanitized 2-core machine.
ContendOptions handover_options() {
  auto options = fast_options();
  options.transition = 1s;
  return options;
}

// How soon a waiter must own after the owner's release, from the protocol: at once with a push
// channel, within its poll interval without one, and in either case before half the owner-only
// window has passed. A lease is renewed every ttl for ttl + transition, so when its owner
// releases it has at least `transition` left: a waiter that only gets it by expiry waits at
// least that long.
std::chrono::milliseconds handover_bound(const Client& client) {
  auto caps = client.backend()->capabilities();
  auto poll = client.options().poll_interval.count() > 0 ? client.options().poll_interval : caps.poll_interval;
  return (client.backend()->push() ? 0ms : poll) + client.options().transition / 2;
}

// An engine with its releases and change events lost: the lease stays until it expires.
class DroppingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool release(const std::string&, const std::string&) override { return true; }
  std::unique_ptr<Subscription> watch(const std::string&, const std::string&,
                                      std::function<void(WatchEvent)>) override {
    return nullptr;  // as an engine without push does; and the owner's release never lands
  }
  const Push* push() const noexcept override { return nullptr; }
};

// The owner (on `owner_client`) releases; how long until a waiter on `waiter_client` owns
// (nullopt: not within 5 s).
std::optional<std::chrono::steady_clock::duration> handover_after_release(const Client& owner_client,
                                                                          const Client& waiter_client) {
  auto mutex = unique_mutex();
  auto a = std::make_shared<Recorder>(mutex);
  auto b = std::make_shared<Recorder>(mutex);
  auto first = start_contender(owner_client, a);
  EXPECT_TRUE(wait_until([&] { return first->is_owner(); }, kSoon));
  auto second = start_contender(waiter_client, b);
  EXPECT_TRUE(wait_until([&] { return second->after_owner().owner_id == a->contender_id(); }, kSoon));
  auto released = std::chrono::steady_clock::now();
  first->stop();
  if (!wait_until([&] { return b->acquired_count() == 1; }, kSoon)) return std::nullopt;
  EXPECT_GT(second->fencing_token(), 0u);
  return b->events()[0].at - released;
}

TEST(ContendTest, HandoverAfterReleaseIsPrompt) {
  auto client = make_client(handover_options());
  auto bound = handover_bound(client);
  auto took = handover_after_release(client, client);
  ASSERT_TRUE(took.has_value()) << "the waiter never got the mutex";
  EXPECT_LT(*took, bound) << "bound " << bound.count() << " ms";
}

TEST(ContendTest, HandoverCheckFailsWhenReleasesAndEventsAreLost) {
  // The check above can fail: with the release and the events dropped, the waiter gets the
  // mutex only when the lease expires, past the bound.
  auto client = make_client(handover_options());
  Client dropping(std::make_shared<DroppingBackend>(make_backend()), client.options(), client.runtime());
  auto took = handover_after_release(dropping, dropping);
  if (took) {
    EXPECT_GE(*took, handover_bound(client));
  }  // else never (ZooKeeper: the released node stays with its session)
}

TEST(ContendTest, StopDuringContentionLeavesNoLease) {
  auto client = make_client();
  auto mutex = unique_mutex();
  std::vector<std::unique_ptr<MutexContendService>> services;
  for (int i = 0; i < 6; ++i) services.push_back(client.contend_service(std::make_shared<Recorder>(mutex)));
  for (int cycle = 0; cycle < 10; ++cycle) {
    for (auto& service : services) service->start();
    if (cycle % 2) std::this_thread::sleep_for(std::chrono::milliseconds(cycle));
    for (auto& service : services) service->stop();
  }
  // A claim still in flight at stop() is handed back when it lands.
  EXPECT_TRUE(wait_until([&] { return client.owner(mutex).empty(); }, 2s))
      << "left a lease of " << client.owner(mutex).owner_id;
  for (auto& service : services) EXPECT_FALSE(service->is_owner());
}

TEST(ContendTest, PausedOwnerStopsBelievingBeforeAnyoneElseWins) {
  FaultyOwnerScene scene;
  std::atomic<int> owner_believed_at_takeover{-1};
  ASSERT_NO_FATAL_FAILURE(scene.start([&] {
    scene.b->hook = [&](bool acquired, const MutexState&) {
      if (acquired) owner_believed_at_takeover = scene.owner->is_owner() ? 1 : 0;
    };
  }));
  scene.faulty->set_delay(1500ms);  // the owner's renewals stall, as in a long GC pause
  // The hook runs right after the event is recorded: wait for the hook's verdict itself.
  ASSERT_TRUE(wait_until([&] { return owner_believed_at_takeover.load() != -1; }, kSoon));
  EXPECT_EQ(owner_believed_at_takeover.load(), 0);
  // The promise is is_owner() (checked above). on_released is posted by the owner's deadline
  // timer, which runs out at most a one-way trip before the rival may win: under load the two
  // callbacks can be delivered in either order, so only its delivery is checked, not its time.
  EXPECT_TRUE(wait_until([&] { return scene.a->released_count() == 1; }, kSoon));
  scene.faulty->set_delay(0ms);
}

TEST(ContendTest, ObserverReportsOwnerChangesWithoutContending) {
  auto client = make_client();
  auto mutex = unique_mutex();
  std::mutex seen_mutex;
  std::vector<std::string> seen;
  auto observer = client.retrieval_service(make_retriever(mutex, [&](const MutexState& state) {
    std::lock_guard lock(seen_mutex);
    if (state.changed()) seen.push_back(state.after.owner_id);
  }));
  observer->start();
  auto last_seen = [&] {
    std::lock_guard lock(seen_mutex);
    return seen.empty() ? std::string("<nothing>") : seen.back();
  };
  auto a = std::make_shared<Recorder>(mutex);
  auto first = start_contender(client, a);
  ASSERT_TRUE(wait_until([&] { return last_seen() == a->contender_id(); }, kSoon));
  EXPECT_EQ(observer->after_owner().owner_id, a->contender_id());
  first->stop();
  ASSERT_TRUE(wait_until([&] { return last_seen().empty(); }, kSoon));
  auto b = std::make_shared<Recorder>(mutex);
  auto second = start_contender(client, b);
  ASSERT_TRUE(wait_until([&] { return last_seen() == b->contender_id(); }, kSoon));
  second->stop();
  ASSERT_TRUE(wait_until([&] { return last_seen().empty(); }, kSoon));
  // Watching never contends: with the observer still running and no contender, nobody owns
  // the mutex, for longer than a ttl.
  std::this_thread::sleep_for(fast_options().ttl + fast_options().ttl / 2);
  EXPECT_TRUE(client.owner(mutex).empty()) << "owned by " << client.owner(mutex).owner_id;
  EXPECT_TRUE(last_seen().empty());
  observer->stop();
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_contend_cases() { return 0; }

}  // namespace simba::tck
