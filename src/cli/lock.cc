// `simba lock`: a distributed flock(1).
#include <signal.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <optional>

#include "base/thread_annotations.h"
#include "cli/child.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/http_endpoint.h"
#include "cli/terminal.h"

namespace simba::cli {
namespace {

void end_hold(Permit& permit) { permit.release(); }
void end_hold(SharedHold& hold) { hold.unlock(); }

// A command run under `Held` (a Permit, a SharedHold): `acquire` waits for it until the stop
// token is stopped (a signal while waiting: then simba exits 128 + the signal, holding
// nothing); the command gets `env(held)`; a loss of the lease while it runs terminates it
// (exit 75); else simba exits with its status. `what` names the hold in messages.
template <class Held>
int run_held(Client client, const CommandRun& run, std::chrono::milliseconds kill_after, const std::string& what,
             const std::function<Held(std::stop_token)>& acquire,
             const std::function<std::vector<std::string>(const Held&)>& env) {
  struct Shared {
    internal::AnnotatedMutex mutex;
    std::shared_ptr<RunningChild> child GUARDED_BY(mutex);
    Held held GUARDED_BY(mutex);
    int stop_signal GUARDED_BY(mutex) = 0;  // a signal while waiting: simba exits
  };
  auto shared = std::make_shared<Shared>();
  std::optional<HttpEndpoint> http;
  if (!run.http.empty()) {
    http.emplace(run.http, client, run.mutex, [shared] {
      internal::MutexLock lock(shared->mutex);
      return shared->held.is_owner();
    });
  }
  std::stop_source interrupt;
  handle_signals([shared, interrupt](int sig) {
    internal::MutexLock lock(shared->mutex);
    if (shared->child) {
      shared->child->signal(sig);
      return;
    }
    if (shared->stop_signal == 0) shared->stop_signal = sig;
    interrupt.request_stop();
  });
  Held held = acquire(interrupt.get_token());
  std::shared_ptr<RunningChild> running;
  std::stop_token lease;
  {
    internal::MutexLock lock(shared->mutex);
    if (shared->stop_signal != 0) {
      end_hold(held);
      return 128 + shared->stop_signal;
    }
    if (!held) return fail(code::timeout, "no " + what + " was free");
    if (held.lost().stop_requested()) return fail(code::lease_lost, "lost the " + what + " before the command started");
    int error = 0;
    running = RunningChild::start(run.command, env(held), error);
    if (!running) return spawn_failure(run.command[0], error);
    shared->child = running;
    lease = held.lost();
    shared->held = std::move(held);
  }
  std::atomic<bool> lost{false};
  std::stop_callback on_lost(lease, [&] {
    lost = true;
    running->wake();
  });
  if (!running->wait_exited_or([&] { return lost.load(); })) {
    std::cerr << "simba: lost the " << what << " while the command ran; terminating it\n";
    running->terminate(kill_after);
    return code::lease_lost;
  }
  const int status = running->status();
  internal::MutexLock lock(shared->mutex);
  end_hold(shared->held);
  return status;
}

// `simba lock --permits N`: one permit of the semaphore run.mutex.
int run_permit_lock(Client client, const CommandRun& run, int permits, std::optional<std::chrono::milliseconds> timeout,
                    std::chrono::milliseconds kill_after) {
  Semaphore semaphore = client.semaphore(run.mutex, permits);  // throws for bad permits
  if (!run.http.empty()) client.label_mutexes(static_cast<std::size_t>(permits));
  return run_held<Permit>(
      client, run, kill_after, "permit of semaphore '" + run.mutex + "'",
      [&](std::stop_token stop) {
        return timeout && timeout->count() == 0
                   ? semaphore.try_acquire()
                   : semaphore.acquire(timeout.value_or(std::chrono::milliseconds::max()), std::move(stop));
      },
      [&](const Permit& permit) {
        auto env = command_env(run.mutex, permit.fencing_token(), "");
        env.push_back("SIMBA_PERMIT=" + std::to_string(permit.slot()));
        env.push_back("SIMBA_PERMITS=" + std::to_string(permits));
        return env;
      });
}

// `simba lock --shared`: a read lock of the shared mutex run.mutex.
int run_shared_lock(Client client, const CommandRun& run, std::optional<std::chrono::milliseconds> timeout,
                    std::chrono::milliseconds kill_after) {
  SharedMutex rw = client.shared_mutex(run.mutex);
  return run_held<SharedHold>(
      client, run, kill_after, "read lock of '" + run.mutex + "'",
      [&](std::stop_token stop) {
        return rw.acquire_shared(timeout.value_or(std::chrono::milliseconds::max()), std::move(stop));
      },
      [&](const SharedHold& hold) { return command_env(run.mutex, hold.fencing_token(), ""); });
}

}  // namespace

int run_lock(const BackendChoice& backend, const CommandRun& run, const std::string& timeout_text, int permits,
             bool read_lock) {
  if (run.command.empty()) return fail(code::usage, "lock: no command given (simba lock MUTEX -- COMMAND...)");
  std::optional<std::chrono::milliseconds> timeout;
  if (!timeout_text.empty()) timeout = parse_duration(timeout_text);
  const auto kill_after = parse_duration(run.kill_after);
  Client client = backend.connect();
  if (permits != 0) {
    client.owner(run.mutex);  // fails fast if the backend is unreachable
    return run_permit_lock(client, run, permits, timeout, kill_after);
  }
  if (read_lock) {
    client.owner(run.mutex);
    return run_shared_lock(client, run, timeout, kill_after);
  }
  const auto started = std::chrono::steady_clock::now();
  client.owner(run.mutex);                         // fails fast if the backend is unreachable
  if (!run.http.empty()) client.label_mutexes(1);  // /metrics: this mutex's own series too

  // The signal thread, which outlives this function, holds it weakly: it is released here.
  auto locker = std::make_shared<Locker>(run.mutex, client);
  const auto http = endpoint_of(run.http, client, locker);  // goes before the locker
  struct Shared {
    internal::AnnotatedMutex mutex;
    std::shared_ptr<RunningChild> child GUARDED_BY(mutex);
    int stop_signal GUARDED_BY(mutex) = 0;  // a signal while waiting: simba exits
    std::stop_source stop;                  // requested with stop_signal: no acquire starts after
  };
  auto shared = std::make_shared<Shared>();
  std::atomic<bool> lost{false};

  // While waiting, a signal gives back anything won and exits: the waiting acquire is
  // interrupted (close() returns once its contender stopped and a lease it won went back), so
  // no round that ends after the release can leave a lease behind. While the command runs, a
  // signal is passed on to the command.
  handle_signals(
      [shared, client, weak = std::weak_ptr<Locker>(locker), mutex = run.mutex, id = locker->contender_id()](int sig) {
        internal::MutexLock lock(shared->mutex);  // held until the exit: no command starts meanwhile
        if (shared->child) {
          shared->child->signal(sig);
          return;
        }
        shared->stop_signal = sig;
        give_back_and_exit(shared->stop, weak, client, mutex, id, sig);
      });

  try {
    std::atomic<bool> waiting{true};
    WaitingLine line(client, run.mutex, [&] { return waiting.load(); });
    if (timeout) {
      locker->acquire(*timeout, shared->stop.get_token());  // throws errc::timeout
    } else {
      locker->acquire(shared->stop.get_token());
    }
    waiting = false;
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::operation_canceled) throw;
    internal::MutexLock lock(shared->mutex);  // the signal thread exits the process first
    return 128 + shared->stop_signal;
  }

