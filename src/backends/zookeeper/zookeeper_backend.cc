// The ZooKeeper backend: a leader latch whose nodes name their owner, carry a lease that the
// owner renews, and fence by creation zxid. See simba/zookeeper_backend.h for the design.
#include "simba/zookeeper_backend.h"

#include <map>
#include <optional>
#include <set>

#include "backends/common/raw_probe.h"
#include "backends/common/watcher.h"
#include "backends/zookeeper/latch_names.h"
#include "backends/zookeeper/session.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba {
namespace {

using internal::Watcher;
using internal::WatchHandle;
using zookeeper::Call;
using zookeeper::LatchNode;
using zookeeper::Lease;
using zookeeper::Reply;
using zookeeper::Session;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often one call re-reads a latch that changed under it before giving up for this round.
constexpr int kRounds = 8;
// Bound on the per-mutex hints a backend keeps (see seen_ and emptied_at_).
constexpr std::size_t kMaxRemembered = 10000;

std::string key_of(const std::string& mutex, const std::string& contender) { return mutex + '\0' + contender; }
std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string describe_of(const ZookeeperOptions& options) {
  std::string where = "zookeeper://";
  if (!options.user.empty()) where += options.user + ":***@";
  return where + options.hosts + options.chroot;
}

std::uint64_t parse_token(const std::string& text) {
  try {
    return text.empty() ? 0 : std::stoull(text);
  } catch (const std::exception&) {
    return 0;  // not ours: someone else's data in the folder
  }
}

// Our node of one contender on one mutex.
struct Entry {
  std::uint64_t generation = 0;  // of the session that created it (the node dies with it)
  std::string guid;
  std::string path;  // empty while the answer to its create is unknown
  std::uint64_t token = 0;  // the node's czxid
  Lease lease;
  bool claimed = false;  // owns and renews, rather than waits
  Steady::time_point joined;  // when its create was answered (the node existed by then)
  std::string watching;  // the predecessor whose deletion wakes it
};

// The leader of a mutex as this process has seen it: since when it has looked unchanged.
struct Seen {
  std::string path;
  std::int32_t version = -1;
  Steady::time_point since;  // when this version was first seen (after it was written)
};

class ZookeeperBackend final : public Backend, public internal::RawProbe {
 public:
  explicit ZookeeperBackend(const ZookeeperOptions& options)
      : options_(options),
        where_(describe_of(options)),
        session_(options, where_,
                 Session::Events{[this](int state, bool fresh) { on_state(state, fresh); },
                                 [this](int type, const std::string& path) { on_node(type, path); }}) {
    session_.ensure();
  }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, milliseconds ttl,
                        milliseconds transition) override {
    const auto generation = session_.ensure();
    const std::string key = key_of(mutex, id);
    const std::string folder = zookeeper::latch_path(mutex);
    for (int round = 0; round < kRounds; ++round) {
      std::optional<Entry> entry = entry_of(key, generation);
      if (entry && entry->claimed) {
        if (renew(*entry, mutex, id, folder)) return own_snapshot(*entry, id);
        internal::log_warn("mutex '" + mutex + "': the node of " + id + " is gone (its lease was taken over); joining the latch again");
        forget(key);
        continue;
      }
      Reply listing;
      bool created_now = false;
      if (!entry) {
        Entry fresh;
        fresh.generation = generation;
        fresh.guid = zookeeper::new_guid();
        fresh.lease = zookeeper::capped_lease(ttl, transition, session_.session_timeout() * 9 / 10);
        remember(key, fresh);  // so a create whose answer is lost can be found again by its guid
        // If our last release here left the folder empty in transaction P, and our create is
        // transaction P + 1 of the ensemble (zxids count every write, one by one), nothing at
        // all happened in between: the folder holds only our node, we lead, and no listing is
        // needed (a free lock then costs what a bare create does). Otherwise list, in the
        // same trip.
        const std::int64_t emptied = take_emptied_at(mutex);
        Call create = session_.create(folder + "/" + zookeeper::node_prefix(fresh.guid, fresh.lease), id,
                                      ZOO_EPHEMERAL_SEQUENTIAL, session_.node_acl());
        std::optional<Call> list;
        if (emptied < 0) list = session_.children(folder);  // runs after the create: a session is FIFO
        if (list) listing = list->wait();  // answered after the create: one wake-up, not two
        Reply created = create.wait();
        if (created.rc == ZNONODE) {
          forget(key);
          create_folder(mutex, folder);
          continue;
        }
        if (created.rc != ZOK) {
          if (!maybe_sent(created.rc)) forget(key);
          session_.fail(created.rc, "joining the latch of mutex '" + mutex + "'");
        }
        fresh.path = created.value;
        fresh.token = static_cast<std::uint64_t>(created.stat.czxid);
        fresh.joined = Steady::now();
        if (emptied >= 0 && created.stat.czxid == emptied + 1) {
          fresh.claimed = true;
          remember(key, fresh);
          return own_snapshot(fresh, id);
        }
        remember(key, fresh);
        entry = fresh;
        created_now = true;
        if (!list) listing = session_.children(folder).wait();
      } else {
        listing = session_.children(folder).wait();
      }
      if (listing.rc == ZNONODE) {
        forget(key);
        continue;
      }
      if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
      const auto nodes = zookeeper::latch_nodes(listing.children);
      if (entry->path.empty() && !recover(key, *entry, folder, nodes)) continue;
      const std::string name = base_name(entry->path);
      std::size_t position = 0;
      while (position < nodes.size() && nodes[position].name != name) ++position;
      if (position == nodes.size()) {  // our node is gone: taken over
        forget(key);
        continue;
      }
      if (position == 0) {
        if (!created_now) {
          // Claim: the lease starts with this write, after this call was sent. (Created as
          // the leader, the create itself was that write.)
          Reply claimed = session_.set(entry->path, id, -1).wait();
          if (claimed.rc == ZNONODE) {
            forget(key);
            continue;
          }
          if (claimed.rc != ZOK) session_.fail(claimed.rc, "claiming mutex '" + mutex + "' for '" + id + "'");
        }
        entry->claimed = true;
        entry->watching.clear();
        remember(key, *entry);
        {
          std::lock_guard lock(mutex_);
          seen_.erase(mutex);  // we lead: what others looked like no longer matters
        }
        return own_snapshot(*entry, id);
      }
      auto waited = wait_behind(key, mutex, folder, *entry, nodes[position - 1], nodes[0]);
      if (waited) return *waited;
    }
    throw Error(errc::unavailable, "ZooKeeper at " + where_ + ": the latch of mutex '" + mutex +
                                       "' kept changing while it was read; try again");
  }

