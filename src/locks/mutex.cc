// Mutex and Hold: the lock manager's public handles, over a LockEntry.
#include "simba/mutex.h"

#include <condition_variable>
#include <thread>
#include <utility>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/lock_entry.h"
#include "runtime/runtime_internal.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {

using internal::LockEntry;

void LockOptions::validate() const {
  if (max_hold.count() < 0) {
    throw Error(errc::invalid_argument, "max_hold must be >= 0 (0: no limit), got " + format_duration(max_hold));
  }
  if (linger && linger->count() < 0) {
    throw Error(errc::invalid_argument, "linger must be >= 0 (0: no caching), got " + format_duration(*linger));
  }
}

// ---- Hold

Hold::Hold(std::shared_ptr<LockEntry> entry, std::uint64_t id, std::uint64_t token, std::stop_token lost) noexcept
    : entry_(std::move(entry)), id_(id), token_(token), lost_(std::move(lost)) {}

const std::string& Hold::mutex() const noexcept {
  static const std::string kNone;
  return entry_ ? entry_->name() : kNone;
}

bool Hold::is_owner() const noexcept {
  if (!entry_ || lost_.stop_requested()) return false;
  try {
    return entry_->hold_is_owner(id_);
  } catch (const std::exception& e) {  // a lock that cannot be taken: not ours to claim
    internal::log_error("mutex '" + entry_->name() + "': is_owner(): " + e.what());
    return false;
  }
}

std::uint64_t Hold::fencing_token() const noexcept { return entry_ && !lost_.stop_requested() ? token_ : 0; }

void Hold::end(bool recycle_lost) noexcept {
  const auto entry = std::move(entry_);  // empty from here on, whatever end_hold does
  entry->end_hold(id_, recycle_lost);
}

// ---- Mutex

Mutex::Mutex(std::shared_ptr<LockEntry> entry, std::chrono::milliseconds max_hold, std::chrono::milliseconds linger,
             unsigned max_local_handovers)
    : entry_(std::move(entry)), max_hold_(max_hold), linger_(linger), max_local_handovers_(max_local_handovers) {
  LockOptions options;
  options.max_hold = max_hold;
  options.linger = linger;
  options.validate();
}

const std::string& Mutex::name() const noexcept { return entry_->name(); }

Mutex Mutex::with_max_hold(std::chrono::milliseconds max_hold) const {
  return Mutex(entry_, max_hold, linger_, max_local_handovers_);
}

Mutex Mutex::with_linger(std::chrono::milliseconds linger) const {
  return Mutex(entry_, max_hold_, linger, max_local_handovers_);
}

// The fast path over a cached lease: only for handles without max_hold (it needs a timer per
// hold) whose holds may cache; a thread's own fast hold is counted whatever the handle.
void Mutex::lock() {
  const auto fast = entry_->fast_lock(max_hold_.count() == 0 && linger_.count() > 0);
  if (fast == internal::FastPath::Lock::acquired || fast == internal::FastPath::Lock::counted) return;
  if (fast == internal::FastPath::Lock::lost) {
    throw Error(errc::unavailable,
                "the lease of mutex '" + name() + "' held by this thread was lost; unlock() it before locking again");
  }
  switch (entry_->threads().reenter(std::this_thread::get_id())) {
    case internal::ThreadHolds::Reentry::counted: return;
    case internal::ThreadHolds::Reentry::lost:
      throw Error(errc::unavailable,
                  "the lease of mutex '" + name() + "' held by this thread was lost; unlock() it before locking again");
    case internal::ThreadHolds::Reentry::not_held: break;
  }
  entry_->threads().adopt(std::this_thread::get_id(), acquire());
}

bool Mutex::try_lock() {
  const auto fast = entry_->fast_lock(max_hold_.count() == 0 && linger_.count() > 0);
  if (fast == internal::FastPath::Lock::acquired || fast == internal::FastPath::Lock::counted) return true;
  if (fast == internal::FastPath::Lock::lost) return false;
  return lock_until(std::chrono::steady_clock::now());
}

