#include "backends/etcd/watches.h"

#include <algorithm>
#include <vector>

#include "base/log.h"

namespace simba::etcd {

WatchHub::WatchHub(Channel& channel, std::function<void(bool lost)> on_reset)
    : channel_(channel), on_reset_(std::move(on_reset)) {
  reader_ = std::thread([this] { read_loop(); });
}

WatchHub::~WatchHub() {
  {
    internal::MutexLock lock(mutex_);
    closing_ = true;
    if (context_) context_->TryCancel();
  }
  wake_.notify_all();
  reader_.join();
}

WatchHub::Id WatchHub::add(std::string key, std::string end, std::int64_t start_revision, bool deletes_only,
                           OnEvents on_events) {
  internal::MutexLock lock(mutex_);
  const Id id = next_id_++;
  Target& target = targets_[id];
  target.request.set_key(std::move(key));
  target.request.set_range_end(std::move(end));
  target.request.set_start_revision(start_revision);
  if (deletes_only) target.request.add_filters(pb::WatchCreateRequest::NOPUT);
  target.on_events = std::make_shared<const OnEvents>(std::move(on_events));
  if (stream_ != nullptr) create_locked(id, target);
  return id;
}

void WatchHub::remove(Id id) {
  internal::MutexLock lock(mutex_);
  auto it = targets_.find(id);
  if (it == targets_.end()) return;
  if (it->second.server_id >= 0) {
    by_server_id_.erase(it->second.server_id);
    cancel_locked(it->second.server_id);
  } else {
    std::replace(creating_.begin(), creating_.end(), id, Id{0});  // cancelled when its create is answered
  }
  targets_.erase(it);
}

bool WatchHub::live(Id id) {
  internal::MutexLock lock(mutex_);
  auto it = targets_.find(id);
  return stream_ != nullptr && it != targets_.end() && it->second.server_id >= 0;
}

std::uint64_t WatchHub::epoch() {
  internal::MutexLock lock(mutex_);
  return epoch_;
}

void WatchHub::create_locked(Id id, Target& target) {
  pb::WatchRequest request;
  *request.mutable_create_request() = target.request;
  if (stream_ != nullptr && stream_->Write(request)) creating_.push_back(id);
}

void WatchHub::cancel_locked(std::int64_t server_id) {
  pb::WatchRequest request;
  request.mutable_cancel_request()->set_watch_id(server_id);
  if (stream_ != nullptr) stream_->Write(request);
}

void WatchHub::handle(const pb::WatchResponse& response, bool& resync) {
  std::shared_ptr<const OnEvents> deliver;
  bool confirmed_all = false;
  {
    internal::MutexLock lock(mutex_);
    if (response.created()) {
      if (creating_.empty()) return;
      const Id id = creating_.front();
      creating_.pop_front();
      auto it = id == 0 ? targets_.end() : targets_.find(id);
      if (it == targets_.end()) {
        cancel_locked(response.watch_id());  // removed while its create was under way
      } else {
        it->second.server_id = response.watch_id();
        by_server_id_[response.watch_id()] = id;
        // A watch of deletions made from a revision the store has passed meanwhile starts behind
        // (etcd catches such watches up every 100 ms): its owner looks now instead.
        const auto& request = it->second.request;
        if (request.filters_size() > 0 && request.start_revision() > 0 &&
            response.header().revision() >= request.start_revision()) {
          deliver = it->second.on_events;
        }
      }
      confirmed_all = resync && creating_.empty();
      if (confirmed_all) resync = false;
    }
    auto at = by_server_id_.find(response.watch_id());
    if (at != by_server_id_.end()) {
      auto it = targets_.find(at->second);
      if (response.canceled() && it != targets_.end()) {
        // Ended by the server. Its start revision was compacted: watch again from now. Refused
        // otherwise (permission): it is made again with the stream. Either way the owner of the
        // watch looks (an empty response is its cue) and polls meanwhile.
        by_server_id_.erase(at);
        it->second.server_id = -1;
        it->second.request.set_start_revision(0);
        if (response.compact_revision() > 0) {
          create_locked(it->first, it->second);
        } else {
          internal::log_warn("etcd at " + channel_.where() + ": a watch of " + it->second.request.key() +
                             " was refused (" + response.cancel_reason() +
                             "); waiters poll until the stream is made again");
        }
        deliver = it->second.on_events;
      } else if (it != targets_.end() && response.events_size() > 0) {
        deliver = it->second.on_events;
      }
    }
  }
  if (deliver) (*deliver)(response);
  if (confirmed_all) on_reset_(false);
}

void WatchHub::read_loop() {
  auto backoff = std::chrono::milliseconds(50);
  bool broken = false;  // a stream broke before this one: tell when this one is in place
  for (;;) {
    grpc::ClientContext context;
    channel_.prepare_stream(context);
    {
      internal::MutexLock lock(mutex_);
      if (closing_) return;
      context_ = &context;
    }
    std::unique_ptr<Stream> stream = channel_.watch_stub().Watch(&context);
    bool resync = broken;
    {
      internal::MutexLock lock(mutex_);
      stream_ = stream.get();
      creating_.clear();
      by_server_id_.clear();
      for (auto& [id, target] : targets_) {
        target.server_id = -1;
        if (broken) target.request.set_start_revision(0);
        create_locked(id, target);
      }
      if (resync && creating_.empty()) resync = false;  // nothing to confirm; tell below
    }
    const bool tell_now = broken && !resync;
    if (tell_now) on_reset_(false);
    pb::WatchResponse response;
    bool answered = false;
    while (stream->Read(&response)) {
      answered = true;
      handle(response, resync);
    }
    {
      internal::MutexLock lock(mutex_);
      stream_ = nullptr;
      context_ = nullptr;
      ++epoch_;
    }
    const grpc::Status status = stream->Finish();
    channel_.after_stream(status);
    {
      internal::UniqueMutexLock lock(mutex_);
      if (closing_) return;
    }
    internal::log_debug("etcd at " + channel_.where() + ": the watch stream broke (" + status.error_message() +
                        "); opening it again");
    broken = true;
    on_reset_(true);
    backoff = answered ? std::chrono::milliseconds(50) : std::min(backoff * 2, std::chrono::milliseconds(1000));
    internal::UniqueMutexLock lock(mutex_);
    wake_.wait_for(lock.native(), backoff, [&]() REQUIRES(mutex_) { return closing_; });
    if (closing_) return;
  }
}

}  // namespace simba::etcd
