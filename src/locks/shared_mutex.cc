// SharedMutex and SharedHold: a gate every new reader passes and writers hold, the write lock,
// and one reader lease per process, all mutexes of the lock manager.
#include "simba/shared_mutex.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/thread_annotations.h"
#include "locks/derived_records.h"
#include "locks/record_watch.h"
#include "locks/shared_mutex_state.h"
#include "simba/backend.h"
#include "simba/contender.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {
namespace internal {

namespace {
// 8 hex digits: a reader id unique enough among the processes reading one name at a time.
std::string reader_id() { return contender_id::uuid().substr(0, 8); }
}  // namespace

struct SharedMutexState {
  SharedMutexState(std::string name_, Mutex gate_, Mutex write_, Mutex reader_, std::shared_ptr<Backend> backend_,
                   Administration* admin_, std::chrono::milliseconds poll_, std::chrono::milliseconds ttl_,
                   std::chrono::milliseconds transition_)
      : name(std::move(name_)),
        gate(std::move(gate_)),
        write(std::move(write_)),
        reader(std::move(reader_)),
        backend(std::move(backend_)),
        admin(admin_),
        lapses_by_time(backend->capabilities().lease_lapses_by_time),
        poll(poll_),
        ttl(ttl_),
        transition(transition_) {}

  std::string name;
  Mutex gate;    // "<name>": the mutex of that name
  Mutex write;   // "<name>#write"
  Mutex reader;  // "<name>#r<8 hex digits>": this process's reader lease
  std::shared_ptr<Backend> backend;
  Administration* admin = nullptr;
  bool lapses_by_time = true;                       // the backend's Capabilities::lease_lapses_by_time
  std::chrono::milliseconds poll{25};               // the longest pause between two looks at the readers
  std::chrono::milliseconds ttl, transition;        // a prober's lease, if it ever wins one
  const std::string prober = contender_id::host();  // a waiting writer, as a waiter on readers' records

  mutable AnnotatedMutex mutex;
  unsigned readers GUARDED_BY(mutex) = 0;  // read holds of this process
  Hold reader_hold GUARDED_BY(mutex);      // while readers > 0

  // The Lockable interfaces' holds, per thread.
  struct ThreadHold {
    SharedHold hold;
    unsigned count = 0;         // of its mode
    unsigned nested_reads = 0;  // lock_shared() by a thread holding the write lock
  };
  std::unordered_map<std::thread::id, ThreadHold> threads GUARDED_BY(mutex);

  // One more read hold of this process; the first takes the reader lease. Under the gate.
  // Returns its lost() token, or nullopt if the lease could not be taken by `deadline`.
  std::optional<std::stop_token> join_readers(std::chrono::steady_clock::time_point deadline) {
    {
      MutexLock lock(mutex);
      if (readers > 0 && reader_hold) {
        ++readers;
        return reader_hold.lost();
      }
    }
    // Only one thread of this process is here at a time (it holds the gate).
    Hold hold = reader.hold_until(deadline);
    if (!hold) return std::nullopt;
    MutexLock lock(mutex);
    ++readers;
    reader_hold = std::move(hold);
    return reader_hold.lost();
  }

  void leave_readers() noexcept {
    Hold last;
    {
      MutexLock lock(mutex);
      if (readers == 0) return;
      if (--readers == 0) last = std::move(reader_hold);
    }
    last.unlock();  // the lease goes back, outside the lock
  }

  bool reader_is_owner() const noexcept {
    MutexLock lock(mutex);
    return readers > 0 && reader_hold.is_owner();
  }

  // The records of the readers inside, as a writer waiting at the gate sees them (their names
  // and owners). The listing judges leases as read() does; where a lease that ran out ends only
  // when a waiter removes it (ZooKeeper: !lease_lapses_by_time), the writer waits on each such
  // record as `prober` too (acquire() judges and removes a dead reader's node; a live one's
  // answer leaves the prober queued, which `probed` remembers for give_back_probes()). Each
  // live reader's record is watched from then on (`watch`): its release ends the writer's pause.
  std::vector<std::string> live_readers(std::set<std::string>& probed, RecordWatch& watch) {
    std::vector<std::string> live;
    const auto listing = admin->list(reader_prefix(name), 100000);
    for (const auto& record : listing.records) {
      const auto& owner = record.owner;
      if (owner.owner_id.empty()) continue;
      if (!lapses_by_time) {
        probed.insert(record.mutex);
        if (backend->acquire(record.mutex, prober, ttl, transition).owner.owner_id == prober) {
          backend->release(record.mutex, prober);  // its reader was gone
          probed.erase(record.mutex);
          continue;
        }
      }
      watch.watch(record.mutex);
      live.push_back(record.mutex + " (" + owner.owner_id + ")");
    }
    return live;
  }

