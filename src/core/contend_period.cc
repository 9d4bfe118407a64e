// Next-delay computation of the contention loop.
#include "core/contend_period.h"

#include <algorithm>

namespace simba::internal {

std::chrono::milliseconds next_delay(const MutexOwner& owner, std::string_view contender_id, EpochMillis now,
                                     std::mt19937_64& rng) {
  std::int64_t delay;
  if (owner.is_owner(contender_id)) {
    delay = owner.ttl_at - now;
  } else {
    std::int64_t min = owner.transition_at == owner.ttl_at ? 0 : -200;
    std::uniform_int_distribution<std::int64_t> jitter(min, 999);
    delay = owner.transition_at - now + jitter(rng);
  }
  return std::chrono::milliseconds(std::max<std::int64_t>(delay, 0));
}

std::chrono::steady_clock::time_point renewal_tick(std::chrono::steady_clock::time_point at,
                                                   std::chrono::steady_clock::time_point now,
                                                   std::chrono::milliseconds ttl) {
  using std::chrono::milliseconds;
  const auto grid = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::clamp(ttl / 8, milliseconds(10), milliseconds(1000)));
  const auto tick = std::chrono::steady_clock::time_point((at.time_since_epoch() / grid) * grid);
  return tick > now ? tick : at;
}

std::chrono::milliseconds expiry_probe_delay(const MutexOwner& owner, EpochMillis now, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> jitter(1, 20);
  return std::chrono::milliseconds(std::max<std::int64_t>(owner.transition_at - now, 0) + jitter(rng));
}

std::chrono::milliseconds backoff_delay(int failures, std::chrono::milliseconds initial, std::chrono::milliseconds cap,
                                        std::mt19937_64& rng) {
  std::int64_t delay = initial.count();
  for (int i = 1; i < failures && delay < cap.count(); ++i) delay *= 2;
  delay = std::min(delay, std::max(cap.count(), initial.count()));
  std::uniform_int_distribution<std::int64_t> jitter(delay / 2, delay);
  return std::chrono::milliseconds(jitter(rng));
}

std::chrono::milliseconds next_round_delay(const MutexOwner& owner, EpochMillis now, std::string_view contender_id,
                                           const RoundPolicy& policy, std::mt19937_64& rng) {
  using std::chrono::milliseconds;
  if (policy.observer) {
    milliseconds delay = owner.empty() ? (policy.push ? policy.ttl : policy.poll)
                                       : milliseconds(std::max<EpochMillis>(owner.transition_at - now + 1, 0));
    if (!policy.push || !policy.push_acquisitions) delay = std::min(delay, policy.poll);
    return delay;
  }
  milliseconds delay = next_delay(owner, contender_id, now, rng);
  if (!policy.ours && !owner.empty()) delay = std::min(delay, expiry_probe_delay(owner, now, rng));
  if (!policy.ours && (!policy.push || owner.empty())) delay = std::min(delay, policy.poll);
  if (policy.again && !policy.ours) delay = milliseconds(0);
  return delay;
}

}  // namespace simba::internal