bool Mutex::lock_until(std::chrono::steady_clock::time_point deadline) {
  const auto fast = entry_->fast_lock(max_hold_.count() == 0 && linger_.count() > 0);
  if (fast == internal::FastPath::Lock::acquired || fast == internal::FastPath::Lock::counted) return true;
  if (fast == internal::FastPath::Lock::lost) return false;
  switch (entry_->threads().reenter(std::this_thread::get_id())) {
    case internal::ThreadHolds::Reentry::counted: return true;
    case internal::ThreadHolds::Reentry::lost: return false;
    case internal::ThreadHolds::Reentry::not_held: break;
  }
  auto hold = hold_until(deadline);
  if (!hold) return false;
  entry_->threads().adopt(std::this_thread::get_id(), std::move(hold));
  return true;
}

namespace {

// Where a blocking request's Hold lands. Cheaper than a std::promise, whose set_value() goes
// through std::call_once: a Locker's cycle on memory: spent a third of its time there.
// A Locker's request is also woken here to claim a handover (locks/offer.h).
struct Landing final : internal::Waker {
  // A completion that runs on the requesting thread (within its own request(), claim(),
  // give_up() or cancel(): an inline round that won, a cached lease) lands here without the
  // lock: only that thread reads these, and it is not waiting then.
  const std::thread::id requester = std::this_thread::get_id();
  bool done_here = false;
  Hold hold_here;

  internal::AnnotatedMutex mutex;
  std::condition_variable arrived;
  bool done GUARDED_BY(mutex) = false;
  bool offered GUARDED_BY(mutex) = false;  // wake(): claim the lease on offer
  Hold hold GUARDED_BY(mutex);

  void wake() noexcept override {
    {
      internal::MutexLock lock(mutex);
      offered = true;
    }
    arrived.notify_one();
  }
};

}  // namespace

Hold Mutex::direct_hold() const {
  if (internal::on_runtime_thread()) return {};  // a runtime thread makes no blocking call
  return entry_->direct_hold({max_hold_, linger_, max_local_handovers_});
}

Hold Mutex::hold_until(std::chrono::steady_clock::time_point deadline, const std::stop_token& interrupt) const {
  constexpr auto kForever = std::chrono::steady_clock::time_point::max();
  // The landing lives here: this thread returns only once the completion ran (or once its
  // request was taken out, never to run), and the completion notifies under the landing's lock,
  // so it is done with the landing when this thread sees `done`. A Locker's wake-up comes under
  // the entry's lock while the request is queued, so before this thread can leave. Holding the
  // landing by a plain pointer also keeps the completion inline in its std::function.
  Landing landing;
  const auto ticket = entry_->request(
      LockEntry::kNoTimeout, {max_hold_, linger_, max_local_handovers_},
      [at = &landing](std::error_code, Hold hold) {
        if (std::this_thread::get_id() == at->requester) {
          at->hold_here = std::move(hold);
          at->done_here = true;
          return;
        }
        internal::MutexLock lock(at->mutex);
        at->hold = std::move(hold);
        at->done = true;
        at->arrived.notify_one();
      },
      /*inline_round=*/!internal::on_runtime_thread(), for_locker_ ? &landing : nullptr);
  // Granted already (an inline round won, or a cached lease): no interrupt to listen for.
  if (landing.done_here) return std::move(landing.hold_here);
  {
    internal::MutexLock lock(landing.mutex);
    if (landing.done) return std::move(landing.hold);
  }
  // (Its destructor waits for a callback running on another thread.)
  std::stop_callback wake(interrupt, [at = &landing] {
    { internal::MutexLock lock(at->mutex); }  // a waiter between its check and its wait sees it
    at->arrived.notify_all();
  });
  for (;;) {
    bool offered = false;
    {
      internal::UniqueMutexLock lock(landing.mutex);
      const auto landed = [&]() REQUIRES(landing.mutex) {
        return landing.done_here || landing.done || landing.offered || interrupt.stop_requested();
      };
      if (deadline == kForever) {
        landing.arrived.wait(lock.native(), landed);
      } else {
        landing.arrived.wait_until(lock.native(), deadline, landed);
      }
      if (landing.done_here) return std::move(landing.hold_here);
      if (landing.done) return std::move(landing.hold);
      offered = std::exchange(landing.offered, false);
    }
    // Granted: the Hold is in the landing (or on its way). Passed: another Locker took the
    // lease first; this request stays first in line.
    if (offered) {
      entry_->claim(ticket);
      continue;
    }
    if (interrupt.stop_requested()) {
      // Taken out here, on this thread: the contender stops (a round in flight ends, a lease it
      // won goes back) before cancel() returns. Not taken out: it was granted meanwhile, and
      // the Hold on its way is dropped (released) below.
      if (entry_->cancel(ticket, std::make_error_code(std::errc::operation_canceled))) return Hold();
      internal::UniqueMutexLock lock(landing.mutex);
      landing.arrived.wait(lock.native(), [&]() REQUIRES(landing.mutex) { return landing.done_here || landing.done; });
      Hold granted = std::move(landing.done_here ? landing.hold_here : landing.hold);
      lock.unlock();
      granted.unlock();
      return Hold();
    }
    // Not under the landing's lock: giving up may complete the request (its callback takes it).
    switch (entry_->give_up(ticket)) {
      case LockEntry::GiveUp::gave_up: return Hold();
      case LockEntry::GiveUp::granted: deadline = kForever; break;  // its Hold is on the way
      case LockEntry::GiveUp::wait_for_round:
        deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);  // one round more
        break;
    }
  }
}

