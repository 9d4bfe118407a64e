// What an owner hears of its relatives with its grant: reads sent behind the grant's write, or
// none while the watches of the last ones have not fired.
#include "backends/zookeeper/relatives.h"

#include <algorithm>

#include "backends/zookeeper/latch_names.h"

namespace simba::zookeeper {

std::optional<Relatives::Look> Relatives::send(const std::string& mutex) {
  Look look;
  const auto hash = mutex.rfind('#');
  if (hash != std::string::npos) {
    look.gate = mutex.substr(0, hash);
    {
      internal::MutexLock lock(mutex_);
      Known& known = derived_[look.gate];
      look.epoch = known.epoch;
      look.trusted = known.absent;
    }
    if (!look.trusted) look.folders.emplace_back(look.gate, session_.get(latch_path(look.gate)));
    return look;
  }
  std::vector<std::string> names;
  {
    internal::MutexLock lock(mutex_);
    auto it = derived_.find(mutex);
    if (it == derived_.end() || !it->second.listed) return std::nullopt;
    look.primitive = mutex;
    look.epoch = it->second.epoch;
    if (it->second.trusted) {
      look.trusted = true;
      return look;
    }
    names = it->second.names;
    watched_[derived_root(mutex)] = mutex;
    for (const auto& name : names) watched_[latch_path(name)] = mutex;
  }
  look.root = session_.watch_children(derived_root(mutex));
  for (auto& name : names) {
    Call read = session_.watch_children(latch_path(name));
    look.folders.emplace_back(std::move(name), std::move(read));
  }
  return look;
}

void Relatives::answer(Look& look, OwnerSnapshot& owner) {
  if (!look.gate.empty()) {
    if (look.trusted) {  // still no folder: the watch for its making has not fired
      internal::MutexLock lock(mutex_);
      if (quiet_locked(look.gate, look.epoch)) owner.parent = OwnerSnapshot::Parent{false, 0};
      return;
    }
    Reply gate = look.folders.front().second.wait();
    if (gate.rc == ZNONODE) {
      owner.parent = OwnerSnapshot::Parent{false, 0};  // never made, or swept: free, as read() says
      watch_absent(look.gate, look.epoch);
    } else if (gate.rc == ZOK && gate.stat.numChildren == 0) {
      owner.parent = OwnerSnapshot::Parent{false, parse_token(gate.value)};
    }
    return;
  }
  if (look.trusted) {
    internal::MutexLock lock(mutex_);
    if (quiet_locked(look.primitive, look.epoch)) owner.no_derived_held = true;
    return;
  }
  bool none_held = true;
  bool all_watched = true;            // every read left its watch (a node that is gone leaves none)
  std::vector<std::string> read_now;  // sorted, as send() took them
  for (auto& [name, read] : look.folders) {
    Reply folder = read.wait();
    read_now.push_back(name);
    if (folder.rc != ZOK) all_watched = false;
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
  const bool trust = none_held && all_watched && root.rc == ZOK && names == read_now;
  owner.no_derived_held = none_held;
  internal::MutexLock lock(mutex_);
  derived_[look.primitive].names = std::move(names);
  // An event since send() (of these watches or of older ones) leaves it untrusted.
  if (Known* known = trust ? quiet_locked(look.primitive, look.epoch) : nullptr) known->trusted = true;
}

void Relatives::watch_absent(const std::string& gate, std::uint64_t epoch) {
  const std::string path = latch_path(gate);
  {
    internal::MutexLock lock(mutex_);
    watched_[path] = gate;
  }
  // Not waited for: its answer, on the completion thread, starts the trust if the folder is
  // still missing and nothing touched the gate since the look.
  session_.watch_exists(path, [this, gate, epoch](const Reply& reply) {
    if (reply.rc != ZNONODE) return;
    internal::MutexLock lock(mutex_);
    if (Known* known = quiet_locked(gate, epoch)) known->absent = true;
  });
}

void Relatives::saw_derived(const std::string& primitive, std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  internal::MutexLock lock(mutex_);
  Known& known = derived_[primitive];
  known.listed = true;
  known.names = std::move(names);
  untrust_locked(known);
}

void Relatives::changed(const std::string& path) {
  internal::MutexLock lock(mutex_);
  auto it = watched_.find(path);
  if (it == watched_.end()) return;
  auto known = derived_.find(it->second);
  if (known != derived_.end()) untrust_locked(known->second);
  watched_.erase(it);  // a watch fires once; the next reads set it again
}

void Relatives::session_changed() {
  internal::MutexLock lock(mutex_);
  for (auto& [primitive, known] : derived_) untrust_locked(known);
  watched_.clear();
}

Relatives::Known* Relatives::quiet_locked(const std::string& name, std::uint64_t epoch) {
  auto it = derived_.find(name);
  return it != derived_.end() && it->second.epoch == epoch ? &it->second : nullptr;
}

void Relatives::untrust_locked(Known& known) {
  known.trusted = false;
  known.absent = false;
  ++known.epoch;
}

}  // namespace simba::zookeeper
