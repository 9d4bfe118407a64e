// What one Client (and its copies) counts, and its event hook. Internal; Client::metrics()
// and Client::on_event() are its public face (simba/metrics.h).
//
// The lock manager's parts and the contention loop report to it; every report is a few
// relaxed atomic adds (the histograms' are the reporting thread's own: no locked instruction),
// and builds an Event only while a hook is installed. The per-mutex
// series go to a slot each part resolves once (at its making), so no report looks up a name.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/thread_annotations.h"
#include "metrics/event_queue.h"
#include "metrics/histogram.h"
#include "simba/metrics.h"

namespace simba::internal {

class Telemetry {
 public:
  using Duration = std::chrono::nanoseconds;

  explicit Telemetry(std::string backend_name) : backend_(std::move(backend_name)) {}

  // Labels the first `at_most` names that get a slot from now on; the rest share "(other)".
  void label_mutexes(std::size_t at_most);
  // The slot a new lock entry or service of `mutex` counts in (stable for the Telemetry's life).
  MutexSlot& slot(const std::string& mutex);

  // A hold granted (or a service's lease won): `waited` from the request (nullopt: not a
  // lock manager request, not timed).
  void acquired(MutexSlot& slot, const std::string& mutex, const std::string& owner, std::uint64_t token,
                std::optional<Duration> waited);
  // The hold (or a service's lease) ended, however: the holders gauge and the hold time.
  void ended(MutexSlot& slot, Duration held);
  void released(MutexSlot& slot, const std::string& mutex, const std::string& owner, std::uint64_t token,
                Duration held);
  void lost(MutexSlot& slot, LostReason reason, const std::string& mutex, const std::string& owner, std::uint64_t token,
            Duration held);
  void waiting(MutexSlot& slot, std::int64_t delta) noexcept;
  void handed_over(Duration gap) noexcept;
  void round_trip(BackendOp op, Duration took) noexcept {
    timings_.report([&](TimingPart& part) { part.round_trip[static_cast<std::size_t>(op)].observe(took); });
  }
  // One round trip carried `rounds` batched rounds.
  void batch(std::size_t rounds) noexcept {
    batches_.fetch_add(1, std::memory_order_relaxed);
    batched_rounds_.fetch_add(rounds, std::memory_order_relaxed);
  }
  // Rounds joined (+) or left (-) the batch queue.
  void queued(std::int64_t delta) noexcept { queued_rounds_.fetch_add(delta, std::memory_order_relaxed); }
  void backend_error(BackendOp op, const std::string& mutex, const std::string& what);
  void demand(const std::string& mutex, const std::string& owner);
  // A lock entry going away adds the cached re-locks of its fast path.
  void relocks_retired(std::uint64_t count) noexcept { relocks_retired_.fetch_add(count, std::memory_order_relaxed); }

  // `live_relocks()`: the fast paths' counts of the entries alive (the lock table's). Called
  // after the retired entries' count is read: an entry that goes meanwhile is counted at the
  // next snapshot, never twice, so the counter never goes back.
  MetricsSnapshot snapshot(const std::function<std::uint64_t()>& live_relocks) const;

  void on_event(EventHook hook) { events_.set_hook(std::move(hook)); }

 private:
  // Queues an event if a hook is installed; `fill` sets what is particular to its kind.
  template <class Fill>
  void emit(EventKind kind, const std::string& mutex, const std::string& owner, std::uint64_t token, Fill&& fill);

  const std::string backend_;
  std::atomic<std::uint64_t> local_handovers_{0};
  std::atomic<std::uint64_t> relocks_retired_{0};
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::uint64_t> batched_rounds_{0};
  std::atomic<std::int64_t> queued_rounds_{0};
  std::array<std::atomic<std::uint64_t>, kLostReasons> lost_{};
  std::array<std::atomic<std::uint64_t>, kBackendOps> errors_{};
  TimingParts timings_;  // the wait, hold, handover and round-trip histograms, a part per thread

  mutable internal::AnnotatedMutex slots_mutex_;
  std::size_t label_limit_ GUARDED_BY(slots_mutex_) = 0;
  // Labelled slots by name, and "(other)"; a deque keeps every slot where it is.
  // The totals of acquisitions, releases, holders and waiters are their sums (snapshot()).
  std::deque<MutexSlot> slots_ GUARDED_BY(slots_mutex_);
  std::unordered_map<std::string, MutexSlot*> by_name_ GUARDED_BY(slots_mutex_);
  MutexSlot other_{kOtherMutexes};

  EventQueue events_;
};

}  // namespace simba::internal
