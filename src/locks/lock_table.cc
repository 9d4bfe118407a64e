// The process's lock tables, one per backend object.
#include "locks/lock_table.h"

#include "locks/lock_entry.h"

#include <vector>

namespace simba::internal {
namespace {

struct Tables {
  std::mutex mutex;
  std::unordered_map<const Backend*, std::weak_ptr<LockTable>> by_backend;
};

Tables& tables() {
  static auto* instance = new Tables();  // never destroyed: entries may die at static destruction
  return *instance;
}

}  // namespace

std::shared_ptr<LockTable> LockTable::of(const std::shared_ptr<Backend>& backend) {
  auto& all = tables();
  std::lock_guard lock(all.mutex);
  auto& slot = all.by_backend[backend.get()];
  auto table = slot.lock();
  if (!table) {
    table = std::make_shared<LockTable>(backend.get());
    slot = table;
  }
  return table;
}

std::size_t LockTable::count(const std::shared_ptr<Backend>& backend) {
  std::shared_ptr<LockTable> table;
  {
    auto& all = tables();
    std::lock_guard lock(all.mutex);
    auto it = all.by_backend.find(backend.get());
    if (it != all.by_backend.end()) table = it->second.lock();
  }
  return table ? table->size() : 0;
}

std::size_t LockTable::release_cached(const std::shared_ptr<Backend>& backend) noexcept {
  std::shared_ptr<LockTable> table;
  {
    auto& all = tables();
    std::lock_guard lock(all.mutex);
    auto it = all.by_backend.find(backend.get());
    if (it != all.by_backend.end()) table = it->second.lock();
  }
  if (!table) return 0;
  std::vector<std::shared_ptr<LockEntry>> entries;
  {
    std::lock_guard lock(table->mutex_);
    for (auto& [name, weak] : table->entries_) {
      if (auto entry = weak.lock()) entries.push_back(std::move(entry));
    }
  }
  std::size_t released = 0;
  for (auto& entry : entries) released += entry->release_cached() ? 1 : 0;
  return released;
}

LockTable::~LockTable() {
  auto& all = tables();
  std::lock_guard lock(all.mutex);
  auto it = all.by_backend.find(backend_);
  // A new table for a new backend at the same address may have taken the slot already.
  if (it != all.by_backend.end() && it->second.expired()) all.by_backend.erase(it);
}

std::shared_ptr<LockEntry> LockTable::entry(const std::string& name, const Client& client) {
  std::lock_guard lock(mutex_);
  auto& slot = entries_[name];
  auto entry = slot.lock();
  if (!entry) {
    try {
      entry = LockEntry::create(shared_from_this(), name, client);
    } catch (...) {
      entries_.erase(name);
      throw;
    }
    slot = entry;
  }
  return entry;
}

void LockTable::forget(const std::string& name) noexcept {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.expired()) entries_.erase(it);
}

std::size_t LockTable::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace simba::internal
