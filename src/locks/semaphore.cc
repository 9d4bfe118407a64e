// Semaphore and Permit: N permit slots, each a mutex of the lock manager; a request races for
// every slot at once and keeps the first it is granted.
#include "simba/semaphore.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <optional>
#include <random>
#include <utility>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/derived_records.h"
#include "locks/lock_entry.h"
#include "locks/semaphore_state.h"
#include "simba/backend.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {
namespace internal {

struct SemaphoreState {
  explicit SemaphoreState(Mutex line_) : line(std::move(line_)) {}

  std::string name;
  unsigned permits = 0;
  std::vector<Mutex> slots;  // slot k: slot_name(name, k, permits)
  // "<name>#wait": the line of waiting processes; its holder (the longest waiting process's
  // first request) waits on the slots, the others wait in the line, so a waiting process has
  // one remote contender and processes are served first come, first served.
  Mutex line;
  // While this process leads the line: the line's hold, shared by this process's requests that
  // wait on the slots (`racing`). A request that comes meanwhile joins them without waiting in
  // the line, up to `permits` of them per lead, so that other processes' turn still comes; the
  // last to settle passes the line on.
  AnnotatedMutex lead_mutex;
  Hold lead GUARDED_BY(lead_mutex);
  unsigned racing GUARDED_BY(lead_mutex) = 0;
  unsigned joins GUARDED_BY(lead_mutex) = 0;
  std::shared_ptr<Backend> backend;
  std::atomic<bool> checked{false};  // the permits were checked against the live holders
  // The slot the next try asks first: the one this handle was last granted (its entry is warm;
  // a sibling holding it is seen without a round trip), first a random one (spreads processes).
  std::atomic<unsigned> next{0};
};

namespace {

std::string permits_text(unsigned permits) { return std::to_string(permits) + (permits == 1 ? " permit" : " permits"); }

// A live holder of one of a semaphore's slots, as a listing shows it.
struct SlotHolder {
  std::string record;  // the slot's record: slot_name(name, slot, permits)
  std::string owner;
  unsigned slot = 0;
  unsigned permits = 0;  // of the semaphore whose slot it holds
};

// The live holders of the slots of semaphores named `state.name` (of any count of permits),
// by one listing of its derived records; nullopt where the engine offers no listing. Blocks for the listing: a
// caller's thread only, never a runtime's.
std::optional<std::vector<SlotHolder>> slot_holders(const SemaphoreState& state) {
  Administration* admin = state.backend->administration();
  if (!admin) return std::nullopt;
  std::vector<SlotHolder> out;
  const auto listing = admin->list_derived(state.name, 4 * Semaphore::kMaxPermits);
  for (const auto& record : listing.records) {
    if (record.owner.owner_id.empty()) continue;
    const auto slot = derived_record(state.name, record.mutex);
    if (!slot || slot->kind != DerivedRecord::Kind::slot) continue;
    out.push_back({record.mutex, record.owner.owner_id, slot->slot, slot->permits});
  }
  return out;
}

// Throws Error(errc::invalid_argument) if a live holder holds a slot of `state.name` with
// another count of permits. Blocks for one listing (engines without Administration: none).
void check_permits(SemaphoreState& state) {
  if (state.checked.load(std::memory_order_acquire)) return;
  for (const auto& holder : slot_holders(state).value_or(std::vector<SlotHolder>{})) {
    if (holder.permits == state.permits) continue;
    throw Error(errc::invalid_argument, "semaphore '" + state.name + "': asked with " + std::to_string(state.permits) +
                                            " permits, but '" + holder.owner + "' holds '" + holder.record +
                                            "' of a semaphore of " + std::to_string(holder.permits) +
                                            " (every contender of a semaphore must use the same permits)");
  }
  state.checked.store(true, std::memory_order_release);
}

// "'<owner>' (permit k), ..." of the live holders of `state`'s slots, or a sentence saying
// why not. As slot_holders(): a caller's thread only.
std::string holders_text(const SemaphoreState& state) {
  try {
    const auto holders = slot_holders(state);
    if (!holders) return "unknown (" + state.backend->describe() + " offers no listing)";
    std::string out;
    for (const auto& holder : *holders) {
      if (holder.permits != state.permits) continue;
      out += (out.empty() ? "'" : ", '") + holder.owner + "' (permit " + std::to_string(holder.slot) + ")";
    }
    return out.empty() ? "none now" : out;
  } catch (const std::exception& e) {
    return std::string("unknown (the listing failed: ") + e.what() + ")";
  }
}

}  // namespace

// A timeout in the line, told once the holders are listed (run(), on an I/O thread); told
// without them if the runtime stopped before it ran (the last copy of the work goes).
class NameTheHolders {
 public:
  using Done = std::function<void(std::error_code, Permit, const std::string&)>;
  NameTheHolders(std::shared_ptr<SemaphoreState> state, Done done, std::error_code error, std::string why)
      : state_(std::move(state)), done_(std::move(done)), error_(error), why_(std::move(why)) {}
  NameTheHolders(const NameTheHolders&) = delete;
  NameTheHolders& operator=(const NameTheHolders&) = delete;
  ~NameTheHolders() {
    if (!done_) return;
    try {
      done_(error_, Permit(), why_ + "; the holders were not listed (the runtime stopped)");
    } catch (const std::exception& e) {
      log_error("semaphore '" + state_->name + "': telling of a timeout: " + e.what());
    } catch (...) {
      log_error("semaphore '" + state_->name + "': telling of a timeout: a non-standard exception");
    }
  }
  void run() {
    auto done = std::move(done_);
    done_ = nullptr;
    done(error_, Permit(), why_ + "; the permits are held by " + holders_text(*state_));
  }

