// Per-thread reentrancy of Mutex's Lockable interface: the hold each thread took through
// lock()/try_lock(), and how many times it entered it. Internal, part of a LockEntry.
// Thread-safe; never calls out while its lock is held.
#pragma once

#include <cstdint>
#include <optional>
#include <stop_token>
#include <thread>
#include <unordered_map>

#include "base/thread_annotations.h"
#include "simba/mutex.h"

namespace simba::internal {

class ThreadHolds {
 public:
  // not_held: the thread holds nothing here; counted: it did, one more entry; lost: its hold
  // was revoked (entering again is an error).
  enum class Reentry { not_held, counted, lost };
  Reentry reenter(std::thread::id thread);
  // The thread's first entry, with the hold it took.
  void adopt(std::thread::id thread, Hold hold);
  // One entry less. nullopt: the thread holds nothing here. At zero the hold comes back, to be
  // ended by the caller (outside every lock); above zero an empty Hold.
  std::optional<Hold> leave(std::thread::id thread);
  // Of the thread's hold: its fencing token (0: none or lost) and its lease (no stop state: none).
  std::uint64_t token(std::thread::id thread) const;
  std::stop_token lease(std::thread::id thread) const;

 private:
  struct Entered {
    Hold hold;
    unsigned count = 0;
  };
  mutable AnnotatedMutex mutex_;
  std::unordered_map<std::thread::id, Entered> threads_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
