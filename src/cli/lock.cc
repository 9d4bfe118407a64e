// `simba lock`: a distributed flock(1).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <optional>

#include "base/thread_annotations.h"
#include "cli/child.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/terminal.h"

namespace simba::cli {

int run_lock(const BackendChoice& backend, const CommandRun& run, const std::string& timeout_text) {
  if (run.command.empty()) return fail(code::usage, "lock: no command given (simba lock MUTEX -- COMMAND...)");
  std::optional<std::chrono::milliseconds> timeout;
  if (!timeout_text.empty()) timeout = parse_duration(timeout_text);
  const auto kill_after = parse_duration(run.kill_after);
  Client client = backend.connect();
  client.owner(run.mutex);  // fails fast if the backend is unreachable

  Locker locker(run.mutex, client);
  // Shared with the signal thread, which outlives this function.
  struct Shared {
    internal::AnnotatedMutex mutex;
    std::shared_ptr<RunningChild> child GUARDED_BY(mutex);
  };
  auto shared = std::make_shared<Shared>();
  std::atomic<bool> lost{false};

  // While waiting, a signal gives back anything won and exits; while the command runs, it is
  // passed on to the command.
  handle_signals([shared, client, mutex = run.mutex, id = locker.contender_id()](int sig) {
    internal::MutexLock lock(shared->mutex);
    if (shared->child) {
      shared->child->signal(sig);
      return;
    }
    give_back_and_exit(client, mutex, id, sig);
  });

  {
    std::atomic<bool> waiting{true};
    WaitingLine line(client, run.mutex, [&] { return waiting.load(); });
    if (timeout) {
      locker.acquire(*timeout);  // throws errc::timeout
    } else {
      locker.acquire();
    }
    waiting = false;
  }

  std::shared_ptr<RunningChild> running;
  {
    internal::MutexLock lock(shared->mutex);
    if (locker.lease_token().stop_requested()) {
      return fail(code::lease_lost, "lost the lease on mutex '" + run.mutex + "' before the command started");
    }
    int error = 0;
    running =
        RunningChild::start(run.command, command_env(run.mutex, locker.fencing_token(), locker.contender_id()), error);
    if (!running) return spawn_failure(run.command[0], error);
    shared->child = running;
  }
  std::stop_callback on_lost(locker.lease_token(), [&] {
    lost = true;
    running->wake();
  });
  if (!running->wait_exited_or([&] { return lost.load(); })) {
    std::cerr << "simba: lost the lease on mutex '" << run.mutex << "' while the command ran; terminating it\n";
    running->terminate(kill_after);
    return code::lease_lost;
  }
  const int status = running->status();
  locker.unlock();
  return status;
}

}  // namespace simba::cli