 private:
  const std::shared_ptr<SemaphoreState> state_;
  Done done_;
  const std::error_code error_;
  const std::string why_;
};

// One request: waits in the semaphore's line, then, at its head, on every slot at once; the
// first grant settles it, the other requests are withdrawn (a slot granted meanwhile is given
// back at once) and the line goes to the next request; if the line or every slot fails (its
// timeout), it fails with what each slot knew.
class PermitRace : public std::enable_shared_from_this<PermitRace> {
 public:
  using Done = std::function<void(std::error_code, Permit, const std::string&)>;

  PermitRace(std::shared_ptr<SemaphoreState> state, std::chrono::milliseconds timeout, Done done)
      : state_(std::move(state)),
        timeout_(timeout),
        deadline_(timeout == LockEntry::kNoTimeout ? std::chrono::steady_clock::time_point::max()
                                                   : std::chrono::steady_clock::now() + timeout),
        done_(std::move(done)),
        pending_(state_->permits),
        tickets_(state_->permits),
        answered_slots_(state_->permits, false),
        failures_(state_->permits) {}

  // Withdraws the request from every slot it waits on; completes it with operation_canceled
  // unless it was settled already. A grant that comes after is given back as it arrives.
  void withdraw() {
    std::vector<std::pair<unsigned, std::uint64_t>> withdrawn;
    std::optional<std::uint64_t> line_ticket;
    bool leave = false;
    Done done;
    {
      MutexLock lock(mutex_);
      if (!settled_) {
        settled_ = true;
        done = std::move(done_);
      }
      for (unsigned slot = 0; slot < tickets_.size(); ++slot) {
        if (tickets_[slot]) withdrawn.emplace_back(slot, *tickets_[slot]);
      }
      line_ticket = std::exchange(line_ticket_, std::nullopt);
      leave = leaving_lead_locked();
    }
    if (line_ticket) state_->line.cancel(*line_ticket);
    for (const auto& [slot, ticket] : withdrawn) state_->slots[slot].cancel(ticket);
    if (leave) leave_lead();
    if (done) {
      done(std::make_error_code(std::errc::operation_canceled), Permit(),
           "semaphore '" + state_->name + "': the request was withdrawn");
    }
  }

  // Waits until every slot asked has answered (a late grant given back). After withdraw().
  void wait_quiet() {
    UniqueMutexLock lock(mutex_);
    answered_changed_.wait(lock.native(), [&]() REQUIRES(mutex_) { return started_ && answered_ == asked_; });
  }

  // Joins this process's requests that lead the line, if it leads and may take one more;
  // else joins the line, and at its head start_slots() asks every slot.
  void start() {
    bool joined = false;
    {
      MutexLock lock(state_->lead_mutex);
      if (state_->lead && state_->joins < state_->permits) {
        ++state_->joins;
        ++state_->racing;
        joined = true;
      }
    }
    if (joined) {
      {
        MutexLock lock(mutex_);
        in_lead_ = true;
        started_ = true;
      }
      answered_changed_.notify_all();
      start_slots();
      return;
    }
    {
      MutexLock lock(mutex_);
      ++asked_;
    }
    const auto ticket = state_->line.enqueue(timeout_, [self = shared_from_this()](std::error_code error, Hold hold) {
      self->at_head(error, std::move(hold));
    });
    bool withdraw = false;
    {
      MutexLock lock(mutex_);
      withdraw = !keep_ticket_locked(line_answered_, line_ticket_, ticket);
      started_ = true;
    }
    if (withdraw) state_->line.cancel(ticket);
    answered_changed_.notify_all();
  }

