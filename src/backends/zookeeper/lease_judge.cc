// Judging the leases of a ZooKeeper latch.
#include "backends/zookeeper/lease_judge.h"

namespace simba::zookeeper {

OwnerSnapshot own_snapshot(const Entry& entry, const std::string& contender_id) {
  const EpochMillis now = epoch_millis_now();
  MutexOwner owner;
  owner.owner_id = contender_id;
  owner.acquired_at = now;
  owner.ttl_at = now + entry.lease.ttl.count();
  owner.transition_at = owner.ttl_at + entry.lease.transition.count();
  owner.fencing_token = entry.token;
  return {owner, now};
}

LeaderView judge_leader(const std::string& node_data, std::int64_t czxid, const std::optional<Lease>& lease,
                        std::chrono::milliseconds age, std::chrono::milliseconds session_timeout) {
  const EpochMillis wall = epoch_millis_now();
  MutexOwner owner;
  auto data = parse_node_data(node_data);
  owner.owner_id = std::move(data.owner_id);
  owner.idle = data.idle;
  owner.fencing_token = static_cast<std::uint64_t>(czxid);
  bool expired = false;
  if (lease) {
    expired = age > lease->total();
    owner.acquired_at = expired ? wall : wall - age.count();
    owner.ttl_at = owner.acquired_at + lease->ttl.count();
    owner.transition_at = owner.ttl_at + lease->transition.count();
  } else {
    owner.acquired_at = wall - age.count();
    owner.ttl_at = owner.transition_at = wall + session_timeout.count();
  }
  return {{owner, wall}, expired};
}

}  // namespace simba::zookeeper
