// The etcd backend's gRPC channel: endpoints with fail-over, authentication, the unary calls
// with their deadline, and the mapping of gRPC statuses to simba errors. Internal to the etcd
// backend.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backends/etcd/grpc.h"
#include "base/thread_annotations.h"
#include "simba/error.h"
#include "simba/etcd_backend.h"

namespace simba::etcd {

namespace pb = etcdserverpb;

// The lease a call named is gone (expired or revoked): etcd's "requested lease not found".
class LeaseNotFound : public Error {
 public:
  explicit LeaseNotFound(const std::string& what) : Error(errc::unavailable, what) {}
};

class Channel {
 public:
  // Connects within options.dial_timeout and authenticates (throws Error: see make_etcd_backend).
  Channel(const EtcdOptions& options, std::string where);

  pb::TxnResponse txn(const pb::TxnRequest& request, const std::string& what);
  pb::RangeResponse range(const pb::RangeRequest& request, const std::string& what);
  pb::DeleteRangeResponse remove(const pb::DeleteRangeRequest& request, const std::string& what);
  pb::LeaseGrantResponse grant(std::int64_t ttl_seconds);
  pb::LeaseTimeToLiveResponse time_to_live(std::int64_t lease);
  // Best effort, bounded by the command timeout: a failure is logged.
  void revoke(std::int64_t lease) noexcept;

  // A stream's context: the auth token, no deadline (the stream lives until it breaks).
  void prepare_stream(grpc::ClientContext& context);
  // After a stream ended with `status`: if the server refused its token (simple tokens expire
  // when unused), gets a new one for the next stream; a failure is logged.
  void after_stream(const grpc::Status& status) noexcept;
  pb::Watch::Stub& watch_stub() { return *watch_; }
  pb::Lease::Stub& lease_stub() { return *lease_; }

  // Throws the Error for a failed call (`what` names what it was doing).
  [[noreturn]] void fail(const grpc::Status& status, const std::string& what) const;
  const std::string& where() const { return where_; }
  std::chrono::milliseconds command_timeout() const { return options_.command_timeout; }

 private:
  template <class Response, class Invoke>
  Response call(const std::string& what, Invoke&& invoke);
  void authenticate();
  void add_token(grpc::ClientContext& context);

  const EtcdOptions options_;
  const std::string where_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Auth::Stub> auth_;
  internal::AnnotatedMutex mutex_;
  std::string token_ GUARDED_BY(mutex_);
};

}  // namespace simba::etcd
