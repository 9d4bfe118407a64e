// How a release in one process wakes the waiters of the same SQLite database in every process
// of this host, at once and without polling (and a demand, the owner that caches the lease).
// Internal to the SQLite backend.
//
// A small file beside the database ("<database>-wake", 8 KiB) is mapped shared by every
// process that opens the database. Its first 32-bit word counts every release; each of the
// next 1,023 words counts the releases of the mutexes whose names hash to it (a slot), and the
// page after them counts the watches of each slot in every process. A release of a watched
// slot adds one to the slot and to the count, then wakes every thread that waits on the count
// (a futex on shared memory: it crosses processes); a release nobody watches costs one read.
// One thread per backend waits on the count, and at each change calls the watchers whose slot
// moved (a slot shared by two names wakes both: one spurious look). A process that dies with
// watches leaves its counts behind: releases of those slots then wake for nothing, never less.
//
// It is an accelerator: waiters still poll at the poll interval, which covers what it cannot
// see (a database on a network file system used from another host, a process that died
// between its release and the wake-up, a file that cannot be created).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/common/watcher.h"
#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::internal {

class WakeBoard : public std::enable_shared_from_this<WakeBoard> {
 public:
  // Maps "<database_path>-wake", creating it if needed. Null where it cannot (logged, unless
  // the database is in memory): waiters then poll only.
  static std::shared_ptr<WakeBoard> open(const std::string& database_path);
  ~WakeBoard();
  WakeBoard(const WakeBoard&) = delete;
  WakeBoard& operator=(const WakeBoard&) = delete;

  // Rings `key` once what it announces was committed: the watchers of `key` on this host look
  // now. Keys: a mutex's name (a release), demand_key(name) (a demand left for its owner).
  void ring(const std::string& key) noexcept;
  // Calls `on_change(WatchEvent::released)` soon after each ring of `key` on this host (and now
  // and then after another key's, sharing its slot), until the handle goes.
  std::unique_ptr<Subscription> watch(const std::string& key, std::function<void(WatchEvent)> on_change);
  static std::string demand_key(const std::string& mutex) { return "demand\n" + mutex; }
  // The slot a key rings and is watched in: the same in every process and build.
  static std::size_t slot_of(const std::string& key) noexcept;

  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kBytes = 2 * kPage;
  static constexpr std::size_t kSlots = kPage / sizeof(std::uint32_t) - 1;  // word 0 is the count

 private:
  explicit WakeBoard(void* map) : map_(map) {}
  // Word 0 counts every release; word 1 + i, the releases of slot i; word kSlots + 1 + i, the
  // watches of slot i.
  std::uint32_t* word(std::size_t index) const noexcept { return static_cast<std::uint32_t*>(map_) + index; }
  std::uint32_t* watches_of(std::size_t slot) const noexcept { return word(kSlots + 1 + slot); }
  void listen();
  void forget(std::size_t slot, std::uint64_t id);

  // The watches of one slot: a ring costs the listener one read per watched slot, however many
  // watches there are.
  struct SlotWatches {
    std::uint32_t seen = 0;  // the slot's value when last looked at
    std::unordered_map<std::uint64_t, std::shared_ptr<Watcher>> watchers;
  };

  void* const map_;
  AnnotatedMutex mutex_;
  std::unordered_map<std::size_t, SlotWatches> watches_ GUARDED_BY(mutex_);  // by slot
  std::uint64_t next_id_ GUARDED_BY(mutex_) = 0;
  bool listening_ GUARDED_BY(mutex_) = false;  // the thread was started (at the first watch)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace simba::internal
