// simba: the command-line tool. `simba lock` is a distributed flock(1); `simba status` shows
// who owns a mutex.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/child.h"
#include "simba/simba.h"

namespace simba::cli {
namespace {

// Exit codes, after sysexits(3) and timeout(1). kExitCodes is the table --help prints (and the
// README repeats; tests/cli_exit_codes_test.sh checks both against this one).
namespace code {
constexpr int usage = 64;         // bad usage or input
constexpr int unavailable = 69;   // backend unreachable
constexpr int internal = 70;      // a bug
constexpr int lease_lost = 75;    // lease lost while the command ran; it was terminated
constexpr int no_permission = 77; // the backend refused the credentials
constexpr int no_engine = 78;     // this build of simba lacks the backend's engine
constexpr int timeout = 124;      // waiting for the mutex timed out
constexpr int cannot_run = 126;   // command found but not executable
constexpr int not_found = 127;    // command not found
}  // namespace code

struct ExitCode {
  int code;
  const char* meaning;
};
constexpr ExitCode kExitCodes[] = {
    {code::usage, "bad usage or input (unknown option, bad duration, bad URI)"},
    {code::unavailable, "backend unreachable"},
    {code::internal, "an internal error (a bug in simba, or a backend record it cannot read)"},
    {code::lease_lost, "the lease was lost while the command ran; it was sent SIGTERM (SIGKILL after --kill-after)"},
    {code::no_permission, "the backend refused the credentials (user, password, ACL)"},
    {code::no_engine, "this build lacks the URI's engine, or the server lacks what the engine needs"},
    {code::timeout, "timed out waiting for the mutex"},
    {code::cannot_run, "the command is not executable"},
    {code::not_found, "the command was not found"},
};

std::string exit_code_footer() {
  std::string text = "Exit codes of lock: the command's own status (128 + N if killed by signal N), or\n";
  for (const auto& exit : kExitCodes) text += "  " + std::to_string(exit.code) + "  " + exit.meaning + "\n";
  text += "status exits 0 or one of 64, 69, 70, 77, 78.";
  return text;
}

int fail(int exit_code, const std::string& message) {
  std::cerr << "simba: " << message << "\n";
  return exit_code;
}

int exit_for(const std::system_error& e) {
  if (e.code() == errc::invalid_argument) return fail(code::usage, e.what());
  if (e.code() == errc::unsupported) return fail(code::no_engine, e.what());
  if (e.code() == errc::unavailable) return fail(code::unavailable, e.what());
  if (e.code() == errc::permission_denied) return fail(code::no_permission, e.what());
  if (e.code() == errc::timeout) return fail(code::timeout, e.what());
  return fail(code::internal, e.what());
}

std::string iso_time(EpochMillis ms) {
  if (ms <= 0) return "-";
  std::time_t seconds = ms / 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buffer, static_cast<int>(ms % 1000));
  return out;
}

struct Common {
  std::string backend;
  std::string ttl, transition;

  Client connect_client() const {
    std::string uri = backend.empty() ? default_backend_uri() : backend;
    ContendOptions options;
    auto opened = open_backend(uri, &options);
    if (!ttl.empty()) options.ttl = parse_duration(ttl);
    if (!transition.empty()) options.transition = parse_duration(transition);
    return Client(opened, options);
  }
};

void add_common(CLI::App& command, Common& common) {
  command.add_option("--backend", common.backend,
                     "Backend URI (default: $SIMBA_BACKEND, else a SQLite file in the state folder)");
  command.add_option("--ttl", common.ttl, "Lease length, e.g. 10s (default: the URI's, else 10s)");
  command.add_option("--transition", common.transition, "Owner-only grace after the ttl (default 6s)");
}

// Shared between the main thread, the signal thread and the lease callback.
struct LockSession {
  std::mutex mutex;
  std::condition_variable changed;
  pid_t child = -1;
  bool child_done = false;
  int child_status = 0;
  bool lost = false;
};

int run_lock(const Common& common, const std::string& mutex, const std::string& timeout_text,
             const std::string& kill_after_text, const std::vector<std::string>& command) {
  if (command.empty()) return fail(code::usage, "lock: no command given (simba lock MUTEX -- COMMAND...)");
  std::optional<std::chrono::milliseconds> timeout;
  if (!timeout_text.empty()) timeout = parse_duration(timeout_text);
  auto kill_after = parse_duration(kill_after_text);
  Client client = common.connect_client();
  auto holder = client.owner(mutex);  // fails fast if the backend is unreachable

  Locker locker(mutex, client);
  LockSession session;

  // SIGINT/SIGTERM/SIGHUP are blocked in every thread; this one handles them. While waiting:
  // give back anything won and exit. While the command runs: pass the signal on to it.
  std::thread([&session, &client, &locker] {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      std::lock_guard lock(session.mutex);
      if (session.child > 0) {
        kill(session.child, sig);
        continue;
      }
      try {
        client.release(locker.mutex(), locker.contender_id());
      } catch (const std::exception& e) {
        std::cerr << "simba: " << e.what() << "\n";
      }
      std::_Exit(128 + sig);
    }
  }).detach();

