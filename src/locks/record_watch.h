// Watches of records a waiter looks at again and again (a writer at the gate of a shared
// mutex, waiting for the readers inside to leave): its pause between two looks ends early
// when one of them changes, where the engine pushes changes. Internal.
//
// Each record is watched as an observer (Backend::watch with no contender id: every change
// of its owner). An engine without push, or a watch that cannot start, leaves the pause as
// it was: the waiter's looks stay the safety net, the watches only shorten the wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::internal {

class RecordWatch {
 public:
  explicit RecordWatch(Backend& backend) : backend_(backend) {}
  ~RecordWatch();  // ends every watch before the state their calls touch goes
  RecordWatch(const RecordWatch&) = delete;
  RecordWatch& operator=(const RecordWatch&) = delete;

  // Watches `record` from now on, unless it is watched already.
  void watch(const std::string& record);
  // Waits `pause`, or less: until a watched record changed since the last wait returned.
  void wait_for(std::chrono::milliseconds pause);

 private:
  Backend& backend_;
  AnnotatedMutex mutex_;
  std::condition_variable changed_;
  std::uint64_t changes_ GUARDED_BY(mutex_) = 0;                  // calls of the watches so far
  std::uint64_t seen_ = 0;                                        // changes_ when the last wait returned (the waiter's)
  std::map<std::string, std::unique_ptr<Subscription>> watches_;  // the waiter's; null: none (no push)
};

}  // namespace simba::internal
