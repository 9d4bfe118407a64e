// The in-process reference backend: the protocol with nothing in the way.
#include "simba/memory_backend.h"
#include "base/thread_annotations.h"

#include "backends/common/watcher.h"
#include "backends/memory/memory_store.h"
#include "backends/memory/records.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace simba {
namespace {

using internal::MemoryRecords;
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
    const auto acquired = records_of(mutex).acquire(mutex, contender_id, ttl, transition, *clock_, *tokens_, result);
    if (acquired.changed) notify(mutex, WatchEvent::acquired);
    if (acquired.lost) notify(kDemand + mutex, WatchEvent::acquired);
    return result;
  }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    if (!records_of(mutex).release(mutex, contender_id, *clock_)) return false;
    notify(mutex, WatchEvent::released);
    return true;
  }

  // Another process's lease ends the way its own release would end it.
  bool evict(const std::string& mutex, const std::string& owner_id) override { return release(mutex, owner_id); }

  OwnerSnapshot read(const std::string& mutex) override { return records_of(mutex).read(mutex, *clock_); }

  // From the index of held derived records (in the name's own part): no walk over every record.
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    MutexListing out;
    out.now = clock_->now();
    records_of(name).list_derived(name, out.now, out.records);
    return in_order(std::move(out), limit);
  }

  // Every part's records, each part judged under its own lock at the one clock reading.
  MutexListing list(const std::string& prefix, std::size_t limit) override {
    MutexListing out;
    out.now = clock_->now();
    for (auto& part : parts_) part.records.list(prefix, out.now, out.records);
    return in_order(std::move(out), limit);
  }

  // Memory also forgets idle records by itself (MemoryRecords); this forgets them sooner.
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override {
    const EpochMillis now = clock_->now();
    std::size_t swept = 0;
    for (auto& part : parts_) {
      if (swept >= limit) break;
      swept += part.records.sweep(idle_for, limit - swept, now);
    }
    return swept;
  }

  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override {
    return records_of(mutex).mark_idle(mutex, owner_id, idle, *clock_);
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
    // look missed comes after it under its part's lock (MemoryRecords), so its notify() sees the count.
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
  // The store's records in parts of their own lock (a part's records, a mutex with those
  // derived from it, are looked at under one): threads taking different mutexes rarely meet on
  // one lock. About kRemembered free records are kept in all, kRemembered / kParts a part.
  static constexpr std::size_t kParts = 16;
  static constexpr std::size_t kRemembered = 4096;
  MemoryRecords& records_of(std::string_view name) { return parts_[MemoryRecords::part_of<kParts>(name)].records; }

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

  static inline const std::string kDemand = std::string("\0demand:", 8);

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

  // A part on a cache line of its own: two threads' locks of different parts do not share one.
  struct alignas(64) Part {
    MemoryRecords records{kRemembered / kParts};
  };

  const std::shared_ptr<const Clock> clock_;
  std::mutex raw_mutex_;                                      // simba-bench's baseline: a std::mutex lock + unlock
  const std::shared_ptr<std::atomic<std::uint64_t>> tokens_;  // every mutex's tokens come from here
  std::array<Part, kParts> parts_;
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
