// `simba leader`: keeps a long-running command alive on the leader only.
//
// Stands by until this process owns the mutex, runs the command while it does, and on a lost
// lease terminates it (SIGTERM, SIGKILL after --kill-after) and stands by again. When the
// command exits by itself: --restart no releases and exits with its status; on-failure
// (non-zero status) and always run it again while still leader, after a backoff that doubles
// from 500 ms to 30 s (and starts over once a run lasted 30 s). SIGINT/SIGTERM/SIGHUP to simba
// terminate the command the same way, release, and exit 128 + N.
#include <atomic>
#include <iostream>

#include "base/thread_annotations.h"
#include "cli/child.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/http_endpoint.h"
#include "cli/terminal.h"

namespace simba::cli {
namespace {

constexpr auto kFirstBackoff = std::chrono::milliseconds(500);
constexpr auto kLongestBackoff = std::chrono::seconds(30);

enum class Restart { no, on_failure, always };

Restart restart_of(const std::string& text) {
  if (text == "no") return Restart::no;
  if (text == "on-failure") return Restart::on_failure;
  if (text == "always") return Restart::always;
  throw Error(errc::invalid_argument, "--restart is no, on-failure or always, not '" + text + "'");
}

// Shared with the signal thread, which outlives run_leader().
struct Shared {
  internal::AnnotatedMutex mutex;
  std::condition_variable changed;
  std::shared_ptr<RunningChild> child GUARDED_BY(mutex);
  int stop_signal GUARDED_BY(mutex) = 0;  // a signal asked simba to stop
  std::stop_source stop;                  // requested with stop_signal: no acquire starts after
  bool lost GUARDED_BY(mutex) = false;    // the current hold's lease was lost
};

}  // namespace

int run_leader(const BackendChoice& backend, const CommandRun& run, const std::string& restart_text) {
  if (run.command.empty()) return fail(code::usage, "leader: no command given (simba leader MUTEX -- COMMAND...)");
  const Restart restart = restart_of(restart_text);
  const auto kill_after = parse_duration(run.kill_after);
  Client client = backend.connect();
  client.owner(run.mutex);                         // fails fast if the backend is unreachable
  if (!run.http.empty()) client.label_mutexes(1);  // /metrics: this mutex's own series too

  // The signal thread, which outlives this function, holds it weakly: it is released here.
  auto locker = std::make_shared<Locker>(run.mutex, client);
  const auto http = endpoint_of(run.http, client, locker);  // goes before the locker
  auto shared = std::make_shared<Shared>();
  // Standing by (no command): interrupt the waiting acquire (close() returns once its contender
  // stopped and a lease it won went back), give back anything won, exit. Running: stop the
  // command, then exit.
  handle_signals(
      [shared, client, weak = std::weak_ptr<Locker>(locker), mutex = run.mutex, id = locker->contender_id()](int sig) {
        internal::UniqueMutexLock lock(shared->mutex);
        if (shared->stop_signal == 0) shared->stop_signal = sig;
        if (shared->child) {
          auto child = shared->child;
          lock.unlock();
          shared->changed.notify_all();
          child->wake();
          return;
        }
        // Under shared->mutex, held until the exit: no command starts meanwhile.
        give_back_and_exit(shared->stop, weak, client, mutex, id, sig);
      });

  for (;;) {
    {
      std::atomic<bool> waiting{true};
      WaitingLine line(client, run.mutex, [&] { return waiting.load(); });
      try {
        locker->acquire(shared->stop.get_token());
      } catch (const std::system_error& e) {
        if (e.code() != std::errc::operation_canceled) throw;
        internal::MutexLock lock(shared->mutex);  // the signal thread exits the process first
        return 128 + shared->stop_signal;
      }
      waiting = false;
    }
    {
      internal::MutexLock lock(shared->mutex);
      shared->lost = false;
    }
    std::stop_callback on_lost(locker->lease_token(), [&] {
      std::shared_ptr<RunningChild> child;
      {
        internal::MutexLock lock(shared->mutex);
        shared->lost = true;
        child = shared->child;
      }
      shared->changed.notify_all();
      if (child) child->wake();
    });
    auto backoff = std::chrono::milliseconds(kFirstBackoff);
    for (;;) {  // runs of the command while leader
      std::shared_ptr<RunningChild> child;
      {
        internal::MutexLock lock(shared->mutex);
        if (shared->stop_signal != 0) return 128 + shared->stop_signal;  // locker's destructor releases
        if (shared->lost) break;
        int error = 0;
        child = RunningChild::start(run.command,
                                    command_env(run.mutex, locker->fencing_token(), locker->contender_id()), error);
        if (!child) return spawn_failure(run.command[0], error);
        shared->child = child;
      }
      const auto started = std::chrono::steady_clock::now();
      const bool exited = child->wait_exited_or([&] {
        internal::MutexLock lock(shared->mutex);
        return shared->lost || shared->stop_signal != 0;
      });
      const int status = exited ? child->status() : child->terminate(kill_after);
      {
        internal::MutexLock lock(shared->mutex);
        shared->child.reset();
        if (shared->stop_signal != 0) return 128 + shared->stop_signal;
        if (shared->lost) {
          std::cerr << "simba: lost leadership of mutex '" << run.mutex << "'"
                    << (exited ? "" : "; the command was terminated") << "; standing by\n";
          break;
        }
      }
      if (restart == Restart::no || (restart == Restart::on_failure && status == 0)) return status;
      if (std::chrono::steady_clock::now() - started >= kLongestBackoff) backoff = kFirstBackoff;
      std::cerr << "simba: the command exited with status " << status << "; running it again in "
                << format_duration(backoff) << "\n";
      internal::UniqueMutexLock lock(shared->mutex);
      shared->changed.wait_for(lock.native(), backoff,
                               [&]() REQUIRES(shared->mutex) { return shared->lost || shared->stop_signal != 0; });
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, kLongestBackoff);
    }
    locker->unlock();  // lost: stand by again
  }
}

}  // namespace simba::cli
