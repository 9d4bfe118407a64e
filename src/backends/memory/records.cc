// One part of a memory store's records (records.h).
#include "backends/memory/records.h"

#include <string.h>

#include <algorithm>

namespace simba::internal {

MemoryRecords::Acquired MemoryRecords::acquire(const std::string& mutex, const std::string& contender_id,
                                               std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                                               const simba::Clock& clock, std::atomic<std::uint64_t>& tokens,
                                               OwnerSnapshot& result) {
  Acquired out;
  MutexLock lock(mutex_);
  const EpochMillis now = clock.now();
  Entry& entry = find_or_add_locked(mutex).second;
  MutexOwner& owner = entry.owner;
  const bool free = owner.empty() || owner.transition_at < now;
  const bool renew = owner.owner_id == contender_id && owner.transition_at > now;
  if (free || renew) {
    out.changed = owner.owner_id != contender_id;
    if (out.changed) {
      entry.last_token = tokens.fetch_add(1) + 1;
      entry.wanted_until = 0;  // a demand was for the owner before
      touch_locked(mutex, entry, now);
    }
    if (!renew) entry.idle_token = 0;  // a new lease starts unmarked
    owner.owner_id = contender_id;
    owner.acquired_at = now;
    owner.ttl_at = now + ttl.count();
    owner.transition_at = owner.ttl_at + transition.count();
    owner.fencing_token = entry.last_token;
  } else {
    out.lost = true;  // held by another: a demand, until the owner changes
    entry.wanted_until = std::max(entry.wanted_until, now + ttl.count() + transition.count());
  }
  result = {owner, now, !out.lost && entry.wanted_until >= now};         // the owner's renewal hears of it
  if (!out.lost && !renew) answer_relatives_locked(mutex, result, now);  // only a grant's answer is heard
  return out;
}

bool MemoryRecords::release(const std::string& mutex, const std::string& contender_id, const simba::Clock& clock) {
  MutexLock lock(mutex_);
  Record* record = find_locked(mutex);
  if (!record || record->second.owner.owner_id != contender_id) return false;
  record->second.owner = MutexOwner::none();
  // Only when records are forgotten depends on this time (this one's, and touch_locked's look
  // at the one that falls out of the queue): a coarse reading, which lags, keeps them longer.
  touch_locked(mutex, record->second, clock.coarse_now());
  return true;
}

OwnerSnapshot MemoryRecords::read(const std::string& mutex, const simba::Clock& clock) {
  MutexLock lock(mutex_);
  const EpochMillis now = clock.now();
  const Record* record = find_locked(mutex);
  if (!record) {
    MutexOwner none;
    none.fencing_token = forgotten_token_;
    return {none, now};
  }
  MutexOwner owner = judged(record->second, now);
  const bool demanded = !owner.empty() && record->second.wanted_until >= now;
  return {owner, now, demanded};
}

bool MemoryRecords::mark_idle(const std::string& mutex, const std::string& owner_id, bool idle,
                              const simba::Clock& clock) {
  MutexLock lock(mutex_);
  Record* record = find_locked(mutex);
  if (!record) return false;
  Entry& entry = record->second;
  if (entry.owner.owner_id != owner_id || entry.owner.transition_at < clock.now()) return false;
  entry.idle_token = idle ? entry.last_token : 0;
  return true;
}

void MemoryRecords::list_derived(const std::string& name, EpochMillis now, std::vector<MutexRecord>& out) {
  MutexLock lock(mutex_);
  for_each_derived_held_locked(name, now, [&](const std::string& record, const Entry& entry) {
    out.push_back({record, judged(entry, now)});
    return true;
  });
}

void MemoryRecords::list(const std::string& prefix, EpochMillis now, std::vector<MutexRecord>& out) {
  MutexLock lock(mutex_);
  for (const auto& [name, entry] : entries_) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    out.push_back({name, judged(entry, now)});
  }
}

std::size_t MemoryRecords::sweep(std::chrono::milliseconds idle_for, std::size_t limit, EpochMillis now) {
  MutexLock lock(mutex_);
  std::size_t swept = 0;
  for (auto it = entries_.begin(); it != entries_.end() && swept < limit;) {
    const Entry& entry = it->second;
    const bool live = !entry.owner.empty() && entry.owner.transition_at >= now - idle_for.count();
    if (live || entry.changed_at > now - idle_for.count()) {
      ++it;
      continue;
    }
    forgotten_token_ = std::max(forgotten_token_, entry.last_token);
    unindex_locked(it->first);
    it = erase_locked(it);
    ++swept;
  }
  return swept;
}

