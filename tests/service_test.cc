// Unit tests of the contention service: lifecycle, generations, ordering, revocation, threads.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "core/kept_state.h"
#include "core/service_core.h"
#include "kit.h"
#include "metrics/telemetry.h"

namespace simba {
namespace {

using namespace std::chrono_literals;
using tck::kSoon;
using tck::Recorder;
using tck::wait_until;

ContendOptions fast() {
  ContendOptions options = tck::fast_options();
  return options;
}

// A core that never contends on its own (initial delay of an hour): only deliver() moves it.
struct Quiet {
  std::shared_ptr<Runtime> runtime = std::make_shared<Runtime>();
  std::shared_ptr<Recorder> recorder = std::make_shared<Recorder>("quiet", "me");
  std::shared_ptr<internal::ServiceCore> core;
  Quiet() {
    ContendOptions options = fast();
    options.initial_delay = 1h;
    core = std::make_shared<internal::ServiceCore>(
        recorder, recorder, std::make_shared<const internal::CoreContext>(make_memory_backend(), runtime, options));
  }
  MutexOwner owner(std::string id, EpochMillis at = 1000) {
    return MutexOwner{std::move(id), at, at + 100, at + 150, 7};
  }
  void drain() { core->flush(); }
};

TEST(ServiceTest, StartAndStopFromTheWrongStateAreFailedPreconditions) {
  Quiet q;
  auto expect_precondition = [](auto&& call) {
    try {
      call();
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::failed_precondition);
    }
  };
  expect_precondition([&] { q.core->stop(); });
  EXPECT_EQ(q.core->status(), ServiceStatus::initial);
  q.core->start();
  EXPECT_EQ(q.core->status(), ServiceStatus::running);
  expect_precondition([&] { q.core->start(); });
  q.core->stop();
  EXPECT_EQ(q.core->status(), ServiceStatus::initial);
  expect_precondition([&] { q.core->stop(); });
  q.core->close();  // not running: a no-op, never throws
}

// A core keeps its contender once, as its retriever: a contender that is not the retriever
// would have the notifications go to one object and the contender's id come from another.
TEST(ServiceTest, AContenderThatIsNotItsRetrieverIsRefused) {
  auto context =
      std::make_shared<const internal::CoreContext>(make_memory_backend(), std::make_shared<Runtime>(), fast());
  auto contender = std::make_shared<Recorder>("refused", "me");
  auto other = std::make_shared<Recorder>("refused", "you");
  try {
    std::make_shared<internal::ServiceCore>(other, contender, context);
    FAIL() << "a core whose contender is not its retriever was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("contender must be its retriever"), std::string::npos) << e.what();
  }
  auto core = std::make_shared<internal::ServiceCore>(contender, contender, context);
  EXPECT_EQ(core->contender_id(), "me");
  auto observer = std::make_shared<internal::ServiceCore>(other, nullptr, context);
  EXPECT_EQ(observer->contender_id(), "");
}

TEST(ServiceTest, AnInlineFirstRoundCountsItsLeaseFromTheCallersClockRead) {
  // The lock manager's blocking request reads the clock once and hands that reading to the
  // round: the lease counts from it, not from a later read of the round's own.
  auto options = fast();
  auto context =
      std::make_shared<const internal::CoreContext>(make_memory_backend(), std::make_shared<Runtime>(), options);
  auto me = std::make_shared<Recorder>("inline-since", "me");
  auto core = std::make_shared<internal::ServiceCore>(me, me, context);
  // A reading well in the past (but within the lease) is told apart from any read of now.
  const auto since = std::chrono::steady_clock::now() - options.ttl / 2;
  core->start(internal::ServiceCore::InlineRound{since});
  ASSERT_TRUE(core->is_owner()) << "the inline round ran on this thread and won the free mutex";
  EXPECT_EQ(core->lease_deadline(), since + options.ttl + options.transition);
  core->stop();
}

TEST(ServiceTest, AStopCountsItsReleasesRoundTripFromTheCallersClockRead) {
  // The lock manager's hold ends with a clock read, and hands it to the stop that follows: the
  // release's round trip counts from it (one read less a cycle), unless the stop waited first.
  auto telemetry = std::make_shared<internal::Telemetry>("memory");
  auto context = std::make_shared<const internal::CoreContext>(make_memory_backend(), std::make_shared<Runtime>(),
                                                               fast(), telemetry);
  auto me = std::make_shared<Recorder>("release-since", "me");
  auto core = std::make_shared<internal::ServiceCore>(me, me, context);
  core->start(internal::ServiceCore::InlineRound{std::chrono::steady_clock::now()});
  ASSERT_TRUE(core->is_owner());
  // A reading far in the past is told apart from any read of now: a memory release takes
  // microseconds.
  constexpr auto kAgo = std::chrono::seconds(3);
  core->stop(std::chrono::steady_clock::now() - kAgo);
  const auto releases =
      telemetry->snapshot([] { return std::uint64_t{0}; }).round_trip[static_cast<std::size_t>(BackendOp::release)];
  ASSERT_EQ(releases.count, 1u);
  EXPECT_GE(releases.sum, std::chrono::duration<double>(kAgo).count()) << "counted from the reading passed to stop()";
  // Without one, the release reads the clock itself.
  core->start(internal::ServiceCore::InlineRound{std::chrono::steady_clock::now()});
  core->stop();
  const auto both =
      telemetry->snapshot([] { return std::uint64_t{0}; }).round_trip[static_cast<std::size_t>(BackendOp::release)];
  ASSERT_EQ(both.count, 2u);
  EXPECT_LT(both.sum - releases.sum, std::chrono::duration<double>(kAgo).count());
}

TEST(ServiceTest, EachStartBeginsANewGeneration) {
  Quiet q;
  q.core->start();
  auto first = q.core->generation();
  q.core->stop();
  q.core->start();
  EXPECT_GT(q.core->generation(), first + 1);
  q.core->stop();
}

TEST(ServiceTest, StaleClaimsAreDroppedButReleasesAreApplied) {
  Quiet q;
  q.core->start();
  auto generation = q.core->generation();
  q.core->deliver(generation - 1, q.owner("me"));  // a claim from an earlier generation
  q.drain();
  EXPECT_EQ(q.recorder->acquired_count(), 0);
  q.core->deliver(generation, q.owner("me"));
  q.drain();
  EXPECT_EQ(q.recorder->acquired_count(), 1);
  q.core->deliver(generation - 1, MutexOwner::none());  // a stale release still applies
  q.drain();
  EXPECT_EQ(q.recorder->released_count(), 1);
  q.core->stop();
}

TEST(ServiceTest, AClaimAfterStopIsDroppedAndStopDeliversTheRelease) {
  Quiet q;
  q.core->start();
  auto generation = q.core->generation();
  q.core->deliver(generation, q.owner("me"));
  q.drain();
  q.core->stop();
  EXPECT_EQ(q.recorder->released_count(), 1);  // before stop() returned
  q.core->deliver(generation, q.owner("me", 2000));
  q.drain();
  EXPECT_EQ(q.recorder->acquired_count(), 1);
  EXPECT_TRUE(q.core->mutex_state().after.empty());
}

// Slow on purpose: the first acquire and every release wait before reaching the store.
class SlowBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    if (acquires_.fetch_add(1) == 0) std::this_thread::sleep_for(50ms);
    return ForwardingBackend::acquire(mutex, id, ttl, transition);
  }
  bool release(const std::string& mutex, const std::string& id) override {
    std::this_thread::sleep_for(100ms);
    return ForwardingBackend::release(mutex, id);
  }

 private:
  std::atomic<int> acquires_{0};
};

