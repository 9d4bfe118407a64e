// What the server backends' tests share: the wrappers' environment, a server restart in the
// middle of a run, child processes (`simba lock` owners to kill and stop), and the check that a
// release wakes only the next waiter.
#pragma once

#include <algorithm>

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kit.h"

namespace simba::test {

// A variable the with_*.sh wrapper exported ("" when unset).
inline std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// An owner holds a mutex on `uri`; `stop_server` kills the server: the owner must be revoked
// at once (on_released well within its 3 s ttl); `start_server` brings it
// back: the owner must own again (a new on_acquired) without restarting anything. The
// fencing tokens of the two ownerships go to `token_before` and `token_after` if given.
inline void expect_restart_revokes_and_resumes(const std::string& uri, const std::function<void()>& stop_server,
                                               const std::function<void()>& start_server,
                                               std::uint64_t* token_before = nullptr,
                                               std::uint64_t* token_after = nullptr) {
  using namespace std::chrono_literals;
  ContendOptions options = tck::fast_options();
  options.ttl = 3s;  // a revocation well within it cannot be the lease running out
  options.transition = 1s;
  auto client = Client(open_backend(uri), options, std::make_shared<Runtime>());
  auto owner = std::make_shared<tck::Recorder>(tck::unique_mutex("restart"));
  auto service = client.contend_service(owner);
  service->start();
  ASSERT_TRUE(tck::wait_until([&] { return owner->acquired_count() == 1; }, 5s));
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(stop_server());
  // The revocation itself, not the belief at some later poll: a round sent after the loss may
  // still be answered by a server that is shutting down (PostgreSQL's LISTEN backend dies
  // before the one that answers a renewal), which is a real renewal of a durable lease.
  ASSERT_TRUE(tck::wait_until([&] { return owner->released_count() >= 1; }, 2s));
  const auto events = owner->events();
  const auto revoked = std::find_if(events.begin(), events.end(), [](const auto& e) { return !e.acquired; });
  ASSERT_NE(revoked, events.end());
  EXPECT_LT(revoked->at - stopped, options.ttl) << "revoked only when the lease ran out";
  ASSERT_NO_FATAL_FAILURE(start_server());
  EXPECT_TRUE(tck::wait_until([&] { return owner->acquired_count() >= 2 && service->is_owner(); }, 20s));
  EXPECT_TRUE(service->is_owner());
  std::vector<std::uint64_t> tokens;
  for (const auto& event : owner->events()) {
    if (event.acquired) tokens.push_back(event.state.after.fencing_token);
  }
  if (token_before && !tokens.empty()) *token_before = tokens.front();
  if (token_after && tokens.size() > 1) *token_after = tokens[1];
  service->stop();
}

// A process running `args` (found on $PATH if it has no '/'), in a process group of its own,
// killed with its group at the end.
class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    EXPECT_EQ(posix_spawnp(&pid_, argv[0], nullptr, &attr, argv.data(), environ), 0);
    posix_spawnattr_destroy(&attr);
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::kill(-pid_, SIGCONT);
      waitpid(pid_, nullptr, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  void signal(int signal) { ::kill(-pid_, signal); }
  // Its exit status, once it exited within `timeout`; -1 otherwise.
  int exit_status(std::chrono::milliseconds timeout) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// After Backend::end_sessions(): an acquire of `mutex` by "ours" fails unavailable (the caller
// checks that it left nothing on the server), and ending the sessions again is harmless.
inline void expect_acquire_refused_after_end(Backend& backend, const std::string& mutex) {
  try {
    backend.acquire(mutex, "ours", std::chrono::seconds(10), std::chrono::seconds(6));
    ADD_FAILURE() << "an acquire after end_sessions() went through";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::unavailable)) << e.what();
  }
  backend.end_sessions();
}

// Five contenders line up on one mutex of `backend`, one at a time; the owner's release wakes
// the next in line and nobody else (an engine whose waiters watch only their predecessor).
inline void expect_release_wakes_only_the_next_waiter(const std::shared_ptr<Backend>& backend) {
  using namespace std::chrono_literals;
  ContendOptions options = tck::fast_options();
  options.ttl = 20s;  // no waiter looks again on its own while the test runs
  options.transition = 5s;
  auto runtime = std::make_shared<Runtime>();
  const std::string mutex = tck::unique_mutex();
  std::vector<std::shared_ptr<tck::AcquireCounting>> counters;
  std::vector<std::shared_ptr<tck::Recorder>> recorders;
  std::vector<std::unique_ptr<MutexContendService>> services;
  for (int i = 0; i < 5; ++i) {
    counters.push_back(std::make_shared<tck::AcquireCounting>(backend));
    recorders.push_back(std::make_shared<tck::Recorder>(mutex));
    services.push_back(Client(counters.back(), options, runtime).contend_service(recorders.back()));
    services.back()->start();
    // One at a time, so the line is in this order.
    ASSERT_TRUE(tck::wait_until([&] { return !services[i]->after_owner().empty(); }, 5s)) << "contender " << i;
  }
  ASSERT_TRUE(services[0]->is_owner());
  std::this_thread::sleep_for(200ms);  // let every first round settle
  std::vector<int> before;
  for (auto& counter : counters) before.push_back(counter->calls());
  services[0]->stop();
  ASSERT_TRUE(tck::wait_until([&] { return recorders[1]->acquired_count() == 1; }, 5s));  // the next in line
  std::this_thread::sleep_for(300ms);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(counters[i]->calls(), before[i]) << "waiter " << i << " was woken";
  for (int i = 1; i < 5; ++i) services[i]->stop();
}

}  // namespace simba::test