// The record as read() and list() show it at `now`: an expired lease as no owner, with the
// mutex's last token, and the idle mark if it belongs to this lease.
MutexOwner MemoryRecords::judged(const Entry& entry, EpochMillis now) {
  MutexOwner owner = entry.owner;
  if (owner.empty() || owner.transition_at < now) owner = MutexOwner::none();
  owner.fencing_token = entry.last_token;
  owner.idle = !owner.empty() && entry.idle_token == owner.fencing_token;
  return owner;
}

// The primitive a derived record ("<name>#<suffix>") belongs to; empty for a primitive.
// (memrchr: std::string::rfind looked at one char a step, 230 of the 510 instructions an
// acquire spent in itself.)
std::string_view MemoryRecords::primitive_of(const std::string& mutex) {
  const void* hash = ::memrchr(mutex.data(), '#', mutex.size());
  return hash ? std::string_view(mutex.data(), static_cast<const char*>(hash) - mutex.data()) : std::string_view{};
}

// What an owner hears in the same step (OwnerSnapshot): whether any record derived from its
// mutex is held and, for a derived record, its primitive's state (in this part: part_of()).
void MemoryRecords::answer_relatives_locked(const std::string& mutex, OwnerSnapshot& result, EpochMillis now) {
  const std::string_view primitive = primitive_of(mutex);
  if (!primitive.empty()) {
    auto index = derived_.find(primitive);
    if (index == derived_.end()) index = derived_.try_emplace(std::string(primitive)).first;
    if (!index->second.contains(mutex)) index->second.insert(mutex);
    auto it = entries_.find(primitive);
    result.parent = it == entries_.end() ? OwnerSnapshot::Parent{false, forgotten_token_}
                                         : OwnerSnapshot::Parent{held(it->second, now), it->second.last_token};
  }
  bool any = false;
  for_each_derived_held_locked(mutex, now, [&](const std::string&, const Entry&) {
    any = true;
    return false;  // one is enough
  });
  result.no_derived_held = !any;
}

// Takes a derived record out of its primitive's index (forgotten).
void MemoryRecords::unindex_locked(const std::string& mutex) {
  const std::string_view primitive = primitive_of(mutex);
  if (primitive.empty()) return;
  auto index = derived_.find(primitive);
  if (index == derived_.end()) return;
  index->second.erase(mutex);
  if (index->second.empty()) derived_.erase(index);
}

// Calls visit(name, entry) for each held record derived from `name` until it returns false.
template <typename Visit>
void MemoryRecords::for_each_derived_held_locked(const std::string& name, EpochMillis now, Visit visit) {
  if (derived_.empty()) return;  // (find() would hash the name first)
  auto index = derived_.find(name);
  if (index == derived_.end()) return;
  for (const auto& record : index->second) {
    auto entry = entries_.find(record);
    if (entry != entries_.end() && held(entry->second, now) && !visit(record, entry->second)) return;
  }
}

// Queues `mutex` as just changed and forgets the record that falls out of the queue if that
// mutex is free and has not changed since. A change of the mutex that changed last only
// moves its place's change (a lock taken and given back in turn queues it once): a record is
// forgotten once `remembered_` changes of other mutexes of this part came after its last.
void MemoryRecords::touch_locked(const std::string& mutex, Entry& entry, EpochMillis now) {
  entry.touched = ++changes_;
  entry.changed_at = now;
  if (!recent_.empty() && recent_.back().second == changes_ - 1 && recent_.back().first == mutex) {
    recent_.back().second = changes_;
    return;
  }
  recent_.emplace_back(mutex, changes_);
  if (recent_.size() <= remembered_) return;
  auto [name, change] = std::move(recent_.front());
  recent_.pop_front();
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.touched != change) return;
  const MutexOwner& owner = it->second.owner;
  if (!owner.empty() && owner.transition_at >= now) return;  // live: kept until it changes again
  forgotten_token_ = std::max(forgotten_token_, it->second.last_token);
  unindex_locked(name);
  erase_locked(it);
}

MemoryRecords::Record* MemoryRecords::find_locked(std::string_view mutex) {
  if (last_ && last_->first == mutex) return last_;
  auto it = entries_.find(mutex);
  if (it == entries_.end()) return nullptr;
  return last_ = &*it;
}

MemoryRecords::Record& MemoryRecords::find_or_add_locked(const std::string& mutex) {
  if (last_ && last_->first == mutex) return *last_;
  return *(last_ = &*entries_.try_emplace(mutex).first);
}

MemoryRecords::Entries::iterator MemoryRecords::erase_locked(Entries::iterator it) {
  if (last_ == &*it) last_ = nullptr;
  return entries_.erase(it);
}

}  // namespace simba::internal