  // Holding the mutex keeps new `--shared` readers out; the readers inside finish first. (A
  // signal meanwhile gives the mutex back and exits, as while waiting for it.)
  if (client.backend()->administration()) {
    auto left = std::chrono::milliseconds::max();
    if (timeout) {
      left = std::max(std::chrono::milliseconds(0), *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   std::chrono::steady_clock::now() - started));
    }
    std::optional<SharedMutex> rw;
    try {
      rw.emplace(client.shared_mutex(run.mutex));
    } catch (const Error& e) {
      if (e.code() != errc::invalid_argument) throw;  // a name too long for readers' records: none can exist
    }
    if (rw && !rw->await_no_readers(left)) {
      locker->unlock();
      return fail(code::timeout, "held mutex '" + run.mutex + "', but its --shared readers did not finish in time");
    }
  }
  std::shared_ptr<RunningChild> running;
  {
    internal::MutexLock lock(shared->mutex);
    if (locker->lease_token().stop_requested()) {
      return fail(code::lease_lost, "lost the lease on mutex '" + run.mutex + "' before the command started");
    }
    int error = 0;
    running = RunningChild::start(run.command, command_env(run.mutex, locker->fencing_token(), locker->contender_id()),
                                  error);
    if (!running) return spawn_failure(run.command[0], error);
    shared->child = running;
  }
  std::stop_callback on_lost(locker->lease_token(), [&] {
    lost = true;
    running->wake();
  });
  if (!running->wait_exited_or([&] { return lost.load(); })) {
    std::cerr << "simba: lost the lease on mutex '" << run.mutex << "' while the command ran; terminating it\n";
    running->terminate(kill_after);
    return code::lease_lost;
  }
  const int status = running->status();
  locker->unlock();
  return status;
}

}  // namespace simba::cli
