// The ZooKeeper latch's acquire path: join (create our node), claim the lead, or wait behind
// the predecessor and take over a leader whose lease ran out unrenewed.
#include <algorithm>
#include <numeric>

#include "backends/common/alone.h"
#include "backends/zookeeper/latch_backend.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba::zookeeper {
namespace {

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }
bool maybe_sent(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }
std::vector<std::size_t> first(std::size_t n) {
  std::vector<std::size_t> indexes(n);
  std::iota(indexes.begin(), indexes.end(), std::size_t{0});
  return indexes;
}

// A multi carries up to this many rewrites, and up to this many bytes of paths and data (the
// server refuses requests over its jute.maxbuffer, 1 MiB by default).
constexpr std::size_t kRewritesPerMulti = 256;
constexpr std::size_t kBytesPerMulti = 256 * 1024;
// A batch of at most this many renewals reads each one's latch too (Renewal::listing).
constexpr std::size_t kRenewalsThatReadDemand = 32;

}  // namespace

OwnerSnapshot LatchBackend::acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                                    std::chrono::milliseconds transition) {
  const auto generation = session_.ensure();
  const LatchKey key = key_of(mutex, id);
  const std::string folder = latch_path(mutex);
  for (int round = 0; round < kRounds; ++round) {
    std::optional<Entry> entry = book_.entry(key, generation);
    if (entry && entry->claimed) {
      if (const auto demanded = renew(key, *entry, mutex, id, folder)) {
        OwnerSnapshot renewed = own_snapshot(*entry, id);
        renewed.demanded = *demanded;
        return renewed;
      }
      forget_taken_over(key, mutex, id);
      continue;
    }
    std::optional<OwnerSnapshot> owner;
    if (!entry) {
      Joined joined = join(key, mutex, id, folder, generation, ttl, transition);
      if (joined.status == Joined::Status::again) continue;
      if (joined.status == Joined::Status::leading) {
        owner = own_snapshot(joined.entry, id);
      } else {
        owner = take_place(key, mutex, id, folder, joined.entry, joined.listing, /*created_now=*/true);
      }
      // Our node was there before the look was sent: what it saw held whichever way we came
      // to own (a record made after it finds a node in our latch).
      if (owner && joined.look && owner->owner.owner_id == id) relatives_.answer(*joined.look, *owner);
    } else {
      owner = take_place(key, mutex, id, folder, *entry, session_.children(folder).wait(), /*created_now=*/false);
    }
    if (owner) return *owner;
  }
  throw Error(errc::unavailable, "ZooKeeper at " + where_ + ": the latch of mutex '" + mutex +
                                     "' kept changing while it was read; try again");
}

LatchBackend::Joined LatchBackend::join(const LatchKey& key, const std::string& mutex, const std::string& id,
                                        const std::string& folder, std::uint64_t generation,
                                        std::chrono::milliseconds ttl, std::chrono::milliseconds transition) {
  Joining joining = send_join(key, mutex, id, folder, generation, ttl, transition);
  std::optional<Relatives::Look> look = relatives_.send(mutex);  // behind the create: see relatives.h
  Joined joined = finish_join(key, mutex, folder, joining);
  joined.look = std::move(look);
  if (joined.status == Joined::Status::no_folder) {
    create_folder(mutex, folder);
    joined.status = Joined::Status::again;
  }
  return joined;
}

