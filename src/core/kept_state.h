// The state a core last delivered to its retriever, kept small: every held lease keeps one,
// so at 100,000 mutexes each byte here is 100 KB. Internal.
//
// Its two owners' times are kept as they are; their ids share one string, and an id that is
// the core's own contender is kept as a flag, not a copy (a held lease would keep its id twice
// otherwise, on the heap). 104 bytes, where a MutexState takes 144.
#pragma once

#include <cstdint>
#include <string>

#include "simba/owner.h"

namespace simba::internal {

class KeptState {
 public:
  // Keeps `state`. `own_id`: the core's contender id (null for an observer, which has none).
  void keep(const MutexState& state, const std::string* own_id);
  // What was kept, with `own_id` (the same as keep()'s) for the owners that are the contender.
  MutexState state(const std::string* own_id) const;
  MutexOwner after(const std::string* own_id) const;
  // The kept state's new owner is the contender.
  bool after_ours() const noexcept { return after_ours_; }

 private:
  struct Times {
    EpochMillis acquired_at = 0;
    EpochMillis ttl_at = 0;
    EpochMillis transition_at = 0;
    std::uint64_t fencing_token = 0;
  };
  static Times times_of(const MutexOwner& owner) noexcept;
  static MutexOwner owner_of(const Times& times, std::string id, bool idle);

  std::string ids_;  // the former owner's id (unless ours), then the new owner's (unless ours)
  Times before_, after_;
  std::uint32_t before_size_ = 0;  // of the former owner's id in ids_
  bool before_ours_ = false;
  bool after_ours_ = false;
  bool before_idle_ = false;
  bool after_idle_ = false;
};

}  // namespace simba::internal
