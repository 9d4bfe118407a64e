// Spawning and reaping the command run under a lock.
#include "cli/child.h"
#include "base/thread_annotations.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/exit_codes.h"

extern char** environ;

namespace simba::cli {

namespace {

// The file execve() runs for argv[0]: as given if it has a '/', else the first match in PATH
// that exists (what execvp does; EACCES if only non-executable matches exist).
std::string resolve(const std::string& name, int& error) {
  error = 0;
  if (name.empty()) {
    error = ENOENT;
    return name;
  }
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  int found_error = ENOENT;
  for (std::size_t start = 0; start <= dirs.size();) {
    auto colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (access(candidate.c_str(), F_OK) == 0) found_error = EACCES;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  error = found_error;
  return name;
}

}  // namespace

// fork + execve rather than posix_spawn, for one thing posix_spawn cannot do: the child asks
// the kernel for SIGKILL when simba dies (PR_SET_PDEATHSIG), so a command never outlives a
// killed simba and runs on beside the next owner's. The child between fork and execve makes
// only async-signal-safe calls; an execve failure comes back through a close-on-exec pipe.
Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  Spawned result;
  const std::string file = resolve(argv.empty() ? std::string() : argv[0], result.error);
  if (result.error != 0) return result;
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

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    result.error = errno;
    return result;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // simba died before the request took effect
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    execve(file.c_str(), args.data(), envp.data());
    const int error = errno;
    ssize_t ignored = write(report[1], &error, sizeof error);
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  if (pid < 0) {
    result.error = errno;
    close(report[0]);
    return result;
  }
  int error = 0;
  ssize_t got;
  while ((got = read(report[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof error)) {  // execve failed: reap the child
    waitpid(pid, nullptr, 0);
    result.error = error;
    return result;
  }
  result.pid = pid;
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
      internal::MutexLock lock(mutex_);
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
  internal::UniqueMutexLock lock(mutex_);
  changed_.wait(lock.native(), [&]() REQUIRES(mutex_) { return exited_ || stop(); });
  return exited_;
}

void RunningChild::wake() {
  { internal::MutexLock lock(mutex_); }  // a waiter between its check and its wait sees the change
  changed_.notify_all();
}

void RunningChild::signal(int sig) {
  internal::MutexLock lock(mutex_);
  if (!exited_) kill(pid_, sig);  // not yet reaped: the pid is still ours
}

int RunningChild::terminate(std::chrono::milliseconds kill_after) {
  internal::UniqueMutexLock lock(mutex_);
  if (!exited_) kill(pid_, SIGTERM);
  if (!changed_.wait_for(lock.native(), kill_after, [&]() REQUIRES(mutex_) { return exited_; })) {
    kill(pid_, SIGKILL);
    changed_.wait(lock.native(), [&]() REQUIRES(mutex_) { return exited_; });
  }
  return status_;
}

int RunningChild::status() {
  internal::MutexLock lock(mutex_);
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
