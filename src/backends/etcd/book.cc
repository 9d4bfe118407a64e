#include "backends/etcd/book.h"

#include <condition_variable>

namespace simba::etcd {

Entry ContenderBook::begin(const std::string& mutex, const std::string& id, std::int64_t seconds) {
  const std::string key = key_of(mutex, id);
  internal::UniqueMutexLock lock(mutex_);
  idle_.wait(lock.native(), [&]() REQUIRES(mutex_) { return !busy_.contains(key); });
  busy_.insert(key);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  // A free slot: no other contender of this mutex here holds a key on (seconds, slot).
  std::set<int> taken;
  const std::string first = mutex + '\0';
  for (auto it = entries_.lower_bound(first); it != entries_.end() && it->first.starts_with(first); ++it) {
    if (it->second.mutex == mutex && it->second.seconds == seconds) taken.insert(it->second.slot);
  }
  Entry entry;
  entry.mutex = mutex;
  entry.id = id;
  entry.seconds = seconds;
  while (taken.contains(entry.slot)) ++entry.slot;
  entries_[key] = entry;
  return entry;
}

void ContenderBook::done(const Entry& entry) {
  {
    internal::MutexLock lock(mutex_);
    const std::string key = key_of(entry.mutex, entry.id);
    entries_[key] = entry;
    busy_.erase(key);
  }
  idle_.notify_all();
}

void ContenderBook::done_and_forget(const Entry& entry) {
  {
    internal::MutexLock lock(mutex_);
    const std::string key = key_of(entry.mutex, entry.id);
    entries_.erase(key);
    busy_.erase(key);
  }
  idle_.notify_all();
}

std::optional<Entry> ContenderBook::peek(const std::string& mutex, const std::string& id) {
  internal::MutexLock lock(mutex_);
  auto it = entries_.find(key_of(mutex, id));
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::optional<Entry> ContenderBook::entry_of_key(const std::string& mutex, const std::string& key) {
  internal::MutexLock lock(mutex_);
  const std::string first = mutex + '\0';
  for (auto it = entries_.lower_bound(first); it != entries_.end() && it->first.starts_with(first); ++it) {
    if (it->second.mutex == mutex && it->second.key == key) return it->second;
  }
  return std::nullopt;
}

std::vector<Entry> ContenderBook::take_lapsed(Steady::time_point now, const std::string* only_key) {
  std::vector<Entry> out;
  internal::MutexLock lock(mutex_);
  for (auto& [key, entry] : entries_) {
    if (!entry.claimed || entry.deadline >= now || busy_.contains(key)) continue;
    if (only_key != nullptr && entry.key != *only_key) continue;
    busy_.insert(key);
    out.push_back(entry);
  }
  return out;
}

std::vector<Entry> ContenderBook::drop_lease(std::int64_t lease) {
  std::vector<Entry> out;
  internal::MutexLock lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.lease == lease && !busy_.contains(it->first)) {
      out.push_back(it->second);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void ContenderBook::add_contender(const std::string& mutex, const std::string& id,
                                  std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  contenders_.emplace(key_of(mutex, id), std::move(watcher));
}

void ContenderBook::drop_contender(const std::string& mutex, const std::string& id,
                                   const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  auto [first, last] = contenders_.equal_range(key_of(mutex, id));
  for (auto it = first; it != last; ++it) {
    if (it->second == watcher) {
      contenders_.erase(it);
      return;
    }
  }
}

WatcherList ContenderBook::contenders_of(const std::string& mutex, const std::string& id) {
  WatcherList out;
  internal::MutexLock lock(mutex_);
  auto [first, last] = contenders_.equal_range(key_of(mutex, id));
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

void ContenderBook::add_observer(std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  observers_.insert(std::move(watcher));
}

void ContenderBook::drop_observer(const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  observers_.erase(watcher);
}

WatcherList ContenderBook::everyone() {
  WatcherList out;
  internal::MutexLock lock(mutex_);
  for (const auto& [key, watcher] : contenders_) out.push_back(watcher);
  out.insert(out.end(), observers_.begin(), observers_.end());
  return out;
}

}  // namespace simba::etcd
