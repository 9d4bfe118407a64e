// A waiter's watches of the records it looks at (record_watch.h).
#include "locks/record_watch.h"

#include "base/log.h"

namespace simba::internal {

RecordWatch::~RecordWatch() { watches_.clear(); }

void RecordWatch::watch(const std::string& record) {
  auto [it, added] = watches_.try_emplace(record);
  if (!added) return;
  try {
    it->second = backend_.watch(record, /*contender_id=*/{}, [this](WatchEvent) {
      {
        MutexLock lock(mutex_);
        ++changes_;
      }
      changed_.notify_all();
    });
  } catch (const std::exception& e) {
    log_debug("watching '" + record + "': " + e.what() + " (looking again at the poll interval instead)");
  }
}

void RecordWatch::wait_for(std::chrono::milliseconds pause) {
  UniqueMutexLock lock(mutex_);
  changed_.wait_for(lock.native(), pause, [&]() REQUIRES(mutex_) { return changes_ != seen_; });
  seen_ = changes_;
}

}  // namespace simba::internal