 private:
  // The line answered: at its head (`hold`), or failed (its timeout).
  void at_head(std::error_code error, Hold hold) {
    Done done;
    std::string why;
    Hold late;  // the line, granted after the request settled: passed on below
    bool lead = false;
    {
      MutexLock lock(mutex_);
      ++answered_;
      line_answered_ = true;
      line_ticket_.reset();
      if (settled_) {
        late = std::move(hold);
      } else if (error) {
        settled_ = true;
        done = std::move(done_);
        why = no_permit_text();
        why += error == errc::timeout
                   ? "it waited in the semaphore's line behind earlier requests, which wait for the permits (" +
                         state_->line.entry_->timeout_message(timeout_) + ")"
                   : "its line '" + state_->line.name() + "': " + error.message();
      } else {
        MutexLock leading(state_->lead_mutex);
        state_->lead = std::move(hold);
        state_->joins = 0;
        ++state_->racing;
        in_lead_ = true;
        lead = true;
      }
    }
    late.unlock();
    answered_changed_.notify_all();
    if (done && error == errc::timeout) {
      // Waiting in the line, this request saw only the request ahead of it: the holders are
      // named by a listing, on an I/O thread (this may be a timer's, which makes no backend
      // call), before any form of acquire hears of the timeout.
      auto naming = std::make_shared<NameTheHolders>(state_, std::move(done), error, std::move(why));
      state_->line.entry_->post_io([naming] { naming->run(); });
      return;
    }
    if (done) {
      done(error, Permit(), why);
      return;
    }
    if (lead) start_slots();
  }

  void start_slots() {
    const unsigned n = state_->permits;
    const auto left = remaining();
    const unsigned first = state_->next.fetch_add(1, std::memory_order_relaxed) % n;
    for (unsigned i = 0; i < n; ++i) {
      const unsigned slot = (first + i) % n;
      {
        MutexLock lock(mutex_);
        if (settled_) return;
        ++asked_;
      }
      const auto ticket =
          state_->slots[slot].enqueue(left, [self = shared_from_this(), slot](std::error_code error, Hold hold) {
            self->answer(slot, error, std::move(hold));
          });
      bool withdraw = false;
      {
        MutexLock lock(mutex_);
        withdraw = !keep_ticket_locked(answered_slots_[slot], tickets_[slot], ticket);
      }
      if (withdraw) state_->slots[slot].cancel(ticket);
    }
  }

  // After an enqueue that returned `ticket`: keeps it in `kept` while its answer is still to
  // come; false if the request settled meanwhile, so the caller must cancel it. Answered
  // already (a cached grant, or an immediate timeout): nothing to keep.
  bool keep_ticket_locked(bool answered, std::optional<std::uint64_t>& kept, std::uint64_t ticket) REQUIRES(mutex_) {
    if (answered) return true;
    if (settled_) return false;
    kept = ticket;
    return true;
  }

  // "semaphore 'x' (N permits): no permit within T: ", the start of a failure's why.
  std::string no_permit_text() const {
    std::string why = "semaphore '" + state_->name + "' (" + permits_text(state_->permits) + "): no permit";
    if (timeout_ != LockEntry::kNoTimeout) why += " within " + format_duration(timeout_);
    return why + ": ";
  }

