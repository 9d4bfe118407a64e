// The MariaDB/MySQL wake locks' thread: the holder connection and the waits, on one poll().
#include "backends/mysql/wake_locks.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/log.h"
#include "simba/error.h"

namespace simba::mysql {
namespace {

using internal::log_debug;
using internal::log_info;
using internal::log_warn;
using std::chrono::milliseconds;

constexpr int kWaitSeconds = 30;            // one GET_LOCK wait; then it asks again
constexpr milliseconds kReconnect{500};     // after a connection could not be made or broke
constexpr milliseconds kLongestTake{1000};  // the longest pause between tries to take a wake lock
constexpr std::size_t kIdleConnections = 4;

// The statement a waiter runs (see wake_locks.h): 11 woken by a release, 111 found free, 0 timed out.
std::string wait_statement(const std::string& name) {
  const std::string quoted = "'" + name + "'";  // a name is "simba:" and hex digits
  return "SELECT IS_FREE_LOCK(" + quoted + ") * 100 + COALESCE(GET_LOCK(" + quoted + ", " +
         std::to_string(kWaitSeconds) + "), 0) * 10 + COALESCE(RELEASE_LOCK(" + quoted + "), 0)";
}

}  // namespace

std::string WakeLocks::lock_name(const std::string& database, const std::string& mutex) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits: the same in every process
  auto mix = [&](unsigned char byte) {
    hash ^= byte;
    hash *= 1099511628211ull;
  };
  for (unsigned char c : database) mix(c);
  mix(0);
  for (unsigned char c : mutex) mix(c);
  char text[40];
  std::snprintf(text, sizeof text, "simba:%016llx", static_cast<unsigned long long>(hash));
  return text;
}

WakeLocks::WakeLocks(const MysqlOptions& options, std::string where)
    : options_(options), where_(std::move(where)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0) throw Error(errc::internal, where_ + ": eventfd failed");
}

