// The Redis backend's pub/sub thread.
#include "backends/redis/subscriber.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "backends/redis/connection.h"
#include "core/log.h"
#include "simba/error.h"

namespace simba::redis {

Subscriber::Subscriber(RedisOptions options, std::string where)
    : options_(std::move(options)), where_(std::move(where)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0) throw Error(errc::internal, where_ + ": eventfd failed");
}

Subscriber::~Subscriber() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  confirmed_changed_.notify_all();
  wake();
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

void Subscriber::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
}

std::unique_ptr<Subscription> Subscriber::watch(const std::vector<std::string>& channels,
                                                std::function<void(WatchEvent)> on_event) {
  auto watcher = std::make_shared<Watcher>(std::move(on_event), channels);
  bool requested = false;
  {
    std::lock_guard lock(mutex_);
    for (const auto& channel : channels) {
      auto& list = by_channel_[channel];
      // Still subscribed if it only lingers idle; else ask the thread to subscribe.
      if (list.empty() && idle_channels_.erase(channel) == 0) {
        requests_.emplace_back("SUBSCRIBE", channel);
        requested = true;
      }
      list.push_back(watcher);
    }
    watchers_.insert(watcher);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  if (requested) wake();
  auto handle = std::make_unique<internal::WatchHandle>(watcher, [this, watcher] { remove(watcher); });
  std::unique_lock lock(mutex_);
  confirmed_changed_.wait_for(lock, options_.command_timeout, [&] {
    return connect_failed_ || stopping_ ||
           std::all_of(channels.begin(), channels.end(), [&](auto& c) { return confirmed_.count(c) > 0; });
  });
  return handle;
}

void Subscriber::remove(const std::shared_ptr<Watcher>& watcher) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (const auto& channel : watcher->keys) {
    auto it = by_channel_.find(channel);
    if (it == by_channel_.end()) continue;
    std::erase(it->second, watcher);
    if (it->second.empty()) {
      by_channel_.erase(it);
      idle_channels_[channel] = now;  // unsubscribed by the thread once it has lingered
    }
  }
  watchers_.erase(watcher);
}

void Subscriber::unsubscribe_idle() {
  constexpr auto kLinger = std::chrono::seconds(10);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  for (auto it = idle_channels_.begin(); it != idle_channels_.end();) {
    if (now - it->second >= kLinger) {
      requests_.emplace_back("UNSUBSCRIBE", it->first);
      it = idle_channels_.erase(it);
    } else {
      ++it;
    }
  }
}

void Subscriber::notify_all(WatchEvent event) {
  std::vector<std::shared_ptr<Watcher>> everyone;
  {
    std::lock_guard lock(mutex_);
    everyone.assign(watchers_.begin(), watchers_.end());
  }
  for (auto& watcher : everyone) watcher->call(event);
}

void Subscriber::dispatch(const std::string& channel, const std::string& payload) {
  WatchEvent event;
  if (payload.rfind("released@@", 0) == 0) {
    event = WatchEvent::released;
  } else if (payload.rfind("acquired@@", 0) == 0) {
    event = WatchEvent::acquired;
  } else {
    return;  // not a simba message
  }
  std::vector<std::shared_ptr<Watcher>> targets;
  {
    std::lock_guard lock(mutex_);
    if (auto it = by_channel_.find(channel); it != by_channel_.end()) targets = it->second;
  }
  for (auto& watcher : targets) watcher->call(event);
}

// Everything below runs on the subscriber thread only, which alone touches `connection_`.

bool Subscriber::connect_and_resubscribe() {
  try {
    connection_ = std::make_unique<Connection>(options_, where_);
    // Reads block only when poll() said there is data: no read timeout on this connection.
    redisSetTimeout(connection_->context(), timeval{0, 0});
  } catch (const std::exception& e) {
    connection_.reset();
    internal::log_debug(std::string("pub/sub: ") + e.what());
    {
      std::lock_guard lock(mutex_);
      connect_failed_ = true;
    }
    confirmed_changed_.notify_all();
    return false;
  }
  std::lock_guard lock(mutex_);
  connect_failed_ = false;
  confirmed_.clear();
  idle_channels_.clear();  // a new connection subscribes only what is watched
  requests_.clear();  // everything current is subscribed below
  for (auto& [channel, _] : by_channel_) requests_.emplace_back("SUBSCRIBE", channel);
  return true;
}

void Subscriber::drain_requests() {
  std::vector<std::pair<std::string, std::string>> requests;
  {
    std::lock_guard lock(mutex_);
    requests.swap(requests_);
  }
  if (requests.empty() || !connection_) return;
  for (auto& [command, name] : requests) {
    std::vector<std::string> args = {command, name};
    Argv argv(args);
    redisAppendCommandArgv(connection_->context(), 2, argv.pointers.data(), argv.lengths.data());
  }
  int done = 0;
  while (!done) {
    if (redisBufferWrite(connection_->context(), &done) != REDIS_OK) connection_->fail_transport("subscribing");
  }
}

void Subscriber::run() {
  pthread_setname_np(pthread_self(), "simba-redis-sub");
  std::mt19937_64 rng{std::random_device{}()};
  std::chrono::milliseconds backoff{50};
  bool was_connected = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
    }
    if (!connection_) {
      if (connect_and_resubscribe()) {
        backoff = std::chrono::milliseconds(50);
        // Changes may have passed unseen while disconnected: every watcher looks again.
        if (was_connected) notify_all(WatchEvent::released);
        was_connected = true;
      } else {
        std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
        pollfd wake_only{wake_fd_, POLLIN, 0};
        poll(&wake_only, 1, static_cast<int>(jitter(rng)));
        std::uint64_t drained;
        [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
        // Capped low: while this connection is down, owners cannot hear of a server restart.
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
        continue;
      }
    }
    try {
      unsubscribe_idle();
      drain_requests();
      pollfd fds[2] = {{connection_->context()->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(fds, 2, 1000) < 0) continue;
      if (fds[1].revents & POLLIN) {
        std::uint64_t drained;
        [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (redisBufferRead(connection_->context()) != REDIS_OK) connection_->fail_transport("reading pub/sub");
        void* raw = nullptr;
        while (redisGetReplyFromReader(connection_->context(), &raw) == REDIS_OK && raw != nullptr) {
          Reply reply(static_cast<redisReply*>(raw));
          raw = nullptr;
          if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) continue;
          auto text = [&](std::size_t i) {
            auto* e = reply->element[i];
            return e->type == REDIS_REPLY_STRING ? std::string(e->str, e->len) : std::string();
          };
          std::string kind = text(0);
          if (kind == "message") {
            dispatch(text(1), text(2));
          } else if (kind == "subscribe") {
            {
              std::lock_guard lock(mutex_);
              confirmed_.insert(text(1));
            }
            confirmed_changed_.notify_all();
          } else if (kind == "unsubscribe") {
            std::lock_guard lock(mutex_);
            confirmed_.erase(text(1));
          }
        }
        if (connection_->context()->err) connection_->fail_transport("reading pub/sub");
      }
    } catch (const std::exception& e) {
      internal::log_warn(std::string("pub/sub connection lost: ") + e.what() + "; reconnecting");
      connection_.reset();
      {
        std::lock_guard lock(mutex_);
        confirmed_.clear();
      }
      notify_all(WatchEvent::lost);
    }
  }
  connection_.reset();
}

}  // namespace simba::redis