  // What is left of the request's timeout (kNoTimeout: none).
  std::chrono::milliseconds remaining() const {
    if (deadline_ == std::chrono::steady_clock::time_point::max()) return LockEntry::kNoTimeout;
    return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      deadline_ - std::chrono::steady_clock::now()));
  }

  void answer(unsigned slot, std::error_code error, Hold hold) {
    std::vector<std::pair<unsigned, std::uint64_t>> withdraw;
    Done done;
    Permit permit;
    std::error_code failure;
    std::string why;
    Hold late;           // a grant after the request settled: given back below, outside the lock
    bool leave = false;  // settled: out of this process's lead
    {
      MutexLock lock(mutex_);
      ++answered_;
      answered_slots_[slot] = true;
      tickets_[slot].reset();
      if (settled_) {
        late = std::move(hold);
      } else if (!error) {
        settled_ = true;
        permit = Permit(state_->name, slot, std::move(hold));
        for (unsigned other = 0; other < tickets_.size(); ++other) {
          if (other != slot && tickets_[other]) withdraw.emplace_back(other, *tickets_[other]);
        }
        done = std::move(done_);
      } else {
        failures_[slot] = error == errc::timeout ? state_->slots[slot].entry_->timeout_message(timeout_)
                                                 : "'" + Semaphore::slot_name(state_->name, slot, state_->permits) +
                                                       "': " + error.message();
        if (!failure_ || failure_ == errc::timeout) failure_ = error;
        if (--pending_ == 0) {
          settled_ = true;
          failure = failure_;
          why = no_permit_text();
          for (unsigned k = 0; k < failures_.size(); ++k) why += (k ? "; " : "") + failures_[k];
          done = std::move(done_);
        }
      }
      leave = leaving_lead_locked();
    }
    // The outcome first: withdrawing from the other slots and passing the line on may each
    // give a lease back, a round trip on this thread, which the grant need not wait for.
    if (done) done(failure, std::move(permit), why);
    for (const auto& [other, ticket] : withdraw) state_->slots[other].cancel(ticket);
    if (leave) leave_lead();
    late.unlock();
    answered_changed_.notify_all();
  }

  // Whether this settled request must now leave this process's lead (once).
  bool leaving_lead_locked() REQUIRES(mutex_) {
    if (!settled_ || !in_lead_ || left_lead_) return false;
    left_lead_ = true;
    return true;
  }
  // The last of this process's requests to leave the lead passes the line on.
  void leave_lead() {
    Hold last;
    {
      MutexLock lock(state_->lead_mutex);
      if (--state_->racing == 0) last = std::move(state_->lead);
    }
    last.unlock();
  }

  const std::shared_ptr<SemaphoreState> state_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point deadline_;  // of the whole request (max: none)
  mutable AnnotatedMutex mutex_;
  Done done_ GUARDED_BY(mutex_);
  bool settled_ GUARDED_BY(mutex_) = false;
  unsigned pending_ GUARDED_BY(mutex_);                                   // slots not answered yet
  std::vector<std::optional<std::uint64_t>> tickets_ GUARDED_BY(mutex_);  // of slots still waiting
  std::vector<bool> answered_slots_ GUARDED_BY(mutex_);
  std::vector<std::string> failures_ GUARDED_BY(mutex_);         // per slot, once it failed
  std::error_code failure_ GUARDED_BY(mutex_);                   // the first failure not a timeout, else timeout
  unsigned asked_ GUARDED_BY(mutex_) = 0;                        // slots enqueued on
  unsigned answered_ GUARDED_BY(mutex_) = 0;                     // ... that answered
  bool started_ GUARDED_BY(mutex_) = false;                      // start() joined the line
  std::optional<std::uint64_t> line_ticket_ GUARDED_BY(mutex_);  // while waiting in the line
  bool line_answered_ GUARDED_BY(mutex_) = false;
  bool in_lead_ GUARDED_BY(mutex_) = false;    // one of this process's requests that lead the line
  bool left_lead_ GUARDED_BY(mutex_) = false;  // ... no more
  std::condition_variable answered_changed_;
};

std::shared_ptr<SemaphoreState> make_semaphore_state(std::string name, unsigned permits,
                                                     std::shared_ptr<Backend> backend,
                                                     const std::function<Mutex(const std::string&)>& slot) {
  require_record_fits(*backend, "semaphore '" + name + "'", Semaphore::slot_name(name, permits - 1, permits));
  require_record_fits(*backend, "semaphore '" + name + "'", line_name(name));
  auto state = std::make_shared<SemaphoreState>(slot(line_name(name)));
  state->name = std::move(name);
  state->permits = permits;
  state->next.store(std::random_device{}() % permits, std::memory_order_relaxed);
  state->backend = std::move(backend);
  state->slots.reserve(permits);
  for (unsigned k = 0; k < permits; ++k) state->slots.push_back(slot(Semaphore::slot_name(state->name, k, permits)));
  return state;
}

}  // namespace internal

