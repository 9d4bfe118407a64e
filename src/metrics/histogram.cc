// Per-thread histogram parts and their totals (histogram.h).
#include "metrics/histogram.h"

#include <algorithm>

namespace simba::internal {

HistogramSnapshot HistogramTotals::snapshot() const {
  HistogramSnapshot out;
  out.bounds.reserve(kBucketBoundsNs.size());
  for (auto ns : kBucketBoundsNs) out.bounds.push_back(static_cast<double>(ns) / 1e9);
  out.counts.assign(counts.begin(), counts.end());
  for (auto count : counts) out.count += count;
  out.sum = static_cast<double>(sum_ns) / 1e9;
  return out;
}

void ThreadHistogram::add_to(HistogramTotals& totals) const noexcept {
  for (std::size_t i = 0; i < counts_.size(); ++i) totals.counts[i] += counts_[i].load(std::memory_order_relaxed);
  totals.sum_ns += sum_ns_.load(std::memory_order_relaxed);
}

void TimingTotals::add(const TimingPart& part) noexcept {
  part.acquire_wait.add_to(acquire_wait);
  part.hold.add_to(hold);
  part.handover.add_to(handover);
  for (std::size_t i = 0; i < kBackendOps; ++i) part.round_trip[i].add_to(round_trip[i]);
}

namespace {

std::atomic<std::uint64_t> next_parts_id{1};  // 0 is no TimingParts (last_parts_id)

// Set as this thread's parts end. A thread's other thread-local objects (and, on the main
// thread, static ones such as a global Client) may still report after that; they go to the
// shared part. A bool stays readable until the thread is gone.
thread_local bool parts_ended = false;

// This thread's parts, one per TimingParts it reported to.
class ThreadParts {
 public:
  ThreadParts() = default;
  ThreadParts(const ThreadParts&) = delete;
  ThreadParts& operator=(const ThreadParts&) = delete;
  // The thread ends: what its parts counted stays counted, in the retired totals.
  ~ThreadParts() {
    parts_ended = true;
    last_parts_id = 0;
    for (auto& entry : entries_) {
      if (auto registry = entry.registry.lock()) retire(*registry, entry.part);
    }
  }

  std::size_t size() const noexcept { return entries_.size(); }

  TimingPart* find(std::uint64_t id, const std::shared_ptr<TimingParts::Registry>& registry) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
    if (it == entries_.end()) {
      // Parts of a Telemetry gone go first: the list keeps only those of live ones.
      std::erase_if(entries_, [](const Entry& e) { return e.registry.expired(); });
      auto part = std::make_shared<TimingPart>();
      {
        internal::MutexLock lock(registry->mutex);
        registry->live.push_back(part);
      }
      it = entries_.insert(entries_.end(), Entry{id, registry, std::move(part)});
    }
    last_parts_id = id;
    last_part = it->part.get();
    return last_part;
  }

 private:
  struct Entry {
    std::uint64_t id;
    std::weak_ptr<TimingParts::Registry> registry;
    std::shared_ptr<TimingPart> part;
  };

  static void retire(TimingParts::Registry& registry, const std::shared_ptr<TimingPart>& part) {
    internal::MutexLock lock(registry.mutex);
    // Added and taken out under one lock: a snapshot counts the part once, live or retired.
    registry.retired.add(*part);
    std::erase(registry.live, part);
  }

  std::vector<Entry> entries_;
};

ThreadParts& this_threads_parts() {
  thread_local ThreadParts parts;
  return parts;
}

}  // namespace

TimingParts::TimingParts()
    : id_(next_parts_id.fetch_add(1, std::memory_order_relaxed)), registry_(std::make_shared<Registry>()) {}

TimingPart* TimingParts::mine() noexcept {
  if (parts_ended) return nullptr;
  try {
    return this_threads_parts().find(id_, registry_);
  } catch (...) {  // bad_alloc: the report goes to the shared part (report())
    return nullptr;
  }
}

std::size_t TimingParts::parts_of_this_thread() noexcept { return parts_ended ? 0 : this_threads_parts().size(); }

TimingTotals TimingParts::totals() const {
  internal::MutexLock lock(registry_->mutex);
  TimingTotals out = registry_->retired;
  for (const auto& part : registry_->live) out.add(*part);
  out.add(registry_->shared);
  return out;
}

}  // namespace simba::internal
