// simba-bench's measurements: samples to percentiles, one JSON line per workload, bounded
// waits, and a contender that stamps when it acquired.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "simba/simba.h"

namespace simba::bench {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d);
double round2(double v);

struct Stats {
  double p50 = 0, p99 = 0, mean = 0;
};
Stats stats_of(std::vector<double> samples);

// {"backend", "workload", "n", "p50_us", "p99_us", "mean_us"}
nlohmann::json line(const std::string& backend, const std::string& workload, std::size_t n, const Stats& s);

// Blocks until `predicate` or `timeout`; a benchmark that cannot make progress stops loudly.
// Between looks it yields (for latencies), or sleeps `pause` (for long waits: not spinning on
// a core the engine and the library need).
void await(const std::function<bool()>& predicate, const char* what,
           std::chrono::milliseconds timeout = std::chrono::seconds(30),
           std::chrono::microseconds pause = std::chrono::microseconds(0));

// Records when a contender acquired, for latency measurements.
class Stamp : public ContenderBase {
 public:
  using ContenderBase::ContenderBase;
  void on_acquired(const MutexState&) override {
    std::lock_guard lock(mutex_);
    acquired_at_ = Clock::now();
  }
  std::optional<Clock::time_point> acquired_at() const {
    std::lock_guard lock(mutex_);
    return acquired_at_;
  }
  void reset() {
    std::lock_guard lock(mutex_);
    acquired_at_.reset();
  }

 private:
  mutable std::mutex mutex_;
  std::optional<Clock::time_point> acquired_at_;
};

}  // namespace simba::bench
