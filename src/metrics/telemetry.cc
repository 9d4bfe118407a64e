// A Client's counters, histograms, per-mutex slots and event hook (telemetry.h).
#include "metrics/telemetry.h"

namespace simba::internal {

void Telemetry::label_mutexes(std::size_t at_most) {
  internal::MutexLock lock(slots_mutex_);
  label_limit_ = at_most;
}

MutexSlot& Telemetry::slot(const std::string& mutex) {
  internal::MutexLock lock(slots_mutex_);
  if (auto it = by_name_.find(mutex); it != by_name_.end()) return *it->second;
  if (slots_.size() >= label_limit_) return other_;
  auto& slot = slots_.emplace_back(mutex);
  by_name_.emplace(mutex, &slot);
  return slot;
}

template <class Fill>
void Telemetry::emit(EventKind kind, const std::string& mutex, const std::string& owner, std::uint64_t token,
                     Fill&& fill) {
  if (!events_.active()) return;
  Event event;
  event.kind = kind;
  event.mutex = mutex;
  event.owner = owner;
  event.token = token;
  event.at = std::chrono::system_clock::now();
  fill(event);
  events_.push(std::move(event));
}

void Telemetry::acquired(MutexSlot& slot, const std::string& mutex, const std::string& owner, std::uint64_t token,
                         std::optional<Duration> waited) {
  slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
  slot.holders.fetch_add(1, std::memory_order_relaxed);
  if (waited) timings_.report([&](TimingPart& part) { part.acquire_wait.observe(*waited); });
  emit(EventKind::acquired, mutex, owner, token, [&](Event& e) { e.waited = waited.value_or(Duration(0)); });
}

void Telemetry::ended(MutexSlot& slot, Duration held) {
  slot.holders.fetch_sub(1, std::memory_order_relaxed);
  timings_.report([&](TimingPart& part) { part.hold.observe(held); });
}

void Telemetry::released(MutexSlot& slot, const std::string& mutex, const std::string& owner, std::uint64_t token,
                         Duration held) {
  slot.releases.fetch_add(1, std::memory_order_relaxed);
  emit(EventKind::released, mutex, owner, token, [&](Event& e) { e.held = held; });
}

void Telemetry::lost(MutexSlot& slot, LostReason reason, const std::string& mutex, const std::string& owner,
                     std::uint64_t token, Duration held) {
  lost_[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  slot.lost.fetch_add(1, std::memory_order_relaxed);
  emit(EventKind::lost, mutex, owner, token, [&](Event& e) {
    e.reason = reason;
    e.held = held;
  });
}

void Telemetry::waiting(MutexSlot& slot, std::int64_t delta) noexcept {
  slot.waiters.fetch_add(delta, std::memory_order_relaxed);
}

void Telemetry::handed_over(Duration gap) noexcept {
  local_handovers_.fetch_add(1, std::memory_order_relaxed);
  timings_.report([&](TimingPart& part) { part.handover.observe(gap); });
}

void Telemetry::backend_error(BackendOp op, const std::string& mutex, const std::string& what) {
  errors_[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  emit(EventKind::backend_error, mutex, {}, 0, [&](Event& e) {
    e.operation = op;
    e.error = what;
  });
}

void Telemetry::demand(const std::string& mutex, const std::string& owner) {
  emit(EventKind::demand, mutex, owner, 0, [](Event&) {});
}

MetricsSnapshot Telemetry::snapshot(const std::function<std::uint64_t()>& live_relocks) const {
  MetricsSnapshot out;
  out.backend = backend_;
  out.local_handovers = local_handovers_.load(std::memory_order_relaxed);
  out.cached_relocks = relocks_retired_.load(std::memory_order_relaxed);
  out.cached_relocks += live_relocks();
  for (std::size_t i = 0; i < kLostReasons; ++i) out.lost[i] = lost_[i].load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < kBackendOps; ++i) out.backend_errors[i] = errors_[i].load(std::memory_order_relaxed);
  const TimingTotals timings = timings_.totals();
  for (std::size_t i = 0; i < kBackendOps; ++i) out.round_trip[i] = timings.round_trip[i].snapshot();
  out.acquire_wait = timings.acquire_wait.snapshot();
  out.hold = timings.hold.snapshot();
  out.handover = timings.handover.snapshot();
  out.events_dropped = events_.dropped();
  out.hook_errors = events_.hook_errors();
  out.batches = batches_.load(std::memory_order_relaxed);
  out.batched_rounds = batched_rounds_.load(std::memory_order_relaxed);
  out.queued_rounds = queued_rounds_.load(std::memory_order_relaxed);
  auto copy = [](const MutexSlot& slot) {
    return MutexMetrics{slot.name,
                        slot.acquisitions.load(std::memory_order_relaxed),
                        slot.releases.load(std::memory_order_relaxed),
                        slot.lost.load(std::memory_order_relaxed),
                        slot.holders.load(std::memory_order_relaxed),
                        slot.waiters.load(std::memory_order_relaxed)};
  };
  internal::MutexLock lock(slots_mutex_);
  std::vector<MutexMetrics> slots;
  slots.reserve(slots_.size() + 1);
  for (const auto& slot : slots_) slots.push_back(copy(slot));
  slots.push_back(copy(other_));
  for (const auto& slot : slots) {  // the totals are the slots' sums: one count per report, not two
    out.acquisitions += slot.acquisitions;
    out.releases += slot.releases;
    out.holders += slot.holders;
    out.waiters += slot.waiters;
  }
  if (label_limit_ > 0 || !slots_.empty()) out.mutexes = std::move(slots);
  return out;
}

}  // namespace simba::internal
