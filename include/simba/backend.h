// simba/backend.h: the seam between the protocol and a storage engine.
//
// Everything above it (services, Locker, Scheduler, CLI) is written once; a storage engine
// implements Backend and passes the conformance kit (simba-tck). In the spirit of leveldb's
// Env, each method states what it returns, whether it blocks, its thread-safety and its errors.
//
// Thread-safety: every method may be called concurrently from any thread. Implementations
// serialise internally as they need to.
//
// Errors: methods throw simba::Error with
//   errc::unavailable        the engine cannot be reached or failed transiently: retry later;
//   errc::permission_denied  credentials were refused: retrying will not help;
//   errc::invalid_argument   the engine cannot store this name (e.g. too long);
//   errc::internal           the engine holds a record simba cannot read.
// "Held by someone else" is never an error: it is the returned owner.
//
// Time: every lease is judged by the backend's clock (the server's for a server engine, the
// host's for memory and SQLite). Results carry that clock's reading so callers compute delays
// as differences on one clock and never compare two hosts' clocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "simba/owner.h"

namespace simba {

// An owner record together with the backend's clock at the moment it was judged.
struct OwnerSnapshot {
  MutexOwner owner;
  EpochMillis now = 0;  // Backend clock, epoch milliseconds.
  // With a DemandSignal: another contender asked for the owned mutex and did not get it
  // (from read(), and from acquire() when it renewed a lease). Always false when free.
  bool demanded = false;
  // From acquire() when the caller owns the mutex after it: true if the engine saw, in the same
  // atomic step (or in a read ordered after the grant's write, so that anyone who comes later
  // sees the grant), that no record derived from the mutex (Administration::list_derived) was
  // held. A shared mutex's writer that got its gate so needs no look at the readers: a reader
  // that comes later finds the gate held. False: unknown (every engine may leave it so; an
  // engine may say it only of a name whose derived records it has listed once, as ZooKeeper,
  // or whose record was there before the grant, as PostgreSQL).
  bool no_derived_held = false;
  // From acquire() of a derived record ("<name>#<suffix>") when the caller owns it after it:
  // the mutex <name> as the engine saw it in the same atomic step (a shared mutex's reader that
  // announced itself so need not read the gate after). Unset: unknown (every engine may leave it
  // so).
  struct Parent {
    bool held = false;
    std::uint64_t fencing_token = 0;
  };
  std::optional<Parent> parent{};
};

// What a backend is, for messages and limits. What it can do beyond the required lease
// interface is which optional interfaces it offers (Backend::push() and the others).
struct Capabilities {
  std::string engine;                            // "memory", "sqlite", ...
  std::chrono::milliseconds poll_interval{100};  // Suggested poll interval without push.
  bool multi_process = false;                    // Contenders in different processes can share it.
  bool multi_host = false;                       // Contenders on different hosts can share it.
  std::size_t max_mutex_bytes = 0;               // Longest mutex name accepted; 0 = no limit.
  // A contender's watch can wait until the contender waits: it tells an owner nothing the
  // owner needs, as watch() never reports WatchEvent::lost (memory, SQLite: a local watch that
  // starts at once) or watch_channel() reports that loss for every lease at once (Redis's
  // pub/sub connection, PostgreSQL's LISTEN, MariaDB's monitor, ZooKeeper's session). The core
  // then opens a contender's watch only after a round that did not win, and looks again once
  // it is open; its owners hear a lost channel through one watch_channel() per Client: a
  // process holding many mutexes keeps no watch for those it holds. (ForwardingBackend says
  // false: a subclass may watch otherwise.)
  bool watch_when_waiting = false;
  // Facts about records and leases, for tools and the kit (the core does not branch on them):
  // a free mutex's record stays until sweep() (false: the engine forgets idle records by
  // itself, as memory does after about 4,096 changes); an unrenewed lease ends at its transition_at
  // by time alone (false: it ends when a waiter removes it or the holder's session ends, as a
  // ZooKeeper latch node does).
  bool keeps_idle_records = true;
  bool lease_lapses_by_time = true;
};

// One mutex the backend holds a record for, as list() found it (owner judged as read() does).
struct MutexRecord {
  std::string mutex;
  MutexOwner owner;
};

// What list() returns: records by name, the backend clock when they were judged, and whether
// more matched than were returned.
struct MutexListing {
  std::vector<MutexRecord> records;
  EpochMillis now = 0;
  bool truncated = false;
};

// What a watch reports: the owner was released (the mutex may be free now), or taken; or the
// push channel itself was lost (connection dropped, server restarted), so changes may have been
// missed and a lease held through this backend may be gone: owners revoke locally and re-check.
enum class WatchEvent { released, acquired, lost };

// Handle of a watch; destroying it ends the watch. After the destructor returns the callback
// is not running and will not be called again.
class Subscription {
 public:
  virtual ~Subscription() = default;
  // Waits until the watch is in place on the server, so that every change from then on is
  // reported; at most the engine's bound (its command timeout), and not at all while the
  // server cannot be reached (the reconnect reports `released` then). watch() may return
  // before: a contender's first round goes at once, and only one that found the mutex held
  // waits here before it looks again. Default: in place when watch() returned.
  virtual void wait_ready() {}
  // Whether a contender's first round must wait until the watch is in place (wait_ready()),
  // because the engine needs every waiter to hear every change from its first round on
  // (Redis: Simba's queue). Then watch() returns without waiting, and the core sends the
  // first round, off the caller's thread, once the watch is in place: a process starting many
  // contenders has their watches set up together, not one round trip after another. (A first
  // round on the caller's thread waits for it there.) Default: false.
  virtual bool ready_before_first_round() const noexcept { return false; }
};

// Optional interfaces: an engine offers each or not. Backend's accessor for one returns it
// (usually the backend itself) or null, and the code above the seam does without it.

// What operators need of the records an engine keeps between uses: `simba list`,
// `simba release --force`, sweeping idle records. Without it a backend still takes locks.
class Administration {
 public:
  // Ends the lease of `owner_id` on `mutex`, whichever process holds it: for an operator
  // clearing a hung holder (`simba release --force`). As release() does for its own contender:
  // only that owner's lease, never a successor's; the fencing token is kept, so the next owner
  // gets a larger one; the holder finds out at its next renewal (its lease is gone).
  // Returns: true if this call ended a lease of `owner_id`.
  // Blocks: for one round trip (ZooKeeper: a listing, a read and a delete).
  virtual bool evict(const std::string& mutex, const std::string& owner_id) = 0;

