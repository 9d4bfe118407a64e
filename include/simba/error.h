// simba/error.h: the one error vocabulary of simba.
//
// Every failure simba reports is a simba::Error (a std::system_error) whose code() is a
// simba::errc in simba's error category. Each code says what the caller should do next.
// Standard codes are used where the standard already names the situation, e.g.
// std::errc::resource_deadlock_would_occur for a second acquire on one Locker.
#pragma once

#include <string>
#include <system_error>

namespace simba {

enum class errc {
  invalid_argument = 1,  // Bad input (blank name, bad URI, bad duration): fix the call.
  failed_precondition,   // Wrong state (start() while running...): fix the state first.
  unavailable,           // Backend unreachable or transiently failing: retry the call.
  timeout,               // A wait ran out before the mutex was acquired.
  unsupported,           // This build or this backend lacks the feature.
  permission_denied,     // The backend refused our credentials.
  internal,              // A bug in simba or a corrupt backend record.
};

const std::error_category& error_category() noexcept;
std::error_code make_error_code(errc code) noexcept;

// The exception simba throws. what() is one line that names the problem.
class Error : public std::system_error {
 public:
  Error(errc code, const std::string& what) : Error(make_error_code(code), what) {}
  Error(std::error_code code, const std::string& what) : std::system_error(code, what), what_(what) {}
  // The message alone, without the category's text appended.
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace simba

template <>
struct std::is_error_code_enum<simba::errc> : std::true_type {};