  bool release(const std::string& mutex, const std::string& id) override {
    const std::string key = key_of(mutex, id);
    std::optional<Entry> entry;
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) entry = it->second;
    }
    if (!entry) return false;
    const auto generation = session_.ensure();
    if (entry->generation != generation) {  // its session ended, and the node with it
      forget(key);
      return false;
    }
    const std::string folder = zookeeper::latch_path(mutex);
    if (entry->path.empty()) {
      Reply listing = session_.children(folder).wait();
      if (listing.rc != ZOK && listing.rc != ZNONODE) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
      if (!recover(key, *entry, folder, zookeeper::latch_nodes(listing.children))) return false;
    }
    // An owner leaves the mutex's last token in its folder, for readers of the free mutex.
    Reply removed = entry->claimed
                        ? session_.remove_and_set(entry->path, -1, folder, std::to_string(entry->token)).wait()
                        : session_.remove(entry->path, -1).wait();
    if (removed.rc != ZOK && removed.rc != ZNONODE) {
      session_.fail(removed.rc, "removing the node of '" + id + "' from mutex '" + mutex + "'");
    }
    forget(key);
    {
      std::lock_guard lock(mutex_);
      seen_.erase(mutex);
      if (removed.rc == ZOK && entry->claimed && removed.stat.numChildren == 0) {
        // Only a hint: forgetting it costs a listing. Bounded for processes that touch
        // endless distinct mutexes. (The folder's pzxid is the zxid of our release.)
        if (emptied_at_.size() >= kMaxRemembered) emptied_at_.clear();
        emptied_at_[mutex] = removed.stat.pzxid;
      }
    }
    return removed.rc == ZOK && entry->claimed;
  }

  OwnerSnapshot read(const std::string& mutex) override {
    session_.ensure();
    const std::string folder = zookeeper::latch_path(mutex);
    for (int round = 0; round < kRounds; ++round) {
      Reply listing = session_.children(folder).wait();
      if (listing.rc == ZNONODE) return {MutexOwner::none(), epoch_millis_now()};
      if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
      const auto nodes = zookeeper::latch_nodes(listing.children);
      if (nodes.empty()) {  // free: its folder keeps the last token
        Reply folder_data = session_.get(folder).wait();
        if (folder_data.rc != ZOK && folder_data.rc != ZNONODE) {
          session_.fail(folder_data.rc, "reading the last token of mutex '" + mutex + "'");
        }
        MutexOwner none;
        none.fencing_token = parse_token(folder_data.value);
        return {none, epoch_millis_now()};
      }
      Reply leader = session_.get(folder + "/" + nodes[0].name).wait();
      if (leader.rc == ZNONODE) continue;
      if (leader.rc != ZOK) session_.fail(leader.rc, "reading the owner of mutex '" + mutex + "'");
      // The node is the owner until a waiter removes it (only waiters judge leases).
      return leader_snapshot(mutex, folder + "/" + nodes[0].name, nodes[0], leader).first;
    }
    throw Error(errc::unavailable, "ZooKeeper at " + where_ + ": the latch of mutex '" + mutex +
                                       "' kept changing while it was read; try again");
  }

  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    auto watcher = std::make_shared<Watcher>(std::move(on_change));
    if (!contender_id.empty()) {
      // A waiter is woken when its predecessor goes; acquire() arms that watch.
      const std::string key = key_of(mutex, contender_id);
      {
        std::lock_guard lock(mutex_);
        contenders_.emplace(key, watcher);
      }
      return std::make_unique<WatchHandle>(watcher, [this, key, watcher] { drop(contenders_, key, watcher); });
    }
    // An observer hears every change of the latch's children.
    const std::string folder = zookeeper::latch_path(mutex);
    {
      std::lock_guard lock(mutex_);
      observers_.emplace(folder, watcher);
    }
    auto handle = std::make_unique<WatchHandle>(watcher, [this, folder, watcher] { drop(observers_, folder, watcher); });
    session_.ensure();
    create_folder(mutex, folder);
    Reply armed = session_.watch_children(folder).wait();
    if (armed.rc != ZOK) session_.fail(armed.rc, "watching mutex '" + mutex + "'");
    return handle;
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = "zookeeper";
    caps.push = true;
    caps.push_acquisitions = true;
    caps.watch_loss = true;
    caps.poll_interval = milliseconds(1000);
    caps.multi_process = true;
    caps.multi_host = true;
    return caps;
  }

  std::string describe() const override { return where_; }

  // The latch's bare join and leave: an ephemeral sequential node created and deleted, on this
  // backend's session (at the top of its chroot, so nothing is left behind).
  double raw_once() override {
    session_.ensure();
    const auto start = Steady::now();
    Reply created = session_.create("/simba-bench-raw-", "owner", ZOO_EPHEMERAL_SEQUENTIAL, session_.node_acl()).wait();
    if (created.rc != ZOK) session_.fail(created.rc, "the raw create");
    Reply removed = session_.remove(created.value, -1).wait();
    if (removed.rc != ZOK) session_.fail(removed.rc, "the raw delete");
    return std::chrono::duration<double, std::micro>(Steady::now() - start).count();
  }

 private:
  using Watchers = std::multimap<std::string, std::shared_ptr<Watcher>>;

  // Renews our leading node; false if it is gone. Only waiters judge (and end) an unrenewed
  // lease, so the node is rewritten (its version rises, and their clocks restart) only while
  // someone waits: a lone owner renews with one read. A waiter that joins after that read
  // first sees our node then, later than the read was sent, and the next renewal, within
  // ttl, sees it and writes: before its clock, started after ours, can run out.
  bool renew(const Entry& entry, const std::string& mutex, const std::string& id, const std::string& folder) {
    Reply listing = session_.children(folder).wait();
    if (listing.rc == ZNONODE) return false;
    if (listing.rc != ZOK) session_.fail(listing.rc, "renewing the lease of '" + id + "' on mutex '" + mutex + "'");
    const auto nodes = zookeeper::latch_nodes(listing.children);
    const std::string name = base_name(entry.path);
    if (nodes.empty() || nodes.front().name != name) return false;
    if (nodes.size() == 1) return true;
    Reply renewed = session_.set(entry.path, id, -1).wait();
    if (renewed.rc == ZNONODE) return false;
    if (renewed.rc != ZOK) session_.fail(renewed.rc, "renewing the lease of '" + id + "' on mutex '" + mutex + "'");
    return true;
  }

  // Waiting behind `predecessor`: watch it (once per predecessor), read the leader, and take
  // over a leader whose lease ran out unrenewed. Returns the owner, or nothing to look again.
  std::optional<OwnerSnapshot> wait_behind(const std::string& key, const std::string& mutex, const std::string& folder,
                                           Entry& entry, const LatchNode& predecessor, const LatchNode& leader) {
    const std::string predecessor_path = folder + "/" + predecessor.name;
    const std::string leader_path = folder + "/" + leader.name;
    std::optional<Call> arm;
    if (entry.watching != predecessor_path) {
      {
        std::lock_guard lock(mutex_);
        waiting_[predecessor_path].insert(key);
      }
      arm = session_.watch_exists(predecessor_path);
    }
    Call read_leader = session_.get(leader_path);
    if (arm) {
      Reply armed = arm->wait();
      if (armed.rc != ZOK) {
        unwait(predecessor_path, key);
        if (armed.rc == ZNONODE) return std::nullopt;  // it just went: look again
        session_.fail(armed.rc, "watching the latch of mutex '" + mutex + "'");
      }
      entry.watching = predecessor_path;
      remember(key, entry);
    }
    Reply owner = read_leader.wait();
    if (owner.rc == ZNONODE) return std::nullopt;
    if (owner.rc != ZOK) session_.fail(owner.rc, "reading the owner of mutex '" + mutex + "'");
    auto [snapshot, expired] = leader_snapshot(mutex, leader_path, leader, owner, entry.joined);
    if (!expired) return snapshot;
    // Seen unchanged for a whole lease: its owner has stopped believing it owns. Delete it at
    // the version seen (a renewal since makes this fail) and record its token.
    Reply evicted = session_.remove_and_set(leader_path, owner.stat.version, folder,
                                            std::to_string(snapshot.owner.fencing_token)).wait();
    if (evicted.rc == ZOK) {
      internal::log_warn("mutex '" + mutex + "': the lease of " + snapshot.owner.owner_id +
                         " ran out unrenewed; removed its node");
    } else if (evicted.rc != ZNONODE && evicted.rc != ZBADVERSION) {
      session_.fail(evicted.rc, "removing the expired owner of mutex '" + mutex + "'");
    }
    return std::nullopt;
  }

  // The owner record of our own lease, counted from now (the call was sent earlier).
  static OwnerSnapshot own_snapshot(const Entry& entry, const std::string& id) {
    const EpochMillis now = epoch_millis_now();
    MutexOwner owner;
    owner.owner_id = id;
    owner.acquired_at = now;
    owner.ttl_at = now + entry.lease.ttl.count();
    owner.transition_at = owner.ttl_at + entry.lease.transition.count();
    owner.fencing_token = entry.token;
    return {owner, now};
  }

  // The record of another owner, read just now, and whether its lease ran out for a waiter
  // that joined at `joined`: the node looked unchanged here for longer than its lease, counted
  // from when this version was first seen or from `joined`, whichever is later. (A lone owner
  // renews without rewriting its node, see renew(): what this process saw before it joined
  // proves nothing.) Times are this host's clock; an owner past its lease shows one lease from
  // now (that is when it would go if it died now). A node without a lease (another latch
  // client's) owns until its session ends, at most a session timeout after its owner dies.
  std::pair<OwnerSnapshot, bool> leader_snapshot(const std::string& mutex, const std::string& path,
                                                 const LatchNode& node, const Reply& reply,
                                                 Steady::time_point joined = Steady::time_point::min()) {
    const auto now = Steady::now();
    const EpochMillis wall = epoch_millis_now();
    Steady::time_point since;
    {
      std::lock_guard lock(mutex_);
      // Forgetting what was seen only restarts the clocks (a later takeover, never an early
      // one): bounded for processes that read endless distinct mutexes.
      if (seen_.size() >= kMaxRemembered && !seen_.count(mutex)) seen_.clear();
      Seen& seen = seen_[mutex];
      if (seen.path != path || seen.version != reply.stat.version) seen = Seen{path, reply.stat.version, now};
      since = std::max(seen.since, joined);
    }
    const auto age = std::chrono::duration_cast<milliseconds>(now - since);
    MutexOwner owner;
    owner.owner_id = reply.value;
    owner.fencing_token = static_cast<std::uint64_t>(reply.stat.czxid);
    bool expired = false;
    if (node.lease) {
      expired = age > node.lease->total();
      owner.acquired_at = expired ? wall : wall - age.count();
      owner.ttl_at = owner.acquired_at + node.lease->ttl.count();
      owner.transition_at = owner.ttl_at + node.lease->transition.count();
    } else {
      owner.acquired_at = wall - age.count();
      owner.ttl_at = owner.transition_at = wall + session_.session_timeout().count();
    }
    return {{owner, wall}, expired};
  }

  // A create may have happened though its answer was lost: find the node by its guid.
  bool recover(const std::string& key, Entry& entry, const std::string& folder, const std::vector<LatchNode>& nodes) {
    for (const auto& node : nodes) {
      if (node.name.find(entry.guid) == std::string::npos) continue;
      Reply stat = session_.get(folder + "/" + node.name).wait();
      if (stat.rc != ZOK) break;
      entry.path = folder + "/" + node.name;
      entry.token = static_cast<std::uint64_t>(stat.stat.czxid);
      entry.joined = Steady::now();
      remember(key, entry);
      return true;
    }
    forget(key);
    return false;
  }

  void create_folder(const std::string& mutex, const std::string& folder) {
    Call root = session_.create("/simba", "", ZOO_PERSISTENT, session_.root_acl());
    Call latch = session_.create(folder, "", ZOO_PERSISTENT, session_.node_acl());
    Reply made_root = root.wait();
    Reply made_latch = latch.wait();
    if (made_root.rc == ZNONODE && !options_.chroot.empty()) {
      throw Error(errc::invalid_argument, "ZooKeeper at " + where_ + ": the chroot '" + options_.chroot +
                                              "' does not exist; create it first");
    }
    if (made_root.rc != ZOK && made_root.rc != ZNODEEXISTS) session_.fail(made_root.rc, "creating /simba");
    if (made_latch.rc != ZOK && made_latch.rc != ZNODEEXISTS) {
      session_.fail(made_latch.rc, "creating the latch of mutex '" + mutex + "'");
    }
  }

  // The zxid at which our last release on `mutex` left its folder empty, once; or -1.
  std::int64_t take_emptied_at(const std::string& mutex) {
    std::lock_guard lock(mutex_);
    auto it = emptied_at_.find(mutex);
    if (it == emptied_at_.end()) return -1;
    auto zxid = it->second;
    emptied_at_.erase(it);
    return zxid;
  }

  static bool maybe_sent(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

  std::optional<Entry> entry_of(const std::string& key, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    if (it->second.generation != generation) {
      erase_locked(it);
      return std::nullopt;
    }
    return it->second;
  }

  void remember(const std::string& key, const Entry& entry) {
    std::lock_guard lock(mutex_);
    entries_[key] = entry;
  }

  void forget(const std::string& key) {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) erase_locked(it);
  }

  void erase_locked(std::map<std::string, Entry>::iterator it) {
    if (!it->second.watching.empty()) {
      if (auto w = waiting_.find(it->second.watching); w != waiting_.end()) {
        w->second.erase(it->first);
        if (w->second.empty()) waiting_.erase(w);
      }
    }
    entries_.erase(it);
  }

  void unwait(const std::string& path, const std::string& key) {
    std::lock_guard lock(mutex_);
    if (auto w = waiting_.find(path); w != waiting_.end()) {
      w->second.erase(key);
      if (w->second.empty()) waiting_.erase(w);
    }
  }

  void drop(Watchers& watchers, const std::string& key, const std::shared_ptr<Watcher>& watcher) {
    std::lock_guard lock(mutex_);
    for (auto [it, end] = watchers.equal_range(key); it != end; ++it) {
      if (it->second == watcher) {
        watchers.erase(it);
        return;
      }
    }
  }

  static void tell(const std::vector<std::shared_ptr<Watcher>>& watchers, WatchEvent event) {
    for (const auto& watcher : watchers) watcher->call(event);
  }

  // Session changes, on the client's completion thread.
  void on_state(int state, bool fresh) {
    std::vector<std::shared_ptr<Watcher>> everyone;
    std::vector<std::string> folders;
    {
      std::lock_guard lock(mutex_);
      if (state == ZOO_EXPIRED_SESSION_STATE) {
        entries_.clear();  // the nodes went with the session
        waiting_.clear();
      }
      for (auto& [key, watcher] : contenders_) everyone.push_back(watcher);
      for (auto& [folder, watcher] : observers_) {
        everyone.push_back(watcher);
        if (folders.empty() || folders.back() != folder) folders.push_back(folder);
      }
    }
    if (state != ZOO_CONNECTED_STATE) {
      // Owners stop believing at once; whether the lease survived shows at the next renewal.
      tell(everyone, WatchEvent::lost);
      return;
    }
    // A new session has none of the old one's watches.
    if (fresh) {
      for (const auto& folder : folders) session_.watch_children(folder);
    }
    tell(everyone, WatchEvent::released);  // connected again: look at what changed meanwhile
  }

  // A node watch fired, on the client's completion thread.
  void on_node(int type, const std::string& path) {
    std::vector<std::shared_ptr<Watcher>> woken;
    if (type == ZOO_CHILD_EVENT) {
      {
        std::lock_guard lock(mutex_);
        for (auto [it, end] = observers_.equal_range(path); it != end; ++it) woken.push_back(it->second);
      }
      if (!woken.empty()) session_.watch_children(path);  // watches fire once: arm it again
      tell(woken, WatchEvent::released);
      return;
    }
    if (type == ZOO_CHANGED_EVENT) {
      {
        std::lock_guard lock(mutex_);
        if (!waiting_.count(path)) return;  // nobody waits behind it any more
      }
      // The watched node was rewritten (a renewal or claim): keep watching, and restart the
      // clock of its lease from the version the new watch sees.
      session_.watch_exists(path, [this, path](const Reply& reply) {
        if (reply.rc == ZNONODE) {
          on_node(ZOO_DELETED_EVENT, path);
          return;
        }
        if (reply.rc != ZOK) return;  // connection trouble: the session events take over
        std::lock_guard lock(mutex_);
        for (auto& [mutex, seen] : seen_) {
          if (seen.path == path && seen.version != reply.stat.version) {
            seen = Seen{path, reply.stat.version, Steady::now()};
          }
        }
      });
      return;
    }
    if (type != ZOO_DELETED_EVENT) return;
    {
      std::lock_guard lock(mutex_);
      auto w = waiting_.find(path);
      if (w == waiting_.end()) return;
      for (const auto& key : w->second) {
        if (auto e = entries_.find(key); e != entries_.end()) e->second.watching.clear();
        for (auto [it, end] = contenders_.equal_range(key); it != end; ++it) woken.push_back(it->second);
      }
      waiting_.erase(w);
    }
    tell(woken, WatchEvent::released);
  }

  const ZookeeperOptions options_;
  const std::string where_;

  std::mutex mutex_;
  std::map<std::string, Entry> entries_;                   // by key_of(mutex, contender)
  std::map<std::string, std::set<std::string>> waiting_;   // predecessor path -> keys behind it
  std::map<std::string, Seen> seen_;                       // by mutex
  std::map<std::string, std::int64_t> emptied_at_;         // by mutex: see take_emptied_at()
  Watchers contenders_;                                    // by key_of(mutex, contender)
  Watchers observers_;                                     // by latch folder

  // Last: closed first when the backend goes, before anything its callbacks touch.
  Session session_;
};

}  // namespace

std::shared_ptr<Backend> make_zookeeper_backend(const ZookeeperOptions& options) {
  return std::make_shared<ZookeeperBackend>(options);
}

}  // namespace simba