  // The mutexes whose names start with `prefix` (empty: all) that this backend holds a record
  // for, free or owned, sorted by name, at most `limit` of them (`truncated` says if more
  // matched). A record is what the engine keeps for a mutex between uses (a row, a Redis
  // fencing hash or lock key, a ZooKeeper latch folder); a swept mutex has none.
  // Blocks: for a scan of the engine's records of that prefix (SQL: an index range; Redis:
  // SCAN, never KEYS; ZooKeeper: one listing of /simba, and one of each folder of derived
  // records that may match) and one read per returned record.
  virtual MutexListing list(const std::string& prefix, std::size_t limit) = 0;

  // The records derived from the primitive `name` (those named "<name>#<suffix>", with no '#'
  // in the suffix: a semaphore's slots and line, a shared mutex's readers), as list() reports
  // them: every one held now, sorted by name, at most `limit`; a free one may be left out.
  // Blocks: as list(name + "#", limit) (the default, which drops the names whose suffix has a
  // '#'; those count against `limit`), which it is on every engine but Redis and ZooKeeper:
  // Redis, one round trip over an index of the name's derived records, not a SCAN of the
  // keyspace; ZooKeeper, a listing of the name's folder of derived records, not of /simba.
  virtual MutexListing list_derived(const std::string& name, std::size_t limit);