LatchBackend::Joining LatchBackend::send_join(const LatchKey& key, const std::string& mutex, const std::string& id,
                                              const std::string& folder, std::uint64_t generation,
                                              std::chrono::milliseconds ttl, std::chrono::milliseconds transition) {
  Joining joining;
  Entry& fresh = joining.entry;
  fresh.generation = generation;
  fresh.guid = new_guid();
  fresh.lease = capped_lease(ttl, transition, session_.session_timeout() * 9 / 10);
  book_.remember(key, fresh);  // so a create whose answer is lost can be found again by its guid
  // If our last release here left the folder empty in transaction P, and our create is
  // transaction P + 1 of the ensemble (zxids count every write, one by one), nothing at all
  // happened in between: the folder holds only our node, we lead, and no listing is needed (a
  // free lock then costs what a bare create does). Otherwise list, in the same trip.
  joining.emptied = book_.take_emptied_at(mutex);
  joining.create = session_.create(folder + "/" + node_prefix(fresh.guid, fresh.lease), id, ZOO_EPHEMERAL_SEQUENTIAL,
                                   session_.node_acl());
  if (joining.emptied < 0) joining.list = session_.children(folder);  // runs after the create: a session is FIFO
  return joining;
}

LatchBackend::Joined LatchBackend::finish_join(const LatchKey& key, const std::string& mutex, const std::string& folder,
                                               Joining& joining) {
  Joined out;
  out.entry = joining.entry;
  Entry& fresh = out.entry;
  if (joining.list) out.listing = joining.list->wait();  // answered after the create: one wake-up, not two
  Reply created = joining.create->wait();
  if (created.rc == ZNONODE) {
    book_.forget(key);
    out.status = Joined::Status::no_folder;
    return out;
  }
  if (created.rc != ZOK) {
    if (!maybe_sent(created.rc)) book_.forget(key);
    session_.fail(created.rc, "joining the latch of mutex '" + mutex + "'");
  }
  fresh.path = created.value;
  fresh.token = static_cast<std::uint64_t>(created.stat.czxid);
  fresh.joined = Steady::now();
  if (joining.emptied >= 0 && created.stat.czxid == joining.emptied + 1) {
    fresh.claimed = true;
    book_.remember(key, fresh);
    out.status = Joined::Status::leading;
    return out;
  }
  book_.remember(key, fresh);
  if (!joining.list) out.listing = session_.children(folder).wait();
  out.status = Joined::Status::queued;
  return out;
}

// With our node in the latch as `listing` shows it: lead, or wait behind our predecessor.
// Returns the owner, or nothing to start the round again.
std::optional<OwnerSnapshot> LatchBackend::take_place(const LatchKey& key, const std::string& mutex,
                                                      const std::string& id, const std::string& folder, Entry& entry,
                                                      const Reply& listing, bool created_now) {
  if (listing.rc == ZNONODE) {
    book_.forget(key);
    return std::nullopt;
  }
  if (listing.rc != ZOK) session_.fail(listing.rc, "listing the latch of mutex '" + mutex + "'");
  const auto nodes = latch_nodes(listing.children);
  if (entry.path.empty() && !recover(key, entry, folder, nodes)) return std::nullopt;
  const std::string name = base_name(entry.path);
  std::size_t position = 0;
  while (position < nodes.size() && nodes[position].name != name) ++position;
  if (position == nodes.size()) {  // our node is gone: taken over
    book_.forget(key);
    return std::nullopt;
  }
  if (position == 0) return claim(key, mutex, id, entry, created_now);
  return wait_behind(key, mutex, folder, entry, nodes[position - 1], nodes[0]);
}

// Our node leads. The lease starts with a write after this call was sent: a claim (created as
// the leader, the create itself was that write).
std::optional<OwnerSnapshot> LatchBackend::claim(const LatchKey& key, const std::string& mutex, const std::string& id,
                                                 Entry& entry, bool created_now) {
  std::optional<Relatives::Look> look;
  if (!created_now) {
    Call claiming = session_.set(entry.path, node_data(id, false), -1);
    look = relatives_.send(mutex);  // behind the claim: see relatives.h
    Reply claimed = claiming.wait();
    if (claimed.rc == ZNONODE) {
      book_.forget(key);
      return std::nullopt;
    }
    if (claimed.rc != ZOK) session_.fail(claimed.rc, "claiming mutex '" + mutex + "' for '" + id + "'");
  }
  entry.claimed = true;
  entry.idle = false;  // a new lease starts unmarked
  entry.watching.clear();
  book_.remember(key, entry);
  book_.forget_seen(mutex);  // we lead: what others looked like no longer matters
  OwnerSnapshot owned = own_snapshot(entry, id);
  if (look) relatives_.answer(*look, owned);
  return owned;
}

