// The ZooKeeper backend's records: list() and sweep() over the latch folders under /simba.
// Tokens are creation zxids, which never go back, so deleting a folder loses nothing a later
// owner needs; a folder is deleted only empty and unchanged since it was read (its version),
// and a contender that finds it gone makes it again (acquire.cc).
#include <algorithm>
#include <deque>
#include <map>

#include "backends/zookeeper/latch_backend.h"
#include "backends/zookeeper/latch_names.h"

namespace simba::zookeeper {
namespace {

constexpr std::size_t kInFlight = 64;  // reads or deletes sent before waiting for the first

// Whether a name of the derived root of `primitive` ("<primitive>#<rest>") may start with `prefix`.
bool may_match(const std::string& primitive, const std::string& prefix) {
  if (prefix.size() <= primitive.size()) return primitive.compare(0, prefix.size(), prefix) == 0;
  return prefix.compare(0, primitive.size(), primitive) == 0 && prefix[primitive.size()] == '#';
}

}  // namespace

std::vector<LatchBackend::Folder> LatchBackend::folders(const std::string& prefix, std::vector<DerivedRoot>* roots) {
  session_.ensure();
  Reply listing = session_.children(kRoot).wait();
  if (listing.rc == ZNONODE) return {};
  if (listing.rc != ZOK) session_.fail(listing.rc, "listing the mutexes under /simba");
  std::vector<Folder> found;
  std::vector<DerivedRoot> looked;
  struct Listing {
    std::string primitive, path;
    Call call;
  };
  std::deque<Listing> listings;  // of derived roots
  auto finish_listing = [&] {
    auto [primitive, path, call] = std::move(listings.front());
    listings.pop_front();
    DerivedRoot root{std::move(path), call.wait()};
    if (root.listing.rc == ZNONODE) return;  // swept meanwhile
    if (root.listing.rc != ZOK) session_.fail(root.listing.rc, "listing the mutexes under " + root.path);
    for (const auto& child : root.listing.children) {
      auto rest = decode_component(child);
      if (!rest) continue;
      std::string name = primitive + "#" + *rest;
      if (name.compare(0, prefix.size(), prefix) == 0) found.push_back({name, root.path + "/" + child});
    }
    looked.push_back(std::move(root));
  };
  for (const auto& child : listing.children) {
    if (auto primitive = primitive_of_derived_root(child)) {
      if (!may_match(*primitive, prefix)) continue;
      std::string path = derived_root(*primitive);
      Call call = session_.children(path);
      listings.push_back({std::move(*primitive), std::move(path), std::move(call)});
      if (listings.size() >= kInFlight) finish_listing();
      continue;
    }
    auto name = decode_component(child);
    if (name && name->compare(0, prefix.size(), prefix) == 0)
      found.push_back({*name, std::string(kRoot) + "/" + child});
  }
  while (!listings.empty()) finish_listing();
  std::sort(found.begin(), found.end(), [](const Folder& a, const Folder& b) { return a.name < b.name; });
  if (roots) *roots = std::move(looked);
  return found;
}

// The leader's node goes if its data names `owner_id` (at the version read, so a renewal in
// between keeps it); the folder keeps its token, as an owner's own release leaves it. The
// holder's next renewal finds its node gone.
bool LatchBackend::evict(const std::string& mutex, const std::string& owner_id) {
  session_.ensure();
  const std::string folder = latch_path(mutex);
  Reply listing = session_.children(folder).wait();
  if (listing.rc == ZNONODE) return false;
  if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
  const auto nodes = latch_nodes(listing.children);
  if (nodes.empty()) return false;
  const std::string path = folder + "/" + nodes[0].name;
  Reply leader = session_.get(path).wait();
  if (leader.rc == ZNONODE || parse_node_data(leader.value).owner_id != owner_id) return false;
  if (leader.rc != ZOK) session_.fail(leader.rc, "reading the owner of mutex '" + mutex + "'");
  Reply removed = session_.remove_and_set(path, leader.stat.version, folder, std::to_string(leader.stat.czxid)).wait();
  if (removed.rc == ZNONODE || removed.rc == ZBADVERSION) return false;
  if (removed.rc != ZOK) session_.fail(removed.rc, "deleting the lease of '" + owner_id + "' on mutex '" + mutex + "'");
  return true;
}

// Our claimed node's data carries the mark. The write also restarts waiters' clocks on the
// lease, as a renewal's does: it can only delay a takeover, never hasten one.
bool LatchBackend::mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) {
  const auto generation = session_.ensure();
  const LatchKey key = key_of(mutex, owner_id);
  std::optional<Entry> entry = book_.entry(key, generation);
  if (!entry || !entry->claimed || entry->path.empty()) return false;
  std::optional<Call> marking;
  {
    // The book takes the mark first: a renewal's rewrite sent after this one carries it too.
    internal::MutexLock lock(node_writes_);
    if (auto now = book_.entry(key, generation); now && now->path == entry->path) {
      now->idle = idle;
      book_.remember(key, *now);
    }
    marking = session_.set(entry->path, node_data(owner_id, idle), -1);
  }
  Reply marked = marking->wait();
  if (marked.rc == ZNONODE) return false;
  if (marked.rc != ZOK) session_.fail(marked.rc, "marking the lease of '" + owner_id + "' on mutex '" + mutex + "'");
  return true;
}

