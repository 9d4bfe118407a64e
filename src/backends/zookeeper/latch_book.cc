// The ZooKeeper backend's bookkeeping.
#include "backends/zookeeper/latch_book.h"
#include "base/thread_annotations.h"

namespace simba::zookeeper {
namespace {

// Bound on the per-mutex hints a backend keeps (seen_ and emptied_at_): forgetting them only
// costs a listing or restarts a clock (a later takeover, never an early one), and processes
// that touch endless distinct mutexes stay bounded.
constexpr std::size_t kMaxRemembered = 10000;

}  // namespace

std::string key_of(const std::string& mutex, const std::string& contender) { return mutex + '\0' + contender; }

std::optional<Entry> LatchBook::entry(const std::string& key, std::uint64_t generation) {
  internal::MutexLock lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.generation != generation) {
    erase_locked(it);
    return std::nullopt;
  }
  return it->second;
}

std::optional<Entry> LatchBook::entry(const std::string& key) {
  internal::MutexLock lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  return std::nullopt;
}

void LatchBook::remember(const std::string& key, const Entry& entry) {
  internal::MutexLock lock(mutex_);
  Entry& kept = entries_[key];
  kept = entry;
  // Found by its path from now on: its guid's storage goes (48 bytes a lease).
  if (!kept.path.empty()) std::string().swap(kept.guid);
}

void LatchBook::forget(const std::string& key) {
  internal::MutexLock lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) erase_locked(it);
}

void LatchBook::erase_locked(std::map<std::string, Entry>::iterator it) {
  if (!it->second.watching.empty()) unwait_locked(it->second.watching, it->first);
  entries_.erase(it);
}

void LatchBook::wait_behind(const std::string& path, const std::string& key) {
  internal::MutexLock lock(mutex_);
  waiting_[path].insert(key);
}

void LatchBook::unwait(const std::string& path, const std::string& key) {
  internal::MutexLock lock(mutex_);
  unwait_locked(path, key);
}

void LatchBook::unwait_locked(const std::string& path, const std::string& key) {
  if (auto w = waiting_.find(path); w != waiting_.end()) {
    w->second.erase(key);
    if (w->second.empty()) waiting_.erase(w);
  }
}

bool LatchBook::waited_on(const std::string& path) {
  internal::MutexLock lock(mutex_);
  return waiting_.count(path) > 0;
}

Steady::time_point LatchBook::seen_since(const std::string& mutex, const std::string& path, std::int32_t version,
                                         Steady::time_point now) {
  internal::MutexLock lock(mutex_);
  if (seen_.size() >= kMaxRemembered && !seen_.count(mutex)) seen_.clear();
  Seen& seen = seen_[mutex];
  if (seen.path != path || seen.version != version) seen = Seen{path, version, now};
  return seen.since;
}

void LatchBook::restart_seen(const std::string& path, std::int32_t version) {
  internal::MutexLock lock(mutex_);
  for (auto& [mutex, seen] : seen_) {
    if (seen.path == path && seen.version != version) seen = Seen{path, version, Steady::now()};
  }
}

void LatchBook::forget_seen(const std::string& mutex) {
  internal::MutexLock lock(mutex_);
  seen_.erase(mutex);
}

void LatchBook::note_emptied(const std::string& mutex, std::int64_t zxid) {
  internal::MutexLock lock(mutex_);
  if (emptied_at_.size() >= kMaxRemembered) emptied_at_.clear();
  emptied_at_[mutex] = zxid;
}

std::int64_t LatchBook::take_emptied_at(const std::string& mutex) {
  internal::MutexLock lock(mutex_);
  auto it = emptied_at_.find(mutex);
  if (it == emptied_at_.end()) return -1;
  auto zxid = it->second;
  emptied_at_.erase(it);
  return zxid;
}

void LatchBook::add_contender(const std::string& key, std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  contenders_.emplace(key, std::move(watcher));
}

void LatchBook::drop_contender(const std::string& key, const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  drop_locked(contenders_, key, watcher);
}

void LatchBook::add_observer(const std::string& folder, std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  observers_.emplace(folder, std::move(watcher));
}

void LatchBook::drop_observer(const std::string& folder, const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  drop_locked(observers_, folder, watcher);
}

void LatchBook::drop_locked(Watchers& watchers, const std::string& key,
                            const std::shared_ptr<internal::Watcher>& watcher) {
  for (auto [it, end] = watchers.equal_range(key); it != end; ++it) {
    if (it->second == watcher) {
      watchers.erase(it);
      return;
    }
  }
}

void LatchBook::add_session_watcher(std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  session_watchers_.emplace(std::string(), std::move(watcher));
}

void LatchBook::drop_session_watcher(const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  drop_locked(session_watchers_, std::string(), watcher);
}

WatcherList LatchBook::observers_of(const std::string& folder) {
  internal::MutexLock lock(mutex_);
  WatcherList out;
  for (auto [it, end] = observers_.equal_range(folder); it != end; ++it) out.push_back(it->second);
  return out;
}

WatcherList LatchBook::woken_by_deletion(const std::string& path) {
  internal::MutexLock lock(mutex_);
  WatcherList woken;
  auto w = waiting_.find(path);
  if (w == waiting_.end()) return woken;
  for (const auto& key : w->second) {
    if (auto e = entries_.find(key); e != entries_.end()) e->second.watching.clear();
    for (auto [it, end] = contenders_.equal_range(key); it != end; ++it) woken.push_back(it->second);
  }
  waiting_.erase(w);
  return woken;
}

LatchBook::Everyone LatchBook::session_changed(bool expired) {
  internal::MutexLock lock(mutex_);
  Everyone out;
  if (expired) {
    entries_.clear();  // the nodes went with the session
    waiting_.clear();
  }
  for (auto& [key, watcher] : contenders_) out.watchers.push_back(watcher);
  for (auto& [key, watcher] : session_watchers_) out.watchers.push_back(watcher);
  for (auto& [folder, watcher] : observers_) {
    out.watchers.push_back(watcher);
    if (out.folders.empty() || out.folders.back() != folder) out.folders.push_back(folder);
  }
  return out;
}

}  // namespace simba::zookeeper