// Waiting behind `predecessor`: watch it (once per predecessor), read the leader, and take over
// a leader whose lease ran out unrenewed. Returns the owner, or nothing to look again.
std::optional<OwnerSnapshot> LatchBackend::wait_behind(const LatchKey& key, const std::string& mutex,
                                                       const std::string& folder, Entry& entry,
                                                       const LatchNode& predecessor, const LatchNode& leader) {
  const std::string predecessor_path = folder + "/" + predecessor.name;
  const std::string leader_path = folder + "/" + leader.name;
  std::optional<Call> arm;
  if (entry.watching != predecessor_path) {
    book_.wait_behind(predecessor_path, key);
    arm = session_.watch_exists(predecessor_path);
  }
  Call read_leader = session_.get(leader_path);
  if (arm) {
    Reply armed = arm->wait();
    if (armed.rc != ZOK) {
      book_.unwait(predecessor_path, key);
      if (armed.rc == ZNONODE) return std::nullopt;  // it just went: look again
      session_.fail(armed.rc, "watching the latch of mutex '" + mutex + "'");
    }
    entry.watching = predecessor_path;
    book_.remember(key, entry);
  }
  Reply owner = read_leader.wait();
  if (owner.rc == ZNONODE) return std::nullopt;
  if (owner.rc != ZOK) session_.fail(owner.rc, "reading the owner of mutex '" + mutex + "'");
  auto [snapshot, expired] = leader_view(mutex, leader_path, leader, owner, entry.joined);
  if (!expired) return snapshot;
  // Seen unchanged for a whole lease: its owner has stopped believing it owns. Delete it at the
  // version seen (a renewal since makes this fail) and record its token.
  Reply evicted =
      session_.remove_and_set(leader_path, owner.stat.version, folder, std::to_string(snapshot.owner.fencing_token))
          .wait();
  if (evicted.rc == ZOK) {
    internal::log_warn("mutex '" + mutex + "': the lease of " + snapshot.owner.owner_id +
                       " ran out unrenewed; removed its node");
  } else if (evicted.rc != ZNONODE && evicted.rc != ZBADVERSION) {
    session_.fail(evicted.rc, "removing the expired owner of mutex '" + mutex + "'");
  }
  return std::nullopt;
}

// Renews our leading node; false if it is gone. Only waiters judge (and end) an unrenewed
// lease, so the node is rewritten (its version rises, and their clocks restart) only while
// someone waits: a lone owner renews with one read. A waiter that joins after that read first
// sees our node then, later than the read was sent, and the next renewal, within ttl, sees it
// and writes: before its clock, started after ours, can run out.
std::optional<bool> LatchBackend::renew(const LatchKey& key, const Entry& entry, const std::string& mutex,
                                        const std::string& id, const std::string& folder) {
  const auto leading = leads(entry, mutex, id, session_.children(folder).wait());
  if (!leading || !*leading) return leading;
  std::optional<Call> rewrite;
  {
    internal::MutexLock lock(node_writes_);
    rewrite = session_.set(entry.path, node_data(id, idle_mark(key, entry)), -1);
  }
  return rewritten(rewrite->wait(), mutex, id);
}

std::optional<bool> LatchBackend::leads(const Entry& entry, const std::string& mutex, const std::string& id,
                                        const Reply& listing) {
  if (listing.rc == ZNONODE) return std::nullopt;
  if (listing.rc != ZOK) session_.fail(listing.rc, "renewing the lease of '" + id + "' on mutex '" + mutex + "'");
  const auto nodes = latch_nodes(listing.children);
  if (nodes.empty() || nodes.front().name != base_name(entry.path)) return std::nullopt;
  return nodes.size() > 1;
}

