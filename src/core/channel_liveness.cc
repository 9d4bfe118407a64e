// Where the contenders of one Client hear that the push channel was lost: see
// channel_liveness.h.
#include "core/channel_liveness.h"

#include <vector>

#include "base/log.h"
#include "core/service_core.h"

namespace simba::internal {

ChannelLiveness::~ChannelLiveness() {
  std::unique_ptr<Subscription> subscription;
  {
    internal::MutexLock lock(open_mutex_);
    subscription = std::move(subscription_);
  }
  subscription.reset();  // once it is gone, on_event() runs no more
}

bool ChannelLiveness::linked_locked(ServiceCore& core) const {
  return core.liveness_.prev != nullptr || first_ == &core;
}

bool ChannelLiveness::open_locked() {
  if (subscription_) return true;
  if (none_.load(std::memory_order_relaxed)) return false;
  try {
    subscription_ = backend_.watch_channel([this](WatchEvent event) { on_event(event); });
  } catch (const std::exception& e) {
    log_warn("cannot watch the push channel of " + backend_.describe() + " (" + e.what() +
             "); an owner hears of its loss only at its next renewal");
    return false;  // tried again at the next look
  }
  if (!subscription_) none_.store(true, std::memory_order_release);
  return subscription_ != nullptr;
}

bool ChannelLiveness::offered() {
  if (none_.load(std::memory_order_acquire)) return false;  // (memory, SQLite: each look stops here)
  internal::MutexLock lock(open_mutex_);
  open_locked();
  return !none_.load(std::memory_order_relaxed);
}

bool ChannelLiveness::join(ServiceCore& core) {
  if (none_.load(std::memory_order_acquire)) return false;  // (memory, SQLite: each start() passes here)
  {
    internal::MutexLock lock(open_mutex_);
    if (!open_locked()) return false;
  }
  internal::MutexLock lock(mutex_);
  if (linked_locked(core)) return true;
  core.liveness_.prev = nullptr;
  core.liveness_.next = first_;
  if (first_) first_->liveness_.prev = &core;
  first_ = &core;
  return true;
}

void ChannelLiveness::leave(ServiceCore& core) noexcept {
  // No channel watch: none was ever linked (a join links only once the watch is open, and none_
  // is set only when opening the first found none). Memory and SQLite stop here at each stop().
  if (none_.load(std::memory_order_acquire)) return;
  internal::MutexLock lock(mutex_);
  if (!linked_locked(core)) return;
  auto& link = core.liveness_;
  if (link.prev) {
    link.prev->liveness_.next = link.next;
  } else {
    first_ = link.next;
  }
  if (link.next) link.next->liveness_.prev = link.prev;
  link = LivenessLink{};
}

void ChannelLiveness::on_event(WatchEvent event) {
  if (event != WatchEvent::lost) return;  // back: an owner revoked at the loss contends again by itself
  std::vector<std::shared_ptr<ServiceCore>> cores;
  {
    internal::MutexLock lock(mutex_);
    for (ServiceCore* core = first_; core; core = core->liveness_.next) {
      // One being destroyed (no reference left) waits in leave() for this lock: skipped.
      if (auto alive = core->weak_from_this().lock()) cores.push_back(std::move(alive));
    }
  }
  if (cores.empty()) return;
  // On the I/O pool, not the channel's thread: a core let go there last may end a watch of
  // this very channel, and a loss is urgent (every owner revokes).
  runtime_.post_io(
      [cores = std::move(cores)] {
        for (const auto& core : cores) core->on_channel_lost();
      },
      Runtime::Priority::urgent);
}

}  // namespace simba::internal
