#include "backends/etcd/channel.h"

#include <netdb.h>
#include <sys/socket.h>

#include <arpa/inet.h>

#include "base/log.h"

namespace simba::etcd {
namespace {

// "host:port" -> "a.b.c.d:port" (gRPC's ipv4: target takes literals only).
std::string literal_of(const std::string& endpoint, const std::string& where) {
  const auto colon = endpoint.rfind(':');
  const std::string host = endpoint.substr(0, colon);
  const std::string port = endpoint.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    throw Error(errc::unavailable, "etcd at " + where + ": cannot resolve '" + host + "' to an IPv4 address");
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
  freeaddrinfo(found);
  return std::string(text) + ":" + port;
}

std::string target_of(const EtcdOptions& options, const std::string& where) {
  std::string target = "ipv4:";
  for (std::size_t i = 0; i < options.endpoints.size(); ++i) {
    target += (i ? "," : "") + literal_of(options.endpoints[i], where);
  }
  return target;
}

bool token_expired(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_message().find("invalid auth token") != std::string::npos;
}

}  // namespace

Channel::Channel(const EtcdOptions& options, std::string where) : options_(options), where_(std::move(where)) {
  grpc::ChannelArguments args;
  // etcd refuses pings more often than every 5 s (--grpc-keepalive-min-time); 5 s with a 2 s
  // timeout finds a dead or stopped server and moves on to the next endpoint.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(-1);
  channel_ = grpc::CreateCustomChannel(target_of(options_, where_), grpc::InsecureChannelCredentials(), args);
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() + options_.dial_timeout)) {
    throw Error(errc::unavailable, "etcd at " + where_ + ": no endpoint answered within " +
                                       std::to_string(options_.dial_timeout.count()) + " ms");
  }
  kv_ = pb::KV::NewStub(channel_);
  watch_ = pb::Watch::NewStub(channel_);
  lease_ = pb::Lease::NewStub(channel_);
  auth_ = pb::Auth::NewStub(channel_);
  if (!options_.user.empty() || !options_.password.empty()) authenticate();
}

void Channel::authenticate() {
  pb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  pb::AuthenticateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.command_timeout);
  const grpc::Status status = auth_->Authenticate(&context, request, &response);
  if (!status.ok()) {
    const auto& message = status.error_message();
    if (message.find("authentication failed") != std::string::npos ||
        message.find("authentication is not enabled") != std::string::npos ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      throw Error(errc::permission_denied,
                  "etcd at " + where_ + " refused the credentials of user '" + options_.user + "': " + message);
    }
    fail(status, "authenticating as '" + options_.user + "'");
  }
  internal::MutexLock lock(mutex_);
  token_ = response.token();
}

void Channel::add_token(grpc::ClientContext& context) {
  internal::MutexLock lock(mutex_);
  if (!token_.empty()) context.AddMetadata("token", token_);
}

void Channel::prepare_stream(grpc::ClientContext& context) {
  context.set_wait_for_ready(true);
  add_token(context);
}

void Channel::after_stream(const grpc::Status& status) noexcept {
  if (status.ok() || options_.user.empty() || !token_expired(status)) return;
  try {
    authenticate();
  } catch (const std::exception& e) {
    internal::log_warn(std::string(e.what()) + " (a stream will try again)");
  }
}

template <class Response, class Invoke>
Response Channel::call(const std::string& what, Invoke&& invoke) {
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.command_timeout);
    // A call waits, within its deadline, for a connection being made again (after a reset, or
    // on the next endpoint) instead of failing at once.
    context.set_wait_for_ready(true);
    add_token(context);
    Response response;
    const grpc::Status status = invoke(context, response);
    if (status.ok()) return response;
    if (attempt == 0 && !options_.user.empty() && token_expired(status)) {
      authenticate();  // simple tokens expire when unused for a while: get a new one, once
      continue;
    }
    fail(status, what);
  }
}

pb::TxnResponse Channel::txn(const pb::TxnRequest& request, const std::string& what) {
  return call<pb::TxnResponse>(
      what, [&](grpc::ClientContext& context, pb::TxnResponse& out) { return kv_->Txn(&context, request, &out); });
}

pb::RangeResponse Channel::range(const pb::RangeRequest& request, const std::string& what) {
  return call<pb::RangeResponse>(
      what, [&](grpc::ClientContext& context, pb::RangeResponse& out) { return kv_->Range(&context, request, &out); });
}

pb::DeleteRangeResponse Channel::remove(const pb::DeleteRangeRequest& request, const std::string& what) {
  return call<pb::DeleteRangeResponse>(what, [&](grpc::ClientContext& context, pb::DeleteRangeResponse& out) {
    return kv_->DeleteRange(&context, request, &out);
  });
}

pb::LeaseGrantResponse Channel::grant(std::int64_t ttl_seconds) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  auto granted = call<pb::LeaseGrantResponse>("granting a lease of " + std::to_string(ttl_seconds) + " s",
                                              [&](grpc::ClientContext& context, pb::LeaseGrantResponse& out) {
                                                return lease_->LeaseGrant(&context, request, &out);
                                              });
  if (!granted.error().empty()) {
    throw Error(errc::unavailable, "etcd at " + where_ + ": granting a lease: " + granted.error());
  }
  return granted;
}

pb::LeaseTimeToLiveResponse Channel::time_to_live(std::int64_t lease) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  return call<pb::LeaseTimeToLiveResponse>("reading the lease " + std::to_string(lease),
                                           [&](grpc::ClientContext& context, pb::LeaseTimeToLiveResponse& out) {
                                             return lease_->LeaseTimeToLive(&context, request, &out);
                                           });
}

void Channel::revoke(std::int64_t lease) noexcept {
  try {
    pb::LeaseRevokeRequest request;
    request.set_id(lease);
    call<pb::LeaseRevokeResponse>("revoking a lease", [&](grpc::ClientContext& context, pb::LeaseRevokeResponse& out) {
      return lease_->LeaseRevoke(&context, request, &out);
    });
  } catch (const LeaseNotFound&) {
    // already gone: nothing to revoke
  } catch (const std::exception& e) {
    internal::log_warn(std::string(e.what()) + " (its keys go when it expires)");
  }
}

void Channel::fail(const grpc::Status& status, const std::string& what) const {
  const std::string message = "etcd at " + where_ + ": " + what + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: throw Error(errc::permission_denied, message);
    case grpc::StatusCode::NOT_FOUND:
      if (status.error_message().find("lease not found") != std::string::npos) throw LeaseNotFound(message);
      throw Error(errc::internal, message);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      if (status.error_message().find("too large") != std::string::npos) throw Error(errc::invalid_argument, message);
      throw Error(errc::internal, message);
    default: throw Error(errc::unavailable, message);
  }
}

}  // namespace simba::etcd