std::optional<bool> LatchBackend::rewritten(const Reply& renewed, const std::string& mutex, const std::string& id) {
  if (renewed.rc == ZNONODE) return std::nullopt;
  if (renewed.rc != ZOK) session_.fail(renewed.rc, "renewing the lease of '" + id + "' on mutex '" + mutex + "'");
  return true;  // a node waits behind ours
}

// The renewals and first joins of a batch share their round trips. Every renewal rewrites its
// node, in one multi for many leases (send_rewrites()); every join's create (and listing) is
// sent at once (the session sends them back to back and ZooKeeper answers them in order). Each
// call is judged as acquire() judges it alone; a node gone, a join that found no folder, and a
// waiter's look (a call whose node waits: several dependent round trips) go on as acquire().
std::vector<AcquireResult> LatchBackend::acquire_batch(const std::vector<AcquireCall>& calls) {
  std::vector<AcquireResult> results(calls.size());
  const auto generation = session_.ensure();
  struct Join {
    std::size_t call;
    LatchKey key;
    Joining joining;
  };
  std::vector<Renewal> renewals;
  std::vector<std::pair<std::size_t, LatchKey>> unclaimed;  // (call, key)
  std::vector<Join> joins;
  std::vector<std::size_t> alone;  // calls that go as acquire()
  for (std::size_t i = 0; i < calls.size(); ++i) {
    LatchKey key = key_of(calls[i].mutex, calls[i].contender_id);
    auto entry = book_.entry(key, generation);
    if (entry && entry->claimed) {
      renewals.push_back({i, std::move(key), std::move(*entry), std::nullopt});
    } else if (!entry) {
      unclaimed.emplace_back(i, std::move(key));
    } else {
      alone.push_back(i);
    }
  }
  auto rewrites = send_rewrites(calls, renewals, first(renewals.size()));
  if (renewals.size() <= kRenewalsThatReadDemand) {
    for (auto& renewal : renewals) renewal.listing = session_.children(latch_path(calls[renewal.call].mutex));
  }
  for (auto& [i, key] : unclaimed) {
    const auto& call = calls[i];
    try {
      auto joining =
          send_join(key, call.mutex, call.contender_id, latch_path(call.mutex), generation, call.ttl, call.transition);
      joins.push_back({i, std::move(key), std::move(joining)});
    } catch (...) {
      results[i].error = std::current_exception();
    }
  }
  // A join's answer: the owner it found, or it goes on as acquire() (again), or its folder is
  // missing (true: created below for every such join at once, then it joins again).
  auto settle_join = [&](Join& join, bool last_try) {
    const auto& call = calls[join.call];
    const std::string folder = latch_path(call.mutex);
    try {
      Joined joined = finish_join(join.key, call.mutex, folder, join.joining);
      if (joined.status == Joined::Status::no_folder && !last_try) return true;
      std::optional<OwnerSnapshot> owner;
      if (joined.status == Joined::Status::leading) {
        owner = own_snapshot(joined.entry, call.contender_id);
      } else if (joined.status == Joined::Status::queued) {
        owner = take_place(join.key, call.mutex, call.contender_id, folder, joined.entry, joined.listing,
                           /*created_now=*/true);
      }
      if (owner) {
        results[join.call].snapshot = std::move(*owner);
      } else {
        alone.push_back(join.call);  // round again, as acquire() would
      }
    } catch (...) {
      results[join.call].error = std::current_exception();
    }
    return false;
  };
  std::vector<Join> foldless;  // new mutexes: their folders are made at once, then they join again
  for (auto& join : joins) {
    if (settle_join(join, false)) foldless.push_back(std::move(join));
  }
  if (!foldless.empty()) {
    Call root = send_root();
    std::vector<FolderCalls> folders;
    for (const auto& join : foldless) folders.push_back(send_latch_folder(latch_path(calls[join.call].mutex)));
    const Reply made_root = root.wait();
    std::vector<Join> again;
    for (std::size_t k = 0; k < foldless.size(); ++k) {
      auto& join = foldless[k];
      const auto& call = calls[join.call];
      try {
        check_folder(call.mutex, made_root, folders[k]);
        join.joining = send_join(join.key, call.mutex, call.contender_id, latch_path(call.mutex), generation, call.ttl,
                                 call.transition);
        again.push_back(std::move(join));
      } catch (...) {
        results[join.call].error = std::current_exception();
      }
    }
    for (auto& join : again) settle_join(join, true);
  }
  finish_rewrites(calls, renewals, std::move(rewrites), results, alone);
  internal::acquire_alone(*this, calls, alone, results);
  return results;
}