WakeLocks::~WakeLocks() {
  std::thread thread;
  {
    internal::MutexLock lock(mutex_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  signal();
  if (thread.joinable()) thread.join();
  close(wake_fd_);
}

void WakeLocks::signal() const {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
}

void WakeLocks::owns(const std::string& mutex, const std::string& contender_id, bool owned) {
  const std::string name = lock_name(options_.database, mutex);
  const auto now = Clock::now();
  bool tell_thread;
  {
    internal::MutexLock lock(mutex_);
    auto it = wanted_.find(name);
    if (owned) {
      if (it != wanted_.end()) {
        it->second.contender_id = contender_id;  // another contender of ours: the lock stays
        return;
      }
      wanted_.emplace(name, Owned{contender_id, now});
      // The thread must be up by the time the lock is due.
      tell_thread = asleep_until_ > now + kTakeAfter;
    } else {
      if (it == wanted_.end() || it->second.contender_id != contender_id) return;
      // A lock not yet due was not taken: the thread finds it gone when it comes to it.
      tell_thread = now >= it->second.since + kTakeAfter;
      wanted_.erase(it);
    }
    changed_.insert(name);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  if (tell_thread) signal();
}

std::unique_ptr<Subscription> WakeLocks::watch(const std::string& mutex, std::function<void(WatchEvent)> on_change) {
  const std::string name = lock_name(options_.database, mutex);
  auto watcher = std::make_shared<internal::Watcher>(std::move(on_change));
  const auto since = Clock::now();
  bool tell_thread;
  {
    internal::MutexLock lock(mutex_);
    auto& watched = watchers_[name];
    if (watched.watchers.empty()) watched.since = since;
    watched.watchers.push_back(watcher);
    tell_thread = asleep_until_ > watched.since + kWaitAfter;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  if (tell_thread) signal();
  return internal::watch_handle(watcher, [this, name, watcher, since] {
    auto began = since;  // of the mutex's watch (met_owner may have made its wait due sooner)
    {
      internal::MutexLock lock(mutex_);
      auto it = watchers_.find(name);
      if (it != watchers_.end()) {
        began = std::min(began, it->second.since);
        std::erase(it->second.watchers, watcher);
        if (it->second.watchers.empty()) watchers_.erase(it);
      }
    }
    // A wait not yet due was never sent: the thread finds it gone when it comes to it.
    if (Clock::now() >= began + kWaitAfter) signal();
  });
}

void WakeLocks::met_owner(const std::string& mutex) {
  const std::string name = lock_name(options_.database, mutex);
  const auto due = Clock::now() - kWaitAfter;
  {
    internal::MutexLock lock(mutex_);
    auto it = watchers_.find(name);
    if (it == watchers_.end() || it->second.since <= due) return;  // not watched, or due already
    it->second.since = due;
  }
  signal();
}

void WakeLocks::run() {
  pthread_setname_np(pthread_self(), "simba-my-wake");
  for (;;) {
    {
      internal::MutexLock lock(mutex_);
      if (stopping_) break;
    }
    auto now = Clock::now();
    sync_holder(now);
    sync_waits(now);
    // Sleep until a wait answers, a request comes, or a retry is due.
    Clock::time_point due = now + std::chrono::seconds(1);
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    std::vector<std::string> reading;
    for (auto& [name, wait] : waits_) {
      if (wait.in_flight) {
        fds.push_back({wait.connection->socket(), POLLIN, 0});
        reading.push_back(name);
      } else {
        due = std::min(due, wait.next);
      }
    }
    for (const auto& [name, take] : takes_) due = std::min(due, take.at);
    if (!holder_ && holder_retry_ > now) due = std::min(due, holder_retry_);
    {
      // A change that came meanwhile is looked at now; one that comes later tells the thread
      // if it would sleep past what the change makes due (owns()).
      internal::MutexLock lock(mutex_);
      if (!changed_.empty()) due = now;
      asleep_until_ = due;
    }
    const auto timeout = std::chrono::ceil<milliseconds>(std::max(due - now, Clock::duration::zero()));
    const int polled = poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    {
      internal::MutexLock lock(mutex_);
      asleep_until_ = Clock::time_point::min();
    }
    if (polled < 0) continue;
    if (fds[0].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] auto n = read(wake_fd_, &drained, sizeof drained);
    }
    now = Clock::now();
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) finish_wait(reading[i - 1], waits_[reading[i - 1]], now);
    }
  }
  // Waits still in flight end on the server too, not only here.
  for (auto& [name, wait] : waits_) {
    if (wait.in_flight && !wait.cancelled) cancel(wait);
  }
  waits_.clear();
  idle_.clear();
  holder_.reset();  // lets every wake lock go
}

void WakeLocks::sync_holder(Clock::time_point now) {
  std::set<std::string> changed;
  {
    internal::MutexLock lock(mutex_);
    changed.swap(changed_);
  }
  for (const auto& [name, take] : takes_) {
    if (take.at <= now) changed.insert(name);
  }
  if (changed.empty()) return;
  if (!holder_) {
    if (now < holder_retry_) {
      internal::MutexLock lock(mutex_);
      changed_.merge(changed);  // not yet: kept for the next try
      return;
    }
    try {
      holder_ = std::make_unique<Connection>(options_, where_, options_.command_timeout);
      // A new connection holds nothing: every wake lock wanted now is taken again.
      held_.clear();
      internal::MutexLock lock(mutex_);
      for (const auto& [name, owned] : wanted_) changed.insert(name);
    } catch (const std::exception& e) {
      log_debug(where_ + ": wake locks: cannot connect (" + e.what() + "); waiters of our mutexes poll meanwhile");
      holder_retry_ = now + kReconnect;
      internal::MutexLock lock(mutex_);
      changed_.merge(changed);
      return;
    }
  }
  for (const auto& name : changed) {
    std::optional<Clock::time_point> since;  // when we began to own it; none: we do not
    {
      internal::MutexLock lock(mutex_);
      if (auto it = wanted_.find(name); it != wanted_.end()) since = it->second.since;
    }
    const bool held = held_.count(name) > 0;
    try {
      if (since && !held) {
        auto [take, added] = takes_.try_emplace(name, Take{*since + kTakeAfter, milliseconds(0)});
        if (take->second.at > now) continue;  // not due yet
        if (holder_->scalar("SELECT GET_LOCK('" + name + "', 0)") == 1) {
          held_.insert(name);
          takes_.erase(take);
        } else {
          // Held elsewhere: most often by a waiter's statement for a moment; by a stalled
          // former owner's connection for longer. Try again soon, then less often.
          take->second.pause = std::clamp(take->second.pause * 2, milliseconds(1), kLongestTake);
          take->second.at = Clock::now() + take->second.pause;
        }
      } else if (!since) {
        takes_.erase(name);
        if (held) {
          held_.erase(name);
          holder_->scalar("SELECT RELEASE_LOCK('" + name + "')");
        }
      }
    } catch (const std::exception& e) {
      if (holder_->broken()) {
        log_debug(where_ + ": wake locks: the holder connection broke (" + e.what() + "); reconnecting");
        drop_holder();
        return;
      }
      log_warn(where_ + ": wake locks: " + e.what() + "; waiters of this mutex poll");
      takes_.erase(name);
    }
  }
}

void WakeLocks::sync_waits(Clock::time_point now) {
  std::map<std::string, Clock::time_point> watched;  // since when
  {
    internal::MutexLock lock(mutex_);
    for (const auto& [name, each] : watchers_) watched.emplace(name, each.since);
  }
  for (auto it = waits_.begin(); it != waits_.end();) {
    Wait& wait = it->second;
    if (watched.count(it->first) > 0) {
      ++it;
      continue;
    }
    if (wait.in_flight) {
      if (!wait.cancelled) cancel(wait);
      ++it;
      continue;
    }
    if (wait.connection && !wait.connection->broken() && idle_.size() < kIdleConnections) {
      idle_.push_back(std::move(wait.connection));
    }
    it = waits_.erase(it);
  }
  for (const auto& [name, since] : watched) {
    auto it = waits_.find(name);
    if (it == waits_.end()) {
      if (waits_.size() >= kMaxWaits) {
        internal::MutexLock lock(mutex_);
        if (!over_limit_said_) {
          over_limit_said_ = true;
          log_info(where_ + ": more than " + std::to_string(kMaxWaits) +
                   " mutexes waited for at once; the waiters of the others poll");
        }
        continue;
      }
      it = waits_.emplace(name, Wait{}).first;
    }
    Wait& wait = it->second;
    if (!wait.sent) wait.next = since + kWaitAfter;
    if (wait.in_flight || wait.next > now) continue;
    wait.sent = true;  // from now on `next` is the answer's (or a failure's) to set
    try {
      if (!wait.connection) wait.connection = connection_for_wait();
      wait.connection->send(wait_statement(name));
      wait.in_flight = true;
      wait.cancelled = false;
    } catch (const std::exception& e) {
      log_debug(where_ + ": wake locks: cannot wait (" + e.what() + "); the waiters poll meanwhile");
      wait.connection.reset();
      wait.next = Clock::now() + kReconnect;
    }
  }
}

void WakeLocks::finish_wait(const std::string& name, Wait& wait, Clock::time_point now) {
  wait.in_flight = false;
  std::int64_t answer = -1;
  try {
    answer = wait.connection->read_scalar();
  } catch (const std::exception& e) {
    if (!wait.cancelled) log_debug(where_ + ": wake locks: a wait failed (" + e.what() + ")");
    if (wait.connection->broken()) wait.connection.reset();
    wait.next = now + (wait.cancelled ? milliseconds(0) : kReconnect);
    wait.cancelled = false;
    return;
  }
  wait.cancelled = false;
  if (answer == 11) {  // the holder let it go: the watchers look now
    wait.pause = milliseconds(0);
    wait.next = now;
    tell(name);
  } else if (answer >= 100) {
    // Nobody held it: the owner has released already, has not taken it yet, or holds none
    // (JVM Simba). Soon after a change (the watch's start, a wake-up) the watchers look, at
    // pauses growing to the poll interval; from then on only their own poll looks.
    const bool soon = wait.pause < options_.poll_interval;
    wait.pause = std::clamp(wait.pause * 2, milliseconds(1), std::max(milliseconds(1), options_.poll_interval));
    wait.next = now + wait.pause;
    if (soon) tell(name);
  } else {  // 30 s passed
    wait.next = now;
  }
}

void WakeLocks::tell(const std::string& name) {
  std::vector<std::shared_ptr<internal::Watcher>> watchers;
  {
    internal::MutexLock lock(mutex_);
    if (auto it = watchers_.find(name); it != watchers_.end()) watchers = it->second.watchers;
  }
  for (const auto& watcher : watchers) watcher->call(WatchEvent::released);
}

void WakeLocks::cancel(Wait& wait) {
  wait.cancelled = true;
  try {
    if (!holder_) holder_ = std::make_unique<Connection>(options_, where_, options_.command_timeout);
    holder_->run("KILL QUERY " + std::to_string(wait.connection->thread_id()));
    return;
  } catch (const std::exception& e) {
    log_debug(where_ + ": wake locks: cannot cancel a wait (" + e.what() + "); closing its connection");
    if (holder_ && holder_->broken()) drop_holder();
  }
  wait.connection.reset();
  wait.in_flight = false;
  wait.cancelled = false;
}

void WakeLocks::drop_holder() {
  holder_.reset();
  held_.clear();
  holder_retry_ = Clock::now() + kReconnect;
  internal::MutexLock lock(mutex_);
  for (const auto& [wanted, owned] : wanted_) changed_.insert(wanted);  // taken again on the next one
}

std::unique_ptr<Connection> WakeLocks::connection_for_wait() {
  if (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    return connection;
  }
  return std::make_unique<Connection>(options_, where_, std::chrono::seconds(kWaitSeconds + 10));
}

}  // namespace simba::mysql
