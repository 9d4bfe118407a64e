// Builders of the etcd requests the backend sends. Internal to the etcd backend.
#pragma once

#include <cstdint>
#include <string>

#include "backends/etcd/grpc.h"

namespace simba::etcd::ops {

namespace pb = etcdserverpb;

// The key of [key, end) with the lowest create revision (the owner), with the range's count.
inline pb::RangeRequest first_created(const std::string& key, const std::string& end) {
  pb::RangeRequest range;
  range.set_key(key);
  range.set_range_end(end);
  range.set_sort_target(pb::RangeRequest::CREATE);
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_limit(1);
  return range;
}

// The key of [key, end) with the highest create revision, below `below` if not 0.
inline pb::RangeRequest last_created(const std::string& key, const std::string& end, std::int64_t below) {
  pb::RangeRequest range = first_created(key, end);
  range.set_sort_order(pb::RangeRequest::DESCEND);
  if (below > 0) range.set_max_create_revision(below - 1);
  return range;
}

inline pb::RangeRequest get(const std::string& key) {
  pb::RangeRequest range;
  range.set_key(key);
  return range;
}

inline void add(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const pb::RangeRequest& range) {
  *ops->Add()->mutable_request_range() = range;
}

inline void add_put(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const std::string& key,
                    const std::string& value, std::int64_t lease) {
  auto* put = ops->Add()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  if (lease != 0) {
    put->set_lease(lease);
  }
}

inline void add_delete(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const std::string& key) {
  ops->Add()->mutable_request_delete_range()->set_key(key);
}

// Compares the create revision of `key` (0: absent).
inline void when_created_at(pb::TxnRequest& txn, const std::string& key, std::int64_t revision) {
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_create_revision(revision);
}

inline void when_modified_at(pb::TxnRequest& txn, const std::string& key, std::int64_t revision) {
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(pb::Compare::MOD);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_mod_revision(revision);
}

// No key in [key, end).
inline void when_empty(pb::TxnRequest& txn, const std::string& key, const std::string& end) {
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_range_end(end);
  compare->set_target(pb::Compare::VERSION);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_version(0);
}

}  // namespace simba::etcd::ops
