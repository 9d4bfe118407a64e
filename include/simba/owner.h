// simba/owner.h: who owns a mutex, and how ownership changed (Simba v3 semantics).
//
// Lease states of one owner record, with `now` in epoch milliseconds of the backend's clock:
//
//   now <  ttl_at                  in ttl          owner is comfortably live; renews at ttl_at
//   ttl_at <= now <= transition_at in transition   only the owner may renew
//   transition_at < now            expired         anyone may take the mutex
//
// Value types only: safe to copy between threads, no synchronisation inside.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace simba {

using EpochMillis = std::int64_t;

// Wall-clock epoch milliseconds of this host.
EpochMillis epoch_millis_now() noexcept;

struct MutexOwner {
  std::string owner_id;           // Contender id of the owner; empty means no owner.
  EpochMillis acquired_at = 0;    // When the current lease was acquired or last renewed.
  EpochMillis ttl_at = 0;         // acquired_at + ttl.
  EpochMillis transition_at = 0;  // ttl_at + transition.
  // Strictly larger for every change of owner of this mutex; kept by renewals. 0 = none.
  std::uint64_t fencing_token = 0;

  static const MutexOwner& none() noexcept;

  bool is_owner(std::string_view contender_id) const noexcept { return owner_id == contender_id; }
  bool is_in_ttl(EpochMillis now) const noexcept { return ttl_at > now; }                 // strict
  bool is_in_transition(EpochMillis now) const noexcept { return transition_at >= now; }  // inclusive
  bool has_owner(EpochMillis now) const noexcept { return transition_at >= now; }         // inclusive
  bool empty() const noexcept { return owner_id.empty(); }
  // The owner is a lock-manager process that keeps leases cached (simba/mutex.h): it may be
  // using this one or keeping it unused, and gives it back as soon as another contender asks.
  // Its id ends with kCachingSuffix.
  static constexpr std::string_view kCachingSuffix = "+caching";
  bool caching() const noexcept { return owner_id.ends_with(kCachingSuffix); }
  // A caching owner keeps this lease cached and nobody in its process uses it right now, as
  // the owner last marked it (IdleMarks::mark_idle(): at most a demand poll, 100 ms, and a round
  // trip behind). To another contender the mutex is as good as free: asking gets it within a
  // hand-back. Always false while the lease is in use, for a non-caching owner, and when free.
  bool idle = false;

  friend bool operator==(const MutexOwner&, const MutexOwner&) = default;
};

// A transition between two owner records. Only a change of owner id is a change: renewals
// by the same owner are not, and fire no callback.
struct MutexState {
  MutexOwner before;
  MutexOwner after;

  bool changed() const noexcept { return before.owner_id != after.owner_id; }
  bool acquired(std::string_view contender_id) const noexcept { return changed() && after.is_owner(contender_id); }
  bool released(std::string_view contender_id) const noexcept { return changed() && before.is_owner(contender_id); }
  bool is_owner(std::string_view contender_id) const noexcept { return after.is_owner(contender_id); }

  friend bool operator==(const MutexState&, const MutexState&) = default;
};

}  // namespace simba