TEST(ServiceTest, ARoundEndingAfterStopNeverReleasesTheNextGenerationsLease) {
  // A round still in flight at stop() wins the lease and, ending after stop(), gives it back.
  // If start() raced ahead of that release, the next generation (same contender id) would win
  // and then lose its lease to the old round's release while believing it owns.
  auto store = make_memory_backend();
  auto runtime = std::make_shared<Runtime>();
  auto me = std::make_shared<Recorder>("stale-release", "me");
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(std::make_shared<SlowBackend>(store), runtime, fast()));
  core->start();  // round 1 sleeps 50 ms, then wins
  std::this_thread::sleep_for(10ms);
  core->stop();  // its release lands at ~110 ms; round 1 ends at ~50 ms, stale
  core->start(
      internal::ServiceCore::InlineRound{std::chrono::steady_clock::now()});  // the stale release lands at ~150 ms
  ASSERT_TRUE(wait_until([&] { return core->is_owner(); }, kSoon));
  std::this_thread::sleep_for(150ms);  // past every release in flight
  EXPECT_TRUE(core->is_owner());
  EXPECT_EQ(store->read("stale-release").owner.owner_id, "me") << "the lease was released under the owner";
  core->close();
}

// Its first acquire waits at a gate the test opens. Counts acquires running at once.
class GatedBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    const int running = running_.fetch_add(1) + 1;
    int seen = most_running_.load();
    while (running > seen && !most_running_.compare_exchange_weak(seen, running)) {
    }
    if (acquires_.fetch_add(1) == 0) {
      entered_.set_value();
      gate_.wait();
    }
    auto snapshot = ForwardingBackend::acquire(mutex, id, ttl, transition);
    running_.fetch_sub(1);
    return snapshot;
  }
  std::future<void> entered() { return entered_.get_future(); }
  void open() { opened_.set_value(); }
  int most_running() const { return most_running_.load(); }

 private:
  std::atomic<int> acquires_{0};
  std::atomic<int> running_{0};
  std::atomic<int> most_running_{0};
  std::promise<void> entered_;
  std::promise<void> opened_;
  std::shared_future<void> gate_ = opened_.get_future().share();
};

