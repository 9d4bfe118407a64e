// Backend URIs: any text parses or fails with errc::invalid_argument; a parsed URI never shows
// its password in redacted(), has a port in range, and holds no control character.
#include <cstdint>
#include <string>

#include "core/uri.h"
#include "simba/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  simba::internal::Uri uri;
  try {
    uri = simba::internal::parse_uri(text);
  } catch (const simba::Error& e) {
    if (e.code() != simba::errc::invalid_argument) __builtin_trap();
    return 0;
  }
  // redacted() does not depend on the password at all: nothing of it can show.
  simba::internal::Uri other = uri;
  other.password = uri.password == "x" ? "y" : "x";
  if (other.redacted() != uri.redacted()) __builtin_trap();
  if (uri.port < 0 || uri.port > 65535) __builtin_trap();
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();  // refused with a message instead
  }
  return 0;
}
