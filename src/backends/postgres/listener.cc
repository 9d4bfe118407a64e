// The PostgreSQL backend's LISTEN thread.
#include "backends/postgres/listener.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "backends/postgres/connection.h"
#include "core/log.h"
#include "simba/error.h"

namespace simba::postgres {

Listener::Listener(PostgresOptions options, std::string where)
    : options_(std::move(options)), where_(std::move(where)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0) throw Error(errc::internal, where_ + ": eventfd failed");
}

Listener::~Listener() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  state_changed_.notify_all();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

std::unique_ptr<Subscription> Listener::watch(const std::string& mutex, std::function<void(WatchEvent)> on_event) {
  auto watcher = std::make_shared<internal::Watcher>(std::move(on_event), std::vector<std::string>{mutex});
  std::unique_lock lock(mutex_);
  by_mutex_[mutex].push_back(watcher);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  state_changed_.wait_for(lock, options_.command_timeout, [&] { return listening_ || connect_failed_ || stopping_; });
  return std::make_unique<internal::WatchHandle>(watcher, [this, watcher] { remove(watcher); });
}

void Listener::remove(const std::shared_ptr<internal::Watcher>& watcher) {
  std::lock_guard lock(mutex_);
  auto it = by_mutex_.find(watcher->keys.front());
  if (it == by_mutex_.end()) return;
  std::erase(it->second, watcher);
  if (it->second.empty()) by_mutex_.erase(it);
}

void Listener::notify_all(WatchEvent event) {
  std::vector<std::shared_ptr<internal::Watcher>> everyone;
  {
    std::lock_guard lock(mutex_);
    for (auto& [_, list] : by_mutex_) everyone.insert(everyone.end(), list.begin(), list.end());
  }
  for (auto& watcher : everyone) watcher->call(event);
}

// Payloads are "<event>@@<mutex>"; the mutex may itself contain "@@".
void Listener::dispatch(const std::string& payload) {
  auto separator = payload.find("@@");
  if (separator == std::string::npos) return;
  const std::string kind = payload.substr(0, separator);
  WatchEvent event;
  if (kind == "released") {
    event = WatchEvent::released;
  } else if (kind == "acquired") {
    event = WatchEvent::acquired;
  } else {
    return;
  }
  std::vector<std::shared_ptr<internal::Watcher>> targets;
  {
    std::lock_guard lock(mutex_);
    if (auto it = by_mutex_.find(payload.substr(separator + 2)); it != by_mutex_.end()) targets = it->second;
  }
  for (auto& watcher : targets) watcher->call(event);
}

void Listener::run() {
  pthread_setname_np(pthread_self(), "simba-pg-listen");
  std::mt19937_64 rng{std::random_device{}()};
  std::chrono::milliseconds backoff{50};
  bool was_listening = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
    }
    if (!connection_) {
      try {
        connection_ = std::make_unique<Connection>(options_, where_);
        connection_->run((std::string("LISTEN ") + kChannel).c_str());
        {
          std::lock_guard lock(mutex_);
          listening_ = true;
          connect_failed_ = false;
        }
        state_changed_.notify_all();
        backoff = std::chrono::milliseconds(50);
        if (was_listening) notify_all(WatchEvent::released);
        was_listening = true;
      } catch (const std::exception& e) {
        connection_.reset();
        internal::log_debug(std::string("listen: ") + e.what());
        {
          std::lock_guard lock(mutex_);
          connect_failed_ = true;
        }
        state_changed_.notify_all();
        std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
        pollfd wake_only{wake_fd_, POLLIN, 0};
        poll(&wake_only, 1, static_cast<int>(jitter(rng)));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
        continue;
      }
    }
    PGconn* pg = connection_->get();
    pollfd fds[2] = {{PQsocket(pg), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, 1000) < 0) continue;
    if (fds[1].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    if (PQconsumeInput(pg) == 0 || PQstatus(pg) != CONNECTION_OK) {
      internal::log_warn(where_ + ": LISTEN connection lost: " + PQerrorMessage(pg) + "reconnecting");
      connection_.reset();
      {
        std::lock_guard lock(mutex_);
        listening_ = false;
      }
      notify_all(WatchEvent::lost);
      continue;
    }
    while (PGnotify* notification = PQnotifies(pg)) {
      std::string payload = notification->extra ? notification->extra : "";
      PQfreemem(notification);
      dispatch(payload);
    }
  }
  connection_.reset();
}

}  // namespace simba::postgres
