// The reconnecting push channel's thread.
#include "backends/common/push_channel.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "simba/error.h"

namespace simba::internal {

// One object per watch, no closures: a process may watch 100,000 mutexes.
class PushChannel::Handle final : public Subscription {
 public:
  Handle(PushChannel& channel, std::shared_ptr<Watcher> watcher, bool ready_before_first_round)
      : channel_(channel), watcher_(std::move(watcher)), ready_before_first_round_(ready_before_first_round) {}
  ~Handle() override {
    watcher_->end();
    channel_.remove(watcher_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  void wait_ready() override { channel_.wait_ready(watcher_); }
  bool ready_before_first_round() const noexcept override { return ready_before_first_round_; }

 private:
  PushChannel& channel_;
  const std::shared_ptr<Watcher> watcher_;
  const bool ready_before_first_round_;
};

PushChannel::PushChannel(PushChannelOptions options, Connect connect)
    : options_(std::move(options)), connect_(std::move(connect)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0) throw Error(errc::internal, options_.where + ": eventfd failed");
}

PushChannel::~PushChannel() {
  {
    internal::MutexLock lock(mutex_);
    stopping_ = true;
  }
  ready_changed_.notify_all();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

std::unique_ptr<Subscription> PushChannel::watch(std::vector<std::string> keys,
                                                 std::function<void(WatchEvent)> on_event, Subscribe when) {
  auto watcher = std::make_shared<Watcher>(std::move(on_event), std::move(keys));
  bool requested = false;
  {
    internal::MutexLock lock(mutex_);
    if (when == Subscribe::lazily) {
      watcher->pending = true;
    } else {
      requested = listen_locked(watcher);
    }
    watchers_.insert(watcher);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  if (requested) wake_thread();
  if (when == Subscribe::before_return) {
    wait_ready(watcher);  // its keys are subscribed when it returns
  } else if (when == Subscribe::lazily && options_.ready_timeout.count() > 0) {
    // The channel itself is up before the caller's first round (once per connection, not per
    // watch): an owner must hear the server's loss from its first lease on, or a restart that
    // lost the lease could go unheard. The keys' subscriptions are wait_ready()'s.
    internal::UniqueMutexLock lock(mutex_);
    ready_changed_.wait_for(lock.native(), options_.ready_timeout,
                            [&]() REQUIRES(mutex_) { return connect_failed_ || stopping_ || connected_; });
  }
  return std::make_unique<Handle>(*this, std::move(watcher), when == Subscribe::before_first_round);
}

bool PushChannel::listen_locked(const std::shared_ptr<Watcher>& watcher) {
  bool requested = false;
  watcher->listened.reserve(watcher->keys.size());
  for (auto& key : watcher->keys) {
    // (try_emplace moves the key only if it inserts it.) A node of keys_ stays while it has
    // watchers: the pointer in `listened` lives as long as the watcher listens.
    const auto it = keys_.try_emplace(std::move(key)).first;
    auto& list = it->second.watchers;
    // Still subscribed if it only lingers idle; else ask the thread to subscribe.
    if (list.empty() && idle_.erase(it->first) == 0) {
      requests_.emplace_back(true, it->first);
      requested = true;
    }
    list.push_back(watcher);
    watcher->listened.push_back(&it->first);
  }
  std::vector<std::string>().swap(watcher->keys);  // kept by keys_ from now on
  return requested;
}

void PushChannel::wake_thread() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
}

void PushChannel::wait_ready(const std::shared_ptr<Watcher>& watcher) {
  bool requested = false;
  {
    internal::MutexLock lock(mutex_);
    if (std::exchange(watcher->pending, false)) requested = listen_locked(watcher);  // its keys from now on
  }
  if (requested) wake_thread();
  if (options_.ready_timeout.count() <= 0) return;
  internal::UniqueMutexLock lock(mutex_);
  ready_changed_.wait_for(lock.native(), options_.ready_timeout, [&]() REQUIRES(mutex_) {
    return connect_failed_ || stopping_ ||
           (connected_ && std::all_of(watcher->listened.begin(), watcher->listened.end(),
                                      [&](const std::string* key) REQUIRES(mutex_) {
                                        const auto it = keys_.find(*key);
                                        return it != keys_.end() && it->second.confirmed;
                                      }));
  });
}

void PushChannel::remove(const std::shared_ptr<Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  watchers_.erase(watcher);
  if (std::exchange(watcher->pending, false)) return;  // never listened
  const auto now = std::chrono::steady_clock::now();
  for (const std::string* key : std::exchange(watcher->listened, {})) {
    auto it = keys_.find(*key);
    if (it == keys_.end()) continue;
    std::erase(it->second.watchers, watcher);
    if (it->second.watchers.empty()) idle_[it->first] = now;  // unsubscribed by the thread once it has lingered
  }
}

void PushChannel::notify_all(WatchEvent event) {
  std::vector<std::shared_ptr<Watcher>> everyone;
  {
    internal::MutexLock lock(mutex_);
    everyone.assign(watchers_.begin(), watchers_.end());
  }
  for (auto& watcher : everyone) watcher->call(event);
}

void PushChannel::deliver(const std::string& key, WatchEvent event) {
  std::vector<std::shared_ptr<Watcher>> targets;
  {
    internal::MutexLock lock(mutex_);
    if (auto it = keys_.find(key); it != keys_.end()) targets = it->second.watchers;
  }
  for (auto& watcher : targets) watcher->call(event);
}

void PushChannel::confirmed(const std::string& key) {
  {
    internal::MutexLock lock(mutex_);
    // A key no longer listened to (unsubscribed meanwhile) has nobody to tell.
    if (auto it = keys_.find(key); it != keys_.end()) it->second.confirmed = true;
  }
  ready_changed_.notify_all();
}

// Everything below runs on the channel's thread only, which alone touches `link_`.

void PushChannel::wait_for_wake(std::chrono::milliseconds timeout) {
  pollfd wake_only{wake_fd_, POLLIN, 0};
  poll(&wake_only, 1, static_cast<int>(timeout.count()));
  std::uint64_t drained;
  [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
}

bool PushChannel::connect_and_resubscribe() {
  try {
    link_ = connect_();
  } catch (const std::exception& e) {
    link_.reset();
    log_debug(options_.where + ": " + options_.what + ": " + e.what());
    {
      internal::MutexLock lock(mutex_);
      connect_failed_ = true;
    }
    ready_changed_.notify_all();
    return false;
  }
  {
    internal::MutexLock lock(mutex_);
    connect_failed_ = false;
    connected_ = true;
    // A new connection subscribes only what is watched; everything current is asked here.
    for (const auto& [key, _] : idle_) keys_.erase(key);
    idle_.clear();
    requests_.clear();
    for (auto& [key, state] : keys_) {
      state.confirmed = false;
      requests_.emplace_back(true, key);
    }
  }
  ready_changed_.notify_all();
  return true;
}

void PushChannel::unsubscribe_idle() {
  const auto now = std::chrono::steady_clock::now();
  internal::MutexLock lock(mutex_);
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (now - it->second >= options_.linger) {
      requests_.emplace_back(false, it->first);
      keys_.erase(it->first);
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
}

void PushChannel::drain_requests() {
  std::vector<std::pair<bool, std::string>> requests;
  {
    internal::MutexLock lock(mutex_);
    requests.swap(requests_);
  }
  for (auto& [subscribe, key] : requests) {
    if (!subscribe) {
      {
        internal::MutexLock lock(mutex_);
        // Watched again since it was let go: subscribed again by a request after this one.
        if (auto it = keys_.find(key); it != keys_.end()) it->second.confirmed = false;
      }
      link_->unsubscribe(key);
    } else if (link_->subscribe(key)) {
      confirmed(key);
    }
  }
}

void PushChannel::run() {
  pthread_setname_np(pthread_self(), options_.thread_name.c_str());
  std::mt19937_64 rng{std::random_device{}()};
  std::chrono::milliseconds backoff{50};
  bool was_connected = false;
  for (;;) {
    {
      internal::MutexLock lock(mutex_);
      if (stopping_) break;
    }
    if (!link_) {
      if (!connect_and_resubscribe()) {
        std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
        wait_for_wake(std::chrono::milliseconds(jitter(rng)));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
        continue;
      }
      backoff = std::chrono::milliseconds(50);
      if (was_connected) notify_all(WatchEvent::released);  // changes may have passed unseen
      was_connected = true;
    }
    try {
      unsubscribe_idle();
      drain_requests();
      pollfd fds[2] = {{link_->socket(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(fds, 2, 1000) < 0) continue;
      if (fds[1].revents & POLLIN) {
        std::uint64_t drained;
        [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) link_->read(*this);
    } catch (const std::exception& e) {
      log_warn(options_.where + ": " + options_.what + " connection lost (" + e.what() + "); reconnecting");
      link_.reset();
      {
        internal::MutexLock lock(mutex_);
        connected_ = false;
        for (auto& [key, state] : keys_) state.confirmed = false;
      }
      notify_all(WatchEvent::lost);
    }
  }
  link_.reset();
}

}  // namespace simba::internal