// `now` is this host's clock when nothing matched (there is no folder to read).
// A folder of an earlier layout (a derived record's, directly under /simba) is left out: it
// holds no lease this version takes; sweep() deletes it once it is idle.
MutexListing LatchBackend::list(const std::string& prefix, std::size_t limit) {
  std::vector<std::string> names;
  for (auto& folder : folders(prefix)) {
    if (folder.path == latch_path(folder.name)) names.push_back(std::move(folder.name));
  }
  return internal::listing_of(std::move(names), limit, [&](const std::string& name) {
    return name.empty() ? OwnerSnapshot{MutexOwner::none(), epoch_millis_now()} : read(name);
  });
}

// The held records derived from `name`: one listing of its derived root (not of /simba: what
// else the server holds costs nothing), then the children of every matching latch at once,
// then the leaders' nodes of the latches that have any, at once (a free latch is left out, as
// list_derived() allows): two or three round trips, where list() reads each latch in turn (two
// round trips each). A latch whose leader went between the two reads is read again alone.
MutexListing LatchBackend::list_derived(const std::string& name, std::size_t limit) {
  session_.ensure();
  const std::string root = derived_root(name);
  Reply derived = session_.children(root).wait();
  if (derived.rc != ZOK && derived.rc != ZNONODE) session_.fail(derived.rc, "listing the mutexes under " + root);
  std::vector<std::string> names = derived_among(name, derived.children);
  relatives_.saw_derived(name, names);  // a grant of `name` reads them from now on
  struct Held {
    std::string name;
    LatchNode leader;
  };
  std::vector<Held> held;
  std::deque<std::pair<std::string, Call>> listings;
  auto finish_listing = [&] {
    auto [found, call] = std::move(listings.front());
    listings.pop_front();
    Reply listing = call.wait();
    if (listing.rc == ZNONODE) return;  // swept meanwhile: free
    if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + found + "'");
    auto nodes = latch_nodes(listing.children);
    if (!nodes.empty()) held.push_back({std::move(found), std::move(nodes.front())});
  };
  for (const auto& found : names) {
    listings.emplace_back(found, session_.children(latch_path(found)));
    if (listings.size() >= kInFlight) finish_listing();
  }
  while (!listings.empty()) finish_listing();

  MutexListing out;
  out.truncated = held.size() > limit;
  if (out.truncated) held.resize(limit);
  std::deque<std::pair<std::size_t, Call>> leaders;
  auto finish_leader = [&] {
    auto [index, call] = std::move(leaders.front());
    leaders.pop_front();
    const Held& one = held[index];
    const std::string path = latch_path(one.name) + "/" + one.leader.name;
    Reply leader = call.wait();
    if (leader.rc != ZOK && leader.rc != ZNONODE)
      session_.fail(leader.rc, "reading the owner of mutex '" + one.name + "'");
    OwnerSnapshot seen =
        leader.rc == ZNONODE ? read(one.name) : leader_view(one.name, path, one.leader, leader).snapshot;
    out.now = std::max(out.now, seen.now);
    out.records.push_back({one.name, std::move(seen.owner)});
  };
  for (std::size_t i = 0; i < held.size(); ++i) {
    leaders.emplace_back(i, session_.get(latch_path(held[i].name) + "/" + held[i].leader.name));
    if (leaders.size() >= kInFlight) finish_leader();
  }
  while (!leaders.empty()) finish_leader();
  if (out.now == 0) out.now = epoch_millis_now();
  return out;
}

