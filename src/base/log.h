// simba's log lines (on spdlog's default logger, name "simba"). Internal to simba.
#pragma once

#include <string>

namespace simba::internal {

bool log_debug_enabled();
void log_debug(const std::string& message);
void log_info(const std::string& message);
void log_warn(const std::string& message);
void log_error(const std::string& message);

}  // namespace simba::internal
