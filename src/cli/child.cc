// Spawning and reaping the command run under a lock.
#include "cli/child.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "cli/exit_codes.h"

extern char** environ;

namespace simba::cli {

Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    bool overridden = false;
    for (const auto& extra : extra_env) {
      if (entry.compare(0, extra.find('=') + 1, extra, 0, extra.find('=') + 1) == 0) overridden = true;
    }
    if (!overridden) env_storage.push_back(std::move(entry));
  }
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp, args;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  Spawned result;
  result.error = posix_spawnp(&result.pid, args[0], nullptr, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (result.error != 0) result.pid = -1;
  return result;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::unique_ptr<RunningChild> RunningChild::start(const std::vector<std::string>& argv,
                                                  const std::vector<std::string>& extra_env, int& error) {
  Spawned spawned = spawn(argv, extra_env);
  error = spawned.error;
  if (spawned.pid < 0) return nullptr;
  return std::unique_ptr<RunningChild>(new RunningChild(spawned.pid));
}

RunningChild::RunningChild(pid_t pid) : pid_(pid) {
  reaper_ = std::thread([this] {
    const int status = wait_exit(pid_);
    {
      std::lock_guard lock(mutex_);
      exited_ = true;
      status_ = status;
    }
    changed_.notify_all();
  });
}

RunningChild::~RunningChild() {
  if (reaper_.joinable()) reaper_.join();
}

bool RunningChild::wait_exited_or(const std::function<bool()>& stop) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return exited_ || stop(); });
  return exited_;
}

void RunningChild::wake() {
  { std::lock_guard lock(mutex_); }  // a waiter between its check and its wait sees the change
  changed_.notify_all();
}

void RunningChild::signal(int sig) {
  std::lock_guard lock(mutex_);
  if (!exited_) kill(pid_, sig);  // not yet reaped: the pid is still ours
}

int RunningChild::terminate(std::chrono::milliseconds kill_after) {
  std::unique_lock lock(mutex_);
  if (!exited_) kill(pid_, SIGTERM);
  if (!changed_.wait_for(lock, kill_after, [&] { return exited_; })) {
    kill(pid_, SIGKILL);
    changed_.wait(lock, [&] { return exited_; });
  }
  return status_;
}

int RunningChild::status() {
  std::lock_guard lock(mutex_);
  return status_;
}

std::vector<std::string> command_env(const std::string& mutex, std::uint64_t token, const std::string& contender) {
  return {"SIMBA_MUTEX=" + mutex, "SIMBA_FENCING_TOKEN=" + std::to_string(token), "SIMBA_CONTENDER_ID=" + contender};
}

int spawn_failure(const std::string& command, int error) {
  return fail(error == ENOENT ? code::not_found : code::cannot_run,
              "cannot run '" + command + "': " + std::strerror(error));
}

}  // namespace simba::cli
