// A row of a simba_mutex table, judged by the database clock. Internal to backends.
#pragma once

#include "simba/backend.h"

namespace simba::internal {

// The owner record of a row read at `now` (database clock): a released or expired lease
// (transition_at < now) reads as no owner, keeping the mutex's fencing token.
inline OwnerSnapshot snapshot_of_row(MutexOwner row, EpochMillis now) {
  if (row.empty() || row.transition_at < now) {
    const auto token = row.fencing_token;
    row = MutexOwner::none();
    row.fencing_token = token;
  }
  return {std::move(row), now};
}

}  // namespace simba::internal
