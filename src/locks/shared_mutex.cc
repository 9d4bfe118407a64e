// SharedMutex and SharedHold: a gate a writer holds (the mutex of the name, so whoever holds
// that mutex keeps readers out), and one reader lease per reading process, both mutexes of the
// lock manager. A reader announces itself (its process's lease) and then looks at the gate; a
// writer takes the gate and then looks at the readers: of two that come at once, one sees the
// other.
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
#include "locks/lock_entry.h"
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
  SharedMutexState(std::string name_, Mutex gate_, Mutex reader_, std::shared_ptr<Backend> backend_,
                   Administration* admin_, std::chrono::milliseconds poll_, std::chrono::milliseconds ttl_,
                   std::chrono::milliseconds transition_)
      : name(std::move(name_)),
        gate(std::move(gate_)),
        reader(std::move(reader_)),
        backend(std::move(backend_)),
        admin(admin_),
        lapses_by_time(backend->capabilities().lease_lapses_by_time),
        poll(poll_),
        ttl(ttl_),
        transition(transition_) {}

  std::string name;
  Mutex gate;    // "<name>": the mutex of that name; a writer's
  Mutex reader;  // "<name>#r<8 hex digits>": this process's reader lease
  std::shared_ptr<Backend> backend;
  Administration* admin = nullptr;
  bool lapses_by_time = true;                       // the backend's Capabilities::lease_lapses_by_time
  std::chrono::milliseconds poll{25};               // the longest pause between two looks at the readers
  std::chrono::milliseconds ttl, transition;        // a prober's lease, if it ever wins one
  const std::string prober = contender_id::host();  // a waiter on readers' records or the gate

  AnnotatedMutex join_mutex ACQUIRED_BEFORE(mutex);  // held by the thread taking the reader lease
  mutable AnnotatedMutex mutex;
  unsigned readers GUARDED_BY(mutex) = 0;  // read holds of this process
  Hold reader_hold GUARDED_BY(mutex);      // while readers > 0
  // A thread is taking the reader lease (join_readers): a writer of this process then waits
  // for it as for any reader (it may come in on the engine's word, without a look at the gate).
  bool taking_lease GUARDED_BY(mutex) = false;

  // The Lockable interfaces' holds, per thread.
  struct ThreadHold {
    SharedHold hold;
    unsigned count = 0;         // of its mode
    unsigned nested_reads = 0;  // lock_shared() by a thread holding the write lock
  };
  std::unordered_map<std::thread::id, ThreadHold> threads GUARDED_BY(mutex);

  struct Joined {
    std::stop_token lost;  // the reader lease's
    // Where this call took the lease and the engine said, in that step, what the gate was (at
    // an instant after `since`): that, so the gate need not be read again.
    std::optional<OwnerSnapshot::Parent> gate;
  };
  // One more read hold of this process; the first takes the reader lease. Nullopt if the lease
  // could not be taken by `deadline`. `since`: when this read began.
  std::optional<Joined> join_readers(std::chrono::steady_clock::time_point deadline,
                                     std::chrono::steady_clock::time_point since) {
    MutexLock joining(join_mutex);  // one thread takes the lease, the others join it
    {
      MutexLock lock(mutex);
      if (readers > 0 && reader_hold) {
        ++readers;
        return Joined{reader_hold.lost(), std::nullopt};
      }
      taking_lease = true;
    }
    Hold hold;
    std::optional<OwnerSnapshot::Parent> gate_seen;
    try {
      hold = reader.hold_until(deadline);
      if (hold) gate_seen = reader.entry_->parent_seen_since(since, hold.fencing_token());
    } catch (...) {
      MutexLock lock(mutex);
      taking_lease = false;
      throw;
    }
    MutexLock lock(mutex);  // taking_lease ends with ++readers, in one step
    taking_lease = false;
    if (!hold) return std::nullopt;
    ++readers;
    reader_hold = std::move(hold);
    return Joined{reader_hold.lost(), gate_seen};
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

  // A reader of this process is in, or taking the lease.
  bool reading() const noexcept {
    MutexLock lock(mutex);
    return readers > 0 || taking_lease;
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
    const auto listing = admin->list_derived(name, 100000);
    for (const auto& record : listing.records) {
      const auto& owner = record.owner;
      if (owner.owner_id.empty()) continue;
      const auto derived = derived_record(name, record.mutex);
      if (!derived || derived->kind != DerivedRecord::Kind::reader) continue;
      // This process's own lease with no reader of it inside, nor one taking it, is on its way
      // back (a release goes out after unlock() returns): not a reader to wait for. A reader
      // that takes it after this look finds this writer's gate held, by the engine's word with
      // its lease or by its look at the gate. (One taking it during the look may have been
      // told the gate was free before this writer took it: waited for, as `taking_lease`.)
      if (record.mutex == reader.name() && !reading()) continue;
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

  // A read hold: this process's reader lease (its first reader takes it), then a look at the
  // gate; while a writer holds the gate (writing, or waiting for the readers inside), out again
  // and wait until the gate is free (watched: its release ends the pause where the engine
  // pushes), then once more.
  SharedHold read_until(const std::shared_ptr<SharedMutexState>& self, std::chrono::steady_clock::time_point deadline,
                        std::string* why, const std::stop_token& interrupt) {
    const auto what = [this] { return "a read lock of shared mutex '" + name + "'"; };
    RecordWatch watch(*backend);
    for (;;) {
      const auto joined = join_readers(deadline, std::chrono::steady_clock::now());
      if (interrupt.stop_requested()) {
        if (joined) leave_readers();
        return SharedHold();
      }
      if (!joined) {
        if (why) *why = what() + ": this process's reader lease was not granted in time";
        return SharedHold();
      }
      // The gate, as the engine saw it when this reader's lease was granted (Redis), else read
      // now; a held gate is read anyway (its owner is named below).
      auto free_gate = [](std::uint64_t token) {
        OwnerSnapshot free;
        free.owner.fencing_token = token;
        return free;
      };
      auto gate_now =
          joined->gate && !joined->gate->held ? free_gate(joined->gate->fencing_token) : backend->read(gate.name());
      if (gate_now.owner.owner_id.empty()) {
        SharedHold out;
        out.mode_ = LockMode::shared;
        out.token_ = gate_now.owner.fencing_token;  // the last write's
        out.lost_ = joined->lost;
        out.state_ = self;
        return out;
      }
      leave_readers();  // a writer holds the gate: it waits for this process's readers, not this one
      for (auto pause = std::chrono::milliseconds(1); !gate_now.owner.owner_id.empty();
           pause = std::min(pause * 2, poll)) {
        if (std::chrono::steady_clock::now() + pause >= deadline || interrupt.stop_requested()) {
          if (why) {
            *why = what() + ": '" + gate_now.owner.owner_id + "' holds '" + gate.name() +
                   "' (a writer, writing or waiting for the readers inside)";
          }
          return SharedHold();
        }
        if (lapsed_on_its_own_record(gate_now)) probe(gate.name());  // ZooKeeper: a waiter removes it
        watch.watch(gate.name());
        watch.wait_for(pause);
        gate_now = backend->read(gate.name());
      }
    }
  }

  // A write hold: the gate, then no reader inside. The gate's lease is the write's.
  SharedHold write_until(const std::shared_ptr<SharedMutexState>& self, std::chrono::steady_clock::time_point deadline,
                         std::string* why, const std::stop_token& interrupt) {
    const auto what = [this] { return "the write lock of shared mutex '" + name + "'"; };
    for (;;) {
      Hold held = gate.hold_until(deadline, interrupt);
      if (interrupt.stop_requested()) return SharedHold();
      if (!held) {
        if (why) *why = what() + ": another writer held '" + gate.name() + "'";
        return SharedHold();
      }
      std::set<std::string> probed;
      std::string readers_in;
      // Where the engine said, with the gate's grant, that no reader's record was held (and
      // the gate has been this lease's since), no reader is in: one that came after finds
      // the gate held. Else a look at the readers.
      const bool empty = gate.entry_->no_derived_held_since_won(held.fencing_token()) ||
                         await_no_readers(deadline, interrupt, probed, why ? &readers_in : nullptr);
      give_back_probes(probed);
      if (!empty) {
        if (why && !interrupt.stop_requested()) *why = what() + ": " + readers_in;
        return SharedHold();
      }
      if (!held.is_owner()) {
        // The gate's lease ran out while this writer waited: a reader may have come in
        // meanwhile. Once more from the gate.
        held.unlock();
        continue;
      }
      SharedHold out;
      out.mode_ = LockMode::exclusive;
      out.token_ = held.fencing_token();
      out.lost_ = held.lost();
      out.gate_ = std::move(held);
      out.state_ = self;
      return out;
    }
  }

  // Whether `snapshot`'s lease ran out by its own record where such a lease ends only when a
  // waiter removes it (!lease_lapses_by_time).
  bool lapsed_on_its_own_record(const OwnerSnapshot& snapshot) const {
    return !lapses_by_time && !snapshot.owner.owner_id.empty() && snapshot.owner.transition_at > 0 &&
           snapshot.owner.transition_at <= snapshot.now;
  }

  // Asks for `record` as `prober` and leaves its queue again: a lease that ran out is removed
  // by the asking (ZooKeeper), a live one is left as it was.
  void probe(const std::string& record) {
    try {
      backend->acquire(record, prober, ttl, transition);
    } catch (const std::exception& e) {
      log_warn("shared mutex '" + name + "': asking for '" + record + "' whose lease ran out: " + e.what());
    }
    give_back_probes({record});
  }

  void give_back_probes(const std::set<std::string>& probed) noexcept {
    for (const auto& record : probed) {
      try {
        backend->release(record, prober);
      } catch (const std::exception& e) {
        log_warn("shared mutex '" + name + "': leaving the queue of '" + record + "': " + e.what());
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
      name, record(name), record(reader), std::move(backend), admin,
      std::clamp(poll, std::chrono::milliseconds(5), std::chrono::milliseconds(100)), options.ttl, options.transition);
}

}  // namespace internal

// ---- SharedHold

SharedHold::SharedHold(SharedHold&& other) noexcept
    : state_(std::move(other.state_)),
      mode_(other.mode_),
      token_(other.token_),
      lost_(std::move(other.lost_)),
      gate_(std::move(other.gate_)) {}

SharedHold& SharedHold::operator=(SharedHold&& other) noexcept {
  if (this != &other) {
    unlock();
    state_ = std::move(other.state_);
    mode_ = other.mode_;
    token_ = other.token_;
    lost_ = std::move(other.lost_);
    gate_ = std::move(other.gate_);
  }
  return *this;
}

bool SharedHold::is_owner() const noexcept {
  if (!state_ || lost_.stop_requested()) return false;
  if (mode_ == LockMode::exclusive) return gate_.is_owner();
  return state_->reader_is_owner();
}

void SharedHold::downgrade() {
  if (!state_ || mode_ != LockMode::exclusive) {
    throw Error(errc::failed_precondition, "downgrade(): only a write hold can become a read hold");
  }
  // Still holding the gate: no writer can come in between.
  auto joined = state_->join_readers(std::chrono::steady_clock::time_point::max(), std::chrono::steady_clock::now());
  if (!joined)
    throw Error(errc::unavailable, "shared mutex '" + state_->name + "': downgrade(): the read lease failed");
  mode_ = LockMode::shared;
  lost_ = joined->lost;
  gate_.unlock();
}

void SharedHold::unlock() noexcept {
  if (!state_) return;
  auto state = std::move(state_);
  if (mode_ == LockMode::exclusive) {
    gate_.unlock();
  } else {
    state->leave_readers();
  }
}

// ---- SharedMutex

const std::string& SharedMutex::name() const noexcept { return state_->name; }

SharedHold SharedMutex::hold_until(bool shared, std::chrono::steady_clock::time_point deadline, std::string* why,
                                   std::stop_token interrupt) const {
  return shared ? state_->read_until(state_, deadline, why, interrupt)
                : state_->write_until(state_, deadline, why, interrupt);
}

namespace {
// The hold, or Error(errc::timeout) saying what the wait of `timeout` met (made only then).
SharedHold must(SharedHold hold, std::chrono::milliseconds timeout, const std::string& why) {
  if (!hold) throw Error(errc::timeout, "timed out after " + format_duration(timeout) + " waiting for " + why);
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
  return must(std::move(hold), timeout, why);
}

SharedHold SharedMutex::acquire() { return hold_until(false, std::chrono::steady_clock::time_point::max(), nullptr); }

SharedHold SharedMutex::acquire_shared(std::chrono::milliseconds timeout) {
  std::string why;
  auto hold = hold_until(true, deadline_after(timeout), &why);
  return must(std::move(hold), timeout, why);
}

SharedHold SharedMutex::acquire_shared() {
  return hold_until(true, std::chrono::steady_clock::time_point::max(), nullptr);
}

SharedHold SharedMutex::acquire(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  std::string why;
  auto hold = hold_until(false, deadline_after(timeout), &why, interrupt);
  if (interrupt.stop_requested()) return SharedHold();
  return must(std::move(hold), timeout, why);
}

SharedHold SharedMutex::acquire_shared(std::chrono::milliseconds timeout, std::stop_token interrupt) {
  std::string why;
  auto hold = hold_until(true, deadline_after(timeout), &why, interrupt);
  if (interrupt.stop_requested()) return SharedHold();
  return must(std::move(hold), timeout, why);
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
