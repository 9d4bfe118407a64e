// The local FIFO of lock requests (request_queue.h).
#include "locks/request_queue.h"

#include <algorithm>

namespace simba::internal {

Request RequestQueue::pop_front() {
  Request request = std::move(queue_.front());
  queue_.pop_front();
  left(request);
  return request;
}

Request* RequestQueue::find(std::uint64_t ticket) noexcept {
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Request& r) { return r.ticket == ticket; });
  return it == queue_.end() ? nullptr : &*it;
}

std::optional<Request> RequestQueue::take(std::uint64_t ticket) {
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Request& r) { return r.ticket == ticket; });
  if (it == queue_.end()) return std::nullopt;
  Request request = std::move(*it);
  queue_.erase(it);
  left(request);
  return request;
}

}  // namespace simba::internal
