// Running the command of `simba lock`, `leader` and `schedule`: spawn with extra environment,
// wait, pass signals on, terminate.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "base/thread_annotations.h"

namespace simba::cli {

struct Spawned {
  pid_t pid = -1;
  int error = 0;  // errno of a failed spawn (ENOENT: not found, EACCES: not executable)
};

// Spawns argv[0] (searched in PATH) with the parent's environment plus `extra_env`
// ("NAME=value"), default signal dispositions and an empty signal mask. The child is killed
// (SIGKILL) if simba dies, or if the thread that spawned it ends: spawn from a thread that
// outlives the command.
Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);

// Blocks until `pid` exits; returns its exit status the way a shell reports it (128 + signal
// for a signal).
int wait_exit(pid_t pid);

// A command running under simba: a thread reaps it; waits can also end on another condition
// (a lost lease, a signal to simba), which the code that changes it announces with wake().
class RunningChild {
 public:
  // Spawns the command; on failure returns null and sets `error` (errno of the spawn).
  static std::unique_ptr<RunningChild> start(const std::vector<std::string>& argv,
                                             const std::vector<std::string>& extra_env, int& error);
  ~RunningChild();  // waits for the reaper (the child has exited by then or is killed)

  pid_t pid() const { return pid_; }
  // Blocks until the child exited or `stop()` holds (evaluated under the child's lock, after
  // each wake()); returns whether it exited.
  bool wait_exited_or(const std::function<bool()>& stop);
  void wake();
  void signal(int sig);
  // SIGTERM, then SIGKILL after `kill_after` if it still runs; waits; returns its status.
  int terminate(std::chrono::milliseconds kill_after);
  // Its exit status (as a shell reports it); only after it exited.
  int status();

 private:
  explicit RunningChild(pid_t pid);
  const pid_t pid_;
  internal::AnnotatedMutex mutex_;
  std::condition_variable changed_;
  bool exited_ GUARDED_BY(mutex_) = false;
  int status_ GUARDED_BY(mutex_) = 0;
  std::thread reaper_;
};

// SIMBA_MUTEX, SIMBA_FENCING_TOKEN and SIMBA_CONTENDER_ID for the command.
std::vector<std::string> command_env(const std::string& mutex, std::uint64_t token, const std::string& contender);

// "cannot run 'x': ..." with exit code 127 (not found) or 126.
int spawn_failure(const std::string& command, int error);

}  // namespace simba::cli