  // Waits until no reader is inside (a writer holding the gate); false if `deadline` passed or
  // `interrupt` was stopped first, with `why` naming the readers still in.
  bool await_no_readers(std::chrono::steady_clock::time_point deadline, const std::stop_token& interrupt,
                        std::set<std::string>& probed, std::string* why) {
    RecordWatch watch(*backend);  // where the engine pushes, a reader's release ends the pause
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, poll)) {
      const auto live = live_readers(probed, watch);
      if (live.empty()) return true;
      if (std::chrono::steady_clock::now() + pause >= deadline || interrupt.stop_requested()) {
        if (why) *why = std::to_string(live.size()) + " reading process(es) still in, e.g. " + live.front();
        return false;
      }
      watch.wait_for(pause);
    }
  }

  void give_back_probes(const std::set<std::string>& probed) noexcept {
    for (const auto& record : probed) {
      try {
        backend->release(record, prober);
      } catch (const std::exception& e) {
        log_warn("shared mutex '" + name + "': leaving the queue of reader '" + record + "': " + e.what());
      }
    }
  }
};

std::shared_ptr<SharedMutexState> make_shared_mutex_state(std::string name, std::shared_ptr<Backend> backend,
                                                          const ContendOptions& options, std::chrono::milliseconds poll,
                                                          const std::function<Mutex(const std::string&)>& record) {
  auto* admin = backend->administration();
  if (!admin) {
    throw Error(errc::unsupported, "shared mutex '" + name + "': " + backend->describe() +
                                       " offers no listing of records (Administration), which a writer needs to "
                                       "see the readers");
  }
  const auto reader = reader_prefix(name) + reader_id();
  require_record_fits(*backend, "shared mutex '" + name + "'", reader);
  return std::make_shared<SharedMutexState>(
      name, record(name), record(write_record(name)), record(reader), std::move(backend), admin,
      std::clamp(poll, std::chrono::milliseconds(5), std::chrono::milliseconds(100)), options.ttl, options.transition);
}

}  // namespace internal

// ---- SharedHold

SharedHold::SharedHold(SharedHold&& other) noexcept
    : state_(std::move(other.state_)),
      mode_(other.mode_),
      token_(other.token_),
      lost_(std::move(other.lost_)),
      gate_(std::move(other.gate_)),
      write_(std::move(other.write_)),
      either_(std::move(other.either_)) {}

SharedHold& SharedHold::operator=(SharedHold&& other) noexcept {
  if (this != &other) {
    unlock();
    state_ = std::move(other.state_);
    mode_ = other.mode_;
    token_ = other.token_;
    lost_ = std::move(other.lost_);
    gate_ = std::move(other.gate_);
    write_ = std::move(other.write_);
    either_ = std::move(other.either_);
  }
  return *this;
}

bool SharedHold::is_owner() const noexcept {
  if (!state_ || lost_.stop_requested()) return false;
  if (mode_ == LockMode::exclusive) return gate_.is_owner() && write_.is_owner();
  return state_->reader_is_owner();
}

void SharedHold::downgrade() {
  if (!state_ || mode_ != LockMode::exclusive) {
    throw Error(errc::failed_precondition, "downgrade(): only a write hold can become a read hold");
  }
  // Still holding the gate: no writer can come in between.
  auto lost = state_->join_readers(std::chrono::steady_clock::time_point::max());
  if (!lost) throw Error(errc::unavailable, "shared mutex '" + state_->name + "': downgrade(): the read lease failed");
  mode_ = LockMode::shared;
  lost_ = *lost;
  either_.reset();
  write_.unlock();
  gate_.unlock();
}

void SharedHold::unlock() noexcept {
  if (!state_) return;
  auto state = std::move(state_);
  if (mode_ == LockMode::exclusive) {
    either_.reset();
    write_.unlock();
    gate_.unlock();
  } else {
    state->leave_readers();
  }
}

// ---- SharedMutex

const std::string& SharedMutex::name() const noexcept { return state_->name; }

