// How a ZooKeeper latch's leases are judged: the record of our own lease, and whether another
// leader's lease ran out unrenewed. Pure functions. Internal to the ZooKeeper backend.
//
// Only waiters judge a lease, by their own monotonic clock: a leader whose node looked
// unchanged here for longer than its lease (ttl + transition, from the node's name), counted
// from when that version was first seen or from the waiter's own joining, whichever is later,
// has stopped believing it owns. (A lone owner renews without rewriting its node: what this
// process saw before it joined proves nothing.) No two hosts' clocks are ever compared.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "backends/zookeeper/latch_book.h"
#include "simba/backend.h"

namespace simba::zookeeper {

// The owner record of our own lease, counted from now (the call was sent earlier).
OwnerSnapshot own_snapshot(const Entry& entry, const std::string& contender_id);

struct LeaderView {
  OwnerSnapshot snapshot;
  bool expired = false;  // its lease ran out unrenewed: a waiter may remove its node
};

// The record of another leader whose node (data `node_data`: its owner id and idle mark,
// creation zxid `czxid`, lease from its name if it is ours) has looked unchanged for `age`. Times are this host's
// clock; an owner past its lease shows one lease from now (when it would go if it died now). A node without a lease
// (another latch client's) owns until its session ends, at most `session_timeout` after its owner dies.
LeaderView judge_leader(const std::string& node_data, std::int64_t czxid, const std::optional<Lease>& lease,
                        std::chrono::milliseconds age, std::chrono::milliseconds session_timeout);

}  // namespace simba::zookeeper
