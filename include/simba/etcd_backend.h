// simba/etcd_backend.h: the etcd backend
// ("etcd://[user:password@]host:port[,host:port...][?prefix=simba&dial_timeout=2s&command_timeout=2s]").
//
// etcd's own lock and election recipes, so simba, Go's `concurrency.Mutex`/`Election`,
// `etcdctl lock` and `etcdctl elect` share one line on a name. A mutex M lives under
//   <prefix>/<M>/<lease id in hex>   one key per contender, attached to its lease; the key
//                                    with the lowest create revision owns, the rest wait
//   <prefix>/<M>                     simba's record of M: the last owner's token, kept while
//                                    M is free and swept when idle (Go's recipes ignore it)
// A contender key's value is the contender id (an election's proposal), followed by "\0idle"
// while a caching owner keeps its lease unused; `etcdctl lock` leaves it empty, and such an
// owner reads as "lease:<lease id in hex>". Names: '/', '%', control bytes and space are
// percent-encoded ('%2F'), so distinct names never share a key or a key range, and plain names
// keep the recipes' keys (`etcdctl lock simba/orders` is the mutex "orders").
//
// * Acquire is one transaction: put the contender's key with its lease if it is not there,
//   read it, read the first-created key (the owner; its range count > 1 is a demand) and the
//   last-created key before ours (the predecessor). A waiter watches only its predecessor's
//   deletion (no herd) and, woken, runs the transaction again: it owns only if the
//   transaction, which reads its own key, says so. (etcd 3.4's `concurrency.Mutex` could tell
//   a waiter whose lease had expired that it holds the lock; this re-read is the check.)
// * Leases: one etcd lease per lease length in seconds (ttl + transition, rounded up; the
//   server may grant more) and per contender slot, shared by the contenders of this backend;
//   one keep-alive stream per backend keeps them, every sixth of their TTL. An owner's lease
//   ends when asked or when the server may drop its key (the last answered keep-alive plus the
//   TTL), whichever is first. A new owner watches its line (push, on the same stream as every
//   watch): its renewals then need no round trip while that watch, in place since a
//   transaction showed the key first, has seen no deletion of the key and no break of the
//   stream; they count the lease from the last keep-alive the server answered, so an owner cut
//   off from the server stops believing within a lease, as after a round trip. Otherwise a
//   renewal is the acquire transaction (plus a keep-alive sent with it when the answered ones
//   do not cover the ttl). An operator's eviction reaches the owner by push at once. A
//   contender of a live process that stops renewing (stalled, unreachable) has its key deleted
//   by this backend when its lease, by this host's monotonic clock, runs out: leases lapse by
//   time, as on the other engines. A stopped or killed process stops its keep-alives and the
//   server deletes its keys when the etcd lease ends.
// * Fencing token: the owner key's create revision. etcd's revision counts every write of the
//   cluster, is kept across restarts and leader changes, and never goes back (compaction
//   forgets history, not the counter); a key that owns was created after every earlier owner's
//   key, which had to be deleted first. So tokens strictly rise with every owner change, and
//   a renewal, which keeps the key, keeps its token.
// * Push: releases and acquisitions come through one watch stream per backend. When it (or the
//   keep-alive stream) drops, every watch reports WatchEvent::lost and owners stop believing
//   at once; the streams come back by themselves and contenders look again.
// * Several endpoints: the channel connects to the first that answers and fails over to the
//   next. user:password: etcd's Authenticate; the token goes with every call and is renewed
//   when the server says it expired; refused credentials are errc::permission_denied.
//
// Thread-safe; calls from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "simba/backend.h"

namespace simba {

struct EtcdOptions {
  // "host:port" of each endpoint (port 2379 when left out), tried in order.
  std::vector<std::string> endpoints{"127.0.0.1:2379"};
  // Both empty: no authentication. The password never appears in messages or logs.
  std::string user;
  std::string password;
  // Every key lives under "<prefix>/". Default: "simba".
  std::string prefix = "simba";
  // Bound on connecting to the cluster when the backend opens. Default: 2s.
  std::chrono::milliseconds dial_timeout{std::chrono::seconds(2)};
  // Bound on one call's round trip. Default: 2s.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(2)};
  // Records of mutexes idle this long are deleted (see Backend::sweep); 0: never. Default: 1h.
  std::chrono::milliseconds sweep_idle{std::chrono::hours(1)};
};

// Connects (within dial_timeout, authenticating if asked) and returns the backend. Throws
// Error with errc::unavailable (no endpoint answers), errc::permission_denied (credentials
// refused) or errc::invalid_argument (bad options).
std::shared_ptr<Backend> make_etcd_backend(const EtcdOptions& options);

}  // namespace simba