TEST(ServiceTest, AStopWhileAnInlineFirstRoundRunsLeavesNoLeaseBehind) {
  // An inline first round is begun under start()'s lock and sent without looking again: a
  // stop() that comes meanwhile waits for it, and the round's end gives back what it won.
  auto store = make_memory_backend();
  auto gated = std::make_shared<GatedBackend>(store);
  auto me = std::make_shared<Recorder>("inline-stop", "me");
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(gated, std::make_shared<Runtime>(), fast()));
  auto entered = gated->entered();
  std::thread starter([&] { core->start(internal::ServiceCore::InlineRound{std::chrono::steady_clock::now()}); });
  ASSERT_EQ(entered.wait_for(kSoon), std::future_status::ready) << "the inline round reached the backend";
  std::thread stopper([&] { core->stop(); });
  // The stop has begun (it then waits for the round in flight, so it is still stopping).
  ASSERT_TRUE(wait_until([&] { return core->status() != ServiceStatus::running; }, kSoon));
  gated->open();
  starter.join();
  stopper.join();
  EXPECT_EQ(core->status(), ServiceStatus::initial);
  EXPECT_FALSE(core->is_owner());
  EXPECT_TRUE(store->read("inline-stop").owner.empty()) << "the lease the round won after stop() was given back";
}

TEST(ServiceTest, ARestartOnARuntimeThreadWhileARoundRunsContendsAfterIt) {
  // stop() on a runtime thread does not wait for the round in flight; the start() after it
  // asks for a round while that one still runs. The stale round's end must start it (else
  // the new generation never contends: a lock manager's waiter that sees no round at all),
  // and not before (two acquires of one contender id at once).
  for (bool inline_round : {false, true}) {
    SCOPED_TRACE(inline_round ? "first round inline" : "first round on a timer");
    auto runtime = std::make_shared<Runtime>(Runtime::Options{2, 1});
    auto me = std::make_shared<Recorder>("restart-on-runtime", "me");
    auto gated = std::make_shared<GatedBackend>(make_memory_backend());
    auto entered = gated->entered();
    auto core = std::make_shared<internal::ServiceCore>(
        me, me, std::make_shared<const internal::CoreContext>(gated, runtime, fast()));
    core->start();  // its first round waits at the gate, on one of the two I/O threads
    ASSERT_EQ(entered.wait_for(kSoon), std::future_status::ready);
    std::promise<void> restarted;
    runtime->post_io([&] {
      core->stop();
      if (inline_round) {
        core->start(internal::ServiceCore::InlineRound{std::chrono::steady_clock::now()});
      } else {
        core->start();
      }
      restarted.set_value();
    });
    ASSERT_EQ(restarted.get_future().wait_for(kSoon), std::future_status::ready);
    // A timer armed after the restart fires after any timer it armed, on the only free I/O
    // thread: once it ran, every round the new generation asked for was asked for.
    std::promise<void> timers_done;
    runtime->schedule_after(1ms, [&] { timers_done.set_value(); });
    ASSERT_EQ(timers_done.get_future().wait_for(kSoon), std::future_status::ready);
    gated->open();
    EXPECT_TRUE(wait_until([&] { return core->is_owner(); }, kSoon)) << "the restarted core never contended";
    EXPECT_EQ(gated->most_running(), 1) << "a round ran beside the stale one";
    core->close();
  }
}

// Its first acquire waits at a gate the test opens, then runs on the engine (and may win) but
// loses its answer: a timeout or a reset after the server ran the command.
class LostAnswerBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    if (acquires_.fetch_add(1) != 0) return ForwardingBackend::acquire(mutex, id, ttl, transition);
    entered_.set_value();
    gate_.wait();
    ForwardingBackend::acquire(mutex, id, ttl, transition);
    ran_.set_value();
    throw Error(errc::unavailable, "the answer was lost");
  }
  std::future<void> entered() { return entered_.get_future(); }
  std::future<void> ran() { return ran_.get_future(); }  // the engine ran the lost call
  void open() { opened_.set_value(); }

 private:
  std::atomic<int> acquires_{0};
  std::promise<void> entered_;
  std::promise<void> ran_;
  std::promise<void> opened_;
  std::shared_future<void> gate_ = opened_.get_future().share();
};

TEST(ServiceTest, ARoundThatFailsAfterStopStillGivesBackWhatItTook) {
  // stop() on a runtime thread does not wait for the round in flight, and its release goes
  // first. That round then wins on the engine but its answer is lost: what it took is given
  // back all the same, not left until its 30 s lease runs out.
  auto store = make_memory_backend();
  auto runtime = std::make_shared<Runtime>(Runtime::Options{2, 1});
  auto me = std::make_shared<Recorder>("lost-answer", "me");
  auto lossy = std::make_shared<LostAnswerBackend>(store);
  auto entered = lossy->entered();
  auto ran = lossy->ran();
  ContendOptions options = fast();
  options.ttl = 30s;
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(lossy, runtime, options));
  core->start();  // its first round waits at the gate, on an I/O thread
  ASSERT_EQ(entered.wait_for(kSoon), std::future_status::ready);
  std::promise<void> stopped;
  runtime->post_io([&] {
    core->stop();
    stopped.set_value();
  });
  ASSERT_EQ(stopped.get_future().wait_for(kSoon), std::future_status::ready);
  EXPECT_TRUE(store->read("lost-answer").owner.empty()) << "taken before the round was let go";
  lossy->open();
  ASSERT_EQ(ran.wait_for(kSoon), std::future_status::ready);
  EXPECT_TRUE(wait_until([&] { return store->read("lost-answer").owner.owner_id != "me"; }, kSoon))
      << "the failed round's lease was left behind";
  EXPECT_FALSE(core->is_owner());
  core->close();
}

