// The local FIFO of lock requests of one mutex in this process, and the count of local
// handovers of one remote lease. Internal, part of a LockEntry, used under its lock.
//
// A request is served in the order it came; it leaves the queue when it is granted (front
// only), cancelled, timed out or given up (anywhere). Each carries its terms, its completion,
// its deadline's timer (cancelled by whoever takes the request out) and what the single-attempt
// rule needs (the rounds seen when it came, when it met another owner). A Locker's request also
// carries how to wake its thread to claim a handover (offer.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "simba/mutex.h"
#include "simba/runtime.h"

namespace simba::internal {

class LockEntry;

// A request's terms: its handle's LockOptions.
struct Terms {
  std::chrono::milliseconds max_hold{0};
  std::chrono::milliseconds linger{0};
  unsigned max_local_handovers = 0;
};

// Wakes a thread that waits for a request, to claim a lease on offer (LockEntry::claim). Called
// under the entry's lock, while the request is queued: its waiter cannot have left meanwhile.
class Waker {
 public:
  virtual void wake() noexcept = 0;

 protected:
  ~Waker() = default;
};

struct Request {
  using Clock = std::chrono::steady_clock;
  std::uint64_t ticket = 0;
  Terms terms;
  Mutex::Callback done;
  std::optional<Runtime::TimerId> deadline;  // its timer, if it has a timeout
  std::uint64_t rounds_at_queue = 0;         // remote rounds finished before it came
  std::shared_ptr<LockEntry> self;           // a request keeps its entry alive
  Clock::time_point queued_at{};
  // When a round first met another owner while this request was first in line: a single
  // attempt's wait for a caching owner's hand-back counts from there.
  std::optional<Clock::time_point> met_owner_at{};
  // A Locker's request (offer.h): its thread is woken to claim a handover, and it may be
  // passed for a while. Null for every other request: granted in turn, never passed.
  Waker* waker = nullptr;  // the waiting thread's, which outlives the request
  std::optional<Clock::time_point> first_offered_at{};
};

// A ring of requests (FIFO): a queue that holds one request at a time, the uncontended case,
// allocates one slot at its first and nothing after (a std::deque kept a 576-byte map and node
// for every entry, and allocated and freed a node every third request). References into it
// hold until the next push.
class RequestQueue {
 public:
  void push(Request request) {
    if (size_ == ring_.size()) grow();
    if (!request.waker) ++strict_;
    slot(size_).emplace(std::move(request));
    ++size_;
  }
  // Ahead of every waiting request: one that passes them (offer.h).
  void push_front(Request request) {
    if (size_ == ring_.size()) grow();
    if (!request.waker) ++strict_;
    head_ = (head_ + ring_.size() - 1) & (ring_.size() - 1);
    ring_[head_].emplace(std::move(request));
    ++size_;
  }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  Request& front() { return *ring_[head_]; }
  const Request& front() const { return *ring_[head_]; }
  Request pop_front();
  // The request of `ticket`, or null if it left.
  Request* find(std::uint64_t ticket) noexcept;
  bool is_front(std::uint64_t ticket) const noexcept { return size_ != 0 && ring_[head_]->ticket == ticket; }
  // Takes the request of `ticket` out, wherever it is; nullopt if it left already.
  std::optional<Request> take(std::uint64_t ticket);
  // Whether every waiting request may be passed (all are Lockers'): offer.h.
  bool all_may_be_passed() const noexcept { return strict_ == 0; }

 private:
  // The slot of the i-th request from the front (the capacity is a power of two); empty past
  // the last.
  std::optional<Request>& slot(std::size_t i) noexcept { return ring_[(head_ + i) & (ring_.size() - 1)]; }
  // Doubles the capacity (1 at first: an uncontended entry needs no more), the requests in
  // order from index 0.
  void grow();
  // Where the request of `ticket` is from the front; size_ if it left.
  std::size_t index_of(std::uint64_t ticket) noexcept;
  // The request at `i` leaves (the ones behind it move up a place); a queue that drained
  // after holding many lets their room go.
  Request leave(std::size_t i);

  std::vector<std::optional<Request>> ring_;  // its capacity: 0 or a power of two
  std::size_t head_ = 0;                      // where the front is
  std::size_t size_ = 0;
  std::size_t strict_ = 0;  // requests that must not be passed
};

// Local handovers of one remote lease: at most the ending hold's max_local_handovers in a
// row, none while another process's demand is pending; a fresh remote lease starts over.
class Handovers {
 public:
  bool may_hand_over(const Terms& ending, bool demanded) const noexcept {
    return count_ < ending.max_local_handovers && !demanded;
  }
  void handed_over() noexcept { ++count_; }
  void reset() noexcept { count_ = 0; }
  unsigned count() const noexcept { return count_; }

 private:
  unsigned count_ = 0;
};

}  // namespace simba::internal