  // Deletes the records of mutexes that have been idle for at least `idle_for`: no live lease,
  // nobody waiting, nothing changed for that long (judged by the backend's clock; ZooKeeper:
  // the folder's last change against this host's clock). At most `limit` records per call.
  // Never deletes the record of a held or awaited mutex, and never lets a token go back: the
  // next owner of a swept mutex gets a token larger than any the mutex had (engines start a
  // new record's token from the backend clock, epoch ms x 1000, and sweep only records whose
  // token is below the clock's; ZooKeeper's tokens are zxids, which never go back). A swept
  // mutex reads with no owner and a token no larger than its last (0 on most engines).
  // Every engine but memory (which forgets idle records by itself) also sweeps on its own:
  // records idle for the engine's `sweep_idle` option (default 1h, 0 = never) are deleted at
  // most every sweep_idle / 2, by whichever release comes then (Redis: by key expiry).
  // Returns: how many records this call deleted.
  // Blocks: for a scan of the records and one delete per swept record (PostgreSQL, MariaDB:
  // one statement per 1,000 records; SQLite: one statement).
  virtual std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) = 0;

 protected:
  ~Administration() = default;
};

// Push of owner changes: Backend::watch() delivers releases at once (waiters need not poll).
class Push {
 public:
  // Whether watch() also delivers acquisitions (else observers poll for them at the poll
  // interval).
  virtual bool pushes_acquisitions() const noexcept { return true; }
  // Whether a waiter's watch delivers acquisitions too, and the waiter looks again at each
  // (Redis: that keeps Simba's wait queue free of owners).
  virtual bool waiters_hear_acquisitions() const noexcept { return false; }

 protected:
  ~Push() = default;
};

// A demand signal: a contender that does not get a mutex another owns leaves a demand, and
// the owner's read() and renewals say OwnerSnapshot::demanded until the owner changes. Lock
// caching needs it (without it leases are not cached); the caching owner reads it at its poll
// interval, at most every 100 ms.
class DemandSignal {
 protected:
  ~DemandSignal() = default;
};

// Demands pushed to the owner as they happen (with a DemandSignal).
class DemandPush {
 public:
  // Calls `on_demand` soon after a contender other than `owner_id` tried to acquire `mutex`
  // and did not get it: the owner's cue to give back a lease it keeps cached (simba/mutex.h).
  // Also called, conservatively, when the push channel drops (a demand may have been missed),
  // and at once if a demand is already pending when the watch starts (where the engine can
  // tell in the same trip: ZooKeeper). It may fire without a demand (ZooKeeper: a waiter
  // left); it never replaces read()'s `demanded`, which the owner polls as a safety net.
  // `on_demand` runs as watch()'s `on_change` does: any thread, quickly, no calls back.
  // Blocks: at most for one round trip.
  virtual std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& owner_id,
                                                     std::function<void()> on_demand) = 0;

 protected:
  ~DemandPush() = default;
};

// The engine's bare primitive, run on the backend's own connection: simba-bench's baseline
// for a lock cycle (memory: a std::mutex; SQLite, PostgreSQL, MariaDB: one-row UPDATEs of a
// private row; Redis: SET NX PX + DEL; ZooKeeper: an ephemeral sequential node).
class RawProbe {
 public:
  // Runs the primitive once; returns how long it took, in microseconds.
  virtual double raw_once() = 0;
  // Where the primitive issues no fencing token: the least lock cycle that does, by the engine's
  // own means, once; how long it took, in microseconds (Redis: a script of SET NX PX and HINCRBY,
  // then one of GET and DEL). What the protocol's own cycle is measured against to tell its cost
  // from the token's. By default none.
  virtual std::optional<double> fenced_once() { return std::nullopt; }

 protected:
  ~RawProbe() = default;
};