// A watch that is in place only once the test opens its gate, on an engine whose contenders
// must hear every change from their first round on (Subscription::ready_before_first_round).
class SlowWatchBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    if (!ready_.load()) early_.fetch_add(1);
    acquires_.fetch_add(1);
    return ForwardingBackend::acquire(mutex, id, ttl, transition);
  }
  std::unique_ptr<Subscription> watch(const std::string&, const std::string&,
                                      std::function<void(WatchEvent)>) override {
    struct Gated final : Subscription {
      void wait_ready() override {
        waiting->store(true);
        gate.wait();
        ready->store(true);
      }
      bool ready_before_first_round() const noexcept override { return true; }
      std::atomic<bool>* waiting;
      std::atomic<bool>* ready;
      std::shared_future<void> gate;
    };
    auto gated = std::make_unique<Gated>();
    gated->waiting = &waiting_;
    gated->ready = &ready_;
    gated->gate = gate_;
    return gated;
  }
  void open() { opened_.set_value(); }
  bool waiting() const { return waiting_.load(); }
  int acquires() const { return acquires_.load(); }
  int early() const { return early_.load(); }

 private:
  std::atomic<bool> waiting_{false}, ready_{false};
  std::atomic<int> acquires_{0}, early_{0};
  std::promise<void> opened_;
  std::shared_future<void> gate_ = opened_.get_future().share();
};

TEST(ServiceTest, AFirstRoundThatNeedsTheWatchWaitsForItOffTheCallersThread) {
  auto runtime = std::make_shared<Runtime>(Runtime::Options{2, 1});
  auto me = std::make_shared<Recorder>("slow-watch", "me");
  auto slow = std::make_shared<SlowWatchBackend>(make_memory_backend());
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(slow, runtime, fast()));
  // start() returns while the watch is not in place: a caller starting many contenders is not
  // held for one subscription after another.
  auto started = std::async(std::launch::async, [&] { core->start(); });
  if (started.wait_for(kSoon) != std::future_status::ready) {
    slow->open();  // lets start() return, so that the test ends
    FAIL() << "start() waited for the watch";
  }
  // The first round waits for it on an I/O thread, and sends nothing before.
  ASSERT_TRUE(wait_until([&] { return slow->waiting(); }, kSoon)) << "nobody waited for the watch";
  EXPECT_EQ(slow->acquires(), 0) << "a round went before the watch was in place";
  slow->open();
  EXPECT_TRUE(wait_until([&] { return core->is_owner(); }, kSoon)) << "no first round once the watch was in place";
  EXPECT_EQ(slow->early(), 0);
  core->close();
}

// A first round that waited for the watch and lost needs no second look when the watch is
// confirmed (it was, before the round): the next round goes on the waiter's schedule, at the
// end of the other's 30 s lease.
TEST(ServiceTest, AFirstRoundThatWaitedForTheWatchAndLostLooksAgainOnlyOnItsSchedule) {
  auto runtime = std::make_shared<Runtime>(Runtime::Options{2, 1});
  auto memory = make_memory_backend();
  ASSERT_EQ(memory->acquire("slow-watch-held", "other", 30s, 1s).owner.owner_id, "other");
  auto me = std::make_shared<Recorder>("slow-watch-held", "me");
  auto slow = std::make_shared<SlowWatchBackend>(memory);
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(slow, runtime, fast()));
  core->start();
  slow->open();
  ASSERT_TRUE(wait_until([&] { return slow->acquires() >= 1; }, kSoon)) << "no first round";
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(slow->acquires(), 1) << "the first round looked again at once, though the watch was in place";
  EXPECT_FALSE(core->is_owner());
  core->close();
}

