// Parsing and printing durations like "500ms", "10s", "2m", "1h".
#include "simba/duration.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "simba/error.h"

namespace simba {

std::chrono::milliseconds parse_duration(std::string_view text) {
  auto bad = [&](const char* why) {
    return Error(errc::invalid_argument, "invalid duration '" + std::string(text) + "': " + why +
                                             " (write a number and a unit: 500ms, 10s, 2m, 1h)");
  };
  if (!text.empty() && text.front() == '-') throw bad("negative");
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string number(text.substr(0, i));
  std::string_view unit = text.substr(i);
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1) {
    throw bad("no number");
  }
  double scale;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else if (unit.empty())
    throw bad("no unit");
  else
    throw bad("unknown unit");
  double millis = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(millis) || millis > 9.0e15) throw bad("too large");
  if (millis != std::floor(millis)) throw bad("finer than a millisecond");
  return std::chrono::milliseconds(static_cast<std::int64_t>(millis));
}

std::string format_duration(std::chrono::milliseconds duration) {
  auto ms = duration.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace simba
