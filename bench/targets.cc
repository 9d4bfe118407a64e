// simba-bench's targets (targets.h).
#include "targets.h"

#include <string_view>

namespace simba::bench {
namespace {

struct Target {
  std::string_view engine;    // "*": every engine
  std::string_view workload;  // as in the JSON line
  std::string_view figure;    // a number in the line
  enum { at_most, at_least } kind;
  double bound;
  std::string_view bound_figure;  // if set, the bound is this figure of the same line (× bound)
  std::string_view why;
};

constexpr Target kTargets[] = {
    {"memory", "cycle", "p50_us", Target::at_most, 0.5, "", "issue 28: the memory engine's Locker cycle"},
    {"redis", "cycle", "ratio_p50", Target::at_most, 1.1, "", "issue 28: against SET NX PX + DEL in the same run"},
    {"sqlite", "handover", "p50_us", Target::at_most, 1000, "", "issue 28: SQLite pushes releases"},
    {"sqlite", "handover", "p99_us", Target::at_most, 5000, "", "issue 28: SQLite pushes releases"},
    {"mysql", "handover", "p50_us", Target::at_most, 5000, "", "issue 28: MariaDB/MySQL pushes releases"},
    {"etcd", "cycle", "ratio_p50", Target::at_most, 1.2, "", "issue 25: against a put-if-absent txn + delete"},
    {"etcd", "handover", "p50_us", Target::at_most, 2000, "", "issue 25: a watch on the predecessor"},
    {"etcd", "kill", "p99_over_lease_us", Target::at_most, 500000, "", "issue 25: a killed owner within lease + 0.5 s"},
    {"*", "relock", "ratio_p50", Target::at_most, 2.0, "", "a cached re-lock within 2x std::mutex"},
    {"*", "pingpong", "ratio_p50", Target::at_most, 1.2, "", "caching costs alternating processes little"},
    {"*", "scale", "missed_renewals", Target::at_most, 0, "", "issue 28: every lease renewed"},
    {"*", "scale", "threads", Target::at_most, 16, "", "issue 28: no thread per contender"},
    {"*", "scale", "rss_per_mutex_bytes", Target::at_most, 1024, "", "issue 28: at most 1 KiB resident per mutex"},
    {"*", "scale", "owners_at_end", Target::at_least, 1, "n", "issue 28: every mutex still owned at the end"},
    {"*", "scale", "round_trips_per_ttl", Target::at_most, 0.01, "n", "issue 28: renewals batched, n/100 per ttl"},
    {"redis", "scale", "acquire_all_ms", Target::at_most, 10000, "", "issue 28: 100,000 mutexes taken within 10 s"},
    {"*", "semaphore", "ratio_p50", Target::at_most, 1.3, "", "issue 26: a permit cycle within 1.3x a mutex cycle"},
    {"*", "semaphore", "handover_p50_us", Target::at_most, 1.2, "mutex_handover_p50_us",
     "issue 26: a permit's handover within the mutex's + 20%"},
    {"*", "rwlock", "ratio_p50", Target::at_most, 1.3, "", "issue 26: a write cycle within 1.3x a mutex cycle"},
    {"*", "rwlock", "read_ratio_p50", Target::at_most, 1.3, "", "issue 26: a read cycle within 1.3x a mutex cycle"},
    {"*", "rwlock", "handover_p50_us", Target::at_most, 1.2, "mutex_handover_p50_us",
     "issue 26: the write lock's handover within the mutex's + 20%"},
    {"*", "async", "completed", Target::at_least, 1, "requests", "every request completes within its timeout"},
};

}  // namespace

void judge(nlohmann::json& line) {
  const auto engine = line.value("backend", std::string());
  const auto workload = line.value("workload", std::string());
  nlohmann::json judged = nlohmann::json::object();
  for (const auto& target : kTargets) {
    if ((target.engine != "*" && target.engine != engine) || target.workload != workload) continue;
    const std::string figure(target.figure);
    if (!line.contains(figure) || !line[figure].is_number()) continue;
    double bound = target.bound;
    if (!target.bound_figure.empty()) {
      const std::string of(target.bound_figure);
      if (!line.contains(of) || !line[of].is_number()) continue;
      bound *= line[of].get<double>();
    }
    const double value = line[figure].get<double>();
    const bool at_most = target.kind == Target::at_most;
    judged[figure] = {{at_most ? "max" : "min", bound},
                      {"met", at_most ? value <= bound : value >= bound},
                      {"why", std::string(target.why)}};
  }
  if (!judged.empty()) line["targets"] = std::move(judged);
}

}  // namespace simba::bench
