#include "backends/etcd/leases.h"

#include <algorithm>
#include <vector>

#include "base/log.h"

namespace simba::etcd {
namespace {

constexpr auto kTick = std::chrono::milliseconds(50);

std::shared_future<std::int64_t> ready(std::int64_t value) {
  std::promise<std::int64_t> promise;
  promise.set_value(value);
  return promise.get_future().share();
}

}  // namespace

Leases::Leases(Channel& channel, Events events) : channel_(channel), events_(std::move(events)) {
  reader_ = std::thread([this] { read_loop(); });
  ticker_ = std::thread([this] { tick_loop(); });
}

Leases::~Leases() { end(); }

void Leases::end() noexcept {
  // Under grant_mutex_: no grant is under way, and none starts after (lease() sees closing_).
  // Only end() sets closing_: set, the threads are stopped and the leases revoked already.
  internal::MutexLock grant(grant_mutex_);
  std::vector<std::int64_t> ids;
  {
    internal::MutexLock lock(mutex_);
    if (closing_) return;
    closing_ = true;
    if (context_) context_->TryCancel();
    for (const auto& [id, lease] : leases_) ids.push_back(id);
  }
  wake_.notify_all();
  ticker_.join();
  reader_.join();
  for (const auto id : ids) channel_.revoke(id);
}

Leases::Granted Leases::lease(std::int64_t seconds, int slot) {
  internal::MutexLock grant(grant_mutex_);
  {
    internal::MutexLock lock(mutex_);
    if (closing_)
      throw Error(errc::unavailable, "the etcd leases of " + channel_.where() + " were ended (end_sessions)");
    if (auto it = by_slot_.find({seconds, slot}); it != by_slot_.end()) {
      return {it->second, leases_.at(it->second).ttl};
    }
  }
  const auto sent = Steady::now();
  const pb::LeaseGrantResponse granted = channel_.grant(seconds);
  internal::MutexLock lock(mutex_);
  Lease& lease = leases_[granted.id()];
  lease.seconds = seconds;
  lease.slot = slot;
  lease.ttl = std::chrono::seconds(granted.ttl());
  lease.confirmed_sent = sent;
  lease.confirmed_until = sent + lease.ttl;
  lease.last_sent = sent;
  by_slot_[{seconds, slot}] = granted.id();
  return {granted.id(), lease.ttl};
}

Leases::Coverage Leases::coverage(std::int64_t id) {
  internal::MutexLock lock(mutex_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return {};
  return {it->second.confirmed_sent, it->second.confirmed_until};
}

Leases::Answer Leases::refresh(std::int64_t id) {
  internal::UniqueMutexLock lock(mutex_);
  // The stream opens (again) in the background: wait for it, as long as a call may take.
  wake_.wait_for(lock.native(), channel_.command_timeout(),
                 [&]() REQUIRES(mutex_) { return stream_ != nullptr || closing_; });
  auto it = leases_.find(id);
  if (it == leases_.end() || stream_ == nullptr) return ready(-1);
  auto promise = std::make_shared<std::promise<std::int64_t>>();
  Answer answer = promise->get_future().share();
  send_locked(id, it->second, std::move(promise));
  return answer;
}

void Leases::forget(std::int64_t id) {
  internal::MutexLock lock(mutex_);
  drop_locked(id, 0);
}

void Leases::send_locked(std::int64_t id, Lease& lease, std::shared_ptr<std::promise<std::int64_t>> promise) {
  const auto now = Steady::now();
  pb::LeaseKeepAliveRequest request;
  request.set_id(id);
  if (stream_ == nullptr || !stream_->Write(request)) {
    if (promise) promise->set_value(-1);
    return;
  }
  lease.last_sent = now;
  lease.pending.emplace_back(now, std::move(promise));
}

void Leases::drop_locked(std::int64_t id, std::int64_t answer) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  for (auto& [sent, promise] : it->second.pending) {
    if (promise) promise->set_value(answer);
  }
  by_slot_.erase({it->second.seconds, it->second.slot});
  leases_.erase(it);
}

void Leases::answer(const pb::LeaseKeepAliveResponse& response) {
  bool gone = false;
  {
    internal::MutexLock lock(mutex_);
    auto it = leases_.find(response.id());
    if (it == leases_.end()) return;
    Lease& lease = it->second;
    if (response.ttl() <= 0) {
      drop_locked(response.id(), 0);
      gone = true;
    } else if (!lease.pending.empty()) {
      auto [sent, promise] = std::move(lease.pending.front());
      lease.pending.pop_front();
      lease.ttl = std::chrono::seconds(response.ttl());
      lease.confirmed_sent = std::max(lease.confirmed_sent, sent);
      lease.confirmed_until = std::max(lease.confirmed_until, sent + lease.ttl);
      if (promise) promise->set_value(response.ttl());
    }
  }
  if (gone && events_.on_gone) events_.on_gone(response.id());
}

void Leases::read_loop() {
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    grpc::ClientContext context;
    channel_.prepare_stream(context);
    std::unique_ptr<Stream> stream;
    {
      internal::MutexLock lock(mutex_);
      if (closing_) return;
      context_ = &context;
    }
    stream = channel_.lease_stub().LeaseKeepAlive(&context);
    {
      internal::MutexLock lock(mutex_);
      stream_ = stream.get();
    }
    wake_.notify_all();
    pb::LeaseKeepAliveResponse response;
    bool answered = false;
    while (stream->Read(&response)) {
      answered = true;
      answer(response);
    }
    {
      internal::MutexLock lock(mutex_);
      stream_ = nullptr;
      context_ = nullptr;
      for (auto& [id, lease] : leases_) {
        for (auto& [sent, promise] : lease.pending) {
          if (promise) promise->set_value(-1);
        }
        lease.pending.clear();
      }
    }
    const grpc::Status status = stream->Finish();
    channel_.after_stream(status);
    internal::UniqueMutexLock lock(mutex_);
    if (closing_) return;
    internal::log_debug("etcd at " + channel_.where() + ": the keep-alive stream broke (" + status.error_message() +
                        "); opening it again");
    backoff = answered ? std::chrono::milliseconds(50) : std::min(backoff * 2, std::chrono::milliseconds(1000));
    wake_.wait_for(lock.native(), backoff, [&]() REQUIRES(mutex_) { return closing_; });
    if (closing_) return;
  }
}

void Leases::tick_loop() {
  for (;;) {
    {
      internal::UniqueMutexLock lock(mutex_);
      wake_.wait_for(lock.native(), kTick, [&]() REQUIRES(mutex_) { return closing_; });
      if (closing_) return;
      const auto now = Steady::now();
      for (auto& [id, lease] : leases_) {
        if (now - lease.last_sent >= lease.ttl / 6) send_locked(id, lease, nullptr);
      }
    }
    if (events_.on_tick) events_.on_tick();
  }
}

}  // namespace simba::etcd
