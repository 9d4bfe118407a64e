// A local handover to a sleeping Locker thread, and the Locker requests that may take the
// lease before that thread wakes. Internal, part of a LockEntry, used under its lock; reads no
// clock and calls nothing (unit-tested in lock_parts_test.cc).
//
// Granting a lease to a thread that sleeps costs a wake-up and a thread switch per hold (tens
// of microseconds on a small VM), while the thread that just let go usually asks again at once.
// So, as a std::mutex and Go's sync.Mutex do, the front request of a Locker is woken to claim
// the lease (LockEntry::claim) rather than granted it, and a Locker request that comes before
// that claim may take the lease first. The bounds:
//   - only a Locker's request passes, and only while every waiting request is a Locker's: a
//     Mutex handle's request is served in FIFO order and never passed;
//   - a waiter may be passed only until kMaxPassOver after it was first woken; from then on a
//     hold's end grants it the lease directly;
//   - waiting requests keep their order among themselves, and a passing request counts as a
//     local handover (the limit that lets other processes in holds).
//
//   state     holder  lease      next
//   closed    any     any        hand_over(front): grant -> closed; wake / woken -> on offer
//   on offer  none    held here  the woken request claims -> closed (granted() by the entry);
//                                a passing request takes it -> closed; the woken one left ->
//                                vacant() (the entry offers it to the next request)
#pragma once

#include <chrono>
#include <cstdint>

#include "locks/request_queue.h"

namespace simba::internal {

class Offer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMaxPassOver{1};

  enum class Next {
    grant,  // grant `front` the lease now
    wake,   // wake its thread to claim the lease (call its Waker)
    woken,  // its thread was woken already: nothing to do until it claims
  };

  // A hold ended (with `ending` terms) and its lease goes to the next local request.
  Next hand_over(Request& front, const Terms& ending, Clock::time_point now) noexcept {
    if (!front.waker) return Next::grant;
    if (!front.first_offered_at) {
      front.first_offered_at = now;
    } else if (now - *front.first_offered_at >= kMaxPassOver) {
      return Next::grant;
    }
    on_offer_ = true;
    terms_ = ending;
    if (woken_ == front.ticket) return Next::woken;
    woken_ = front.ticket;
    return Next::wake;
  }
  // Whether a request that comes now may take the lease on offer, passing `waiting`.
  bool may_pass(const Request& newcomer, const RequestQueue& waiting) const noexcept {
    return on_offer_ && newcomer.waker && waiting.all_may_be_passed();
  }
  // A request was granted the lease, whichever way: nothing is on offer, and a woken request
  // that was granted has no claim left to make.
  void granted(std::uint64_t ticket) noexcept {
    on_offer_ = false;
    if (woken_ == ticket) woken_ = 0;
  }
  // The woken request's thread came to claim (granted or passed): its wake-up is spent.
  void claimed(std::uint64_t ticket) noexcept {
    if (woken_ == ticket) woken_ = 0;
  }
  // A request left without a hold (cancelled, timed out, gave up). True if the lease is now on
  // offer with nobody woken to claim it: the entry hands it to the next request (or lets go).
  bool left(std::uint64_t ticket) noexcept {
    if (woken_ == ticket) woken_ = 0;
    return vacant();
  }
  bool vacant() const noexcept { return on_offer_ && woken_ == 0; }
  // The lease went elsewhere (cached, given back): not on offer.
  void closed() noexcept { on_offer_ = false; }

  bool on_offer() const noexcept { return on_offer_; }
  // The terms of the hold whose lease is on offer: the handover limit and caching go by them.
  const Terms& terms() const noexcept { return terms_; }

 private:
  bool on_offer_ = false;    // no holder; the lease waits for the woken request or one passing
  std::uint64_t woken_ = 0;  // the request whose thread was woken to claim, until it does
  Terms terms_{};
};

}  // namespace simba::internal
