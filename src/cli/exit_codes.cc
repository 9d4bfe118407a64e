#include "cli/exit_codes.h"

#include <iostream>

#include "simba/error.h"

namespace simba::cli {
namespace {

struct ExitCode {
  int code;
  const char* meaning;
};
constexpr ExitCode kExitCodes[] = {
    {code::not_confirmed, "release: the lease was not released (not confirmed on the terminal)"},
    {code::usage, "bad usage or input (unknown option, bad duration, bad URI)"},
    {code::unavailable, "backend unreachable"},
    {code::internal, "an internal error (a bug in simba, or a backend record it cannot read)"},
    {code::lease_lost,
     "lock: the lease was lost while the command ran; it was sent SIGTERM (SIGKILL after --kill-after)"},
    {code::no_permission, "the backend refused the credentials (user, password, ACL)"},
    {code::no_engine, "this build lacks the URI's engine, or the server lacks what the engine needs"},
    {code::timeout, "lock: timed out waiting for the mutex"},
    {code::cannot_run, "the command is not executable"},
    {code::not_found, "the command was not found"},
};

}  // namespace

std::string exit_code_footer() {
  std::string text =
      "Exit codes. lock and leader: the command's own status (128 + N if killed by signal N);\n"
      "interrupted by signal N while waiting (lock, leader) or running (leader, schedule): 128 + N;\n"
      "watch: 0 when interrupted; status, list, release: 0 when done. Otherwise:\n";
  for (const auto& exit : kExitCodes) text += "  " + std::to_string(exit.code) + "  " + exit.meaning + "\n";
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

}  // namespace simba::cli
