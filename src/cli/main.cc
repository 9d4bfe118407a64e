// simba: the command-line tool. Parses the command line and runs one subcommand (each in its
// own file: lock.cc, leader.cc, schedule.cc, records.cc).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace simba::cli {
namespace {

constexpr const char* kCommandFooter =
    "Everything after -- is the command, passed on untouched. It gets SIMBA_MUTEX, "
    "SIMBA_FENCING_TOKEN and SIMBA_CONTENDER_ID.";

int main_impl(int argc, char** argv) {
  CLI::App app{"simba: distributed mutual exclusion and leader election"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("simba ") + kVersion);
  app.set_help_all_flag("--help-all", "Print help for every subcommand and exit");
  app.footer(backends_footer() + "\n" + exit_code_footer());

  BackendChoice backend;
  CommandRun run;
  std::string timeout, restart = "no", prefix;
  Every every;
  std::size_t limit = 1000;
  bool json = false, force = false, yes = false;
  int permits = 0;
  bool shared = false;

  auto with_command = [&](CLI::App* sub) {
    add_backend_options(*sub, backend);
    add_lease_options(*sub, backend);
    sub->add_option("--kill-after", run.kill_after, "SIGKILL the command this long after its SIGTERM (default 10s)");
    sub->add_option("--http", run.http,
                    "Serve GET /metrics (Prometheus), /healthz and /leader (200 only while this process owns "
                    "the mutex) on ADDR:PORT, e.g. 127.0.0.1:9464");
    sub->add_option("mutex", run.mutex, "Mutex name")->required();
    sub->footer(kCommandFooter);
  };

  auto* lock = app.add_subcommand("lock", "Run a command while holding a mutex (a distributed flock)");
  with_command(lock);
  lock->add_option("--timeout,-w", timeout, "Give up waiting after this long, e.g. 30s (0s: one attempt)");
  lock->add_option("--permits", permits,
                   "Hold one of N permits of the semaphore MUTEX instead of the mutex: at most N commands "
                   "run at once, fleet-wide (a distributed sem -j N); every user of the name must give the same N");
  lock->add_flag("--shared", shared,
                 "Hold a read lock of MUTEX: --shared commands run together; a plain simba lock MUTEX (the "
                 "writer) waits for them and keeps new ones out");

  auto* leader = app.add_subcommand("leader", "Keep a command running on the leader only; stand by elsewhere");
  with_command(leader);
  leader
      ->add_option("--restart", restart,
                   "When the command exits by itself: no (exit with its status), "
                   "on-failure, always (run it again while leader, with backoff)")
      ->check(CLI::IsMember({"no", "on-failure", "always"}));

  auto* schedule = app.add_subcommand("schedule", "Run a command every period, on the leader only");
  with_command(schedule);
  schedule->add_option("--every", every.period, "The period, e.g. 30s")->required();
  schedule->add_flag("--fixed-rate", every.fixed_rate, "Start to start (default: fixed delay, end to start)");
  schedule->add_option("--initial-delay", every.initial_delay, "After winning, before the first run (default 0s)");

  auto* status = app.add_subcommand("status",
                                    "Show the owner, fencing token and lease times of a mutex (of a semaphore: its "
                                    "permits and holders; of a shared mutex: also its writer and readers)");
  add_backend_options(*status, backend);
  status->add_option("mutex", run.mutex, "Mutex name")->required();
  status->add_flag("--json", json, "One JSON object");

  auto* watch = app.add_subcommand(
      "watch", "Print a line per change of owner of a mutex (of each slot of a semaphore), until interrupted");
  add_backend_options(*watch, backend);
  watch->add_option("mutex", run.mutex, "Mutex name")->required();
  watch->add_flag("--json", json, "One JSON object per line");

  auto* list = app.add_subcommand("list", "List the mutexes the backend keeps a record for");
  add_backend_options(*list, backend);
  list->add_option("prefix", prefix, "Only names starting with this");
  list->add_option("--limit", limit, "At most this many (default 1000)")->check(CLI::PositiveNumber);
  list->add_flag("--json", json, "One JSON object per line");

  std::string interval = "1s";
  auto* top = app.add_subcommand("top", "A live view of the mutexes under a prefix: owner, token, held for; q quits");
  add_backend_options(*top, backend);
  top->add_option("prefix", prefix, "Only names starting with this");
  top->add_option("--limit", limit, "At most this many (default 1000)")->check(CLI::PositiveNumber);
  top->add_option("--interval", interval, "Redraw this often (default 1s)");
  top->footer(
      "Without a terminal on stdout it prints one view and exits. HELD FOR counts from when this view first "
      "saw the owner's token.");

  auto* release = app.add_subcommand("release", "Delete whatever lease holds a mutex (clear a hung holder)");
  add_backend_options(*release, backend);
  release->add_option("mutex", run.mutex, "Mutex name")->required();
  release->add_flag("--force", force, "Required: the lease of another process is deleted");
  release->add_flag("--yes,-y", yes, "Do not ask on a terminal");
  release->footer(
      "The next owner still gets a larger fencing token; the former holder finds out at its "
      "next renewal (simba lock then exits 75).");

  // Everything after the first "--" is the command, kept away from CLI11's own parsing.
  int own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own = i;
      run.command.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  try {
    app.parse(own, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --version
  } catch (const CLI::ParseError& e) {
    return fail(code::usage, std::string(e.what()) + " (see simba --help)");
  }
  if (!run.command.empty() && !*lock && !*leader && !*schedule) {
    return fail(code::usage, "only lock, leader and schedule take a command after --");
  }
  try {
    if (*lock) {
      if (lock->count("--permits") && permits < 1) {
        return fail(code::usage, "lock: --permits must be 1 or more, got " + std::to_string(permits));
      }
      if (shared && permits != 0) return fail(code::usage, "lock: --shared and --permits do not go together");
      return run_lock(backend, run, timeout, permits, shared);
    }
    if (*leader) return run_leader(backend, run, restart);
    if (*schedule) return run_schedule(backend, run, every);
    if (*watch) return run_watch(backend, run.mutex, json);
    if (*list) return run_list(backend, prefix, limit, json);
    if (*release) return run_release(backend, run.mutex, force, yes);
    if (*top) return run_top(backend, prefix, limit, interval);
    return run_status(backend, run.mutex, json);
  } catch (const std::system_error& e) {
    return exit_for(e);
  } catch (const std::exception& e) {
    return fail(code::internal, e.what());
  }
}

}  // namespace
}  // namespace simba::cli

int main(int argc, char** argv) {
  // Block the termination signals before any thread starts, so every thread inherits the mask
  // and the one signal thread of a subcommand alone receives them.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int rc = simba::cli::main_impl(argc, argv);
  std::cout.flush();
  std::_Exit(rc);  // the shared runtime's threads need no orderly teardown at exit
}
