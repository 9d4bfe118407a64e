// The in-process reference backend: the protocol with nothing in the way.
#include "simba/memory_backend.h"
#include "base/thread_annotations.h"

#include "backends/common/watcher.h"
#include "backends/memory/memory_store.h"

#include <string.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace simba {
namespace {

using internal::Watcher;
using internal::WatchHandle;

class MemoryBackend final
    : public BackendOffering<Push, DemandSignal, DemandPush, IdleMarks, Administration, RawProbe> {
 public:
  MemoryBackend(std::shared_ptr<const Clock> clock, std::shared_ptr<std::atomic<std::uint64_t>> tokens)
      : clock_(std::move(clock)), tokens_(std::move(tokens)) {}

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    OwnerSnapshot result;
    bool changed = false, lost = false;
    {
      internal::MutexLock lock(mutex_);
      const EpochMillis now = clock_->now();
      Entry& entry = entries_[mutex];
      MutexOwner& owner = entry.owner;
      bool free = owner.empty() || owner.transition_at < now;
      bool renew = owner.owner_id == contender_id && owner.transition_at > now;
      if (free || renew) {
        changed = owner.owner_id != contender_id;
        if (changed) {
          entry.last_token = tokens_->fetch_add(1) + 1;
          entry.wanted_until = 0;  // a demand was for the owner before
          touch_locked(mutex, entry, now);
        }
        if (!renew) entry.idle_token = 0;  // a new lease starts unmarked
        owner.owner_id = contender_id;
        owner.acquired_at = now;
        owner.ttl_at = now + ttl.count();
        owner.transition_at = owner.ttl_at + transition.count();
        owner.fencing_token = entry.last_token;
      } else {
        lost = true;  // held by another: a demand, until the owner changes
        entry.wanted_until = std::max(entry.wanted_until, now + ttl.count() + transition.count());
      }
      result = {owner, now, !lost && entry.wanted_until >= now};         // the owner's renewal hears of it
      if (!lost && !renew) answer_relatives_locked(mutex, result, now);  // only a grant's answer is heard
    }
    if (changed) notify(mutex, WatchEvent::acquired);
    if (lost) notify(kDemand + mutex, WatchEvent::acquired);
    return result;
  }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    {
      internal::MutexLock lock(mutex_);
      auto it = entries_.find(mutex);
      if (it == entries_.end() || it->second.owner.owner_id != contender_id) return false;
      it->second.owner = MutexOwner::none();
      // Only when records are forgotten depends on this time (this one's, and touch_locked's look
      // at the one that falls out of the queue): a coarse reading, which lags, keeps them longer.
      touch_locked(mutex, it->second, clock_->coarse_now());
    }
    notify(mutex, WatchEvent::released);
    return true;
  }

  // Another process's lease ends the way its own release would end it.
  bool evict(const std::string& mutex, const std::string& owner_id) override { return release(mutex, owner_id); }

  OwnerSnapshot read(const std::string& mutex) override {
    internal::MutexLock lock(mutex_);
    const EpochMillis now = clock_->now();
    auto it = entries_.find(mutex);
    if (it == entries_.end()) {
      MutexOwner none;
      none.fencing_token = forgotten_token_;
      return {none, now};
    }
    MutexOwner owner = judged(it->second, now);
    const bool demanded = !owner.empty() && it->second.wanted_until >= now;
    return {owner, now, demanded};
  }

  // From the index of held derived records: no walk over every record.
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    MutexListing out;
    internal::MutexLock lock(mutex_);
    out.now = clock_->now();
    for_each_derived_held_locked(name, out.now, [&](const std::string& record, const Entry& entry) {
      out.records.push_back({record, judged(entry, out.now)});
      return true;
    });
    return in_order(std::move(out), limit);
  }

  MutexListing list(const std::string& prefix, std::size_t limit) override {
    MutexListing out;
    internal::MutexLock lock(mutex_);
    out.now = clock_->now();
    for (const auto& [name, entry] : entries_) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      out.records.push_back({name, judged(entry, out.now)});
    }
    return in_order(std::move(out), limit);
  }

  // Memory also forgets idle records by itself (see touch_locked); this forgets them sooner.
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    internal::MutexLock lock(mutex_);
    const EpochMillis now = clock_->now();
    std::size_t swept = 0;
    for (auto it = entries_.begin(); it != entries_.end() && swept < limit;) {
      const Entry& entry = it->second;
      const bool live = !entry.owner.empty() && entry.owner.transition_at >= now - idle_for.count();
      if (live || entry.changed_at > now - idle_for.count()) {
        ++it;
        continue;
      }
      forgotten_token_ = std::max(forgotten_token_, entry.last_token);
      unindex_locked(it->first);
      it = entries_.erase(it);
      ++swept;
    }
    return swept;
  }

  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    internal::MutexLock lock(mutex_);
    auto it = entries_.find(mutex);
    if (it == entries_.end()) return false;
    Entry& entry = it->second;
    if (entry.owner.owner_id != owner_id || entry.owner.transition_at < clock_->now()) return false;
    entry.idle_token = idle ? entry.last_token : 0;
    return true;
  }

  // Starts at once and never reports WatchEvent::lost: a contender's is opened only once it
  // waits (Capabilities::watch_when_waiting).
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& /*contender_id*/,
                                      std::function<void(WatchEvent)> on_change) override {
    return add_watcher(mutex, std::move(on_change));
  }

  // Demand watchers are kept beside the others, under a name no mutex has.
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& /*owner_id*/,
                                             std::function<void()> on_demand) override {
    return add_watcher(kDemand + mutex, [on_demand = std::move(on_demand)](WatchEvent) { on_demand(); });
  }

  std::unique_ptr<Subscription> add_watcher(const std::string& mutex, std::function<void(WatchEvent)> on_change) {
    auto watcher = std::make_shared<Watcher>(std::move(on_change));
    // Counted before the watcher's first look (its round, after this returns): a change that
    // look missed comes after it under mutex_, so its notify() sees the count.
    live_watchers_->fetch_add(1, std::memory_order_relaxed);
    internal::MutexLock lock(watch_mutex_);
    auto& list = watchers_[mutex];
    // Drop watchers whose subscription has ended: of this mutex now, of all now and then.
    std::erase_if(list, [](const std::weak_ptr<Watcher>& w) { return w.expired(); });
    list.push_back(watcher);
    if (watchers_.size() > 2 * watched_after_sweep_ + 1024) {
      for (auto it = watchers_.begin(); it != watchers_.end();) {
        std::erase_if(it->second, [](const std::weak_ptr<Watcher>& w) { return w.expired(); });
        it = it->second.empty() ? watchers_.erase(it) : std::next(it);
      }
      watched_after_sweep_ = watchers_.size();
    }
    return std::make_unique<WatchHandle>(watcher,
                                         [live = live_watchers_] { live->fetch_sub(1, std::memory_order_relaxed); });
  }

  // The engine's bare primitive: a std::mutex lock + unlock.
  double raw_once() override {
    const auto start = std::chrono::steady_clock::now();
    raw_mutex_.lock();
    raw_mutex_.unlock();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.engine = "memory";
    caps.poll_interval = std::chrono::milliseconds(100);
    caps.keeps_idle_records = false;  // kRemembered
    caps.watch_when_waiting = true;
    return caps;
  }

  std::string describe() const override { return "memory:"; }

 private:
  struct Entry {
    MutexOwner owner;
    std::uint64_t last_token = 0;
    std::uint64_t touched = 0;     // the change that last queued it in recent_
    EpochMillis changed_at = 0;    // the clock at its last change of owner
    EpochMillis wanted_until = 0;  // a losing acquire's demand lasts until then (or a new owner)
    std::uint64_t idle_token = 0;  // the lease its owner marked idle (mark_idle), by token
  };
  // The record as read() and list() show it at `now`: an expired lease as no owner, with the
  // mutex's last token, and the idle mark if it belongs to this lease.
  static MutexOwner judged(const Entry& entry, EpochMillis now) {
    MutexOwner owner = entry.owner;
    if (owner.empty() || owner.transition_at < now) owner = MutexOwner::none();
    owner.fencing_token = entry.last_token;
    owner.idle = !owner.empty() && entry.idle_token == owner.fencing_token;
    return owner;
  }

  // Lookups by a part of a name without a copy of it.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
  };
  using Names = std::unordered_set<std::string, NameHash, std::equal_to<>>;

  // A listing's records by name, at most `limit` of them (unordered_map gives no order).
  static MutexListing in_order(MutexListing listing, std::size_t limit) {
    std::sort(listing.records.begin(), listing.records.end(),
              [](const MutexRecord& a, const MutexRecord& b) { return a.mutex < b.mutex; });
    if (listing.records.size() > limit) {
      listing.records.resize(limit);
      listing.truncated = true;
    }
    return listing;
  }

  static bool held(const Entry& entry, EpochMillis now) {
    return !entry.owner.empty() && entry.owner.transition_at >= now;
  }

  // The primitive a derived record ("<name>#<suffix>") belongs to; empty for a primitive.
  // (memrchr: std::string::rfind looked at one char a step, 230 of the 510 instructions an
  // acquire spent in itself.)
  static std::string_view primitive_of(const std::string& mutex) {
    const void* hash = ::memrchr(mutex.data(), '#', mutex.size());
    return hash ? std::string_view(mutex.data(), static_cast<const char*>(hash) - mutex.data()) : std::string_view{};
  }

  // What an owner hears in the same step (OwnerSnapshot): whether any record derived from its
  // mutex is held and, for a derived record, its primitive's state.
  void answer_relatives_locked(const std::string& mutex, OwnerSnapshot& result, EpochMillis now) REQUIRES(mutex_) {
    const std::string_view primitive = primitive_of(mutex);
    if (!primitive.empty()) {
      auto index = derived_.find(primitive);
      if (index == derived_.end()) index = derived_.try_emplace(std::string(primitive)).first;
      if (!index->second.contains(mutex)) index->second.insert(mutex);
      auto it = entries_.find(primitive);
      result.parent = it == entries_.end() ? OwnerSnapshot::Parent{false, forgotten_token_}
                                           : OwnerSnapshot::Parent{held(it->second, now), it->second.last_token};
    }
    bool any = false;
    for_each_derived_held_locked(mutex, now, [&](const std::string&, const Entry&) {
      any = true;
      return false;  // one is enough
    });
    result.no_derived_held = !any;
  }

  // Takes a derived record out of its primitive's index (forgotten).
  void unindex_locked(const std::string& mutex) REQUIRES(mutex_) {
    const std::string_view primitive = primitive_of(mutex);
    if (primitive.empty()) return;
    auto index = derived_.find(primitive);
    if (index == derived_.end()) return;
    index->second.erase(mutex);
    if (index->second.empty()) derived_.erase(index);
  }

  // Calls visit(name, entry) for each held record derived from `name` until it returns false.
  template <typename Visit>
  void for_each_derived_held_locked(const std::string& name, EpochMillis now, Visit visit) REQUIRES(mutex_) {
    auto index = derived_.find(name);
    if (index == derived_.end()) return;
    for (const auto& record : index->second) {
      auto entry = entries_.find(record);
      if (entry != entries_.end() && held(entry->second, now) && !visit(record, entry->second)) return;
    }
  }

  static inline const std::string kDemand = std::string("\0demand:", 8);
  static constexpr std::size_t kRemembered = 4096;

  // Queues `mutex` as just changed and forgets the record that falls out of the queue if that
  // mutex is free and has not changed since. A change of the mutex that changed last only
  // moves its place's change (a lock taken and given back in turn queues it once): a record is
  // forgotten once kRemembered changes of other mutexes came after its last.
  void touch_locked(const std::string& mutex, Entry& entry, EpochMillis now) REQUIRES(mutex_) {
    entry.touched = ++changes_;
    entry.changed_at = now;
    if (!recent_.empty() && recent_.back().second == changes_ - 1 && recent_.back().first == mutex) {
      recent_.back().second = changes_;
      return;
    }
    recent_.emplace_back(mutex, changes_);
    if (recent_.size() <= kRemembered) return;
    auto [name, change] = std::move(recent_.front());
    recent_.pop_front();
    auto it = entries_.find(name);
    if (it == entries_.end() || it->second.touched != change) return;
    const MutexOwner& owner = it->second.owner;
    if (!owner.empty() && owner.transition_at >= now) return;  // live: kept until it changes again
    forgotten_token_ = std::max(forgotten_token_, it->second.last_token);
    unindex_locked(name);
    entries_.erase(it);
  }

  // Calls the watchers of `mutex` outside the lock. A mutex rarely has more than a few: those
  // are kept inline (no allocation per change), the rest in a vector.
  void notify(const std::string& mutex, WatchEvent event) {
    // Nobody watches anything (a process whose locks are taken and given back uncontended): no
    // lock and no lookup.
    if (live_watchers_->load(std::memory_order_relaxed) == 0) return;
    std::array<std::shared_ptr<Watcher>, 4> few;
    std::size_t count = 0;
    std::vector<std::shared_ptr<Watcher>> more;
    {
      internal::MutexLock lock(watch_mutex_);
      auto it = watchers_.find(mutex);
      if (it == watchers_.end()) return;
      for (auto& weak : it->second) {
        auto watcher = weak.lock();
        if (!watcher) continue;
        if (count < few.size()) {
          few[count++] = std::move(watcher);
        } else {
          more.push_back(std::move(watcher));
        }
      }
    }
    for (std::size_t i = 0; i < count; ++i) few[i]->call(event);
    for (auto& watcher : more) watcher->call(event);
  }

  const std::shared_ptr<const Clock> clock_;
  std::mutex raw_mutex_;  // simba-bench's baseline: a std::mutex lock + unlock
  internal::AnnotatedMutex mutex_;
  std::unordered_map<std::string, Entry, NameHash, std::equal_to<>> entries_ GUARDED_BY(mutex_);
  const std::shared_ptr<std::atomic<std::uint64_t>> tokens_;  // every mutex's tokens come from here
  std::uint64_t forgotten_token_ GUARDED_BY(mutex_) = 0;      // the highest token of a forgotten record
  std::uint64_t changes_ GUARDED_BY(mutex_) = 0;
  std::deque<std::pair<std::string, std::uint64_t>> recent_ GUARDED_BY(mutex_);  // (mutex, change), oldest first
  // Per primitive, its derived records that were ever held and are not yet forgotten (a record
  // leaves with its entry: touch_locked, sweep).
  std::unordered_map<std::string, Names, NameHash, std::equal_to<>> derived_ GUARDED_BY(mutex_);
  internal::AnnotatedMutex watch_mutex_;
  std::unordered_map<std::string, std::vector<std::weak_ptr<Watcher>>> watchers_ GUARDED_BY(watch_mutex_);
  std::size_t watched_after_sweep_ GUARDED_BY(watch_mutex_) = 0;
  // Subscriptions not yet ended (a handle may outlive this backend: it keeps the count).
  const std::shared_ptr<std::atomic<std::size_t>> live_watchers_ = std::make_shared<std::atomic<std::size_t>>(0);
};

}  // namespace

std::shared_ptr<Backend> make_memory_backend(std::shared_ptr<const Clock> clock) {
  if (!clock) clock = std::make_shared<SystemClock>();
  return std::make_shared<MemoryBackend>(std::move(clock), std::make_shared<std::atomic<std::uint64_t>>(0));
}

namespace internal {

std::shared_ptr<Backend> make_memory_store(std::shared_ptr<std::atomic<std::uint64_t>> tokens) {
  return std::make_shared<MemoryBackend>(std::make_shared<SystemClock>(), std::move(tokens));
}

}  // namespace internal

}  // namespace simba
