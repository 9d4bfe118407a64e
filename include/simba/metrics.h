// simba/metrics.h: what a Client counts, its events, and the Prometheus text exposition.
//
//   simba::MetricsSnapshot m = client.metrics();          // always on, per Client and its copies
//   std::string text = simba::to_prometheus(m);           // serve it at /metrics
//   client.label_mutexes(100);                            // opt-in: per-mutex series for 100 names
//   client.on_event([](const simba::Event& e) { ... });   // acquired, released, lost, errors, demands
//
// What is counted, and where:
// - The lock manager (Mutex, Locker, and the CLI): a hold is one acquisition (a cached re-lock
//   on the fast path is counted in cached_relocks instead, and not timed: it stays a few ns).
// - Contender services (contend_service, Scheduler): winning the lease is one acquisition, and
//   giving it back at stop() one release.
// - Every backend call of a contention round (acquire, renew, read) and every release is timed;
//   a failed one is counted by its operation.
// Counters only rise for the life of the Client (and its copies); gauges are "now".
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace simba {

// Why a lease (or a hold on it) was lost.
enum class LostReason {
  error,     // the backend failed or its push channel dropped while we owned it
  stall,     // our lease ran out by our own clock before a renewal came back (a stall, a slow backend)
  evicted,   // the backend said another contender (or nobody) owns it: released by force, or expired
  max_hold,  // a lock manager hold outlived its LockOptions::max_hold
};
inline constexpr std::size_t kLostReasons = 4;
const char* to_string(LostReason reason) noexcept;

// The backend calls that are timed and whose failures are counted.
enum class BackendOp { acquire, renew, read, release, mark_idle };
inline constexpr std::size_t kBackendOps = 5;
const char* to_string(BackendOp op) noexcept;

// A histogram of durations, in seconds (Prometheus' unit).
struct HistogramSnapshot {
  std::vector<double> bounds;         // upper bounds of the buckets, ascending; +Inf follows
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative: bounds.size() + 1 of them
  std::uint64_t count = 0;
  double sum = 0;  // seconds
};

// The series of one labelled mutex (Client::label_mutexes), or of the names past the bound
// together (mutex == kOtherMutexes).
struct MutexMetrics {
  std::string mutex;
  std::uint64_t acquisitions = 0;
  std::uint64_t releases = 0;
  std::uint64_t lost = 0;
  std::int64_t holders = 0;
  std::int64_t waiters = 0;
};
inline constexpr const char* kOtherMutexes = "(other)";

struct MetricsSnapshot {
  std::string backend;  // the engine's name (Capabilities::name)
  std::uint64_t acquisitions = 0;
  std::uint64_t releases = 0;
  std::uint64_t local_handovers = 0;                        // a hold's lease passed to the next local request
  std::uint64_t cached_relocks = 0;                         // holds taken from a cached lease with no backend call
  std::array<std::uint64_t, kLostReasons> lost{};           // by LostReason
  std::array<std::uint64_t, kBackendOps> backend_errors{};  // by BackendOp
  std::int64_t holders = 0;        // lock manager holds (fast holds excepted) and owning services, now
  std::int64_t waiters = 0;        // lock manager requests waiting and services standing by, now
  HistogramSnapshot acquire_wait;  // a lock manager request: from its call to its grant
  HistogramSnapshot hold;          // a hold or a service's lease: from its grant to its end
  HistogramSnapshot handover;      // a local handover: from one hold's end to the next one's grant
  std::array<HistogramSnapshot, kBackendOps> round_trip;  // by BackendOp
  std::vector<MutexMetrics> mutexes;                      // empty unless Client::label_mutexes was called
  std::uint64_t events_dropped = 0;                       // events the hook could not take in time (its queue was full)
  std::uint64_t hook_errors = 0;                          // calls of the hook that threw
  // Rounds sent in batches (Batches: a backend that takes many acquisitions or renewals in
  // one round trip), and the round trips that carried them.
  std::uint64_t batched_rounds = 0;
  std::uint64_t batches = 0;
  // Rounds waiting, now, for a batch to take them (they pile up while batches are on the wire;
  // a queue that keeps growing means the backend cannot keep up).
  std::int64_t queued_rounds = 0;
};

// The Prometheus text exposition (version 0.0.4) of `snapshot`: simba_* names, units in the
// names (seconds), counters ending in _total, histograms with _bucket/_sum/_count.
// `extra` is appended as it is (e.g. a program's own gauges, already in the text format).
std::string to_prometheus(const MetricsSnapshot& snapshot, const std::string& extra = {});
// `value` as a label value of the exposition: backslash, double quote and newline escaped.
std::string prometheus_label_value(const std::string& value);

// What Client::on_event delivers.
enum class EventKind { acquired, released, lost, backend_error, demand };
const char* to_string(EventKind kind) noexcept;

struct Event {
  EventKind kind = EventKind::acquired;
  std::string mutex;
  std::string owner;                           // our contender id (demand: the owner asked to hand back)
  std::uint64_t token = 0;                     // the fencing token of the hold or lease (0 if none)
  LostReason reason = LostReason::error;       // lost only
  BackendOp operation = BackendOp::acquire;    // backend_error only
  std::string error;                           // backend_error: the backend's message
  std::chrono::nanoseconds waited{0};          // acquired: from the request to the grant
  std::chrono::nanoseconds held{0};            // released, lost: from the grant to the end
  std::chrono::system_clock::time_point at{};  // when it happened, by this host's clock
};

// Called on the Client's one event thread, in the order the events happened (per mutex; across
// mutexes, in the order they were recorded), never on the thread that locks. It must not
// capture the Client it is installed on (that would keep the Client alive forever). A hook that
// throws is caught, counted (hook_errors) and logged; one slower than the events come makes the
// queue (65,536 events) fill up, and the events past it are dropped, counted (events_dropped)
// and logged. When the last copy of the Client goes, the events still queued are delivered
// first, for up to a second.
using EventHook = std::function<void(const Event&)>;

}  // namespace simba
