// Per-thread reentrancy of the Lockable interface (thread_holds.h).
#include "locks/thread_holds.h"

namespace simba::internal {

ThreadHolds::Reentry ThreadHolds::reenter(std::thread::id thread) {
  MutexLock lock(mutex_);
  auto it = threads_.find(thread);
  if (it == threads_.end()) return Reentry::not_held;
  if (it->second.hold.lost().stop_requested()) return Reentry::lost;
  ++it->second.count;
  return Reentry::counted;
}

void ThreadHolds::adopt(std::thread::id thread, Hold hold) {
  MutexLock lock(mutex_);
  threads_[thread] = Entered{std::move(hold), 1};
}

std::optional<Hold> ThreadHolds::leave(std::thread::id thread) {
  MutexLock lock(mutex_);
  auto it = threads_.find(thread);
  if (it == threads_.end()) return std::nullopt;
  if (--it->second.count > 0) return Hold();
  Hold hold = std::move(it->second.hold);
  threads_.erase(it);
  return hold;
}

std::uint64_t ThreadHolds::token(std::thread::id thread) const {
  MutexLock lock(mutex_);
  auto it = threads_.find(thread);
  return it == threads_.end() ? 0 : it->second.hold.fencing_token();
}

std::stop_token ThreadHolds::lease(std::thread::id thread) const {
  MutexLock lock(mutex_);
  auto it = threads_.find(thread);
  return it == threads_.end() ? std::stop_token() : it->second.hold.lost();
}

}  // namespace simba::internal
