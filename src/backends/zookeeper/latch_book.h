// What a ZooKeeper backend remembers of its latches, under its own lock: our nodes (one per
// contender and mutex), who waits behind which predecessor, how long each leader has looked
// unchanged, hints for a free lock's fast path, and the watchers to wake. Internal to the
// ZooKeeper backend.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/common/watcher.h"
#include "backends/zookeeper/latch_names.h"
#include "base/thread_annotations.h"

namespace simba::zookeeper {

using Steady = std::chrono::steady_clock;
using internal::WatcherList;

// Our node of one contender on one mutex, as the backend works with it (LatchBook keeps it
// packed: Kept, below).
struct Entry {
  std::uint64_t generation = 0;  // of the session that created it (the node dies with it)
  std::string guid;              // in its node's name; finds the node when the create's answer was lost
  std::string path;              // empty while the answer to its create is unknown
  std::uint64_t token = 0;       // the node's czxid
  Lease lease;
  bool claimed = false;       // owns and renews, rather than waits
  bool idle = false;          // claimed, and its data marks the lease idle (mark_idle)
  Steady::time_point joined;  // when its create was answered (the node existed by then)
  std::string watching;       // the predecessor whose deletion wakes it
};

// The key of one contender on one mutex: the first 16 bytes of the SHA-256 of the mutex, a NUL
// and the contender id (names hold no NUL), with the mutex it was made from. The book keeps
// only the digest: at 100,000 leases, keeping the two names as the key cost 80 bytes each on
// the heap. Two keys share a digest only as two guids of new_guid() would be the same.
struct LatchKey {
  using Digest = std::array<std::uint8_t, 16>;
  Digest digest{};
  std::string mutex;  // (rebuilds a node's path; never kept by the book)
};
LatchKey key_of(const std::string& mutex, const std::string& contender);

class LatchBook {
 public:
  // Our entry for `key`, if it belongs to session `generation` (an older one is dropped: its
  // node went with its session).
  std::optional<Entry> entry(const LatchKey& key, std::uint64_t generation);
  // Our entry for `key` whatever its session.
  std::optional<Entry> entry(const LatchKey& key);
  void remember(const LatchKey& key, const Entry& entry);
  void forget(const LatchKey& key);

  // `key` waits behind the node at `path` (its deletion wakes it), or no longer does.
  void wait_behind(const std::string& path, const LatchKey& key);
  void unwait(const std::string& path, const LatchKey& key);
  bool waited_on(const std::string& path);

  // When the leader of `mutex`, seen now at `path` and `version`, was first seen unchanged.
  Steady::time_point seen_since(const std::string& mutex, const std::string& path, std::int32_t version,
                                Steady::time_point now);
  // The node at `path` was rewritten to `version`: its lease's clock restarts.
  void restart_seen(const std::string& path, std::int32_t version);
  void forget_seen(const std::string& mutex);

  // Our release at zxid `zxid` left the folder of `mutex` empty.
  void note_emptied(const std::string& mutex, std::int64_t zxid);
  // That zxid, once; or -1.
  std::int64_t take_emptied_at(const std::string& mutex);

  // Watchers: a contender's (woken when its predecessor goes) and an observer's (of a folder).
  void add_contender(const LatchKey& key, std::shared_ptr<internal::Watcher> watcher);
  void drop_contender(const LatchKey& key, const std::shared_ptr<internal::Watcher>& watcher);
  void add_observer(const std::string& folder, std::shared_ptr<internal::Watcher> watcher);
  void drop_observer(const std::string& folder, const std::shared_ptr<internal::Watcher>& watcher);
  // A session's watcher (Backend::watch_channel): told of session changes only.
  void add_session_watcher(std::shared_ptr<internal::Watcher> watcher);
  void drop_session_watcher(const std::shared_ptr<internal::Watcher>& watcher);
  WatcherList observers_of(const std::string& folder);
  // The contenders waiting behind the node at `path`, which was deleted; they no longer wait.
  WatcherList woken_by_deletion(const std::string& path);

  // Every watcher, and the folders observed; after a session expiry our entries are gone.
  struct Everyone {
    WatcherList watchers;
    std::vector<std::string> folders;
  };
  Everyone session_changed(bool expired);

 private:
  using Digest = LatchKey::Digest;
  using Watchers = std::multimap<std::string, std::shared_ptr<internal::Watcher>>;
  using KeyWatchers = std::multimap<Digest, std::shared_ptr<internal::Watcher>>;
  void erase_locked(const Digest& key) REQUIRES(mutex_);
  void unwait_locked(const std::string& path, const Digest& key) REQUIRES(mutex_);
  template <class Map, class Key>
  void drop_locked(Map& watchers, const Key& key, const std::shared_ptr<internal::Watcher>& watcher) REQUIRES(mutex_);

  // An entry as the book keeps it, 56 bytes and nothing on the heap (at 100,000 leases its
  // strings cost 240 bytes each): its node's path is rebuilt from the key's mutex, the guid,
  // the lease and the sequence number ZooKeeper appended; the predecessor it watches, which
  // only a waiter has, is kept in watching_. An entry whose path would not be rebuilt exactly
  // (a guid not of new_guid(), a path not of node_prefix()) is kept whole in odd_ instead.
  struct Kept {
    std::uint64_t generation = 0;
    std::uint64_t token = 0;
    Steady::time_point joined;
    GuidBytes guid{};
    std::uint32_t ttl_ms = 0;
    std::uint32_t transition_ms = 0;
    std::int32_t sequence = 0;
    bool has_path = false;
    bool claimed = false;
    bool idle = false;
  };
  static std::optional<Kept> pack(const LatchKey& key, const Entry& entry);
  static Entry unpack(const LatchKey& key, const Kept& kept);
  // What the book holds for a key, copied out under its lock and unpacked outside it.
  struct Stored {
    std::optional<Kept> packed;
    std::optional<Entry> whole;  // (an entry pack() could not keep)
    std::string watching;
    bool found() const { return packed || whole; }
    std::uint64_t generation() const;     // found()
    Entry entry(const LatchKey& key) &&;  // found()
  };
  Stored stored_locked(const Digest& key) const REQUIRES(mutex_);

  // The leader of a mutex as this process has seen it: since when it has looked unchanged.
  struct Seen {
    std::string path;
    std::int32_t version = -1;
    Steady::time_point since;  // when this version was first seen (after it was written)
  };

  internal::AnnotatedMutex mutex_;
  std::map<Digest, Kept> entries_ GUARDED_BY(mutex_);                   // by key_of(mutex, contender)
  std::map<Digest, Entry> odd_ GUARDED_BY(mutex_);                      // by key: the few pack() cannot keep
  std::map<Digest, std::string> watching_ GUARDED_BY(mutex_);           // by key: Entry::watching, if any
  std::map<std::string, std::set<Digest>> waiting_ GUARDED_BY(mutex_);  // predecessor path -> keys behind it
  std::map<std::string, Seen> seen_ GUARDED_BY(mutex_);                 // by mutex
  std::map<std::string, std::int64_t> emptied_at_ GUARDED_BY(mutex_);   // by mutex: see take_emptied_at()
  KeyWatchers contenders_ GUARDED_BY(mutex_);                           // by key_of(mutex, contender)
  Watchers observers_ GUARDED_BY(mutex_);                               // by latch folder
  Watchers session_watchers_ GUARDED_BY(mutex_);                        // all under ""
};

}  // namespace simba::zookeeper
