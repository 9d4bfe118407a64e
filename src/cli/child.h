// Running the command of `simba lock`: spawn with extra environment, wait, terminate.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace simba::cli {

struct Spawned {
  pid_t pid = -1;
  int error = 0;  // errno of a failed spawn (ENOENT: not found, EACCES: not executable)
};

// Spawns argv[0] (searched in PATH) with the parent's environment plus `extra_env`
// ("NAME=value"), default signal dispositions and an empty signal mask.
Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);

// Blocks until `pid` exits; returns its exit status the way a shell reports it (128 + signal
// for a signal).
int wait_exit(pid_t pid);

}  // namespace simba::cli
