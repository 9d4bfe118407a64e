// Conformance cases for what every engine takes on its URI.
#include <gtest/gtest.h>

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
  // At its own pace the engine reads at most once per its default poll interval (the
  // shortest of any engine's is 25 ms) and once at the start.
  const auto default_poll = std::min<std::chrono::milliseconds>(make_backend()->capabilities().poll_interval, 25ms);
  const long at_default_pace = kWindow / default_poll + 2;
  const bool pushes = backend->push() != nullptr;
  if (pushes) backend = std::make_shared<PushlessBackend>(backend);

  auto holder_client = make_client();
  const std::string mutex = unique_mutex();
  auto holder = holder_client.contend_service(std::make_shared<Recorder>(mutex));
  holder->start();
  ASSERT_TRUE(wait_until([&] { return holder->is_owner(); }, 5s));

  auto counted = std::make_shared<simba::testing::FaultInjectingBackend>(backend);
  Client client(counted, options, holder_client.runtime());
  auto observer = client.retrieval_service(make_retriever(mutex, [](const MutexState&) {}));
  observer->start();
  ASSERT_TRUE(wait_until([&] { return !observer->after_owner().empty(); }, 5s));
  const long before = counted->calls();
  std::this_thread::sleep_for(kWindow);
  const long reads = counted->calls() - before;
  observer->stop();
  holder->stop();
  // Every 5 ms is up to 100 reads in 500 ms: more than the default pace shows the option set
  // it, with room for a loaded machine.
  EXPECT_GT(reads, at_default_pace) << backend->capabilities().engine << (pushes ? " (push hidden)" : "")
                                    << ": an observer read " << reads << " times in 500 ms with poll=5ms";
}

}  // namespace

// run_kit() calls it: linking run_kit links these cases (a static library drops unused objects).
int link_connect_cases() { return 0; }

}  // namespace simba::tck