std::vector<LatchBackend::Rewrite> LatchBackend::send_rewrites(const std::vector<AcquireCall>& calls,
                                                               const std::vector<Renewal>& renewals,
                                                               const std::vector<std::size_t>& which) {
  internal::MutexLock lock(node_writes_);
  std::vector<Rewrite> rewrites;
  std::vector<std::pair<std::string, std::string>> writes;
  std::vector<std::size_t> carried;
  std::size_t bytes = 0;
  auto send = [&] {
    if (writes.empty()) return;
    rewrites.push_back({std::move(carried), session_.write_all(std::move(writes))});
    writes.clear();
    carried.clear();
    bytes = 0;
  };
  for (const std::size_t r : which) {
    const auto& renewal = renewals[r];
    const auto& call = calls[renewal.call];
    std::string data = node_data(call.contender_id, idle_mark(renewal.key, renewal.entry));
    const std::size_t size = renewal.entry.path.size() + data.size();
    if (writes.size() == kRewritesPerMulti || (bytes + size > kBytesPerMulti && !writes.empty())) send();
    bytes += size;
    writes.emplace_back(renewal.entry.path, std::move(data));
    carried.push_back(r);
  }
  send();
  return rewrites;
}

bool LatchBackend::idle_mark(const LatchKey& key, const Entry& entry) {
  const auto now = book_.entry(key);
  return now && now->path == entry.path ? now->idle : entry.idle;
}

void LatchBackend::finish_rewrites(const std::vector<AcquireCall>& calls, const std::vector<Renewal>& renewals,
                                   std::vector<Rewrite> rewrites, std::vector<AcquireResult>& results,
                                   std::vector<std::size_t>& alone) {
  auto failed = [&](const Renewal& renewal, int rc) {
    const auto& call = calls[renewal.call];
    try {
      session_.fail(rc, "renewing the lease of '" + call.contender_id + "' on mutex '" + call.mutex + "'");
    } catch (...) {
      results[renewal.call].error = std::current_exception();
    }
  };
  while (!rewrites.empty()) {
    std::vector<std::size_t> again;  // in a multi that failed on another node: not applied
    for (auto& rewrite : rewrites) {
      const Reply reply = rewrite.call.wait();
      // A failed multi names the write that failed; the others were not applied.
      const bool named = std::any_of(reply.results.begin(), reply.results.end(),
                                     [](int code) { return code != ZOK && code != ZRUNTIMEINCONSISTENCY; });
      for (std::size_t k = 0; k < rewrite.renewals.size(); ++k) {
        const auto& renewal = renewals[rewrite.renewals[k]];
        const auto& call = calls[renewal.call];
        if (reply.rc == ZOK) {  // still ours
          results[renewal.call].snapshot = own_snapshot(renewal.entry, call.contender_id);
          if (renewal.listing) {
            Call listing = *renewal.listing;
            const Reply seen = listing.wait();
            if (seen.rc == ZOK) {
              results[renewal.call].snapshot.demanded =
                  leads(renewal.entry, call.mutex, call.contender_id, seen).value_or(false);
            }
          }
          continue;
        }
        if (Session::unavailable(reply.rc)) {
          failed(renewal, reply.rc);
          continue;
        }
        const int rc = k < reply.results.size() ? reply.results[k] : ZOK;
        if (rc == ZRUNTIMEINCONSISTENCY) {
          again.push_back(rewrite.renewals[k]);
        } else if (rc == ZOK) {
          // Before the failing write (not applied); if none is named, each goes alone, where
          // acquire() judges it.
          if (named) {
            again.push_back(rewrite.renewals[k]);
          } else {
            alone.push_back(renewal.call);
          }
        } else if (rc == ZNONODE) {
          forget_taken_over(renewal.key, call.mutex, call.contender_id);
          alone.push_back(renewal.call);
        } else {
          failed(renewal, rc);
        }
      }
    }
    rewrites = send_rewrites(calls, renewals, again);
  }
}

