// When the lock manager gives a busy lease back to the backend (the local handover limit, or a
// demand), a local request that waits would win it back at once, before a waiter in another
// process could look. YieldWindow decides how long the entry's contender stays away: a pure
// value (time comes in as arguments), used under the entry's lock. Internal.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

namespace simba::internal {

class YieldWindow {
 public:
  using Clock = std::chrono::steady_clock;

  // The entry's contender won the lease in a round that took `round_trip` (it sizes a window
  // on a push engine).
  void won(Clock::duration round_trip) noexcept { round_trip_ = round_trip; }
  // A round saw another process own the mutex.
  void rival_seen(Clock::time_point now) noexcept {
    rival_seen_ = now;
    spacing_ = {};  // uncontended windows start over at the shortest spacing
  }
  std::optional<Clock::time_point> last_rival() const noexcept { return rival_seen_; }
  // Another process was seen wanting the mutex within the last second.
  bool contended(Clock::time_point now) const noexcept {
    return rival_seen_ && now - *rival_seen_ < std::chrono::seconds(1);
  }

  // The lease went back while requests wait here: stay away for a window, every time while
  // contended; else after a spacing of busy local use (a waiter elsewhere that never won yet
  // leaves no trace to see; it still gets a window within that bound). The spacing starts at
  // four windows and doubles with each window no other process used (none was seen since), up
  // to kMaxSpacing (or four windows, if longer); seeing another process starts it over.
  // `push`: the engine pushes releases to waiters; `poll`: their poll interval otherwise.
  void yield(Clock::time_point now, bool push, std::chrono::milliseconds poll) noexcept {
    const auto window = length(push, poll);
    const Clock::duration shortest = 4 * window;
    if (contended(now)) {
      leave(now, window);
      return;
    }
    spacing_ = std::max(spacing_, shortest);
    if (now - last_window_ >= spacing_) {
      leave(now, window);
      spacing_ = std::max(std::min<Clock::duration>(2 * spacing_, kMaxSpacing), shortest);
    }
  }
  // The longest spacing of windows while no other process is seen.
  static constexpr Clock::duration kMaxSpacing = std::chrono::seconds(1);
  // Whether the contender stays away at `now` (a window is not over). `clock` gives now: it is
  // read only while a window was left (most starts read no clock).
  template <class Now>
  bool away(Now clock) noexcept {
    if (not_before_ == Clock::time_point{}) return false;
    if (clock() < not_before_) return true;
    not_before_ = {};  // over
    return false;
  }
  // Until when the contender stays away (the past or the epoch: it may start).
  Clock::time_point not_before() const noexcept { return not_before_; }

  // With a push channel a waiter elsewhere is told of the release at once and needs about one
  // round trip: four of ours, at least 2 ms, at most 50 ms. Without one it looks again within
  // its poll interval.
  Clock::duration length(bool push, std::chrono::milliseconds poll) const noexcept {
    if (!push) return poll + std::chrono::milliseconds(10);
    return std::clamp<Clock::duration>(4 * round_trip_, std::chrono::milliseconds(2), std::chrono::milliseconds(50));
  }

 private:
  Clock::duration round_trip_{};     // of the round that won the lease, last time
  Clock::time_point last_window_{};  // end of the last window left to others
  Clock::time_point not_before_{};
  Clock::duration spacing_{};  // of uncontended windows (yield())

  void leave(Clock::time_point now, Clock::duration window) noexcept {
    not_before_ = now + window;
    last_window_ = not_before_;
  }
  std::optional<Clock::time_point> rival_seen_;  // when a round last saw another owner
};

}  // namespace simba::internal
