// The states of a lock manager entry (the table in simba/mutex.h) as code: what the entry is
// in, from the facts it keeps, and what its remote contender must do about it. Internal.
//
//   state      remote contender               local holder  requests  the contender
//   idle       none                           none          none      -
//   queued     none (not yet, or yielding)    none          >= 1      start (once a yield ends)
//   waiting    contending                     none          >= 1      -
//   held       owns the lease, renewing it    one           any       -
//   cached     owns the lease, renewing it    none          none      -
//   cancelled  contending, no longer wanted   none          none      stop -> idle
//   releasing  giving the lease back          none          any       stop -> idle, or queued
//
// A Locker's direct lease (remote_contender.h) is held with no contender running: while the
// entry has one, its driver decides by it (keep it, have the contender take it over, or give it
// back) instead of by this table.
#pragma once

namespace simba::internal {

enum class EntryState { idle, queued, waiting, held, cached, cancelled, releasing };

struct EntryFacts {
  bool contending = false;      // the remote contender runs
  bool release_wanted = false;  // the lease (or the place in line) must go back
  bool holder = false;          // a local hold
  bool requests = false;        // local requests wait
  bool cached = false;          // the lease is kept with no hold (lock caching)
};

constexpr EntryState entry_state(const EntryFacts& facts) noexcept {
  if (facts.contending && facts.release_wanted) return EntryState::releasing;
  if (facts.holder) return EntryState::held;
  if (facts.requests) return facts.contending ? EntryState::waiting : EntryState::queued;
  if (facts.cached) return EntryState::cached;
  return facts.contending ? EntryState::cancelled : EntryState::idle;
}

enum class ContenderMove { none, start, stop };

constexpr ContenderMove contender_move(EntryState state) noexcept {
  switch (state) {
    case EntryState::queued: return ContenderMove::start;
    case EntryState::cancelled:
    case EntryState::releasing: return ContenderMove::stop;
    default: return ContenderMove::none;
  }
}

constexpr const char* to_string(EntryState state) noexcept {
  switch (state) {
    case EntryState::idle: return "idle";
    case EntryState::queued: return "queued";
    case EntryState::waiting: return "waiting";
    case EntryState::held: return "held";
    case EntryState::cached: return "cached";
    case EntryState::cancelled: return "cancelled";
    case EntryState::releasing: return "releasing";
  }
  return "?";
}

}  // namespace simba::internal