void Mutex::unlock() noexcept {
  if (entry_->fast_unlock()) return;
  std::optional<Hold> hold;
  try {
    hold = entry_->threads().leave(std::this_thread::get_id());
  } catch (const std::exception& e) {
    internal::log_error("mutex '" + name() + "': unlock(): " + e.what());
    return;
  }
  if (!hold) {
    internal::log_error("mutex '" + name() +
                        "': unlock() by a thread that does not hold it (a usage error); nothing was released");
  }
  // A hold leaving here ends as `hold` goes out of scope.
}

std::uint64_t Mutex::fencing_token() const {
  if (auto token = entry_->fast().thread_token()) return *token;
  return entry_->threads().token(std::this_thread::get_id());
}

std::stop_token Mutex::lease_token() const {
  if (auto lease = entry_->fast().thread_lease()) return *lease;
  return entry_->threads().lease(std::this_thread::get_id());
}

bool Mutex::held_by_this_thread() const {
  return entry_->fast().thread_lease().has_value() ||
         entry_->threads().lease(std::this_thread::get_id()).stop_possible();
}

Hold Mutex::acquire() { return hold_until(std::chrono::steady_clock::time_point::max()); }

Hold Mutex::acquire(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  auto hold = hold_until(std::chrono::steady_clock::now() + timeout);
  if (!hold) throw Error(errc::timeout, entry_->timeout_message(timeout));
  return hold;
}

std::future<Hold> Mutex::lock_async(std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Hold>>();
  auto future = promise->get_future();
  std::weak_ptr<LockEntry> weak = entry_;
  enqueue(timeout, [promise, weak, timeout](std::error_code error, Hold hold) {
    if (!error) {
      promise->set_value(std::move(hold));
      return;
    }
    auto entry = weak.lock();
    std::string what = entry && error == errc::timeout ? entry->timeout_message(timeout) : error.message();
    promise->set_exception(std::make_exception_ptr(Error(error, what)));
  });
  return future;
}

void Mutex::lock_async(std::chrono::milliseconds timeout, Callback done) {
  if (!done) throw Error(errc::invalid_argument, "lock_async(): the callback must not be empty");
  auto strand = entry_->callback_strand();
  auto hold_name = [name = name()](const Hold&) { return name; };
  enqueue(timeout, [strand, hold_name, done = std::move(done)](std::error_code error, Hold hold) {
    // A Callback is copyable, a Hold is not: the Hold travels in a shared box.
    auto box = std::make_shared<Hold>(std::move(hold));
    strand.post([done, error, box, name = hold_name(*box)] {
      try {
        done(error, std::move(*box));
      } catch (const std::exception& e) {
        internal::log_error("mutex '" + name + "': a lock_async callback threw: " + e.what());
      } catch (...) {
        internal::log_error("mutex '" + name + "': a lock_async callback threw a non-standard exception");
      }
    });
  });
}

std::uint64_t Mutex::enqueue(std::chrono::milliseconds timeout, Callback done) const {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  return entry_->request(timeout, {max_hold_, linger_, max_local_handovers_}, std::move(done), /*inline_round=*/false);
}

bool Mutex::cancel(std::uint64_t ticket, std::error_code reason) const { return entry_->cancel(ticket, reason); }

}  // namespace simba
