// The fast path over a cached lease (fast_path.h).
#include "locks/fast_path.h"

namespace simba::internal {
namespace {

// The fast path reads CLOCK_MONOTONIC_COARSE, which lags steady_clock's CLOCK_MONOTONIC by at
// most a tick (1-10 ms): it stops using a cached lease kMargin before its deadline by
// steady_clock, so a lagging reading never overruns it.
constexpr std::int64_t kMargin = 20'000'000;  // ns

std::int64_t coarse_deadline(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count() - kMargin;
}

}  // namespace

FastPath::Lock FastPath::relock() noexcept {
  if (thread_.load(std::memory_order_relaxed) != this_thread_tag()) return Lock::none;
  if (lost_.stop_requested()) return Lock::lost;
  ++count_;
  return Lock::counted;
}

void FastPath::open(std::uint64_t token, std::chrono::steady_clock::time_point deadline) noexcept {
  token_ = token;
  if (!lost_.stop_possible() || lost_.stop_requested()) lost_ = std::stop_source();
  until_.store(coarse_deadline(deadline), std::memory_order_relaxed);
  state_.store(State::open, std::memory_order_release);
}

void FastPath::extend(std::chrono::steady_clock::time_point deadline) noexcept {
  until_.store(coarse_deadline(deadline), std::memory_order_relaxed);
}

bool FastPath::settle() noexcept {
  auto state = state_.load(std::memory_order_acquire);
  for (;;) {
    if (state == State::open) {
      if (state_.compare_exchange_weak(state, State::closed, std::memory_order_acq_rel)) return false;
    } else if (state == State::held) {
      if (state_.compare_exchange_weak(state, State::closing, std::memory_order_acq_rel)) return true;
    } else {
      return false;
    }
  }
}

std::optional<std::uint64_t> FastPath::thread_token() const noexcept {
  if (thread_.load(std::memory_order_relaxed) != this_thread_tag()) return std::nullopt;
  return lost_.stop_requested() ? 0 : token_;
}

std::optional<std::stop_token> FastPath::thread_lease() const noexcept {
  if (thread_.load(std::memory_order_relaxed) != this_thread_tag()) return std::nullopt;
  return lost_.get_token();
}

}  // namespace simba::internal
