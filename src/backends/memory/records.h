// One part of a memory store: the records of some of its names, under a lock of their own.
// Internal.
#pragma once

#include <string.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "simba/backend.h"
#include "simba/clock.h"

namespace simba::internal {

// The records whose name's root (the name up to its first '#') falls to this part: a mutex
// and every record derived from it ("<name>#<suffix>", and theirs) are in one part, so an
// owner hears of its relatives in the same step. Each call takes the part's lock once and
// reads the clock under it. Free records are forgotten once `remembered` changes of other
// records of the part came after their last; their tokens never come back, as every part
// takes its tokens from the store's one counter.
class MemoryRecords {
 public:
  explicit MemoryRecords(std::size_t remembered) : remembered_(remembered) {}

  // What acquire() did beside its answer (which it writes to `result`: no copy of a move).
  struct Acquired {
    bool changed = false;  // a new owner: the mutex's watchers hear it
    bool lost = false;     // held by another: the demand's watchers hear it
  };
  Acquired acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                   std::chrono::milliseconds transition, const simba::Clock& clock, std::atomic<std::uint64_t>& tokens,
                   OwnerSnapshot& result);
  bool release(const std::string& mutex, const std::string& contender_id, const simba::Clock& clock);
  OwnerSnapshot read(const std::string& mutex, const simba::Clock& clock);
  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle, const simba::Clock& clock);
  // Adds the held records derived from `name`, or every record whose name starts with `prefix`,
  // to `out` (unordered), as read() would show them at `now`.
  void list_derived(const std::string& name, EpochMillis now, std::vector<MutexRecord>& out);
  void list(const std::string& prefix, EpochMillis now, std::vector<MutexRecord>& out);
  // Forgets at most `limit` records idle for `idle_for` at `now`; returns how many.
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit, EpochMillis now);

  // The part a name's records are in, of `Parts` (a power of two): by its root's length and
  // first and last eight bytes, mixed. Not a full hash (std::hash of a 48-byte name cost an
  // uncontended lock cycle 5%, twice): names that differ only in the middle of a long root
  // share a part, where their locks meet; nothing else.
  template <std::size_t Parts>
  static std::size_t part_of(std::string_view name) noexcept {
    static_assert(Parts > 0 && (Parts & (Parts - 1)) == 0);
    if (const void* hash = ::memchr(name.data(), '#', name.size())) {
      name = name.substr(0, static_cast<std::size_t>(static_cast<const char*>(hash) - name.data()));
    }
    const std::size_t n = name.size();
    std::uint64_t head = 0, tail = 0;
    if (n >= 8) {  // two loads
      ::memcpy(&head, name.data(), 8);
      ::memcpy(&tail, name.data() + n - 8, 8);
    } else {
      ::memcpy(&head, name.data(), n);
    }
    std::uint64_t mixed = (head * 0x9E3779B97F4A7C15ull) ^ (tail * 0xC2B2AE3D27D4EB4Full) ^ n;
    mixed = (mixed ^ (mixed >> 29)) * 0xBF58476D1CE4E5B9ull;
    return static_cast<std::size_t>(mixed >> 32) & (Parts - 1);
  }

 private:
  struct Entry {
    MutexOwner owner;
    std::uint64_t last_token = 0;
    std::uint64_t touched = 0;     // the change that last queued it in recent_
    EpochMillis changed_at = 0;    // the clock at its last change of owner
    EpochMillis wanted_until = 0;  // a losing acquire's demand lasts until then (or a new owner)
    std::uint64_t idle_token = 0;  // the lease its owner marked idle (mark_idle), by token
  };
  // Lookups by a part of a name without a copy of it.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
  };
  using Names = std::unordered_set<std::string, NameHash, std::equal_to<>>;
  using Entries = std::unordered_map<std::string, Entry, NameHash, std::equal_to<>>;
  using Record = Entries::value_type;

  static MutexOwner judged(const Entry& entry, EpochMillis now);
  static bool held(const Entry& entry, EpochMillis now) {
    return !entry.owner.empty() && entry.owner.transition_at >= now;
  }
  static std::string_view primitive_of(const std::string& mutex);

  void answer_relatives_locked(const std::string& mutex, OwnerSnapshot& result, EpochMillis now) REQUIRES(mutex_);
  void unindex_locked(const std::string& mutex) REQUIRES(mutex_);
  template <typename Visit>
  void for_each_derived_held_locked(const std::string& name, EpochMillis now, Visit visit) REQUIRES(mutex_);
  void touch_locked(const std::string& mutex, Entry& entry, EpochMillis now) REQUIRES(mutex_);
  // The record of `mutex` (nullptr: none), or a new one: the one looked at last if it is that
  // name's (a lock taken and given back in turn hashes its name once, not at every call; a
  // 48-byte name's hash cost a memory lock cycle about 4%), else the map's.
  Record* find_locked(std::string_view mutex) REQUIRES(mutex_);
  Record& find_or_add_locked(const std::string& mutex) REQUIRES(mutex_);
  // Forgets a record (and the look-up that remembers it).
  Entries::iterator erase_locked(Entries::iterator it) REQUIRES(mutex_);

  const std::size_t remembered_;
  AnnotatedMutex mutex_;
  Entries entries_ GUARDED_BY(mutex_);
  Record* last_ GUARDED_BY(mutex_) = nullptr;             // the record looked at last (a map's node stays put)
  std::uint64_t forgotten_token_ GUARDED_BY(mutex_) = 0;  // the highest token of a record forgotten here
  std::uint64_t changes_ GUARDED_BY(mutex_) = 0;
  std::deque<std::pair<std::string, std::uint64_t>> recent_ GUARDED_BY(mutex_);  // (mutex, change), oldest first
  // Per primitive, its derived records that were ever held and are not yet forgotten (a record
  // leaves with its entry: touch_locked, sweep).
  std::unordered_map<std::string, Names, NameHash, std::equal_to<>> derived_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
