// Owner records and service status names.
#include "simba/owner.h"

namespace simba {

EpochMillis epoch_millis_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const MutexOwner& MutexOwner::none() noexcept {
  static const MutexOwner kNone{};
  return kNone;
}

const char* to_string(Status status) noexcept {
  switch (status) {
    case Status::initial: return "INITIAL";
    case Status::starting: return "STARTING";
    case Status::running: return "RUNNING";
    case Status::stopping: return "STOPPING";
  }
  return "UNKNOWN";
}

}  // namespace simba
