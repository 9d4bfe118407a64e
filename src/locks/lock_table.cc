// A Client's lock table: its entries by name.
#include "locks/lock_table.h"
#include "base/thread_annotations.h"

#include <vector>

#include "locks/lock_entry.h"

namespace simba::internal {

std::shared_ptr<LockEntry> LockTable::entry(const std::string& name, bool caches, const std::string& contender_id) {
  // Names and ids hold no NUL (validate_mutex_name, validate_contender_id): no two keys alias.
  const std::string key = contender_id.empty() ? name : name + '\0' + contender_id;
  internal::MutexLock lock(mutex_);
  auto& slot = entries_[key];
  auto entry = slot.lock();
  if (!entry) {
    try {
      entry = LockEntry::create(shared_from_this(), key, name, caches, contender_id);
    } catch (...) {
      entries_.erase(key);
      throw;
    }
    slot = entry;
  }
  return entry;
}

void LockTable::forget(const std::string& key) noexcept {
  internal::MutexLock lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.expired()) entries_.erase(it);
}

std::size_t LockTable::size() const {
  internal::MutexLock lock(mutex_);
  return entries_.size();
}

// Outside mutex_, the caller drops what it got: an entry let go last there forgets its slot.
std::vector<std::shared_ptr<LockEntry>> LockTable::alive() const {
  std::vector<std::shared_ptr<LockEntry>> entries;
  internal::MutexLock lock(mutex_);
  entries.reserve(entries_.size());
  for (const auto& [name, weak] : entries_) {
    if (auto entry = weak.lock()) entries.push_back(std::move(entry));
  }
  return entries;
}

std::uint64_t LockTable::fast_relocks() const {
  std::uint64_t relocks = 0;
  for (const auto& entry : alive()) relocks += entry->fast().uses();
  return relocks;
}

std::size_t LockTable::release_cached() noexcept {
  auto entries = alive();
  std::size_t released = 0;
  for (auto& entry : entries) released += entry->release_cached() ? 1 : 0;
  return released;
}

}  // namespace simba::internal
