// simba-bench's measurements.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

namespace simba::bench {

using namespace std::chrono_literals;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

Stats stats_of(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * samples.size()))];
  };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  return s;
}

double round2(double v) { return std::round(v * 100) / 100; }

nlohmann::json line(const std::string& backend, const std::string& workload, std::size_t n, const Stats& s) {
  return {{"backend", backend},      {"workload", workload},    {"n", n},
          {"p50_us", round2(s.p50)}, {"p99_us", round2(s.p99)}, {"mean_us", round2(s.mean)}};
}

void await(const std::function<bool()>& predicate, const char* what, std::chrono::milliseconds timeout,
           std::chrono::microseconds pause) {
  auto deadline = Clock::now() + timeout;
  while (!predicate()) {
    if (Clock::now() > deadline) throw Error(errc::timeout, std::string("benchmark stuck waiting for ") + what);
    if (pause.count() > 0) {
      std::this_thread::sleep_for(pause);
    } else {
      std::this_thread::yield();
    }
  }
}
}  // namespace simba::bench
