// Conformance cases for what every engine takes on its URI.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "cases.h"
#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// The backend under test with its push channel hidden: watch() delivers nothing, so every
// service of it polls.
class PushlessBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::unique_ptr<Subscription> watch(const std::string&, const std::string&,
                                      std::function<void(WatchEvent)>) override {
    return nullptr;
  }
  const Push* push() const noexcept override { return nullptr; }
};

// Times every read(): how long the caller waited between the end of one and the start of the
// next is the pace it chose, whatever a read itself costs on a loaded machine.
class ReadPaceBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot read(const std::string& mutex) override {
    const auto started = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      if (last_end_) shortest_pause_ = std::min(shortest_pause_, started - *last_end_);
      ++reads_;
    }
    auto snapshot = ForwardingBackend::read(mutex);
    std::lock_guard lock(mutex_);
    last_end_ = std::chrono::steady_clock::now();
    return snapshot;
  }
  // From now on: counts and pauses of the reads that start after this.
  void restart() {
    std::lock_guard lock(mutex_);
    last_end_.reset();
    reads_ = 0;
    shortest_pause_ = std::chrono::steady_clock::duration::max();
  }
  long reads() const {
    std::lock_guard lock(mutex_);
    return reads_;
  }
  std::chrono::steady_clock::duration shortest_pause() const {
    std::lock_guard lock(mutex_);
    return shortest_pause_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<std::chrono::steady_clock::time_point> last_end_;  // guarded by mutex_
  long reads_ = 0;                                                 // guarded by mutex_
  std::chrono::steady_clock::duration shortest_pause_ =
      std::chrono::steady_clock::duration::max();  // guarded by mutex_
};

// `poll` is a common option: every engine accepts it on its URI, and it sets how often a
// service looks again where the engine pushes nothing: an observer reads every `poll` while
// the mutex is held. An engine that pushes every change (memory, Redis, ZooKeeper) is woken
// instead, so the case hides its push channel: the option must still set the pace.
TEST(ConnectTest, PollOptionIsAcceptedAndUsed) {
  constexpr auto kPoll = 5ms;
  constexpr auto kWindow = 500ms;
  std::shared_ptr<Backend> backend;
  ContendOptions options = fast_options();
  if (const std::string& uri = backend_uri(); !uri.empty()) {
    ContendOptions parsed;
    backend = open_backend(uri + (uri.find('?') == std::string::npos ? "?" : "&") + "poll=5ms", &parsed);
    EXPECT_EQ(parsed.poll_interval, kPoll);
    options.poll_interval = parsed.poll_interval;
  } else {
    backend = make_backend();  // a factory's backend has no URI: the option is set in code
    options.poll_interval = kPoll;
  }
  // At its own pace an observer waits at least the engine's default poll interval (the
  // shortest of any engine's is 25 ms) between one read and the next while the mutex is held:
  // a shorter pause shows the option set it. The pause is timed from the end of a read, so
  // how long a read takes on a loaded machine does not count.
  const auto default_poll = std::min<std::chrono::milliseconds>(make_backend()->capabilities().poll_interval, 25ms);
  ASSERT_GT(default_poll, kPoll);
  const bool pushes = backend->push() != nullptr;
  if (pushes) backend = std::make_shared<PushlessBackend>(backend);

  // The holder's lease is long: the observer's next look is never brought forward by a lease
  // about to end (it looks again at the owner-only window's end if that comes sooner).
  ContendOptions holding = fast_options();
  holding.ttl = 30s;
  holding.transition = 10s;
  auto holder_client = make_client(holding);
  const std::string mutex = unique_mutex();
  auto holder = holder_client.contend_service(std::make_shared<Recorder>(mutex));
  holder->start();
  ASSERT_TRUE(wait_until([&] { return holder->is_owner(); }, 5s));

  auto paced = std::make_shared<ReadPaceBackend>(backend);
  Client client(paced, options, holder_client.runtime());
  auto observer = client.retrieval_service(make_retriever(mutex, [](const MutexState&) {}));
  observer->start();
  ASSERT_TRUE(wait_until([&] { return !observer->after_owner().empty(); }, 5s));
  paced->restart();
  // Two reads after the restart at least (a pause between them), and kWindow at least.
  const auto window_end = std::chrono::steady_clock::now() + kWindow;
  const bool two = wait_until([&] { return paced->reads() >= 2 && std::chrono::steady_clock::now() >= window_end; },
                              kSoon + kWindow);
  const long reads = paced->reads();
  const auto shortest = std::chrono::duration_cast<std::chrono::microseconds>(paced->shortest_pause());
  observer->stop();
  holder->stop();
  ASSERT_TRUE(two) << "the observer read " << reads << " times";
  EXPECT_LT(shortest, default_poll) << backend->capabilities().engine << (pushes ? " (push hidden)" : "")
                                    << ": with poll=5ms the shortest pause between two of an observer's " << reads
                                    << " reads was " << shortest.count()
                                    << " us (the default pace: " << default_poll.count() << " ms)";
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_connect_cases() { return 0; }

}  // namespace simba::tck