// Holds the answer of every acquire from the `hold_from`th on (after the engine gave it) until
// the test lets it go, and lets the test report the loss of the push channel.
class HeldAnswers : public ForwardingBackend {
 public:
  HeldAnswers(std::shared_ptr<Backend> target, int hold_from)
      : ForwardingBackend(std::move(target)), hold_from_(hold_from) {}
  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    auto snapshot = ForwardingBackend::acquire(mutex, id, ttl, transition);
    std::unique_lock lock(mutex_);
    const int call = ++calls_;
    if (call >= hold_from_) {
      answered_ = call;
      changed_.notify_all();
      changed_.wait(lock, [&] { return let_go_ >= call; });
    }
    return snapshot;
  }
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    {
      std::lock_guard lock(mutex_);
      on_change_ = on_change;
    }
    return ForwardingBackend::watch(mutex, contender_id, std::move(on_change));
  }
  // Whether the `call`th acquire has its answer and waits for let_go(call).
  bool answered(int call) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kSoon, [&] { return answered_ >= call; });
  }
  void let_go(int call) {
    std::lock_guard lock(mutex_);
    let_go_ = call;
    changed_.notify_all();
  }
  void lose_channel() {
    std::function<void(WatchEvent)> on_change;
    {
      std::lock_guard lock(mutex_);
      on_change = on_change_;
    }
    on_change(WatchEvent::lost);
  }
  void let_all_go() { let_go(1 << 30); }

 private:
  const int hold_from_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;                              // guarded by mutex_
  int answered_ = 0;                           // guarded by mutex_
  int let_go_ = 0;                             // guarded by mutex_
  std::function<void(WatchEvent)> on_change_;  // guarded by mutex_
};

TEST(ServiceTest, ARenewalSentBeforeThePushChannelWasLostRestoresNoOwnership) {
  // The channel drops (the server may have restarted and forgotten every lease) while a
  // renewal is on its way back: its answer came from the old server and proves nothing. Only
  // the round sent after the loss may make the owner an owner again.
  auto runtime = std::make_shared<Runtime>();
  auto me = std::make_shared<Recorder>("renewal-across-loss", "me");
  auto held = std::make_shared<HeldAnswers>(make_memory_backend(), 2);  // the first renewal on
  ASSERT_NE(held->push(), nullptr) << "the memory engine pushes";
  auto core = std::make_shared<internal::ServiceCore>(
      me, me, std::make_shared<const internal::CoreContext>(held, runtime, fast()));
  core->start();
  ASSERT_TRUE(wait_until([&] { return core->is_owner(); }, kSoon));
  ASSERT_TRUE(held->answered(2)) << "no renewal";  // renewed by the engine, not yet told
  held->lose_channel();
  EXPECT_FALSE(core->is_owner());
  held->let_go(2);
  // The round the loss asked for comes next, after the renewal's answer was taken in.
  ASSERT_TRUE(held->answered(3)) << "no round after the loss";
  EXPECT_FALSE(core->is_owner()) << "the renewal sent before the loss made it owner again";
  held->let_all_go();
  EXPECT_TRUE(wait_until([&] { return core->is_owner(); }, kSoon)) << "the round after the loss did not";
  core->close();
}

// The memory engine, saying that a contender's watch can wait until the contender waits (as
// memory does; ForwardingBackend alone says it cannot), counting the watches opened, and with
// a channel watch the test can drop (lose()), as PostgreSQL's and MariaDB's can be lost.
class LosableChannel final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Capabilities capabilities() const override {
    Capabilities caps = ForwardingBackend::capabilities();
    caps.watch_when_waiting = true;
    return caps;
  }
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    watches_.fetch_add(1);
    return ForwardingBackend::watch(mutex, contender_id, std::move(on_change));
  }
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override {
    std::lock_guard lock(mutex_);
    ++channel_watches_;
    on_channel_ = std::move(on_change);
    return std::make_unique<Ends>(*this);
  }
  // The channel drops: what its watch hears.
  void lose() {
    std::lock_guard lock(mutex_);
    if (on_channel_) on_channel_(WatchEvent::lost);
  }
  int watches() const { return watches_.load(); }
  int channel_watches() const {
    std::lock_guard lock(mutex_);
    return channel_watches_;
  }

 private:
  struct Ends final : Subscription {
    explicit Ends(LosableChannel& backend) : backend(backend) {}
    ~Ends() override {
      std::lock_guard lock(backend.mutex_);
      backend.on_channel_ = nullptr;
    }
    LosableChannel& backend;
  };

  std::atomic<int> watches_{0};
  mutable std::mutex mutex_;
  int channel_watches_ = 0;                     // guarded by mutex_
  std::function<void(WatchEvent)> on_channel_;  // guarded by mutex_
};

TEST(ServiceTest, AContenderOpensItsWatchOnceItWaitsAndHearsTheReleaseThroughIt) {
  // Leases of a minute and a poll of a minute: within kSoon, only the watch can tell the
  // waiter that the mutex is free.
  auto runtime = std::make_shared<Runtime>();
  auto counted = std::make_shared<LosableChannel>(make_memory_backend());
  ContendOptions options = fast();
  options.ttl = 60s;
  options.transition = 1s;
  options.poll_interval = 60s;
  auto context = std::make_shared<const internal::CoreContext>(counted, runtime, options);
  auto holder = std::make_shared<Recorder>("opens-when-waiting", "holder");
  auto waiter = std::make_shared<Recorder>("opens-when-waiting", "waiter");
  auto held = std::make_shared<internal::ServiceCore>(holder, holder, context);
  auto waits = std::make_shared<internal::ServiceCore>(waiter, waiter, context);
  held->start();
  ASSERT_TRUE(wait_until([&] { return held->is_owner(); }, kSoon));
  EXPECT_EQ(counted->watches(), 0) << "a contender that won at once opened a watch";
  waits->start();
  ASSERT_TRUE(wait_until([&] { return counted->watches() == 1; }, kSoon)) << "the waiter opened no watch";
  EXPECT_FALSE(waits->is_owner());
  held->stop();
  EXPECT_TRUE(wait_until([&] { return waits->is_owner(); }, kSoon)) << "the waiter did not hear the release";
  EXPECT_EQ(counted->watches(), 1);
  waits->close();
  held->close();
}

