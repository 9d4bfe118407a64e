// simba/log.h: where simba's log lines go.
//
// By default simba writes its log lines to stderr, at or above the level $SIMBA_LOG names
// (debug, info, warn, error, off; default warn). An application can take them instead:
//
//   simba::set_log_sink([](simba::LogLevel level, std::string_view line) {
//     my_logger.log(to_my_level(level), "simba: {}", line);
//   });
#pragma once

#include <functional>
#include <string_view>

namespace simba {

enum class LogLevel { debug, info, warn, error };

// Receives each line (without a trailing newline). Called from simba's threads, one line at a
// time; it must return quickly and must not call into simba.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Sends every later line to `sink` instead of stderr (still filtered by $SIMBA_LOG); an empty
// sink restores stderr. Thread-safe.
void set_log_sink(LogSink sink);

}  // namespace simba
