// Conformance cases for what every engine takes on its URI.
#include <gtest/gtest.h>

#include "kit.h"

namespace simba::tck {
namespace {

using namespace std::chrono_literals;

// `poll` is a common option: every engine accepts it on its URI, and it sets how often a
// service looks again where the engine pushes nothing: an observer of an engine that does not
// push acquisitions (SQLite, MariaDB, PostgreSQL) reads every `poll` while the mutex is held.
// Engines that push every change (memory, Redis, ZooKeeper) are woken instead of polling.
TEST(ConnectTest, PollOptionIsAcceptedAndUsed) {
  constexpr auto kPoll = 5ms;
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
  const Capabilities caps = backend->capabilities();
  if (caps.push && caps.push_acquisitions) return;

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
  std::this_thread::sleep_for(500ms);
  const long reads = counted->calls() - before;
  observer->stop();
  holder->stop();
  // Every 5 ms is up to 100 reads in 500 ms; the engines' own defaults (25 ms and more) give
  // at most 20. 35 leaves room for a slow, sanitized machine and still fails without `poll`.
  EXPECT_GE(reads, 35) << caps.engine << ": an observer read " << reads << " times in 500 ms with poll=5ms";
}

}  // namespace
}  // namespace simba::tck
