// simba/zookeeper_backend.h: the ZooKeeper backend
// ("zookeeper://[user:password@]host:port[,host:port...][/chroot][?session_timeout=10s]").
//
// A leader latch, as in Simba: every contender of mutex M has one ephemeral sequential node
// under /simba/<M>; the lowest sequence owns, and each waiter watches only its predecessor
// (a release wakes exactly one waiter: no herd). Unlike Simba's latch:
//
// * The node's data is the contender id, so every contender and observer (and `simba status`)
//   sees who owns.
// * Names ZooKeeper forbids in a path ('/', control characters, "." and "..", invalid or
//   reserved UTF-8) are percent-encoded, and '%' itself always is: distinct names never share
//   a path, and ordinary names keep Simba's path (/simba/my-job). A name "<N>#<rest>" (a
//   semaphore's slot, a shared mutex's reader: a record derived from N) has its latch in N's
//   folder of derived records, /simba/<N>#derived/<rest>, so that they are listed without
//   listing every latch under /simba.
// * Fencing token: the creation zxid (czxid) of the owner's node. Zxids are assigned by the
//   ensemble's leader in commit order and rise across leader elections (the epoch is their
//   high 32 bits), and a later owner's node was always created after an earlier owner's (a
//   node owns only once every lower sequence is gone), so the token strictly rises with every
//   owner change and across sessions; an owner that keeps its node (a renewal, or a session
//   that survives a reconnect) keeps its token. The sequence number would restart if the
//   mutex's parent node were ever deleted and re-created; the zxid never goes back.
//   A release records the last token in the parent node, so a free mutex reads as no owner
//   with that token (after a session expiry, the last token recorded by a release).
// * Leases with real times. Every ttl the owner renews: one read shows its node still leads,
//   and while anyone waits it also rewrites the node (the version rises). A process renewing
//   many leases at once rewrites their nodes in one multi instead (a node that is written
//   still leads: a leader leads until its node is deleted). The lease (ttl +
//   transition, from the node's name) is capped at 9/10 of the negotiated session timeout, so
//   an owner that stalls past its session has stopped believing it owns before the server
//   can expire the session. A waiter that has seen the leader's node unchanged for a whole
//   lease on its own monotonic clock (counted from its own joining at the earliest) deletes
//   it, with the version it saw (a renewal in between makes that delete fail): an owner whose
//   process lives but stopped renewing is replaced like any expired lease. Nodes of other latch
//   clients (Curator's "_c_<uuid>-latch-N") have no lease: they own until their session ends.
//   Times in owner records are on this host's wall clock; each is at least as late as the
//   server-side event it stands for, so the lease a record shows never ends early.
// * Sessions: when the connection drops, every watch reports WatchEvent::lost and owners stop
//   believing at once; if the session survives the reconnect and the node still leads, the
//   owner's next renewal owns again with the same token. After a session expiry the backend
//   opens a new session and contenders create new nodes.
// * With user:password, the session authenticates with the digest scheme and every node it
//   creates carries the ACL "creator: all, anyone: read": other users see owners but cannot
//   contend on, delete or rewrite this user's mutexes. (/simba itself also lets anyone
//   create.)
//
// One session (the ZooKeeper C client's two threads) per backend, shared by all its
// contenders. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "simba/backend.h"

namespace simba {

struct ZookeeperOptions {
  // "host:port[,host:port...]" of the ensemble.
  std::string hosts = "127.0.0.1:2181";
  // "" or "/path": every node lives under it; it must exist on the server.
  std::string chroot;
  // Digest authentication; both empty: none. The password never appears in messages or logs.
  std::string user;
  std::string password;
  // Asked of the server, which bounds it by its own min/max (2 and 20 ticks by default).
  // A killed owner's node goes when its session expires: takeover after a crash takes this
  // long. Default: 10s.
  std::chrono::milliseconds session_timeout{std::chrono::seconds(10)};
  // How long a call waits for the session to be connected before failing with
  // errc::unavailable. Default: 5s.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  // Latch folders of mutexes idle this long are deleted (see Backend::sweep); 0: never.
  // Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
};

// Opens the session and waits up to connect_timeout for it (so an unreachable ensemble or a
// refused password fails here). Throws Error with errc::unavailable, errc::permission_denied
// or errc::invalid_argument (bad options).
std::shared_ptr<Backend> make_zookeeper_backend(const ZookeeperOptions& options);

}  // namespace simba