TEST(ServiceTest, OwnersWithoutAWatchOfTheirOwnHearALostChannelThroughTheClientsOne) {
  // Leases of a minute: within kSoon only the channel's loss can end an ownership.
  auto runtime = std::make_shared<Runtime>();
  auto channel = std::make_shared<LosableChannel>(make_memory_backend());
  ContendOptions options = fast();
  options.ttl = 60s;
  options.transition = 1s;
  auto context = std::make_shared<const internal::CoreContext>(channel, runtime, options);
  auto first = std::make_shared<Recorder>("liveness-a", "first");
  auto second = std::make_shared<Recorder>("liveness-b", "second");
  auto one = std::make_shared<internal::ServiceCore>(first, first, context);
  auto two = std::make_shared<internal::ServiceCore>(second, second, context);
  one->start();
  two->start();
  ASSERT_TRUE(wait_until([&] { return one->is_owner() && two->is_owner(); }, kSoon));
  EXPECT_EQ(channel->watches(), 0) << "an owner opened a watch of its own";
  EXPECT_EQ(channel->channel_watches(), 1) << "not one channel watch for the Client";
  channel->lose();
  // Revoked on the I/O pool right after the loss; both contend again at once and win again.
  EXPECT_TRUE(wait_until([&] { return first->released_count() == 1 && second->released_count() == 1; }, kSoon))
      << "an owner did not hear the channel's loss";
  EXPECT_TRUE(wait_until([&] { return first->acquired_count() == 2 && second->acquired_count() == 2; }, kSoon))
      << "an owner did not contend again after the loss";
  // A stopped contender hears nothing more; the running one still does.
  one->stop();
  const int released = first->released_count();
  channel->lose();
  EXPECT_TRUE(wait_until([&] { return second->released_count() == 2; }, kSoon));
  one->flush();
  EXPECT_EQ(first->released_count(), released) << "a stopped contender heard the channel";
  EXPECT_EQ(channel->channel_watches(), 1);
  two->close();
  one->close();
}

TEST(ServiceTest, DuplicateAcquisitionIsReportedOnce) {
  Quiet q;
  q.core->start();
  auto generation = q.core->generation();
  q.core->deliver(generation, q.owner("me", 1000));
  q.core->deliver(generation, q.owner("me", 1100));  // a renewal
  q.core->deliver(generation, q.owner("me", 1200));
  q.drain();
  EXPECT_EQ(q.recorder->acquired_count(), 1);
  EXPECT_EQ(q.core->mutex_state().after.acquired_at, 1200);
  EXPECT_EQ(q.core->mutex_state().before.acquired_at, 1100);
  q.core->stop();
}

TEST(ServiceTest, NotificationsArriveInOrderOneAtATime) {
  auto runtime = std::make_shared<Runtime>();
  std::vector<std::string> seen;
  std::atomic<int> inside{0}, overlaps{0};
  auto retriever = make_retriever("ordered", [&](const MutexState& state) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    seen.push_back(state.after.owner_id);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    inside.fetch_sub(1);
  });
  ContendOptions options = fast();
  options.initial_delay = 1h;
  auto core = std::make_shared<internal::ServiceCore>(
      retriever, nullptr, std::make_shared<const internal::CoreContext>(make_memory_backend(), runtime, options));
  core->start();
  std::vector<std::string> sent;
  for (int i = 0; i < 300; ++i) {
    sent.push_back("owner-" + std::to_string(i));
    core->deliver(core->generation(), MutexOwner{sent.back(), i, i + 1, i + 2, 1});
  }
  ASSERT_TRUE(
      wait_until([&] { return inside.load() == 0 && core->mutex_state().after.owner_id == sent.back(); }, kSoon));
  core->stop();
  EXPECT_EQ(seen, sent);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(ServiceTest, BackendErrorRevokesTheOwnerAtOnceAndBacksOff) {
  auto runtime = std::make_shared<Runtime>();
  auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(make_memory_backend());
  Client client(faulty, fast(), runtime);
  auto recorder = std::make_shared<Recorder>("revoke");
  auto service = client.contend_service(recorder);
  service->start();
  ASSERT_TRUE(wait_until([&] { return service->is_owner(); }, kSoon));
  faulty->set_unreachable(true);
  auto failed_at = std::chrono::steady_clock::now();
  // The renewal at ttl fails: revoked then, not at the end of ttl + transition.
  ASSERT_TRUE(wait_until([&] { return recorder->released_count() == 1; }, kSoon));
  EXPECT_LT(recorder->events().back().at - failed_at, client.options().ttl + client.options().transition / 2);
  EXPECT_FALSE(service->is_owner());
  // Exponential backoff: far fewer calls than a fixed 20ms retry would make in one second.
  auto calls = faulty->calls();
  std::this_thread::sleep_for(1s);
  auto retries = faulty->calls() - calls;
  EXPECT_GE(retries, 2);
  EXPECT_LE(retries, 10);
  faulty->set_unreachable(false);
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 2; }, kSoon));  // resumes
  service->stop();
}