// An idle mark on the owner record: lock caching shows whether a cached lease is in use.
class IdleMarks {
 public:
  // Marks the live lease of `owner_id` on `mutex` as cached and unused (`idle`), or in use:
  // read() and list() then report MutexOwner::idle until the owner marks it again or
  // the lease ends (the mark belongs to this lease, by its fencing token: a later owner, or the
  // same id re-acquiring, starts unmarked). Never touches another owner's lease or the times.
  // Returns: true if the mark was set on a live lease of `owner_id`; false when `owner_id`
  // does not own `mutex`.
  // Blocks: for one round trip (ZooKeeper: a listing and a write of the owner's node).
  virtual bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) = 0;

 protected:
  ~IdleMarks() = default;
};

// One acquire() call of a batch (Batches).
struct AcquireCall {
  std::string mutex;
  std::string contender_id;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds transition{0};
  // The caller holds this lease, as far as it knows, and renews it: the engine may leave the
  // relatives' answers (OwnerSnapshot::no_derived_held, ::parent) unset, as only a grant's are
  // heard.
  bool renewal = false;
};

// What one call of a batch got: the owner after it, as acquire() returns it, or the error that
// call alone met, as acquire() would have thrown it.
struct AcquireResult {
  OwnerSnapshot snapshot;
  std::exception_ptr error;  // set: the call failed (snapshot is empty)
};

// Many acquire() calls in one round trip: how a process holding many leases renews them, and
// how it takes many free mutexes at once. The core sends the rounds that wait for an I/O
// thread through it (never a blocking lock's first round, which goes alone at once).
class Batches {
 public:
  // Runs each call as acquire() would run it alone (each atomic by itself, not the batch) and
  // answers each: results[i] for calls[i]. An error one call met is in its result (a lease
  // lost is that lease's answer only); an error that hits the whole batch (the connection)
  // throws Error as acquire() would, and the caller counts it against every call.
  // Blocks: for one round trip (Redis: a pipeline of scripts on one connection).
  virtual std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) = 0;
  // The most calls one batch carries. Default: 256.
  virtual std::size_t max_batch() const noexcept { return 256; }
  // Whether rounds other than renewals (first acquisitions, a waiter's looks) go in batches
  // too; false: only renewals do, the others go alone. A batch answers when its last call is
  // done, so an engine whose acquisition takes several dependent round trips it cannot send
  // at once keeps its renewals from waiting behind them. Default: true.
  virtual bool batches_acquisitions() const noexcept { return true; }

 protected:
  ~Batches() = default;
};

// The required lease interface (acquire, release, read; watch where the engine pushes, else
// callers poll read()) and the optional interfaces the engine offers. A backend that
// implements only the required part takes locks everywhere a lock is taken: the kit's lease
// groups run on one (tck/own_backend_main.cc).
class Backend {
 public:
  virtual ~Backend() = default;