// Idle: no nodes, and neither made nor written (the last release leaves its token) for
// `idle_for` by this host's clock against the server's mtime. Reads and deletes travel in
// batches; a delete that meets a new node (ZNOTEMPTY) or a release (ZBADVERSION) keeps it.
// Then a derived root made at least `idle_for` ago and found empty, or emptied by this sweep,
// goes too (not counted: it is no record); a latch folder being made in it meanwhile makes
// the delete fail (ZNOTEMPTY), or its maker finds it gone and makes both again.
std::size_t LatchBackend::sweep(std::chrono::milliseconds idle_for, std::size_t limit) {
  std::vector<DerivedRoot> roots;
  const auto found = folders("", &roots);
  const EpochMillis idle_since = epoch_millis_now() - idle_for.count();
  std::size_t swept = 0;
  std::map<std::string, std::size_t> emptied;  // derived root -> its folders this sweep deleted
  std::deque<std::pair<std::string, Call>> reads, deletes;
  auto finish_delete = [&] {
    auto [folder, call] = std::move(deletes.front());
    deletes.pop_front();
    Reply removed = call.wait();
    if (removed.rc == ZOK) {
      ++swept;
      ++emptied[parent_path(folder)];
    } else if (removed.rc != ZNONODE && removed.rc != ZNOTEMPTY && removed.rc != ZBADVERSION) {
      session_.fail(removed.rc, "deleting the idle latch folder " + folder);
    }
  };
  auto finish_read = [&] {
    auto [folder, call] = std::move(reads.front());
    reads.pop_front();
    Reply seen = call.wait();
    if (seen.rc == ZNONODE) return;
    if (seen.rc != ZOK) session_.fail(seen.rc, "reading the latch folder " + folder);
    if (seen.stat.numChildren != 0 || seen.stat.mtime > idle_since || seen.stat.ctime > idle_since) return;
    if (swept + deletes.size() >= limit) return;
    deletes.emplace_back(folder, session_.remove(folder, seen.stat.version));
    if (deletes.size() >= kInFlight) finish_delete();
  };
  for (const auto& folder : found) {
    if (swept + deletes.size() >= limit) break;
    reads.emplace_back(folder.path, session_.get(folder.path));
    if (reads.size() >= kInFlight) finish_read();
  }
  while (!reads.empty()) finish_read();
  while (!deletes.empty()) finish_delete();

  std::vector<std::pair<std::string, Call>> removals;
  for (const auto& root : roots) {
    const auto gone = emptied.find(root.path);
    const std::size_t left = root.listing.children.size() - (gone == emptied.end() ? 0 : gone->second);
    if (left == 0 && root.listing.stat.ctime <= idle_since) {
      removals.emplace_back(root.path, session_.remove(root.path, -1));
    }
  }
  for (auto& [path, call] : removals) {
    Reply removed = call.wait();
    if (removed.rc != ZOK && removed.rc != ZNONODE && removed.rc != ZNOTEMPTY) {
      session_.fail(removed.rc, "deleting the empty folder " + path);
    }
  }
  return swept;
}

}  // namespace simba::zookeeper
