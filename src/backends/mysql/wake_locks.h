// How a release wakes the waiters of a mutex in every process at once, through the server's
// user-level locks (GET_LOCK): the closest MariaDB and MySQL come to a push channel. Internal
// to the MySQL backend.
//
// Each mutex has a wake lock, "simba:" and a hash of the database and the name. The process
// that owns the mutex holds its wake lock on a connection of its own (the holder) from
// kTakeAfter after it won the row until just after its release. A waiter waits for the wake lock on a
// connection of its own, in one statement that also lets it go at once:
//
//   SELECT IS_FREE_LOCK(n) * 100 + COALESCE(GET_LOCK(n, 30), 0) * 10 + COALESCE(RELEASE_LOCK(n), 0)
//
// 11: the lock was held, and given to us when its holder let it go: the owner released (or its
// connection ended): the watchers look now. 111: nobody held it: the owner released before we
// asked, or has not taken it yet (it takes it just after its win, off the caller's path), or
// holds none (JVM Simba). The waiter asks again after a pause that grows from 1 ms to the poll
// interval, and the watchers look at each such answer until the pause reaches it. 0: 30 s
// passed; ask again.
//
// One thread per backend runs the holder and every wait, on one poll(). A watch ending while its
// wait is in flight is cancelled with KILL QUERY from the holder connection. The rows decide who
// owns a mutex; a wake lock only says when to look, and waiters still poll at the poll interval:
// that covers every wake-up this cannot give (an owner holding no wake lock, a stalled former
// owner still holding it, more watched mutexes than kMaxWaits, a server that refuses GET_LOCK).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/watcher.h"
#include "backends/mysql/connection.h"
#include "base/thread_annotations.h"
#include "simba/backend.h"
#include "simba/mysql_backend.h"

namespace simba::mysql {

class WakeLocks {
 public:
  WakeLocks(const MysqlOptions& options, std::string where);
  ~WakeLocks();
  WakeLocks(const WakeLocks&) = delete;
  WakeLocks& operator=(const WakeLocks&) = delete;

  // After a round of `contender_id` on `mutex`: whether it owns the mutex now. Its process
  // then holds the mutex's wake lock (taken soon after), or lets it go if this contender held
  // it. Never blocks on the server.
  void owns(const std::string& mutex, const std::string& contender_id, bool owned);
  // Calls `on_change(WatchEvent::released)` soon after the owner of `mutex` in any process let
  // its wake lock go, until the handle goes. Never blocks on the server.
  std::unique_ptr<Subscription> watch(const std::string& mutex, std::function<void(WatchEvent)> on_change);
  // A contender of ours asked for `mutex` and met another owner: it waits, so the wait for the
  // wake lock (if `mutex` is watched) goes now, not kWaitAfter after the watch began. Never
  // blocks on the server.
  void met_owner(const std::string& mutex);

  // The wake lock's name for `mutex` in `database` (at most 64 characters, as the server wants).
  static std::string lock_name(const std::string& database, const std::string& mutex);
  // Waits at once in flight at most: the watches of further mutexes only poll.
  static constexpr std::size_t kMaxWaits = 32;
  // How long an owner holds a mutex before its process takes the wake lock (the thread's
  // poll() counts whole milliseconds: 1 ms at most). Shorter holds cost the server nothing (a
  // lock cycle stays two statements); a waiter that finds the lock free looks again after 1,
  // 2, 4 ms..., which serves them. It was 2 ms: a waiter that came within a hold's first 2 ms
  // then found the lock free and learnt of a release only at its next ask (a handover of a
  // 2 ms hold took 2.8-2.9 ms at p50, now 0.8-0.9 ms, docs/benchmarks.md).
  static constexpr std::chrono::microseconds kTakeAfter{500};
  // How long a mutex is watched before its wait is sent: every contender watches from its
  // start, and one that wins at once (most) ends its watch without costing the server anything.
  // One that met another owner waits at once (met_owner).
  static constexpr std::chrono::milliseconds kWaitAfter{2};

 private:
  using Clock = std::chrono::steady_clock;

  // The wait for one wake lock (the thread's own).
  struct Wait {
    std::unique_ptr<Connection> connection;
    bool in_flight = false;              // its statement was sent and not yet read
    bool cancelled = false;              // a KILL QUERY was sent for it
    bool sent = false;                   // asked once: `next` no longer follows the watch's start
    Clock::time_point next{};            // when to ask again
    std::chrono::milliseconds pause{0};  // after a 111: how long it waits before asking again
  };

  void run();
  void sync_holder(Clock::time_point now);
  void sync_waits(Clock::time_point now);
  void finish_wait(const std::string& name, Wait& wait, Clock::time_point now);
  void tell(const std::string& name);  // the watchers of `name`: look now
  void cancel(Wait& wait);
  void drop_holder();  // the holder connection broke: its wake locks are gone, to be taken again
  std::unique_ptr<Connection> connection_for_wait();
  void signal() const;

  const MysqlOptions options_;
  const std::string where_;
  const int wake_fd_;

  internal::AnnotatedMutex mutex_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread thread_ GUARDED_BY(mutex_);
  // A mutex a contender of ours owns: its wake lock is taken kTakeAfter after `since`.
  struct Owned {
    std::string contender_id;
    Clock::time_point since;
  };
  std::map<std::string, Owned> wanted_ GUARDED_BY(mutex_);  // wake locks to hold, by lock name
  struct Watched {
    std::vector<std::shared_ptr<internal::Watcher>> watchers;
    Clock::time_point since;  // its wait is sent kWaitAfter later
  };
  std::map<std::string, Watched> watchers_ GUARDED_BY(mutex_);  // by lock name
  std::set<std::string> changed_ GUARDED_BY(mutex_);  // wake locks wanted or no longer, since the thread looked
  bool over_limit_said_ GUARDED_BY(mutex_) = false;
  // Until when the thread sleeps if nothing tells it (min: it is awake).
  Clock::time_point asleep_until_ GUARDED_BY(mutex_) = Clock::time_point::min();

  // The thread's own.
  std::unique_ptr<Connection> holder_;
  Clock::time_point holder_retry_{};
  std::set<std::string> held_;  // wake locks the holder holds
  // Wake locks to take: when (kTakeAfter after the win; after a failed try, a pause later).
  struct Take {
    Clock::time_point at;
    std::chrono::milliseconds pause{0};
  };
  std::map<std::string, Take> takes_;
  std::map<std::string, Wait> waits_;              // by lock name
  std::vector<std::unique_ptr<Connection>> idle_;  // wait connections between waits
};

}  // namespace simba::mysql
