// `simba schedule`: a cron that runs on the leader only (the Scheduler).
//
// Every --every, on the leader only: fixed delay (end to start) by default, --fixed-rate start
// to start (a run never overlaps the next). A run that outlives leadership gets SIGTERM
// (SIGKILL after --kill-after); a failing run is reported on stderr and the schedule goes on.
// SIGINT/SIGTERM/SIGHUP stop the schedule (a running command is terminated the same way),
// release, and exit 128 + N.
#include <iostream>

#include "base/thread_annotations.h"
#include "cli/child.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/http_endpoint.h"
#include "cli/terminal.h"

namespace simba::cli {

int run_schedule(const BackendChoice& backend, const CommandRun& run, const Every& every) {
  if (run.command.empty())
    return fail(code::usage, "schedule: no command given (simba schedule --every DUR MUTEX -- COMMAND...)");
  ScheduleOptions options;
  options.period = parse_duration(every.period);
  options.initial_delay = parse_duration(every.initial_delay);
  options.strategy = every.fixed_rate ? ScheduleOptions::Strategy::fixed_rate : ScheduleOptions::Strategy::fixed_delay;
  options.worker = "simba-schedule";
  const auto kill_after = parse_duration(run.kill_after);
  Client client = backend.connect();
  client.owner(run.mutex);                         // fails fast if the backend is unreachable
  if (!run.http.empty()) client.label_mutexes(1);  // /metrics: this mutex's own series too

  struct Shared {
    internal::AnnotatedMutex mutex;
    std::condition_variable changed;
    int stop_signal GUARDED_BY(mutex) = 0;
  };
  auto shared = std::make_shared<Shared>();
  handle_signals([shared](int sig) {
    {
      internal::MutexLock lock(shared->mutex);
      if (shared->stop_signal == 0) shared->stop_signal = sig;
    }
    shared->changed.notify_all();
  });

  std::string contender;
  Scheduler scheduler(run.mutex, client, options, [&](std::stop_token stop, std::uint64_t token) {
    int error = 0;
    std::shared_ptr<RunningChild> child =
        RunningChild::start(run.command, command_env(run.mutex, token, contender), error);
    if (!child) {
      spawn_failure(run.command[0], error);
      return;
    }
    std::stop_callback on_stop(stop, [&] { child->wake(); });
    if (!child->wait_exited_or([&] { return stop.stop_requested(); })) {
      std::cerr << "simba: leadership of mutex '" << run.mutex << "' ended during a run; terminating it\n";
      child->terminate(kill_after);
      return;
    }
    if (const int status = child->status(); status != 0) {
      std::cerr << "simba: a run of '" << run.command[0] << "' exited with status " << status
                << "; the schedule goes on\n";
    }
  });
  contender = scheduler.contender_id();
  std::optional<HttpEndpoint> http;  // before the scheduler goes
  if (!run.http.empty()) http.emplace(run.http, client, run.mutex, [&scheduler] { return scheduler.is_leader(); });
  scheduler.start();
  int sig;
  {
    WaitingLine line(client, run.mutex, [&] { return !scheduler.is_leader(); });
    internal::UniqueMutexLock lock(shared->mutex);
    shared->changed.wait(lock.native(), [&]() REQUIRES(shared->mutex) { return shared->stop_signal != 0; });
    sig = shared->stop_signal;
  }
  scheduler.stop();  // terminates a running command, releases
  return 128 + sig;
}

}  // namespace simba::cli
