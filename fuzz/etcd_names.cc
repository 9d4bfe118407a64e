// etcd keys of mutex names: encoding is a round trip (two names never share a key), never
// yields '/', keeps prefixes (what list() relies on), and decoding never accepts what we would
// not write. The input is also read as a contender key's value (the owner id and idle mark
// that wrote it come back whole) and as a record, which must not crash whatever another
// client stored.
#include <cstdint>
#include <string>

#include "backends/etcd/names.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace simba::etcd;
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string encoded = encode_name(name);
  if (encoded.find('/') != std::string::npos || encoded.empty() != name.empty()) __builtin_trap();
  const auto decoded = decode_name(encoded);
  if (!decoded || *decoded != name) __builtin_trap();
  if (auto again = decode_name(name); again && encode_name(*again) != name) __builtin_trap();
  const std::string half = name.substr(0, size / 2);
  if (encoded.rfind(encode_name(half), 0) != 0) __builtin_trap();  // a prefix's encoding is a prefix

  const MutexKeys keys = mutex_keys("simba", name);
  if (!(keys.contended < keys.end) || keys.record + "/" != keys.contended) __builtin_trap();
  if (keys.contender(static_cast<std::int64_t>(size)).rfind(keys.contended, 0) != 0) __builtin_trap();

  const auto owner = parse_contender(name, 1);
  if (!name.empty() && contender_value(owner.owner_id, owner.idle) != name) __builtin_trap();
  (void)parse_record(name);
  return 0;
}
