// simba/duration.h: durations written the way people write them: "500ms", "10s", "2m", "1h".
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace simba {

// Parses a non-negative duration: a number (decimals allowed) followed by one of the units
// ms, s, m, h. Throws Error(errc::invalid_argument) naming the text and the accepted form.
std::chrono::milliseconds parse_duration(std::string_view text);

// The shortest exact spelling: 1500ms -> "1500ms", 10000ms -> "10s", 120000ms -> "2m".
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace simba