std::string Semaphore::slot_name(const std::string& name, unsigned slot, unsigned permits) {
  return internal::derived_prefix(name) + std::to_string(slot) + "of" + std::to_string(permits);
}

const std::string& Semaphore::name() const noexcept { return state_->name; }

unsigned Semaphore::permits() const noexcept { return state_->permits; }

std::shared_ptr<internal::PermitRace> Semaphore::request(
    std::chrono::milliseconds timeout, std::function<void(std::error_code, Permit, const std::string&)> done) const {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  internal::check_permits(*state_);
  auto race = std::make_shared<internal::PermitRace>(state_, timeout, std::move(done));
  race->start();
  return race;
}

Permit Semaphore::acquire(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  // A free slot first, one at a time: a free permit costs one round trip, not one per slot.
  if (auto permit = try_acquire(); permit || timeout.count() == 0) return permit;
  if (interrupt.stop_requested()) return Permit();
  auto promise = std::make_shared<std::promise<Permit>>();
  auto future = promise->get_future();
  auto race = request(timeout, [promise](std::error_code error, Permit permit, const std::string& why) {
    if (error == std::errc::operation_canceled) {
      promise->set_value(Permit());
    } else if (error) {
      promise->set_exception(std::make_exception_ptr(Error(error, why)));
    } else {
      promise->set_value(std::move(permit));
    }
  });
  {
    std::stop_callback withdraw(interrupt, [&race] { race->withdraw(); });
    future.wait();
  }
  Permit permit = future.get();
  if (interrupt.stop_requested()) {
    race->withdraw();  // settled already: takes out what still waits
    race->wait_quiet();
    permit.release();  // granted just before the stop: given back too
  }
  return permit;
}

std::future<Permit> Semaphore::acquire_async(std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Permit>>();
  auto future = promise->get_future();
  request(timeout, [promise](std::error_code error, Permit permit, const std::string& why) {
    if (error) {
      promise->set_exception(std::make_exception_ptr(Error(error, why)));
    } else {
      promise->set_value(std::move(permit));
    }
  });
  return future;
}

void Semaphore::acquire_async(std::chrono::milliseconds timeout, Callback done) {
  if (!done) throw Error(errc::invalid_argument, "acquire_async(): the callback must not be empty");
  auto strand = state_->slots.front().entry_->callback_strand();
  request(timeout, [strand, name = state_->name, done = std::move(done)](std::error_code error, Permit permit,
                                                                         const std::string& why) {
    if (error) internal::log_info(why);
    // A Callback is copyable, a Permit is not: the Permit travels in a shared box.
    auto box = std::make_shared<Permit>(std::move(permit));
    strand.post([done, error, box, name] {
      try {
        done(error, std::move(*box));
      } catch (const std::exception& e) {
        internal::log_error("semaphore '" + name + "': an acquire_async callback threw: " + e.what());
      } catch (...) {
        internal::log_error("semaphore '" + name + "': an acquire_async callback threw a non-standard exception");
      }
    });
  });
}

std::function<void()> Semaphore::enqueue(std::chrono::milliseconds timeout, Callback done) const {
  if (!done) throw Error(errc::invalid_argument, "enqueue(): the callback must not be empty");
  auto race = request(timeout, [done = std::move(done)](std::error_code error, Permit permit, const std::string& why) {
    if (error && error != std::errc::operation_canceled) internal::log_info(why);
    done(error, std::move(permit));
  });
  return [race] { race->withdraw(); };
}

Permit Semaphore::acquire(std::chrono::milliseconds timeout) {
  auto permit = acquire(timeout, std::stop_token());
  if (!permit) throw Error(errc::timeout, "semaphore '" + name() + "': no permit was free");
  return permit;
}

Permit Semaphore::acquire() { return acquire(internal::LockEntry::kNoTimeout, std::stop_token()); }

Permit Semaphore::try_acquire() {
  internal::check_permits(*state_);
  const unsigned n = state_->permits;
  const unsigned first = state_->next.load(std::memory_order_relaxed) % n;
  for (unsigned i = 0; i < n; ++i) {
    const unsigned slot = (first + i) % n;
    // One remote attempt on this slot (none while a local holder has it).
    auto hold = state_->slots[slot].hold_until(std::chrono::steady_clock::now());
    if (hold) {
      state_->next.store(slot, std::memory_order_relaxed);
      return Permit(state_->name, slot, std::move(hold));
    }
  }
  return Permit();
}

}  // namespace simba
