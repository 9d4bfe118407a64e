// The ZooKeeper backend's bookkeeping.
#include "backends/zookeeper/latch_book.h"
#include "base/thread_annotations.h"

#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>

#include "simba/error.h"

namespace simba::zookeeper {
namespace {

// Bound on the per-mutex hints a backend keeps (seen_ and emptied_at_): forgetting them only
// costs a listing or restarts a clock (a later takeover, never an early one), and processes
// that touch endless distinct mutexes stay bounded.
constexpr std::size_t kMaxRemembered = 10000;

}  // namespace

LatchKey key_of(const std::string& mutex, const std::string& contender) {
  // Fetched once: an implicit fetch per digest would look the algorithm up each time.
  static const std::unique_ptr<EVP_MD, decltype(&EVP_MD_free)> sha256(EVP_MD_fetch(nullptr, "SHA256", nullptr),
                                                                      &EVP_MD_free);
  std::string names;
  names.reserve(mutex.size() + 1 + contender.size());
  names.append(mutex).push_back('\0');
  names.append(contender);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (!sha256 || EVP_Digest(names.data(), names.size(), digest.data(), &size, sha256.get(), nullptr) != 1 ||
      size < LatchKey::Digest().size()) {
    throw Error(errc::internal, "zookeeper: OpenSSL gave no SHA-256 for the latch book's key of mutex '" + mutex + "'");
  }
  LatchKey key;
  std::copy_n(digest.begin(), key.digest.size(), key.digest.begin());
  key.mutex = mutex;
  return key;
}

std::optional<Entry> LatchBook::entry(const LatchKey& key, std::uint64_t generation) {
  Stored stored;
  {
    internal::MutexLock lock(mutex_);
    stored = stored_locked(key.digest);
    if (!stored.found()) return std::nullopt;
    if (stored.generation() != generation) {
      erase_locked(key.digest);
      return std::nullopt;
    }
  }
  return std::move(stored).entry(key);
}

std::optional<Entry> LatchBook::entry(const LatchKey& key) {
  Stored stored;
  {
    internal::MutexLock lock(mutex_);
    stored = stored_locked(key.digest);
  }
  if (!stored.found()) return std::nullopt;
  return std::move(stored).entry(key);
}

LatchBook::Stored LatchBook::stored_locked(const Digest& key) const {
  Stored stored;
  if (auto it = entries_.find(key); it != entries_.end()) {
    stored.packed = it->second;
  } else if (auto odd = odd_.find(key); odd != odd_.end()) {
    stored.whole = odd->second;
  } else {
    return stored;
  }
  if (auto w = watching_.find(key); w != watching_.end()) stored.watching = w->second;
  return stored;
}

std::uint64_t LatchBook::Stored::generation() const { return packed ? packed->generation : whole->generation; }

Entry LatchBook::Stored::entry(const LatchKey& key) && {
  Entry out = packed ? unpack(key, *packed) : std::move(*whole);
  out.watching = std::move(watching);
  return out;
}

void LatchBook::remember(const LatchKey& latch_key, const Entry& entry) {
  const auto packed = pack(latch_key, entry);  // (outside the lock: it builds the path to compare)
  const Digest& key = latch_key.digest;
  internal::MutexLock lock(mutex_);
  if (packed) {
    entries_.insert_or_assign(key, *packed);
    odd_.erase(key);
  } else {
    Entry& kept = odd_.insert_or_assign(key, entry).first->second;
    kept.watching.clear();  // in watching_, as for the others
    entries_.erase(key);
  }
  if (entry.watching.empty()) {
    watching_.erase(key);
  } else {
    watching_.insert_or_assign(key, entry.watching);
  }
}

void LatchBook::forget(const LatchKey& key) {
  internal::MutexLock lock(mutex_);
  erase_locked(key.digest);
}

void LatchBook::erase_locked(const Digest& key) {
  if (auto w = watching_.find(key); w != watching_.end()) {
    unwait_locked(w->second, key);
    watching_.erase(w);
  }
  entries_.erase(key);
  odd_.erase(key);
}

namespace {

std::string node_path(const LatchKey& key, const std::string& guid, const Lease& lease, std::int32_t sequence) {
  return latch_path(key.mutex) + "/" + node_name(guid, lease, sequence);
}

}  // namespace

std::optional<LatchBook::Kept> LatchBook::pack(const LatchKey& key, const Entry& entry) {
  Kept kept;
  const auto guid = guid_bytes(entry.guid);
  if (!guid) return std::nullopt;
  kept.guid = *guid;
  const auto ttl = entry.lease.ttl.count(), transition = entry.lease.transition.count();
  if (ttl < 0 || transition < 0 || ttl > UINT32_MAX || transition > UINT32_MAX) return std::nullopt;
  kept.ttl_ms = static_cast<std::uint32_t>(ttl);
  kept.transition_ms = static_cast<std::uint32_t>(transition);
  if (!entry.path.empty()) {
    const auto sequence = sequence_of(entry.path);
    if (sequence < 0 || sequence > INT32_MAX) return std::nullopt;
    kept.sequence = static_cast<std::int32_t>(sequence);
    kept.has_path = true;
    // Kept only if rebuilt exactly.
    if (node_path(key, entry.guid, entry.lease, kept.sequence) != entry.path) return std::nullopt;
  }
  kept.generation = entry.generation;
  kept.token = entry.token;
  kept.joined = entry.joined;
  kept.claimed = entry.claimed;
  kept.idle = entry.idle;
  return kept;
}

Entry LatchBook::unpack(const LatchKey& key, const Kept& kept) {
  Entry entry;
  entry.generation = kept.generation;
  entry.guid = guid_text(kept.guid);
  entry.lease = Lease{std::chrono::milliseconds(kept.ttl_ms), std::chrono::milliseconds(kept.transition_ms)};
  if (kept.has_path) entry.path = node_path(key, entry.guid, entry.lease, kept.sequence);
  entry.token = kept.token;
  entry.joined = kept.joined;
  entry.claimed = kept.claimed;
  entry.idle = kept.idle;
  return entry;
}

void LatchBook::wait_behind(const std::string& path, const LatchKey& key) {
  internal::MutexLock lock(mutex_);
  waiting_[path].insert(key.digest);
}

void LatchBook::unwait(const std::string& path, const LatchKey& key) {
  internal::MutexLock lock(mutex_);
  unwait_locked(path, key.digest);
}

void LatchBook::unwait_locked(const std::string& path, const Digest& key) {
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

template <class Map, class Key>
void LatchBook::drop_locked(Map& watchers, const Key& key, const std::shared_ptr<internal::Watcher>& watcher) {
  for (auto [it, end] = watchers.equal_range(key); it != end; ++it) {
    if (it->second == watcher) {
      watchers.erase(it);
      return;
    }
  }
}

void LatchBook::add_contender(const LatchKey& key, std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  contenders_.emplace(key.digest, std::move(watcher));
}

void LatchBook::drop_contender(const LatchKey& key, const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  drop_locked(contenders_, key.digest, watcher);
}

void LatchBook::add_observer(const std::string& folder, std::shared_ptr<internal::Watcher> watcher) {
  internal::MutexLock lock(mutex_);
  observers_.emplace(folder, std::move(watcher));
}

void LatchBook::drop_observer(const std::string& folder, const std::shared_ptr<internal::Watcher>& watcher) {
  internal::MutexLock lock(mutex_);
  drop_locked(observers_, folder, watcher);
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
    watching_.erase(key);
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
    odd_.clear();
    watching_.clear();
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