void LatchBackend::forget_taken_over(const LatchKey& key, const std::string& mutex, const std::string& id) {
  internal::log_warn("mutex '" + mutex + "': the node of " + id +
                     " is gone (its lease was taken over); joining the latch again");
  book_.forget(key);
}

// A create may have happened though its answer was lost: find the node by its guid.
bool LatchBackend::recover(const LatchKey& key, Entry& entry, const std::string& folder,
                           const std::vector<LatchNode>& nodes) {
  for (const auto& node : nodes) {
    if (node.name.find(entry.guid) == std::string::npos) continue;
    Reply stat = session_.get(folder + "/" + node.name).wait();
    if (stat.rc != ZOK) break;
    entry.path = folder + "/" + node.name;
    entry.token = static_cast<std::uint64_t>(stat.stat.czxid);
    entry.joined = Steady::now();
    book_.remember(key, entry);
    return true;
  }
  book_.forget(key);
  return false;
}

void LatchBackend::create_folder(const std::string& mutex, const std::string& folder) {
  Call root = send_root();
  FolderCalls made = send_latch_folder(folder);
  const Reply made_root = root.wait();
  check_folder(mutex, made_root, made);
}

Call LatchBackend::send_root() { return session_.create(kRoot, "", ZOO_PERSISTENT, session_.root_acl()); }

LatchBackend::FolderCalls LatchBackend::send_latch_folder(const std::string& folder) {
  std::optional<Call> derived_root;
  const auto parent = parent_path(folder);
  if (parent != kRoot) derived_root = session_.create(parent, "", ZOO_PERSISTENT, session_.node_acl());
  return {std::move(derived_root), session_.create(folder, "", ZOO_PERSISTENT, session_.node_acl())};
}

void LatchBackend::check_folder(const std::string& mutex, const Reply& made_root, FolderCalls& made) {
  if (made_root.rc == ZNONODE && !options_.chroot.empty()) {
    throw Error(errc::invalid_argument,
                "ZooKeeper at " + where_ + ": the chroot '" + options_.chroot + "' does not exist; create it first");
  }
  if (made_root.rc != ZOK && made_root.rc != ZNODEEXISTS) session_.fail(made_root.rc, "creating /simba");
  if (made.derived_root) {
    const Reply made_parent = made.derived_root->wait();
    if (made_parent.rc != ZOK && made_parent.rc != ZNODEEXISTS) {
      session_.fail(made_parent.rc,
                    "creating " + derived_root(mutex) + ", the folder of mutex '" + mutex + "''s latch");
    }
  }
  const Reply made_latch = made.latch.wait();
  if (made_latch.rc == ZNONODE && made.derived_root) return;  // its derived root was swept just now: joined again
  if (made_latch.rc != ZOK && made_latch.rc != ZNODEEXISTS) {
    session_.fail(made_latch.rc, "creating the latch of mutex '" + mutex + "'");
  }
}

LeaderView LatchBackend::leader_view(const std::string& mutex, const std::string& path, const LatchNode& node,
                                     const Reply& reply, Steady::time_point joined) {
  const auto now = Steady::now();
  const auto since = std::max(book_.seen_since(mutex, path, reply.stat.version, now), joined);
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
  return judge_leader(reply.value, reply.stat.czxid, node.lease, age, session_.session_timeout());
}

}  // namespace simba::zookeeper