  bool won = false;
  if (isatty(STDERR_FILENO)) {
    won = locker.try_lock();
    if (!won) {
      holder = client.owner(mutex);
      std::cerr << "simba: waiting for mutex '" << mutex << "'"
                << (holder.empty() ? "" : " (held by " + holder.owner_id + ")") << "...\n";
    }
  }
  if (!won) {
    if (timeout) {
      locker.acquire(*timeout);  // throws errc::timeout
    } else {
      locker.acquire();
    }
  }

  std::stop_callback on_lost(locker.lease_token(), [&session] {
    {
      std::lock_guard lock(session.mutex);
      session.lost = true;
    }
    session.changed.notify_all();
  });

  std::thread reaper;
  {
    std::lock_guard lock(session.mutex);
    if (session.lost) return fail(code::lease_lost, "lost the lease on mutex '" + mutex + "' before the command started");
    auto spawned = spawn(command, {"SIMBA_MUTEX=" + mutex,
                                   "SIMBA_FENCING_TOKEN=" + std::to_string(locker.fencing_token()),
                                   "SIMBA_CONTENDER_ID=" + locker.contender_id()});
    if (spawned.pid < 0) {
      int exit_code = spawned.error == ENOENT ? code::not_found : code::cannot_run;
      return fail(exit_code, "cannot run '" + command[0] + "': " + std::strerror(spawned.error));
    }
    session.child = spawned.pid;
    reaper = std::thread([&session, pid = spawned.pid] {
      int status = wait_exit(pid);
      {
        std::lock_guard lock(session.mutex);
        session.child_done = true;
        session.child_status = status;
      }
      session.changed.notify_all();
    });
  }

  std::unique_lock lock(session.mutex);
  session.changed.wait(lock, [&] { return session.child_done || session.lost; });
  if (!session.child_done) {
    std::cerr << "simba: lost the lease on mutex '" << mutex << "' while the command ran; terminating it\n";
    kill(session.child, SIGTERM);
    if (!session.changed.wait_for(lock, kill_after, [&] { return session.child_done; })) {
      kill(session.child, SIGKILL);
      session.changed.wait(lock, [&] { return session.child_done; });
    }
    lock.unlock();
    reaper.join();
    return code::lease_lost;
  }
  int status = session.child_status;
  lock.unlock();
  reaper.join();
  locker.unlock();
  return status;
}

int run_status(const Common& common, const std::string& mutex, bool json) {
  Client client = common.connect_client();
  auto snapshot = client.snapshot(mutex);
  const auto& owner = snapshot.owner;
  if (json) {
    nlohmann::json out = {
        {"mutex", mutex},
        {"owner", owner.empty() ? nlohmann::json(nullptr) : nlohmann::json(owner.owner_id)},
        {"fencing_token", owner.fencing_token},
        {"acquired_at", owner.acquired_at},
        {"ttl_at", owner.ttl_at},
        {"transition_at", owner.transition_at},
        {"now", snapshot.now},
        {"backend", client.describe()},
    };
    std::cout << out.dump() << "\n";
    return 0;
  }
  auto in = [&](EpochMillis at) {
    return at <= 0 ? std::string() : "  (in " + format_duration(std::chrono::milliseconds(at - snapshot.now)) + ")";
  };
  std::cout << "mutex:          " << mutex << "\n"
            << "owner:          " << (owner.empty() ? "(none)" : owner.owner_id) << "\n"
            << "fencing token:  " << owner.fencing_token << "\n"
            << "acquired at:    " << iso_time(owner.acquired_at) << "\n"
            << "ttl at:         " << iso_time(owner.ttl_at) << in(owner.ttl_at) << "\n"
            << "transition at:  " << iso_time(owner.transition_at) << in(owner.transition_at) << "\n"
            << "backend:        " << client.describe() << "\n";
  return 0;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"simba: distributed mutual exclusion and leader election"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("simba ") + kVersion);
  app.footer(exit_code_footer());

  Common common;
  std::string mutex, timeout, kill_after = "10s";
  std::vector<std::string> command;
  bool json = false;

  auto* lock = app.add_subcommand("lock", "Run a command while holding a mutex (a distributed flock)");
  add_common(*lock, common);
  lock->add_option("--timeout,-w", timeout, "Give up waiting after this long, e.g. 30s (0s: one attempt)");
  lock->add_option("--kill-after", kill_after, "After a lost lease, SIGKILL the command this long after SIGTERM (default 10s)");
  lock->add_option("mutex", mutex, "Mutex name")->required();
  lock->footer("Everything after -- is the command, passed on untouched.");

  auto* status = app.add_subcommand("status", "Show the owner, fencing token and lease times of a mutex");
  add_common(*status, common);
  status->add_option("mutex", mutex, "Mutex name")->required();
  status->add_flag("--json", json, "One JSON object");

  // Everything after the first "--" is the command, kept away from CLI11's own parsing.
  int own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own = i;
      command.assign(argv + i + 1, argv + argc);
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
  try {
    if (*lock) return run_lock(common, mutex, timeout, kill_after, command);
    return run_status(common, mutex, json);
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
  // and the lock command's signal thread alone receives them.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int rc = simba::cli::main_impl(argc, argv);
  std::cout.flush();
  std::_Exit(rc);  // the shared runtime's threads need no orderly teardown at exit
}
