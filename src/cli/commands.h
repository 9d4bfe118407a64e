// The subcommands of `simba`, each in its own file; main.cc parses and dispatches.
#pragma once

#include <string>
#include <vector>

#include "cli/connection.h"

namespace simba::cli {

// What lock, leader and schedule share: the mutex, the command, how long a terminated command
// gets before SIGKILL, the operator's HTTP endpoint.
struct CommandRun {
  std::string mutex;
  std::vector<std::string> command;
  std::string kill_after = "10s";
  std::string http;  // --http ADDR:PORT: serve /metrics, /healthz and /leader (http_endpoint.h)
};

// permits: 0 for the mutex run.mutex, else one permit of the semaphore run.mutex of that many.
// shared: a read lock of the shared mutex run.mutex (the mutex itself writes: it waits for the
// readers inside before the command runs).
int run_lock(const BackendChoice& backend, const CommandRun& run, const std::string& timeout, int permits, bool shared);

// restart: "no", "on-failure" or "always".
int run_leader(const BackendChoice& backend, const CommandRun& run, const std::string& restart);

struct Every {
  std::string period;
  bool fixed_rate = false;
  std::string initial_delay = "0s";
};
int run_schedule(const BackendChoice& backend, const CommandRun& run, const Every& every);

int run_status(const BackendChoice& backend, const std::string& mutex, bool json);
int run_watch(const BackendChoice& backend, const std::string& mutex, bool json);
int run_list(const BackendChoice& backend, const std::string& prefix, std::size_t limit, bool json);
// `simba top`: a live view of the mutexes under `prefix` (top.cc).
int run_top(const BackendChoice& backend, const std::string& prefix, std::size_t limit, const std::string& interval);
int run_release(const BackendChoice& backend, const std::string& mutex, bool force, bool yes);

}  // namespace simba::cli
