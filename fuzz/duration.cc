// Durations ("500ms", "1.5s", "2m", "1h"): any text parses or fails with invalid_argument; a
// parsed one is never negative, and what format_duration writes parses back to the same value.
#include <cstdint>
#include <string>

#include "simba/duration.h"
#include "simba/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::chrono::milliseconds parsed;
  try {
    parsed = simba::parse_duration(text);
  } catch (const simba::Error& e) {
    if (e.code() != simba::errc::invalid_argument) __builtin_trap();
    return 0;
  }
  if (parsed.count() < 0) __builtin_trap();
  const std::string written = simba::format_duration(parsed);
  if (simba::parse_duration(written) != parsed) __builtin_trap();
  return 0;
}
