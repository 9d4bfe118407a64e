// Keys and values of the etcd backend (see simba/etcd_backend.h). Pure functions. Internal to
// the etcd backend.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace simba::etcd {

// A mutex name as one key component: '/', '%', space and control bytes percent-encoded ("%2F").
// Injective, keeps the name's byte order of prefixes (a name's encoding starts with the
// encoding of each of its prefixes), and never contains '/'.
std::string encode_name(std::string_view name);
// The name of an encoded component; nullopt if it is no encoding (a stray or bad '%').
std::optional<std::string> decode_name(std::string_view component);

// The keys of one mutex under a prefix ("simba").
struct MutexKeys {
  std::string record;     // "<prefix>/<encoded name>": simba's record of the mutex
  std::string contended;  // "<prefix>/<encoded name>/": where the contender keys are
  std::string end;        // the end of that range (exclusive)
  // "<prefix>/<encoded name>/<lease id in hex>", as Go's concurrency package names it.
  std::string contender(std::int64_t lease) const;
};
MutexKeys mutex_keys(std::string_view prefix, std::string_view name);

// The first key after every key that starts with `prefix` (etcd's "range_end" of a prefix).
std::string prefix_end(std::string_view prefix);

// "%x" of a lease id, as Go's fmt prints it.
std::string lease_hex(std::int64_t lease);

// A contender key's value: the contender id, and "\0idle" while its lease is marked idle.
// Another client's value (a Go election's proposal, etcdctl lock's empty one) is what it is.
struct KeyValue {
  std::string owner_id;
  bool idle = false;
};
std::string contender_value(const std::string& id, bool idle);
// The owner a contender key stands for; an empty value reads as "lease:<lease id in hex>".
KeyValue parse_contender(std::string_view value, std::int64_t lease);

// simba's record of a free mutex: "<last token> <epoch ms of the release>".
struct Record {
  std::uint64_t token = 0;
  std::int64_t released_at = 0;
};
std::string record_value(const Record& record);
Record parse_record(std::string_view value);

}  // namespace simba::etcd
