// The exit codes of every `simba` subcommand: one table, printed by --help, repeated by the
// docs/cli.md and the man page (tests/cli_exit_codes_test.sh checks them against each other).
#pragma once

#include <string>
#include <system_error>

namespace simba::cli {

// After sysexits(3) and timeout(1).
namespace code {
constexpr int not_confirmed = 1;   // release: the operator did not confirm
constexpr int usage = 64;          // bad usage or input
constexpr int unavailable = 69;    // backend unreachable
constexpr int internal = 70;       // a bug
constexpr int lease_lost = 75;     // lease lost while the command ran; it was terminated
constexpr int no_permission = 77;  // the backend refused the credentials
constexpr int no_engine = 78;      // this build of simba lacks the backend's engine
constexpr int timeout = 124;       // waiting for the mutex timed out
constexpr int cannot_run = 126;    // command found but not executable
constexpr int not_found = 127;     // command not found
}  // namespace code

// The table, for --help's footer.
std::string exit_code_footer();

// Prints "simba: <message>" on stderr; returns exit_code.
int fail(int exit_code, const std::string& message);

// The exit code (and message) of a simba::Error.
int exit_for(const std::system_error& e);

}  // namespace simba::cli
