// The local FIFO of lock requests (request_queue.h).
#include "locks/request_queue.h"

#include <algorithm>

namespace simba::internal {

namespace {
// A drained queue keeps room for this many requests; past it, it lets the room go.
constexpr std::size_t kKeptRoom = 64;
}  // namespace

void RequestQueue::grow() {
  std::vector<std::optional<Request>> bigger(std::max<std::size_t>(1, ring_.size() * 2));
  for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slot(i));
  ring_ = std::move(bigger);
  head_ = 0;
}

Request RequestQueue::leave(std::size_t i) {
  Request request = std::move(*slot(i));
  if (i == 0) {
    ring_[head_].reset();
    head_ = (head_ + 1) & (ring_.size() - 1);
  } else {
    for (std::size_t j = i; j + 1 < size_; ++j) slot(j) = std::move(slot(j + 1));
    slot(size_ - 1).reset();
  }
  --size_;
  if (!request.waker) --strict_;
  if (size_ == 0) {
    head_ = 0;
    if (ring_.size() > kKeptRoom) ring_ = std::vector<std::optional<Request>>();
  }
  return request;
}

Request RequestQueue::pop_front() { return leave(0); }

std::size_t RequestQueue::index_of(std::uint64_t ticket) noexcept {
  std::size_t i = 0;
  while (i < size_ && slot(i)->ticket != ticket) ++i;
  return i;
}

Request* RequestQueue::find(std::uint64_t ticket) noexcept {
  const auto i = index_of(ticket);
  return i < size_ ? &*slot(i) : nullptr;
}

std::optional<Request> RequestQueue::take(std::uint64_t ticket) {
  const auto i = index_of(ticket);
  if (i == size_) return std::nullopt;
  return leave(i);
}

}  // namespace simba::internal
