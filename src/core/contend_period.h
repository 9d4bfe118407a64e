// The delay before a contender's next attempt (Simba's ContendPeriod). Internal to simba.
#pragma once

#include <chrono>
#include <random>
#include <string_view>

#include "simba/owner.h"

namespace simba::internal {

// When a renewal due at `at` goes, with batched rounds (RoundBatcher): on a grid of ttl / 8
// (10 ms to 1 s) shared by every lease of that ttl in the process, at or before `at` (never
// later: the lease is only renewed sooner), so that leases renew together and share round
// trips. `at` itself when the grid point is not after `now`.
std::chrono::steady_clock::time_point renewal_tick(std::chrono::steady_clock::time_point at,
                                                   std::chrono::steady_clock::time_point now,
                                                   std::chrono::milliseconds ttl);

// Owner: ttl_at - now (renew at the soft expiry). Non-owner: transition_at - now + jitter
// with jitter uniform in [0, 1000) ms if transition_at == ttl_at, else [-200, 1000) ms.
// Clamped to >= 0. `now` is the backend clock's reading that judged `owner`.
std::chrono::milliseconds next_delay(const MutexOwner& owner, std::string_view contender_id, EpochMillis now,
                                     std::mt19937_64& rng);

// When a non-owner should look again at the latest: just after the lease's hard expiry
// (transition_at < now takes it), plus 1..20 ms of jitter. Simba waits up to a second longer
// (next_delay's jitter); a waiter takes the earlier of the two, so takeover after an owner
// dies costs the lease plus a round trip, not plus a second.
std::chrono::milliseconds expiry_probe_delay(const MutexOwner& owner, EpochMillis now, std::mt19937_64& rng);

// Exponential backoff after `failures` consecutive errors (1 = first): initial * 2^(n-1),
// capped at `cap`, then "equal jitter": uniform in [d/2, d].
std::chrono::milliseconds backoff_delay(int failures, std::chrono::milliseconds initial, std::chrono::milliseconds cap,
                                        std::mt19937_64& rng);

// What decides when a service's next round runs, besides the owner it just read.
struct RoundPolicy {
  bool observer = false;           // no contender: the service only watches
  bool ours = false;               // the round left this contender owning the mutex
  bool again = false;              // a claim came back after its lease ran out: retry at once
  bool push = false;               // the backend pushes releases (Backend::push())
  bool push_acquisitions = false;  // ... and acquisitions (Push::pushes_acquisitions)
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds poll{0};  // the poll interval in force
};

// The delay before the next round after one that read `owner` at backend time `now`:
//   observer: when the lease could expire (expiry is never pushed; a free mutex: ttl with
//             push, else poll), at most poll without pushed acquisitions;
//   owner:    next_delay() (renew at the soft expiry);
//   waiter:   the earlier of next_delay() and expiry_probe_delay(), at most poll without push
//             or when the mutex is free; 0 after a claim that came back too late.
std::chrono::milliseconds next_round_delay(const MutexOwner& owner, EpochMillis now, std::string_view contender_id,
                                           const RoundPolicy& policy, std::mt19937_64& rng);

}  // namespace simba::internal
