// simba's log lines (on spdlog's default logger, name "simba"). Internal to simba.
#pragma once

#include <string>

namespace simba::internal {

bool log_debug_enabled();
void log_debug(const std::string& message);
void log_info(const std::string& message);
void log_warn(const std::string& message);
void log_error(const std::string& message);

// Warns once per host about `topic` (a marker file under $XDG_STATE_HOME/simba/warned/, else
// ~/.local/state/simba/warned/, remembers it across processes); later calls, in any process,
// log the message at info. Warns every time if no marker can be written.
void log_warn_once_per_host(const std::string& topic, const std::string& message);

}  // namespace simba::internal
