// simba/metrics.h: the Prometheus text exposition of a MetricsSnapshot, and the names of the
// metrics' enums.
#include <cstdio>

#include "simba/metrics.h"

namespace simba {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // A sample; `labels` already rendered (`a="x",b="y"`) or empty.
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  template <class Integer>
  void sample(const std::string& name, const std::string& labels, Integer value) {
    sample(name, labels, std::to_string(value));
  }
  void histogram(const std::string& name, const std::string& labels, const HistogramSnapshot& h) {
    const std::string sep = labels.empty() ? "" : labels + ",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(name + "_bucket", sep + "le=\"" + number(h.bounds[i]) + "\"", cumulative);
    }
    sample(name + "_bucket", sep + "le=\"+Inf\"", h.count);
    sample(name + "_sum", labels, number(h.sum));
    sample(name + "_count", labels, h.count);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string prometheus_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

const char* to_string(LostReason reason) noexcept {
  switch (reason) {
    case LostReason::error: return "error";
    case LostReason::stall: return "stall";
    case LostReason::evicted: return "evicted";
    case LostReason::max_hold: return "max_hold";
  }
  return "unknown";
}

const char* to_string(BackendOp op) noexcept {
  switch (op) {
    case BackendOp::acquire: return "acquire";
    case BackendOp::renew: return "renew";
    case BackendOp::read: return "read";
    case BackendOp::release: return "release";
    case BackendOp::mark_idle: return "mark_idle";
  }
  return "unknown";
}

const char* to_string(EventKind kind) noexcept {
  switch (kind) {
    case EventKind::acquired: return "acquired";
    case EventKind::released: return "released";
    case EventKind::lost: return "lost";
    case EventKind::backend_error: return "backend_error";
    case EventKind::demand: return "demand";
  }
  return "unknown";
}

std::string to_prometheus(const MetricsSnapshot& m, const std::string& extra) {
  Exposition x;
  x.family("simba_info", "gauge", "The backend engine this process's simba client uses.");
  x.sample("simba_info", "backend=\"" + prometheus_label_value(m.backend) + "\"", 1);
  x.family("simba_acquisitions_total", "counter",
           "Holds granted by the lock manager and leases won by contender services.");
  x.sample("simba_acquisitions_total", "", m.acquisitions);
  x.family("simba_releases_total", "counter", "Holds and service leases given back (not lost).");
  x.sample("simba_releases_total", "", m.releases);
  x.family("simba_local_handovers_total", "counter", "Leases passed from one local hold to the next request.");
  x.sample("simba_local_handovers_total", "", m.local_handovers);
  x.family("simba_cached_relocks_total", "counter", "Holds taken from a cached lease with no backend call.");
  x.sample("simba_cached_relocks_total", "", m.cached_relocks);
  x.family("simba_leases_lost_total", "counter", "Leases or holds lost, by reason.");
  for (std::size_t i = 0; i < kLostReasons; ++i) {
    x.sample("simba_leases_lost_total", std::string("reason=\"") + to_string(static_cast<LostReason>(i)) + "\"",
             m.lost[i]);
  }
  x.family("simba_backend_errors_total", "counter", "Failed backend calls, by operation.");
  for (std::size_t i = 0; i < kBackendOps; ++i) {
    x.sample("simba_backend_errors_total", std::string("operation=\"") + to_string(static_cast<BackendOp>(i)) + "\"",
             m.backend_errors[i]);
  }
  x.family("simba_holders", "gauge", "Holds (fast holds of a cached lease excepted) and owning services now.");
  x.sample("simba_holders", "", m.holders);
  x.family("simba_waiters", "gauge", "Lock manager requests waiting and contender services standing by, now.");
  x.sample("simba_waiters", "", m.waiters);
  x.family("simba_acquire_wait_seconds", "histogram", "From a lock request to its grant.");
  x.histogram("simba_acquire_wait_seconds", "", m.acquire_wait);
  x.family("simba_hold_seconds", "histogram", "From a grant to the end of the hold or lease.");
  x.histogram("simba_hold_seconds", "", m.hold);
  x.family("simba_handover_seconds", "histogram", "From a hold's end to the next local request's grant.");
  x.histogram("simba_handover_seconds", "", m.handover);
  x.family("simba_backend_round_trip_seconds", "histogram", "Backend calls, by operation.");
  for (std::size_t i = 0; i < kBackendOps; ++i) {
    x.histogram("simba_backend_round_trip_seconds",
                std::string("operation=\"") + to_string(static_cast<BackendOp>(i)) + "\"", m.round_trip[i]);
  }
  x.family("simba_events_dropped_total", "counter", "Events the hook could not take in time.");
  x.sample("simba_events_dropped_total", "", m.events_dropped);
  x.family("simba_event_hook_errors_total", "counter", "Calls of the event hook that threw.");
  x.sample("simba_event_hook_errors_total", "", m.hook_errors);
  x.family("simba_backend_batches_total", "counter", "Round trips that carried batched acquisitions and renewals.");
  x.sample("simba_backend_batches_total", "", m.batches);
  x.family("simba_backend_batched_rounds_total", "counter", "Acquisitions and renewals sent in batches.");
  x.sample("simba_backend_batched_rounds_total", "", m.batched_rounds);
  x.family("simba_backend_queued_rounds", "gauge", "Acquisitions and renewals waiting for a batch, now.");
  x.sample("simba_backend_queued_rounds", "", m.queued_rounds);
  if (!m.mutexes.empty()) {
    struct PerMutex {
      const char* name;
      const char* type;
      const char* help;
      std::int64_t (*value)(const MutexMetrics&);
    };
    const PerMutex families[] = {
        {"simba_mutex_acquisitions_total", "counter", "Acquisitions of one labelled mutex.",
         [](const MutexMetrics& v) { return static_cast<std::int64_t>(v.acquisitions); }},
        {"simba_mutex_releases_total", "counter", "Releases of one labelled mutex.",
         [](const MutexMetrics& v) { return static_cast<std::int64_t>(v.releases); }},
        {"simba_mutex_leases_lost_total", "counter", "Losses of one labelled mutex.",
         [](const MutexMetrics& v) { return static_cast<std::int64_t>(v.lost); }},
        {"simba_mutex_holders", "gauge", "Holders of one labelled mutex now.",
         [](const MutexMetrics& v) { return v.holders; }},
        {"simba_mutex_waiters", "gauge", "Waiters of one labelled mutex now.",
         [](const MutexMetrics& v) { return v.waiters; }},
    };
    for (const auto& f : families) {
      x.family(f.name, f.type, f.help);
      for (const auto& v : m.mutexes) x.sample(f.name, "mutex=\"" + prometheus_label_value(v.mutex) + "\"", f.value(v));
    }
  }
  return x.take() + extra;
}

}  // namespace simba
