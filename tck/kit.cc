// The conformance kit's helpers.
#include "kit.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <spawn.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

extern char** environ;

namespace simba::tck {
namespace {

struct UnderTest {
  std::string uri = "memory:";
  BackendFactory factory;
};
UnderTest& under_test() {
  static UnderTest instance;
  return instance;
}

}  // namespace

const std::string& backend_uri() { return under_test().uri; }
void set_backend_uri(std::string uri) {
  under_test().uri = std::move(uri);
  under_test().factory = nullptr;
}
void set_backend_factory(BackendFactory factory) {
  under_test().factory = std::move(factory);
  under_test().uri.clear();
}
std::shared_ptr<Backend> make_backend() {
  if (under_test().factory) return under_test().factory();
  return open_backend(under_test().uri);
}

ContendOptions fast_options() {
  ContendOptions options;
  options.ttl = std::chrono::milliseconds(400);
  // The owner-only window is also how late a renewal may start before it counts as a loss:
  // 400 ms leaves room for a loaded, sanitized 2-core machine.
  options.transition = std::chrono::milliseconds(400);
  options.backoff_initial = std::chrono::milliseconds(20);
  return options;
}

std::shared_ptr<Runtime> make_runtime() {
  Runtime::Options threads;
  threads.io_threads = 4;
  threads.callback_threads = 2;
  return std::make_shared<Runtime>(threads);
}

Client make_client(const ContendOptions& options) { return Client(make_backend(), options, make_runtime()); }

std::string unique_mutex(const std::string& hint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string test = hint;
  if (test.empty()) {
    if (auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
      test = std::string(info->test_suite_name()) + "." + info->name();
    }
  }
  // At most 54 bytes: Simba's SQL table holds names of up to 66.
  return "tck/" + test.substr(0, 40) + "/" + std::to_string(rng() % 1'000'000'000);
}

bool wait_until(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= deadline) return predicate();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::chrono::milliseconds first_round_bound(const Client& client) {
  std::chrono::steady_clock::duration slowest{};
  const auto probe = unique_mutex("first-round-bound");
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    client.owner(probe);
    slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
  }
  const auto& options = client.options();
  return options.ttl + options.transition + client.backend()->capabilities().poll_interval +
         4 * std::chrono::ceil<std::chrono::milliseconds>(slowest);
}

Client other_process(const Client& client) {
  return Client(std::make_shared<ForwardingBackend>(make_backend()), client.options(), client.runtime());
}

std::optional<std::chrono::milliseconds> other_process_gets_past_busy_threads(const Client& client,
                                                                              const std::string& mutex,
                                                                              std::chrono::milliseconds timeout) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 3; ++t) {
    busy.emplace_back([&] {
      auto m = client.mutex(mutex);
      while (!stop.load()) {
        std::scoped_lock guard(m);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto other = other_process(client).mutex(mutex);
  const auto start = std::chrono::steady_clock::now();
  const bool got = other.try_lock_for(timeout);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  stop.store(true);
  if (got) other.unlock();
  for (auto& thread : busy) thread.join();
  if (!got) return std::nullopt;
  return took;
}

void expect_left_nothing(const Client& client, const std::string& mutex) {
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(client.owner(mutex).empty()) << "someone took '" << mutex << "'";
  EXPECT_TRUE(wait_until([&] { return client.lock_entries() == 0; }, std::chrono::seconds(5)))
      << client.lock_entries() << " lock entries left";
}

pid_t spawn_case(const std::string& gtest_case, const std::vector<std::string>& env) {
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<std::string> args{self, "--backend", backend_uri(), "--gtest_filter=" + gtest_case,
                                "--gtest_also_run_disabled_tests"};
  std::vector<std::string> all = env;
  for (char** e = environ; *e; ++e) all.emplace_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : all) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return pid;
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

void Recorder::record(bool acquired, const MutexState& state) {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  {
    std::lock_guard lock(mutex_);
    events_.push_back({acquired, state, std::chrono::steady_clock::now(), name});
  }
  if (hook) hook(acquired, state);
}

}  // namespace simba::tck
