// Owner records.
#include "simba/owner.h"

namespace simba {

EpochMillis epoch_millis_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const MutexOwner& MutexOwner::none() noexcept {
  static const MutexOwner kNone{};
  return kNone;
}

}  // namespace simba