TEST(ServiceTest, ARenewalThatLeavesAfterTheLeaseRanOutIsALoss) {
  // One I/O thread, stalled past the lease (as a stopped process is): the old ownership must
  // end (on_released) before a new one begins, whichever of the deadline check and the
  // renewal round runs first (several I/O threads after a SIGCONT may run the round first;
  // tests/cli_exit_codes_test.sh stops a real process).
  auto runtime = std::make_shared<Runtime>(Runtime::Options{1, 1});
  ContendOptions options;
  options.ttl = 200ms;
  options.transition = 100ms;
  Client client(make_memory_backend(), options, runtime);
  auto recorder = std::make_shared<Recorder>("stall");
  auto service = client.contend_service(recorder);
  service->start();
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, kSoon));
  runtime->post_io([] { std::this_thread::sleep_for(600ms); });
  ASSERT_TRUE(wait_until([&] { return recorder->released_count() == 1; }, kSoon));
  // Then it owns again, as a new ownership (on_acquired once more).
  EXPECT_TRUE(wait_until([&] { return recorder->acquired_count() == 2; }, kSoon));
  service->stop();
}

TEST(ServiceTest, ASlowRoundTripDoesNotEatTheRenewalsSlack) {
  // Every call takes 0.6 of the transition. A lease counts from when its round was sent, and so
  // does the wait for its next renewal: each renewal then comes back 0.4 of the transition
  // before the lease would run out. Counted from the answer instead, each renewal would go a
  // round trip late and come back 0.2 of the transition after it (a loss at every renewal).
  ContendOptions options;
  options.ttl = 1500ms;
  options.transition = 1500ms;
  const auto round_trip = options.transition * 6 / 10;
  auto slow = std::make_shared<simba::testing::FaultInjectingBackend>(make_memory_backend());
  slow->set_delay(round_trip);
  Client client(slow, options, std::make_shared<Runtime>());
  auto recorder = std::make_shared<Recorder>("slow-round-trip");
  auto service = client.contend_service(recorder);
  service->start();
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, kSoon));
  const auto calls = slow->calls();
  // Three renewals.
  ASSERT_TRUE(wait_until([&] { return slow->calls() >= calls + 3; }, 3 * (options.ttl + round_trip) + kSoon));
  EXPECT_EQ(recorder->released_count(), 0) << "a renewal came back after its lease had run out";
  EXPECT_EQ(recorder->acquired_count(), 1);
  EXPECT_TRUE(service->is_owner());
  service->stop();
}

TEST(ServiceTest, ALeaseReleasedByForceIsALossAtTheNextRenewal) {
  // An operator's `simba release --force` deletes the lease; the owner's next renewal then takes
  // the mutex anew with a new token. That is a loss (someone may have held it in between), then
  // a new ownership with the new token, never a silent renewal.
  auto backend = make_memory_backend();
  ContendOptions options;
  options.ttl = 200ms;
  options.transition = 200ms;
  Client client(backend, options, std::make_shared<Runtime>());
  auto recorder = std::make_shared<Recorder>("forced");
  auto service = client.contend_service(recorder);
  service->start();
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 1; }, kSoon));
  const std::uint64_t before = service->fencing_token();
  ASSERT_TRUE(backend->release("forced", service->contender_id()));
  ASSERT_TRUE(wait_until([&] { return recorder->released_count() == 1; }, kSoon)) << "the loss was not reported";
  ASSERT_TRUE(wait_until([&] { return recorder->acquired_count() == 2; }, kSoon));
  EXPECT_GT(service->fencing_token(), before);
  service->stop();
}

TEST(ServiceTest, TwoThousandContendersShareAFewThreads) {
  // The threads this test's runtime and contenders add: the program may already run others
  // (the sanitizer's, the hang report's, those of the cases before it in the same program).
  const int before = tck::thread_count();
  auto runtime = std::make_shared<Runtime>();
  Client client(make_memory_backend(), fast(), runtime);
  std::vector<std::unique_ptr<MutexContendService>> services;
  for (int i = 0; i < 2000; ++i) {
    services.push_back(client.contend_service(make_contender("m" + std::to_string(i % 1000), {})));
    services.back()->start();
  }
  auto owners = [&] { return std::count_if(services.begin(), services.end(), [](auto& s) { return s->is_owner(); }); };
  ASSERT_TRUE(wait_until([&] { return owners() == 1000; }, 10s));
  int threads = tck::thread_count() - before;
  EXPECT_LE(threads, 16);
  RecordProperty("threads", threads);
  for (auto& service : services) service->stop();
  EXPECT_EQ(owners(), 0);
}