  // Acquire-or-renew, atomically. If the mutex is free (no record, released, or expired:
  // transition_at < now), `contender_id` takes it; if `contender_id` already owns it and
  // transition_at > now, the lease is renewed. Either way the lease becomes
  // acquired_at = now, ttl_at = now + ttl, transition_at = ttl_at + transition. The fencing
  // token rises (to a value larger than any before for this mutex) only when the owner id
  // changes; a renewal keeps it. An engine may grant a shorter lease than asked (ZooKeeper
  // caps it by its session timeout): the returned times say what was granted, and callers
  // count the shorter of the two. An engine with a queue (ZooKeeper) also enqueues a
  // contender that does not get the mutex. With a DemandSignal, a contender that does not get
  // a mutex another owns leaves a demand (see DemandSignal).
  // Returns: the owner after the call (this contender's lease, or the other live owner's).
  // Blocks: for one round trip to the engine, bounded by the engine's timeouts.
  // Requires: ttl > 0, transition >= 0, validated names.
  virtual OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id,
                                std::chrono::milliseconds ttl, std::chrono::milliseconds transition) = 0;

  // Release, only if `contender_id` is still the owner; a late release by a former owner
  // never touches its successor's lease. A contender that waits leaves the queue (on engines
  // with one); the core calls this after stop() and after any round that ended after it.
  // Returns: true if this call released a lease of `contender_id`.
  // Blocks: for one round trip.
  virtual bool release(const std::string& mutex, const std::string& contender_id) = 0;

  // Reads the current owner without contending. An expired lease reads as no owner (owner_id
  // empty, times 0) but keeps the mutex's last fencing token.
  // Blocks: for one round trip.
  virtual OwnerSnapshot read(const std::string& mutex) = 0;

  // With push(): calls `on_change` soon after the owner of `mutex` was released or taken (not
  // on mere expiry; acquisitions as Push says), and with WatchEvent::lost when the push
  // channel drops. Without push() an engine may still return a watch that only reports
  // WatchEvent::lost (and resyncs with `released`) when its server goes (MariaDB: owners hear
  // it at once); else nullptr, and callers poll read(). `contender_id` names the waiting
  // contender this watch serves (releases only need to reach waiters; an engine may address
  // them one by one); empty for an observer, which wants every change.
  // `on_change` may run on any thread, including inside another caller's release(); it must
  // return quickly and must not call back into this backend.
  // Blocks: at most for one round trip (e.g. a SUBSCRIBE).
  // Default: none (callers poll).
  virtual std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                              std::function<void(WatchEvent)> on_change) {
    (void)mutex, (void)contender_id, (void)on_change;
    return nullptr;
  }
  // The push channel's own health, for the owners of a process: WatchEvent::lost when the
  // channel drops (the server may have forgotten leases), `released` once it is back; nothing
  // about any mutex. Where Capabilities::watch_when_waiting holds, the core opens one per
  // Client for its contenders instead of a watch each while they own. Same threading rules as
  // watch(). Blocks: as watch(). Default: none.
  virtual std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> /*on_change*/) { return nullptr; }

  // What this backend can do. Never blocks; constant for the backend's life.
  virtual Capabilities capabilities() const = 0;

  // The optional interfaces this backend offers (null: not offered). Never block; constant
  // for the backend's life.
  virtual const Push* push() const noexcept { return nullptr; }
  virtual const DemandSignal* demand_signal() const noexcept { return nullptr; }
  virtual DemandPush* demand_push() noexcept { return nullptr; }
  virtual IdleMarks* idle_marks() noexcept { return nullptr; }
  virtual Administration* administration() noexcept { return nullptr; }
  virtual RawProbe* raw_probe() noexcept { return nullptr; }
  virtual Batches* batches() noexcept { return nullptr; }

  // The backend's description for messages: scheme, host, path; never a password.
  virtual std::string describe() const = 0;

  // Ends, now, what the engine keeps alive for this backend's sessions, for a process about
  // to exit without destroying its Client (simba does on a signal): where leases and places
  // in line live and die with a session (ZooKeeper's ephemeral nodes, etcd's leases), every
  // one of this backend's goes at once, whatever its rounds in flight were doing; calls
  // after it fail with errc::unavailable. Elsewhere it changes nothing: those leases end by
  // release() or by time. Never throws; blocks for at most a round trip or two.
  // Default: nothing.
  virtual void end_sessions() noexcept {}
};

// The backend's administration; throws Error(errc::unsupported), naming the backend, when it
// offers none (simba list, simba release --force, ForwardingBackend's list/sweep/evict).
Administration& administration_of(Backend& backend);

// An engine's base: Backend and the optional interfaces it offers, whose accessors return the
// engine itself; the others return null.
//   class MyBackend final : public simba::BackendOffering<simba::Push, simba::Administration> {...};
template <class... Offered>
class BackendOffering : public Backend, public Offered... {
 public:
  const Push* push() const noexcept override { return offered<Push>(); }
  const DemandSignal* demand_signal() const noexcept override { return offered<DemandSignal>(); }
  DemandPush* demand_push() noexcept override { return offered<DemandPush>(); }
  IdleMarks* idle_marks() noexcept override { return offered<IdleMarks>(); }
  Administration* administration() noexcept override { return offered<Administration>(); }
  RawProbe* raw_probe() noexcept override { return offered<RawProbe>(); }
  Batches* batches() noexcept override { return offered<Batches>(); }

