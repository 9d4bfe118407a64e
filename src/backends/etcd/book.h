// What an etcd backend remembers of its contenders, under its own lock: each contender's key
// on each mutex (its lease, slot, create revision, whether it owns and until when it believes
// so), the predecessor a waiter watches, and the watchers to wake. Internal to the etcd
// backend.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/common/watcher.h"
#include "backends/etcd/watches.h"
#include "base/thread_annotations.h"
#include "simba/owner.h"

namespace simba::etcd {

using Steady = std::chrono::steady_clock;
using internal::WatcherList;

// What the watch on an owner's line has seen since the owner claimed it (shared between the
// entry's copies and the watch's callback).
struct OwnerFlags {
  std::atomic<bool> gone{false};          // our key was deleted (evicted, its lease revoked)
  std::atomic<bool> demanded{false};      // another key joined the line
  std::atomic<bool> idle{false};          // our key's value carries the idle mark
  std::atomic<std::uint64_t> resyncs{0};  // the watch was made again (events may be missing)
};

// One contender's key on one mutex.
struct Entry {
  std::string mutex;
  std::string id;
  std::int64_t seconds = 0;  // its lease's length asked for
  int slot = 0;
  std::int64_t lease = 0;     // 0: none yet
  std::string key;            // "<prefix>/<name>/<lease hex>"
  std::int64_t revision = 0;  // the key's create revision; 0: unknown
  bool claimed = false;       // owns, and believes so until `deadline`
  // The create revision of the key this contender last removed after its lease ran out: a read
  // sent before that removal still shows the key, which is free all the same.
  std::int64_t removed = 0;
  Steady::time_point deadline;
  MutexOwner owner;        // claimed: the lease as returned (wall clock times)
  std::string watching;    // a waiter: the predecessor key whose deletion wakes it
  WatchHub::Id watch = 0;  // the watch of `watching`, or of the owner's line
  // An owner: what its line's watch saw, and the stream epoch and resync count with which a
  // transaction last showed the key first while that watch was in place.
  std::shared_ptr<OwnerFlags> flags;
  std::uint64_t verified_epoch = 0;
  std::uint64_t verified_resyncs = 0;

  // Its key, which it no longer owns once its lease ran out, was just removed.
  void lapsed_key_removed() {
    removed = revision;
    claimed = false;
    revision = 0;
  }
};

class ContenderBook {
 public:
  // The entry of `id` on `mutex`, made with a free slot for `seconds` if there is none, and
  // marked busy: one call at a time per entry (a call waits for another's to end, and the
  // reaper skips busy entries). End the call with done().
  Entry begin(const std::string& mutex, const std::string& id, std::int64_t seconds);
  // Stores `entry` and ends its call.
  void done(const Entry& entry);
  // Ends the call and forgets the entry.
  void done_and_forget(const Entry& entry);
  // The entry, if any, without taking it.
  std::optional<Entry> peek(const std::string& mutex, const std::string& id);
  // The entry of this backend whose key is `key`, claimed or not.
  std::optional<Entry> entry_of_key(const std::string& mutex, const std::string& key);
  // Claimed entries whose belief ran out by `now` (only the one of `only_key`, if given), marked
  // busy (end each with done()).
  std::vector<Entry> take_lapsed(Steady::time_point now, const std::string* only_key = nullptr);
  // Entries on `lease`, which is gone: forgotten; their watches to remove.
  std::vector<Entry> drop_lease(std::int64_t lease);

  // Watchers of contenders (woken when their predecessor goes) and of observers.
  void add_contender(const std::string& mutex, const std::string& id, std::shared_ptr<internal::Watcher> watcher);
  void drop_contender(const std::string& mutex, const std::string& id, const std::shared_ptr<internal::Watcher>& w);
  WatcherList contenders_of(const std::string& mutex, const std::string& id);
  void add_observer(std::shared_ptr<internal::Watcher> watcher);
  void drop_observer(const std::shared_ptr<internal::Watcher>& watcher);
  WatcherList everyone();

 private:
  static std::string key_of(const std::string& mutex, const std::string& id) { return mutex + '\0' + id; }

  internal::AnnotatedMutex mutex_;
  std::condition_variable idle_;                             // an entry stopped being busy
  std::map<std::string, Entry> entries_ GUARDED_BY(mutex_);  // by key_of(mutex, id)
  std::set<std::string> busy_ GUARDED_BY(mutex_);
  std::multimap<std::string, std::shared_ptr<internal::Watcher>> contenders_ GUARDED_BY(mutex_);
  std::set<std::shared_ptr<internal::Watcher>> observers_ GUARDED_BY(mutex_);
};

}  // namespace simba::etcd