TEST(RuntimeTest, TimersFireInDeadlineOrderAndCancelledOnesNever) {
  // Deadlines from one reading of the clock, so their order is what the test says. A cancel can
  // only win before its deadline, and a busy machine can keep this thread from running past any
  // fixed one: an attempt whose cancel came late, by this thread's own clock, proves nothing and
  // is tried again further out; one that came in time must succeed.
  for (auto step = 20ms;; step *= 2) {
    ASSERT_LT(step, 20ms * 256) << "no cancel came before its deadline";
    std::mutex mutex;
    std::vector<int> fired;  // guarded by mutex
    auto record = [&](int n) {
      std::lock_guard lock(mutex);
      fired.push_back(n);
    };
    Runtime runtime(Runtime::Options{1, 1});  // goes first, with any timer it still holds
    const auto t0 = std::chrono::steady_clock::now();
    runtime.schedule_at(t0 + 3 * step, [&] { record(3); });
    runtime.schedule_at(t0 + step, [&] { record(1); });
    auto cancelled = runtime.schedule_at(t0 + 2 * step, [&] { record(-2); });
    runtime.schedule_at(t0 + 2 * step, [&] { record(2); });
    const bool withdrawn = runtime.cancel(cancelled);
    if (!withdrawn) {
      ASSERT_GE(std::chrono::steady_clock::now(), t0 + 2 * step) << "a cancel in time did not withdraw the timer";
      continue;
    }
    EXPECT_FALSE(runtime.cancel(cancelled));
    ASSERT_TRUE(wait_until(
        [&] {
          std::lock_guard lock(mutex);
          return fired.size() == 3;
        },
        kSoon));
    std::this_thread::sleep_for(50ms);
    std::lock_guard lock(mutex);
    EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
    return;
  }
}

TEST(RuntimeTest, UrgentTasksAndDueTimersGoBeforeWaitingNormalTasks) {
  Runtime runtime(Runtime::Options{1, 1});
  std::mutex mutex;
  std::vector<int> ran;
  auto record = [&](int n) {
    std::lock_guard lock(mutex);
    ran.push_back(n);
  };
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> busy{false};
  runtime.post_io([&, released] {  // holds the only I/O thread
    busy = true;
    released.wait();
  });
  ASSERT_TRUE(wait_until([&] { return busy.load(); }, kSoon));
  runtime.post_io([&] { record(3); });
  runtime.post_io([&] { record(4); });
  runtime.post_io([&] { record(1); }, Runtime::Priority::urgent);
  runtime.schedule_after(0ms, [&] { record(2); });  // a due timer: urgent too
  std::this_thread::sleep_for(50ms);                // the timer thread hands the timer over
  release.set_value();
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return ran.size() == 4;
      },
      kSoon));
  std::lock_guard lock(mutex);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
}

// A core keeps the state it delivered small (core/kept_state.h): whatever it kept comes back
// whole, the contender's own id included, for a contender and an observer alike.
TEST(KeptStateTest, GivesBackEveryOwnerAsKeptWithTheContendersOwnId) {
  const auto owner = [](std::string id, EpochMillis at, std::uint64_t token, bool idle) {
    MutexOwner out;
    out.owner_id = std::move(id);
    out.acquired_at = at;
    out.ttl_at = at + 1000;
    out.transition_at = at + 1500;
    out.fencing_token = token;
    out.idle = idle;
    return out;
  };
  const std::string self = "self:1@host";
  const std::string other = "another contender, with an id longer than any short string";
  const std::vector<MutexState> states = {
      MutexState{},
      MutexState{MutexOwner::none(), owner(self, 100, 7, false)},
      MutexState{owner(self, 100, 7, false), owner(self, 200, 7, true)},
      MutexState{owner(self, 200, 7, false), owner(other, 300, 8, false)},
      MutexState{owner(other, 300, 8, true), owner(self, 400, 9, false)},
      MutexState{owner(other, 300, 8, false), owner("x", 500, 10, false)},
      MutexState{owner(other, 600, 11, false), MutexOwner::none()},
  };
  internal::KeptState kept;
  for (const auto& state : states) {
    kept.keep(state, &self);
    EXPECT_EQ(kept.state(&self), state);
    EXPECT_EQ(kept.after(&self), state.after);
    EXPECT_EQ(kept.after_ours(), state.after.owner_id == self);
    kept.keep(state, nullptr);  // an observer: no id of its own
    EXPECT_EQ(kept.state(nullptr), state);
    EXPECT_FALSE(kept.after_ours());
  }
}

}  // namespace
}  // namespace simba
