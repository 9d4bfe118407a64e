// ZooKeeper paths of mutex names: encoding is a round trip (so two names never give one path),
// never yields '/' or a name ZooKeeper refuses ("." / ".."); decoding never accepts what we
// would not write. The input also goes, split at '\n', through the node-name parser and the
// lease judge, which must not crash on what another latch client may have created, and reads
// a node's data as the owner id and idle mark that wrote it.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/zookeeper/latch_names.h"
#include "backends/zookeeper/lease_judge.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace simba::zookeeper;
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string encoded = encode_component(name);
  if (encoded.find('/') != std::string::npos || encoded == "." || encoded == ".." || encoded.empty() != name.empty()) {
    __builtin_trap();
  }
  const auto decoded = decode_component(encoded);
  if (!decoded || *decoded != name) __builtin_trap();
  if (auto again = decode_component(name); again && encode_component(*again) != name) __builtin_trap();

  std::vector<std::string> children;
  for (std::size_t start = 0; start <= name.size();) {
    auto end = name.find('\n', start);
    children.push_back(name.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  const auto nodes = latch_nodes(children);
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    if (nodes[i - 1].sequence > nodes[i].sequence) __builtin_trap();  // sorted by sequence
  }
  for (const auto& node : nodes) {
    if (node.sequence < 0) __builtin_trap();
    const auto view = judge_leader(name, static_cast<std::int64_t>(size), node.lease, std::chrono::milliseconds(size),
                                   std::chrono::milliseconds(10'000));
    // The node's data is the owner id and the idle mark, and nothing is lost between them.
    const auto& owner = view.snapshot.owner;
    if (node_data(owner.owner_id, owner.idle) != name) __builtin_trap();
  }
  return 0;
}