 private:
  template <class Interface>
  static constexpr bool kOffers = (std::is_same_v<Interface, Offered> || ...);
  template <class Interface>
  Interface* offered() noexcept {
    if constexpr (kOffers<Interface>) {
      return this;
    } else {
      return nullptr;
    }
  }
  template <class Interface>
  const Interface* offered() const noexcept {
    if constexpr (kOffers<Interface>) {
      return this;
    } else {
      return nullptr;
    }
  }
};

// Forwards every call to another backend, and offers the optional interfaces the target
// offers, except Batches: a batch would pass by the acquire() a subclass overrides, so rounds
// through a ForwardingBackend go one by one. Derive from it and override what you want to
// change: that is how the fault-injecting backend of the tests is written.
class ForwardingBackend : public Backend,
                          public Push,
                          public DemandSignal,
                          public DemandPush,
                          public IdleMarks,
                          public Administration {
 public:
  explicit ForwardingBackend(std::shared_ptr<Backend> target) : target_(std::move(target)) {}

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    return target_->acquire(mutex, contender_id, ttl, transition);
  }
  bool release(const std::string& mutex, const std::string& contender_id) override {
    return target_->release(mutex, contender_id);
  }
  OwnerSnapshot read(const std::string& mutex) override { return target_->read(mutex); }
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override {
    return target_->watch(mutex, contender_id, std::move(on_change));
  }
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override {
    return target_->watch_channel(std::move(on_change));
  }
  Capabilities capabilities() const override {
    Capabilities caps = target_->capabilities();
    caps.watch_when_waiting = false;  // an override of watch() may report WatchEvent::lost
    return caps;
  }
  std::string describe() const override { return target_->describe(); }
  void end_sessions() noexcept override { target_->end_sessions(); }
  const Push* push() const noexcept override { return target_->push() ? this : nullptr; }
  const DemandSignal* demand_signal() const noexcept override { return target_->demand_signal() ? this : nullptr; }
  DemandPush* demand_push() noexcept override { return target_->demand_push() ? this : nullptr; }
  IdleMarks* idle_marks() noexcept override { return target_->idle_marks() ? this : nullptr; }
  Administration* administration() noexcept override { return target_->administration() ? this : nullptr; }
  RawProbe* raw_probe() noexcept override { return target_->raw_probe(); }

  // The optional interfaces, offered only when the target offers them.
  bool pushes_acquisitions() const noexcept override {
    return target_->push() == nullptr || target_->push()->pushes_acquisitions();
  }
  bool waiters_hear_acquisitions() const noexcept override {
    return target_->push() != nullptr && target_->push()->waiters_hear_acquisitions();
  }
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& owner_id,
                                             std::function<void()> on_demand) override {
    auto* pushes = target_->demand_push();
    return pushes ? pushes->watch_demand(mutex, owner_id, std::move(on_demand)) : nullptr;
  }
  bool evict(const std::string& mutex, const std::string& owner_id) override {
    return administration_of(*target_).evict(mutex, owner_id);
  }
  MutexListing list(const std::string& prefix, std::size_t limit) override {
    return administration_of(*target_).list(prefix, limit);
  }
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    return administration_of(*target_).list_derived(name, limit);
  }
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    return administration_of(*target_).sweep(idle_for, limit);
  }
  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    auto* marks = target_->idle_marks();
    return marks != nullptr && marks->mark_idle(mutex, owner_id, idle);
  }

  const std::shared_ptr<Backend>& target() const { return target_; }

 private:
  std::shared_ptr<Backend> target_;
};

}  // namespace simba
