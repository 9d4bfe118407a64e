// The single-attempt rule of the lock manager: a wait whose deadline passed (try_lock(),
// a timeout) ends only after it saw at least one remote round of its contender, and against
// an owner in another process that caches, after the hand-back its demand brings. And what a
// wait that timed out says. Pure: facts in, verdict out. Internal, used by LockEntry.
#pragma once

#include <chrono>
#include <string>

namespace simba::internal {

struct AttemptFacts {
  using Duration = std::chrono::steady_clock::duration;
  // First in line, not behind a local holder, and its contender running: a remote attempt
  // is under way. Otherwise the answer is known (the mutex is taken here) and the wait ends.
  bool attempting = false;
  bool won_ungranted = false;       // a round won the lease; the entry has not granted it yet
  bool round_since_queued = false;  // a round of the contender finished since the request came
  Duration since_queued{};
  Duration attempt_bound{};  // how long a round may take to come: ttl + transition + hand-back
  bool met_caching_owner = false;
  Duration since_met_owner{};  // since a round first met the other owner (else: since queued)
  Duration handback_bound{};   // how long the owner may take to hand back
};

enum class AttemptVerdict {
  ends,                // give up
  wait_for_round,      // look again after the next round
  ends_without_round,  // give up, though no round came within the bound (worth a warning)
};

inline AttemptVerdict single_attempt(const AttemptFacts& facts) noexcept {
  if (!facts.attempting) return AttemptVerdict::ends;
  if (facts.won_ungranted) return AttemptVerdict::wait_for_round;
  if (!facts.round_since_queued) {
    return facts.since_queued < facts.attempt_bound ? AttemptVerdict::wait_for_round
                                                    : AttemptVerdict::ends_without_round;
  }
  if (facts.met_caching_owner && facts.since_met_owner < facts.handback_bound) return AttemptVerdict::wait_for_round;
  return AttemptVerdict::ends;
}

// What a timed-out wait for `mutex` says (Error's message): how long it waited (unless
// `timeout` is none), as whom (if `contender` is not empty), who holds it (here, or the owner
// a round last saw if not `contender`), and the last backend error.
struct TimeoutFacts {
  std::string mutex;
  std::chrono::milliseconds timeout{-1};  // negative: none
  std::string contender;                  // empty: not named
  bool held_here = false;
  std::string owner;       // the owner a round last saw
  std::string self;        // the contender's own id (an owner equal to it is not named)
  std::string last_error;  // the last backend error, if any
};
std::string timeout_message(const TimeoutFacts& facts);

}  // namespace simba::internal
