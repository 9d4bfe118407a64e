// The etcd backend's administration (list, sweep, evict), idle marks and raw probe.
#include <algorithm>
#include <map>
#include <set>

#include "backends/etcd/etcd_backend_impl.h"
#include "backends/etcd/ops.h"
#include "base/log.h"

namespace simba::etcd {
namespace {

constexpr std::int64_t kPage = 5000;
constexpr std::size_t kSweepBatch = 64;

// Calls `each(kv)` for every key in [key, end), a page at a time (one read per page).
template <class Each>
void scan(Channel& channel, std::string key, const std::string& end, bool keys_only, Each&& each) {
  for (;;) {
    pb::RangeRequest page;
    page.set_key(key);
    page.set_range_end(end);
    page.set_limit(kPage);
    page.set_keys_only(keys_only);
    const auto got = channel.range(page, "listing the keys under " + key);
    for (const auto& kv : got.kvs()) each(kv);
    if (!got.more() || got.kvs_size() == 0) return;
    key = got.kvs(got.kvs_size() - 1).key() + '\0';
  }
}

}  // namespace

// One range over the prefix, with values, a page at a time: each name's record and the keys
// of its line come together, so the owners need no read of their own (an owner of another
// process still costs a look at its etcd lease, as read() does).
MutexListing EtcdBackend::list(const std::string& prefix, std::size_t limit) {
  const std::string root = options_.prefix + "/";
  const std::string start = root + encode_name(prefix);
  struct Found {
    pb::RangeResponse line;  // its first created contender key, and `count` of them
    pb::RangeResponse record;
  };
  std::map<std::string, Found> names;
  scan(channel_, start, prefix_end(start), /*keys_only=*/false, [&](const pb::KeyValue& kv) {
    const std::string rest = kv.key().substr(root.size());
    const auto slash = rest.find('/');
    const auto name = decode_name(rest.substr(0, slash));
    if (!name) return;
    auto& found = names[*name];
    if (slash == std::string::npos) {
      *found.record.add_kvs() = kv;
      return;
    }
    found.line.set_count(found.line.count() + 1);
    if (found.line.kvs_size() == 0) {
      *found.line.add_kvs() = kv;
    } else if (kv.create_revision() < found.line.kvs(0).create_revision()) {
      *found.line.mutable_kvs(0) = kv;
    }
  });
  MutexListing out;
  for (const auto& [name, found] : names) {
    if (out.records.size() == limit) {
      out.truncated = true;
      break;
    }
    const auto seen = name.empty() ? OwnerSnapshot{MutexOwner::none(), epoch_millis_now()}
                                   : snapshot_of(name, found.line, found.record);
    out.records.push_back({name, seen.owner});
  }
  out.now = epoch_millis_now();
  return out;
}

// A record (a key "<prefix>/<name>") goes when its mutex has been free for `idle_for`: its
// release time is that old, and, checked in the same transaction as the delete, no contender
// key is under it and the record did not change since it was read.
std::size_t EtcdBackend::sweep(std::chrono::milliseconds idle_for, std::size_t limit) {
  const std::string root = options_.prefix + "/";
  const EpochMillis before = epoch_millis_now() - idle_for.count();
  struct Candidate {
    std::string name;
    std::string key;
    std::int64_t mod_revision;
  };
  std::vector<Candidate> idle;
  scan(channel_, root, prefix_end(root), /*keys_only=*/false, [&](const pb::KeyValue& kv) {
    const std::string rest = kv.key().substr(root.size());
    if (rest.find('/') != std::string::npos) return;  // a contender key
    const auto name = decode_name(rest);
    if (!name || parse_record(kv.value()).released_at > before) return;
    idle.push_back({*name, kv.key(), kv.mod_revision()});
  });
  if (idle.size() > limit) idle.resize(limit);
  // Deletes the records of [first, last) in one transaction if all are still idle.
  const auto sweep_all = [&](std::size_t first, std::size_t last) {
    pb::TxnRequest txn;
    for (std::size_t i = first; i < last; ++i) {
      const MutexKeys keys = mutex_keys(options_.prefix, idle[i].name);
      ops::when_modified_at(txn, idle[i].key, idle[i].mod_revision);
      ops::when_empty(txn, keys.contended, keys.end);
      ops::add_delete(txn.mutable_success(), idle[i].key);
    }
    return channel_.txn(txn, "sweeping the record of mutex '" + idle[first].name + "'").succeeded();
  };
  // In batches (etcd allows 128 comparisons per transaction, two per record); a batch in which
  // one mutex came back to life goes record by record.
  std::size_t swept = 0;
  for (std::size_t first = 0; first < idle.size(); first += kSweepBatch) {
    const std::size_t last = std::min(idle.size(), first + kSweepBatch);
    if (sweep_all(first, last)) {
      swept += last - first;
      continue;
    }
    for (std::size_t i = first; i < last; ++i) swept += sweep_all(i, i + 1) ? 1 : 0;
  }
  return swept;
}

std::optional<pb::KeyValue> EtcdBackend::owner_key(const MutexKeys& keys, const std::string& mutex,
                                                   const std::string& owner_id) {
  const auto line =
      channel_.range(ops::first_created(keys.contended, keys.end), "reading the owner of mutex '" + mutex + "'");
  if (line.kvs_size() == 0) return std::nullopt;
  const pb::KeyValue& owner = line.kvs(0);
  if (parse_contender(owner.value(), owner.lease()).owner_id != owner_id) return std::nullopt;
  return owner;
}

bool EtcdBackend::evict(const std::string& mutex, const std::string& owner_id) {
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  const auto found = owner_key(keys, mutex, owner_id);
  if (!found) return false;
  const pb::KeyValue& owner = *found;
  pb::TxnRequest txn;
  ops::when_created_at(txn, owner.key(), owner.create_revision());
  ops::add_delete(txn.mutable_success(), owner.key());
  ops::add_put(txn.mutable_success(), keys.record,
               record_value({static_cast<std::uint64_t>(owner.create_revision()), epoch_millis_now()}), 0);
  const bool evicted = channel_.txn(txn, "evicting '" + owner_id + "' from mutex '" + mutex + "'").succeeded();
  if (evicted) internal::log_warn("mutex '" + mutex + "': ended the lease of " + owner_id + " by force");
  return evicted;
}

// The mark is in the owner key's value; a new key (a new lease) starts without it.
bool EtcdBackend::mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) {
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  const auto found = owner_key(keys, mutex, owner_id);
  if (!found) return false;
  const pb::KeyValue& owner = *found;
  pb::TxnRequest txn;
  ops::when_created_at(txn, owner.key(), owner.create_revision());
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(owner.key());
  put->set_value(contender_value(owner_id, idle));
  put->set_ignore_lease(true);
  return channel_.txn(txn, "marking the lease of '" + owner_id + "' on mutex '" + mutex + "'").succeeded();
}

// The recipe's bare step: a put-if-absent transaction and a delete, on this backend's channel.
double EtcdBackend::raw_once() {
  const std::string key = options_.prefix + "/.simba-bench-raw";
  const auto start = Steady::now();
  pb::TxnRequest txn;
  ops::when_created_at(txn, key, 0);
  ops::add_put(txn.mutable_success(), key, "raw", 0);
  channel_.txn(txn, "the raw put");
  pb::DeleteRangeRequest remove;
  remove.set_key(key);
  channel_.remove(remove, "the raw delete");
  return std::chrono::duration<double, std::micro>(Steady::now() - start).count();
}

}  // namespace simba::etcd
