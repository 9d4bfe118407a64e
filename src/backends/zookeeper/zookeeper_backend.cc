// The ZooKeeper backend: a leader latch whose nodes name their owner, carry a lease that the
// owner renews, and fence by creation zxid. See simba/zookeeper_backend.h for the design; the
// acquire path is in acquire.cc, the bookkeeping in latch_book.cc.
#include "simba/zookeeper_backend.h"

#include "backends/zookeeper/latch_backend.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba {
namespace zookeeper {
namespace {

using internal::tell;
using internal::Watcher;
using internal::WatchHandle;

std::string describe_of(const ZookeeperOptions& options) {
  std::string where = "zookeeper://";
  if (!options.user.empty()) where += options.user + ":***@";
  return where + options.hosts + options.chroot;
}

}  // namespace

LatchBackend::LatchBackend(const ZookeeperOptions& options)
    : options_(options),
      where_(describe_of(options)),
      sweeps_(options.sweep_idle),
      relatives_(session_),
      session_(options, where_,
               Session::Events{[this](int state, bool fresh) { on_state(state, fresh); },
                               [this](int type, const std::string& path) { on_node(type, path); }}) {
  session_.ensure();
}

bool LatchBackend::release(const std::string& mutex, const std::string& id) {
  const bool released = leave(mutex, id);
  sweeps_.maybe(where_, [&](std::chrono::milliseconds idle) { sweep(idle, internal::kSweepBatch); });
  return released;
}

bool LatchBackend::leave(const std::string& mutex, const std::string& id) {
  const LatchKey key = key_of(mutex, id);
  std::optional<Entry> entry = book_.entry(key);
  if (!entry) return false;
  const auto generation = session_.ensure();
  if (entry->generation != generation) {  // its session ended, and the node with it
    book_.forget(key);
    return false;
  }
  const std::string folder = latch_path(mutex);
  if (entry->path.empty()) {
    Reply listing = session_.children(folder).wait();
    if (listing.rc != ZOK && listing.rc != ZNONODE)
      session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
    if (!recover(key, *entry, folder, latch_nodes(listing.children))) return false;
  }
  // An owner leaves the mutex's last token in its folder, for readers of the free mutex.
  Reply removed = entry->claimed ? session_.remove_and_set(entry->path, -1, folder, std::to_string(entry->token)).wait()
                                 : session_.remove(entry->path, -1).wait();
  if (removed.rc != ZOK && removed.rc != ZNONODE) {
    session_.fail(removed.rc, "removing the node of '" + id + "' from mutex '" + mutex + "'");
  }
  book_.forget(key);
  book_.forget_seen(mutex);
  // Only a hint (forgetting it costs a listing): the folder's pzxid is the zxid of our release.
  if (removed.rc == ZOK && entry->claimed && removed.stat.numChildren == 0)
    book_.note_emptied(mutex, removed.stat.pzxid);
  return removed.rc == ZOK && entry->claimed;
}

OwnerSnapshot LatchBackend::read(const std::string& mutex) {
  session_.ensure();
  const std::string folder = latch_path(mutex);
  for (int round = 0; round < kRounds; ++round) {
    Reply listing = session_.children(folder).wait();
    if (listing.rc == ZNONODE) return {MutexOwner::none(), epoch_millis_now()};
    if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
    const auto nodes = latch_nodes(listing.children);
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
    // The node is the owner until a waiter removes it (only waiters judge leases). A node
    // behind it is a contender that wants the mutex: a demand.
    auto snapshot = leader_view(mutex, folder + "/" + nodes[0].name, nodes[0], leader).snapshot;
    snapshot.demanded = !snapshot.owner.empty() && nodes.size() > 1;
    return snapshot;
  }
  throw Error(errc::unavailable, "ZooKeeper at " + where_ + ": the latch of mutex '" + mutex +
                                     "' kept changing while it was read; try again");
}

std::unique_ptr<Subscription> LatchBackend::watch(const std::string& mutex, const std::string& contender_id,
                                                  std::function<void(WatchEvent)> on_change) {
  auto watcher = std::make_shared<Watcher>(std::move(on_change));
  if (!contender_id.empty()) {
    // A waiter is woken when its predecessor goes; acquire() arms that watch.
    const LatchKey key = key_of(mutex, contender_id);
    book_.add_contender(key, watcher);
    return watch_handle(watcher, [this, key, watcher] { book_.drop_contender(key, watcher); });
  }
  // An observer hears every change of the latch's children.
  const std::string folder = latch_path(mutex);
  book_.add_observer(folder, watcher);
  auto handle =
      std::make_unique<WatchHandle>(watcher, [this, folder, watcher] { book_.drop_observer(folder, watcher); });
  session_.ensure();
  create_folder(mutex, folder);
  Reply armed = session_.watch_children(folder).wait();
  if (armed.rc != ZOK) session_.fail(armed.rc, "watching mutex '" + mutex + "'");
  return handle;
}

// Told of the session's changes only: an owner (which keeps no watch of its own,
// Capabilities::watch_when_waiting) stops believing at a disconnection, as a waiter does. It
// needs no session to be up: it hears every change from now on, as a contender's watch does.
std::unique_ptr<Subscription> LatchBackend::watch_channel(std::function<void(WatchEvent)> on_change) {
  auto watcher = std::make_shared<Watcher>(std::move(on_change));
  book_.add_session_watcher(watcher);
  return std::make_unique<WatchHandle>(watcher, [this, watcher] { book_.drop_session_watcher(watcher); });
}

// The owner watches the latch's children: a node joining behind its own is a demand (a
// waiter leaving fires too: harmless). The listing that arms the watch shows one already there.
std::unique_ptr<Subscription> LatchBackend::watch_demand(const std::string& mutex, const std::string& /*owner_id*/,
                                                         std::function<void()> on_demand) {
  auto watcher = std::make_shared<Watcher>([on_demand](WatchEvent) { on_demand(); });
  const std::string folder = latch_path(mutex);
  book_.add_observer(folder, watcher);
  auto handle =
      std::make_unique<WatchHandle>(watcher, [this, folder, watcher] { book_.drop_observer(folder, watcher); });
  session_.ensure();
  Reply armed = session_.watch_children(folder).wait();
  if (armed.rc != ZOK) session_.fail(armed.rc, "watching the latch of mutex '" + mutex + "'");
  if (latch_nodes(armed.children).size() > 1) on_demand();
  return handle;
}

Capabilities LatchBackend::capabilities() const {
  Capabilities caps;
  caps.engine = "zookeeper";
  caps.poll_interval = std::chrono::milliseconds(1000);
  caps.multi_process = true;
  caps.multi_host = true;
  caps.lease_lapses_by_time = false;  // a leader's node stays until a waiter removes it, or its session ends
  // A waiter's watch is its predecessor's deletion: an owner needs only the session's (watch_channel).
  caps.watch_when_waiting = true;
  return caps;
}

// The latch's bare join and leave: an ephemeral sequential node created and deleted, on this
// backend's session (at the top of its chroot, so nothing is left behind).
double LatchBackend::raw_once() {
  session_.ensure();
  const auto start = Steady::now();
  Reply created = session_.create("/simba-bench-raw-", "owner", ZOO_EPHEMERAL_SEQUENTIAL, session_.node_acl()).wait();
  if (created.rc != ZOK) session_.fail(created.rc, "the raw create");
  Reply removed = session_.remove(created.value, -1).wait();
  if (removed.rc != ZOK) session_.fail(removed.rc, "the raw delete");
  return std::chrono::duration<double, std::micro>(Steady::now() - start).count();
}

// Session changes, on the client's completion thread.
void LatchBackend::on_state(int state, bool fresh) {
  relatives_.session_changed();  // its watches may be gone: its next grants read again
  auto everyone = book_.session_changed(state == ZOO_EXPIRED_SESSION_STATE);
  if (state != ZOO_CONNECTED_STATE) {
    // Owners stop believing at once; whether the lease survived shows at the next renewal.
    tell(everyone.watchers, WatchEvent::lost);
    return;
  }
  // A new session has none of the old one's watches.
  if (fresh) {
    for (const auto& folder : everyone.folders) session_.watch_children(folder);
  }
  tell(everyone.watchers, WatchEvent::released);  // connected again: look at what changed meanwhile
}

// A node watch fired, on the client's completion thread.
void LatchBackend::on_node(int type, const std::string& path) {
  relatives_.changed(path);  // before any later answer on the session (relatives.h)
  if (type == ZOO_CHILD_EVENT) {
    auto woken = book_.observers_of(path);
    if (!woken.empty()) session_.watch_children(path);  // watches fire once: arm it again
    tell(woken, WatchEvent::released);
    return;
  }
  if (type == ZOO_CHANGED_EVENT) {
    if (!book_.waited_on(path)) return;  // nobody waits behind it any more
    // The watched node was rewritten (a renewal or claim): keep watching, and restart the
    // clock of its lease from the version the new watch sees.
    session_.watch_exists(path, [this, path](const Reply& reply) {
      if (reply.rc == ZNONODE) {
        on_node(ZOO_DELETED_EVENT, path);
        return;
      }
      if (reply.rc != ZOK) return;  // connection trouble: the session events take over
      book_.restart_seen(path, reply.stat.version);
    });
    return;
  }
  if (type == ZOO_DELETED_EVENT) {
    // A swept latch folder that observers watch: make it again and watch it (the calls go in
    // order on the session; nothing here waits for them).
    auto observers = book_.observers_of(path);
    if (!observers.empty()) {
      send_latch_folder(path);  // (a derived record's: its derived root first, swept too maybe)
      session_.watch_children(path);
      tell(observers, WatchEvent::released);
    }
    tell(book_.woken_by_deletion(path), WatchEvent::released);
  }
}

}  // namespace zookeeper

std::shared_ptr<Backend> make_zookeeper_backend(const ZookeeperOptions& options) {
  return std::make_shared<zookeeper::LatchBackend>(options);
}

}  // namespace simba
