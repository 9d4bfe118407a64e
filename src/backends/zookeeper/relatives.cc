// What an owner hears of its relatives with its grant: reads sent behind the grant's write.
#include "backends/zookeeper/relatives.h"

#include <algorithm>

#include "backends/zookeeper/latch_names.h"

namespace simba::zookeeper {

std::optional<Relatives::Look> Relatives::send(const std::string& mutex) {
  Look look;
  const auto hash = mutex.rfind('#');
  if (hash != std::string::npos) {
    const std::string gate = mutex.substr(0, hash);
    look.folders.emplace_back(gate, session_.get(latch_path(gate)));
    return look;
  }
  std::vector<std::string> known;
  {
    internal::MutexLock lock(mutex_);
    auto it = derived_.find(mutex);
    if (it == derived_.end()) return std::nullopt;
    known = it->second;
  }
  look.primitive = mutex;
  look.root = session_.children(derived_root(mutex));
  for (auto& name : known) {
    Call read = session_.get(latch_path(name));
    look.folders.emplace_back(std::move(name), std::move(read));
  }
  return look;
}

void Relatives::answer(Look& look, OwnerSnapshot& owner) {
  if (look.primitive.empty()) {
    Reply gate = look.folders.front().second.wait();
    if (gate.rc == ZNONODE) {
      owner.parent = OwnerSnapshot::Parent{false, 0};  // never made, or swept: free, as read() says
    } else if (gate.rc == ZOK && gate.stat.numChildren == 0) {
      owner.parent = OwnerSnapshot::Parent{false, parse_token(gate.value)};
    }
    return;
  }
  bool none_held = true;
  std::vector<std::string> read_now;  // sorted, as send() took them
  for (auto& [name, read] : look.folders) {
    Reply folder = read.wait();
    read_now.push_back(name);
    if (folder.rc == ZNONODE) continue;  // swept: nothing held
    if (folder.rc != ZOK || folder.stat.numChildren != 0) none_held = false;
  }
  Reply root = look.root->wait();
  if (root.rc != ZOK && root.rc != ZNONODE) return;  // none: no derived record has a folder
  auto names = derived_among(look.primitive, root.children);
  // A record made since the last listing was not read: unknown this time.
  for (const auto& name : names) {
    if (!std::binary_search(read_now.begin(), read_now.end(), name)) none_held = false;
  }
  saw_derived(look.primitive, std::move(names));
  owner.no_derived_held = none_held;
}

void Relatives::saw_derived(const std::string& primitive, std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  internal::MutexLock lock(mutex_);
  derived_[primitive] = std::move(names);
}

}  // namespace simba::zookeeper