SharedHold SharedMutex::hold_until(bool shared, std::chrono::steady_clock::time_point deadline, std::string* why,
                                   std::stop_token interrupt) const {
  auto& s = *state_;
  const std::string what = std::string(shared ? "a read" : "the write") + " lock of shared mutex '" + s.name + "'";
  Hold gate = s.gate.hold_until(deadline, interrupt);
  if (interrupt.stop_requested()) return SharedHold();
  if (!gate) {
    if (why) *why = what + ": a writer or another reader's pass held the gate '" + s.gate.name() + "'";
    return SharedHold();
  }
  SharedHold out;
  if (shared) {
    // A writer whose gate lease was lost may still hold the write lock: wait for it to end
    // (its release ends a pause where the engine pushes).
    internal::RecordWatch watch(*s.backend);
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, s.poll)) {
      const auto write = s.backend->read(s.write.name());
      if (write.owner.owner_id.empty()) {
        out.token_ = write.owner.fencing_token;
        break;
      }
      if (std::chrono::steady_clock::now() + pause >= deadline || interrupt.stop_requested()) {
        if (why) *why = what + ": '" + write.owner.owner_id + "' holds the write lock";
        return SharedHold();
      }
      watch.watch(s.write.name());
      watch.wait_for(pause);
    }
    auto lost = s.join_readers(deadline);
    if (!lost) {
      if (why) *why = what + ": this process's reader lease was not granted in time";
      return SharedHold();
    }
    if (!gate.is_owner()) {
      // The gate's lease ran out before this reader was in: a writer may have passed it and
      // missed this reader. Out again, and once more from the gate.
      s.leave_readers();
      gate.unlock();
      return hold_until(shared, deadline, why, interrupt);
    }
    out.mode_ = LockMode::shared;
    out.lost_ = *lost;
    out.state_ = state_;
    return out;  // the gate goes back as `gate` goes
  }
  // A writer: holding the gate, wait for the readers inside to finish.
  std::string readers;
  std::set<std::string> probed;
  struct GiveBack {
    internal::SharedMutexState& s;
    std::set<std::string>& probed;
    ~GiveBack() { s.give_back_probes(probed); }
  } give_back{s, probed};
  if (!s.await_no_readers(deadline, interrupt, probed, why ? &readers : nullptr)) {
    if (why) *why = what + ": " + readers;
    return SharedHold();
  }
  Hold write = s.write.hold_until(deadline, interrupt);
  if (!write) {
    if (why) *why = what + ": the write lock '" + s.write.name() + "' was not granted in time";
    return SharedHold();
  }
  if (!gate.is_owner()) {
    // The gate's lease ran out while this writer waited: a reader may have come in meanwhile.
    // Once more from the gate.
    write.unlock();
    gate.unlock();
    s.give_back_probes(probed);
    probed.clear();
    return hold_until(shared, deadline, why, interrupt);
  }
  struct Either {
    std::stop_source lost;
    std::stop_callback<std::function<void()>> gate, write;
    Either(std::stop_token g, std::stop_token w)
        : gate(std::move(g), [this] { lost.request_stop(); }), write(std::move(w), [this] { lost.request_stop(); }) {}
  };
  auto either = std::make_shared<Either>(gate.lost(), write.lost());
  out.mode_ = LockMode::exclusive;
  out.token_ = write.fencing_token();
  out.lost_ = either->lost.get_token();
  out.either_ = either;
  out.gate_ = std::move(gate);
  out.write_ = std::move(write);
  out.state_ = state_;
  return out;
}

namespace {
SharedHold must(SharedHold hold, const std::string& why) {
  if (!hold) throw Error(errc::timeout, why);
  return hold;
}
// milliseconds::max(): forever.
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) throw Error(errc::invalid_argument, "timeout must be >= 0, got " + format_duration(timeout));
  if (timeout == std::chrono::milliseconds::max()) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + timeout;
}
}  // namespace

SharedHold SharedMutex::acquire(std::chrono::milliseconds timeout) {
  std::string why;
  auto hold = hold_until(false, deadline_after(timeout), &why);
  return must(std::move(hold), "timed out after " + format_duration(timeout) + " waiting for " + why);
}

SharedHold SharedMutex::acquire() { return hold_until(false, std::chrono::steady_clock::time_point::max(), nullptr); }

