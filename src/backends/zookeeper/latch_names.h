// Paths and node names of the ZooKeeper latch. Internal to the ZooKeeper backend.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace simba::zookeeper {

// The folder of every latch.
constexpr const char* kRoot = "/simba";

// The latch folder of `mutex`: "/simba/<encoded mutex>", except for a name with a '#' that
// something follows, "<primitive>#<rest>" (a record derived from <primitive>: a semaphore's slot
// or line, a shared mutex's reader; or any name so spelled), whose folder is
// "/simba/<encoded primitive>#derived/<encoded rest>": the records derived from a name are
// listed with their own folder (derived_root), not with every latch under /simba. The
// encoding keeps every byte ZooKeeper accepts in a path component and percent-encodes the rest
// ('/', '%', control characters, bytes of invalid UTF-8 or of characters ZooKeeper rejects,
// and the dots of "." and ".."), so it is injective; a child of /simba ending in "#derived"
// with no other '#' is never a latch folder (its name would have been nested).
std::string latch_path(std::string_view mutex);
// The folder holding the latch folders of the names "<primitive>#<rest>", `primitive` being
// the part of `name` before its first '#' (all of it if none).
std::string derived_root(std::string_view name);
// The folder holding `path` ("/simba" for a mutex's latch folder, its derived root for a
// derived record's).
std::string parent_path(std::string_view path);
// The primitive whose derived_root is the child `component` of /simba, or nullopt if it is none.
std::optional<std::string> primitive_of_derived_root(std::string_view component);
// The records derived from `name` (derived_from) among `children` of derived_root(name), sorted.
std::vector<std::string> derived_among(std::string_view name, const std::vector<std::string>& children);
std::string encode_component(std::string_view name);
// The mutex name of an encoded component; nullopt if `component` is no encoding (a stray '%').
std::optional<std::string> decode_component(std::string_view component);
// The last token a free latch's folder keeps (its data); 0 for none or another client's data.
std::uint64_t parse_token(const std::string& text);
// Whether mutex `candidate` is a record derived from mutex `name`: "<name>#<suffix>", one '#'
// after <name> (not a record derived from one of its records).
bool derived_from(std::string_view name, std::string_view candidate);

struct Lease {
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds transition{0};
  std::chrono::milliseconds total() const { return ttl + transition; }
};

// The lease asked for, shrunk (keeping the ttl : transition ratio) to fit in `cap`.
Lease capped_lease(std::chrono::milliseconds ttl, std::chrono::milliseconds transition, std::chrono::milliseconds cap);

// The name prefix of a node (ZooKeeper appends a 10-digit sequence number):
// "_c_<guid>-<ttl ms>.<transition ms>-latch-". The guid finds our node again when the answer
// to its create was lost; the lease tells other contenders when an unrenewed owner expired.
std::string node_prefix(const std::string& guid, const Lease& lease);
// 32 random hex digits.
std::string new_guid();
// A guid as 16 bytes, and back: nullopt for text that is not 32 lowercase hex digits.
using GuidBytes = std::array<std::uint8_t, 16>;
std::optional<GuidBytes> guid_bytes(std::string_view guid);
std::string guid_text(const GuidBytes& bytes);
// The name ZooKeeper gives our node: node_prefix() and the sequence number in 10 digits.
std::string node_name(const std::string& guid, const Lease& lease, std::int32_t sequence);

// A child of a latch: ours ("_c_<guid>-<ttl>.<transition>-latch-N") or another latch
// client's ("...latch-N", no lease).
struct LatchNode {
  std::string name;
  std::int64_t sequence = 0;
  std::optional<Lease> lease;
};

// The data of our node: the owner's id, followed by "\0idle" while the owner marks its lease
// idle (Backend::mark_idle; ids hold no NUL). Another latch client's node holds what it holds.
struct NodeData {
  std::string owner_id;
  bool idle = false;
};
std::string node_data(const std::string& owner_id, bool idle);
NodeData parse_node_data(const std::string& data);

// The sequence number ZooKeeper gave the node at `path`, or -1.
std::int64_t sequence_of(std::string_view path);

// Parses the latch nodes among `children`, ordered by sequence (lowest, the owner, first);
// children that are not latch nodes are left out.
std::vector<LatchNode> latch_nodes(const std::vector<std::string>& children);

}  // namespace simba::zookeeper