SharedHold SharedMutex::acquire_shared(std::chrono::milliseconds timeout) {
  std::string why;
  auto hold = hold_until(true, deadline_after(timeout), &why);
  return must(std::move(hold), "timed out after " + format_duration(timeout) + " waiting for " + why);
}

SharedHold SharedMutex::acquire_shared() {
  return hold_until(true, std::chrono::steady_clock::time_point::max(), nullptr);
}

SharedHold SharedMutex::acquire(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  std::string why;
  auto hold = hold_until(false, deadline_after(timeout), &why, interrupt);
  if (interrupt.stop_requested()) return SharedHold();
  return must(std::move(hold), "timed out after " + format_duration(timeout) + " waiting for " + why);
}

SharedHold SharedMutex::acquire_shared(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  std::string why;
  auto hold = hold_until(true, deadline_after(timeout), &why, interrupt);
  if (interrupt.stop_requested()) return SharedHold();
  return must(std::move(hold), "timed out after " + format_duration(timeout) + " waiting for " + why);
}

bool SharedMutex::await_no_readers(std::chrono::milliseconds timeout) const {
  auto& s = *state_;
  std::set<std::string> probed;
  const auto deadline = deadline_after(timeout);
  const bool gone = s.await_no_readers(deadline, {}, probed, nullptr);
  s.give_back_probes(probed);
  return gone;
}

bool SharedMutex::lock_until(bool shared, std::chrono::steady_clock::time_point deadline) {
  auto& s = *state_;
  const auto me = std::this_thread::get_id();
  {
    internal::MutexLock lock(s.mutex);
    auto it = s.threads.find(me);
    if (it != s.threads.end()) {
      auto& mine = it->second;
      if (mine.hold.mode() == LockMode::exclusive) {
        if (shared) {
          ++mine.nested_reads;
        } else {
          ++mine.count;
        }
        return true;
      }
      if (!shared) {
        throw Error(errc::failed_precondition, "shared mutex '" + s.name +
                                                   "': this thread holds a read lock and may not upgrade to the "
                                                   "write lock (unlock_shared() first)");
      }
      ++mine.count;
      return true;
    }
  }
  auto hold = hold_until(shared, deadline, nullptr);
  if (!hold) return false;
  internal::MutexLock lock(s.mutex);
  auto& mine = s.threads[me];
  mine.hold = std::move(hold);
  mine.count = 1;
  return true;
}

void SharedMutex::lock() { lock_until(false, std::chrono::steady_clock::time_point::max()); }

bool SharedMutex::try_lock() { return lock_until(false, std::chrono::steady_clock::now()); }

void SharedMutex::lock_shared() { lock_until(true, std::chrono::steady_clock::time_point::max()); }

bool SharedMutex::try_lock_shared() { return lock_until(true, std::chrono::steady_clock::now()); }

namespace {
// Counts down the calling thread's hold of `mode`; the hold to end (at zero) comes back.
SharedHold count_down(internal::SharedMutexState& s, LockMode mode) noexcept {
  SharedHold ending;
  internal::MutexLock lock(s.mutex);
  auto it = s.threads.find(std::this_thread::get_id());
  if (it == s.threads.end()) {
    internal::log_error("shared mutex '" + s.name + "': unlock by a thread that holds nothing here (a usage error)");
    return ending;
  }
  auto& mine = it->second;
  if (mode == LockMode::shared && mine.hold.mode() == LockMode::exclusive) {
    if (mine.nested_reads == 0) {
      internal::log_error("shared mutex '" + s.name + "': unlock_shared() by a thread that holds the write lock only");
    } else {
      --mine.nested_reads;
    }
    return ending;
  }
  if (mine.hold.mode() != mode) {
    internal::log_error("shared mutex '" + s.name + "': unlock() by a thread that holds a read lock (a usage error)");
    return ending;
  }
  if (--mine.count == 0) {
    ending = std::move(mine.hold);
    s.threads.erase(it);
  }
  return ending;
}
}  // namespace

void SharedMutex::unlock() noexcept { count_down(*state_, LockMode::exclusive).unlock(); }

void SharedMutex::unlock_shared() noexcept { count_down(*state_, LockMode::shared).unlock(); }

std::uint64_t SharedMutex::fencing_token() const {
  internal::MutexLock lock(state_->mutex);
  auto it = state_->threads.find(std::this_thread::get_id());
  return it == state_->threads.end() ? 0 : it->second.hold.fencing_token();
}

}  // namespace simba
