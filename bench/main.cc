// simba-bench: the same workloads on any backend, each against the engine's own bare
// primitive measured in the same run. One JSON object per line on stdout.
//
//   simba-bench --backend URI --workload cycle,handover,takeover [--n N]
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "core/uri.h"
#include "simba/simba.h"

namespace simba::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Stats {
  double p50 = 0, p99 = 0, mean = 0;
};

Stats stats_of(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * samples.size()))]; };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  return s;
}

double round2(double v) { return std::round(v * 100) / 100; }

nlohmann::json line(const std::string& backend, const std::string& workload, std::size_t n, const Stats& s) {
  return {{"backend", backend}, {"workload", workload}, {"n", n},
          {"p50_us", round2(s.p50)}, {"p99_us", round2(s.p99)}, {"mean_us", round2(s.mean)}};
}

// Blocks until `predicate` or 30 s; a benchmark that cannot make progress stops loudly.
void await(const std::function<bool()>& predicate, const char* what) {
  auto deadline = Clock::now() + 30s;
  while (!predicate()) {
    if (Clock::now() > deadline) throw Error(errc::timeout, std::string("benchmark stuck waiting for ") + what);
    std::this_thread::yield();
  }
}

// The engine's bare primitive: what one lock + unlock cannot beat.
std::vector<double> raw_cycle(const std::string& uri, std::size_t n) {
  auto parsed = internal::parse_uri(uri);
  std::vector<double> samples;
  samples.reserve(n);
  if (parsed.scheme == "memory") {
    std::mutex mutex;
    for (std::size_t i = 0; i < n; ++i) {
      auto start = Clock::now();
      mutex.lock();
      mutex.unlock();
      samples.push_back(micros(Clock::now() - start));
    }
  } else if (parsed.scheme == "sqlite") {
    // A bare write transaction updating one row, on its own connection to the same file.
    std::string path = parsed.host == "localhost" ? parsed.path : parsed.host + parsed.path;
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw Error(errc::unavailable, "raw: cannot open " + path);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE IF NOT EXISTS simba_bench_raw (k TEXT PRIMARY KEY, v INTEGER);"
                     "INSERT OR IGNORE INTO simba_bench_raw VALUES ('k', 0);", nullptr, nullptr, nullptr);
    sqlite3_stmt *begin, *update, *commit;
    sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr);
    sqlite3_prepare_v2(db, "UPDATE simba_bench_raw SET v = v + 1 WHERE k = 'k'", -1, &update, nullptr);
    sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      auto start = Clock::now();
      for (auto* stmt : {begin, update, commit}) {
        if (sqlite3_step(stmt) != SQLITE_DONE) throw Error(errc::unavailable, std::string("raw: ") + sqlite3_errmsg(db));
        sqlite3_reset(stmt);
      }
      samples.push_back(micros(Clock::now() - start));
    }
    for (auto* stmt : {begin, update, commit}) sqlite3_finalize(stmt);
    sqlite3_exec(db, "DROP TABLE simba_bench_raw", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  return samples;
}

nlohmann::json cycle(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  Locker locker("bench/cycle/" + contender_id::uuid(), client);
  for (int i = 0; i < 20; ++i) {  // warm up
    locker.acquire();
    locker.unlock();
  }
  std::vector<double> samples;
  samples.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto start = Clock::now();
    locker.acquire();
    locker.unlock();
    samples.push_back(micros(Clock::now() - start));
  }
  auto out = line(engine, "cycle", n, stats_of(samples));
  auto raw = stats_of(raw_cycle(uri, n));
  out["raw_p50_us"] = round2(raw.p50);
  out["raw_p99_us"] = round2(raw.p99);
  if (raw.p50 > 0) out["ratio_p50"] = round2(out["p50_us"].get<double>() / raw.p50);
  return out;
}

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

// Release by the owner to the next owner's on_acquired.
nlohmann::json handover(const Client& client, const std::string& engine, std::size_t n) {
  auto mutex = "bench/handover/" + contender_id::uuid();
  auto a = std::make_shared<Stamp>(mutex), b = std::make_shared<Stamp>(mutex);
  auto first = client.contend_service(a), second = client.contend_service(b);
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    a->reset();
    b->reset();
    first->start();
    await([&] { return first->is_owner(); }, "the first owner");
    second->start();
    await([&] { return second->after_owner().owner_id == a->contender_id(); }, "the waiter to see the owner");
    auto released = Clock::now();
    first->stop();
    await([&] { return b->acquired_at().has_value(); }, "the handover");
    samples.push_back(micros(*b->acquired_at() - released));
    second->stop();
  }
  return line(engine, "handover", n, stats_of(samples));
}

// The owner vanishes without releasing (its backend goes unreachable); the waiter takes over
// once the lease runs out. Reported with the lease (ttl + transition) it cannot beat.
nlohmann::json takeover(const Client& client, const std::string& engine, std::size_t n) {
  ContendOptions options = client.options();
  options.ttl = 200ms;
  options.transition = 100ms;
  Client fast(client.backend(), options, client.runtime());
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    auto mutex = "bench/takeover/" + contender_id::uuid();
    auto faulty = std::make_shared<FaultInjectingBackend>(client.backend());
    Client doomed(faulty, options, client.runtime());
    auto a = std::make_shared<Stamp>(mutex), b = std::make_shared<Stamp>(mutex);
    auto owner = doomed.contend_service(a);
    owner->start();
    await([&] { return owner->is_owner(); }, "the owner");
    auto waiter = fast.contend_service(b);
    waiter->start();
    await([&] { return waiter->after_owner().owner_id == a->contender_id(); }, "the waiter to see the owner");
    auto last_renewal = owner->after_owner().acquired_at;
    faulty->set_unreachable(true);
    await([&] { return b->acquired_at().has_value(); }, "the takeover");
    // From the owner's last renewal, as judged by the backend's clock, to the new owner.
    auto taken = waiter->after_owner().acquired_at;
    samples.push_back(static_cast<double>(taken - last_renewal) * 1000.0);
    waiter->stop();
    faulty->set_unreachable(false);
    owner->stop();
  }
  auto out = line(engine, "takeover", n, stats_of(samples));
  out["lease_us"] = (options.ttl + options.transition).count() * 1000;
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"simba-bench: lock workloads against the engine's bare primitive; JSON lines"};
  std::string uri = "memory:";
  std::string workloads = "cycle,handover,takeover";
  std::size_t n = 0;
  app.add_option("--backend", uri, "Backend URI (default memory:)");
  app.add_option("--workload", workloads, "Comma-separated: cycle, handover, takeover");
  app.add_option("--n", n, "Samples per workload (default: cycle 2000, handover 50, takeover 10)");
  CLI11_PARSE(app, argc, argv);
#if !defined(__OPTIMIZE__)
  std::cerr << "simba-bench: WARNING: built without optimisation; figures are not representative\n";
#endif
  // Injected faults are expected here: keep their warnings out of the figures.
  setenv("SIMBA_LOG", "error", /*overwrite=*/0);
  ContendOptions options;
  auto backend = open_backend(uri, &options);
  Client client(backend, options);
  auto engine = backend->capabilities().engine;
  std::cout << nlohmann::json{{"backend", engine}, {"workload", "env"}, {"uri", internal::parse_uri(uri).redacted()},
                              {"cores", std::thread::hardware_concurrency()},
#if defined(__OPTIMIZE__)
                              {"optimized", true}
#else
                              {"optimized", false}
#endif
                             }.dump()
            << std::endl;
  std::stringstream list(workloads);
  for (std::string workload; std::getline(list, workload, ',');) {
    nlohmann::json out;
    if (workload == "cycle") out = cycle(client, uri, engine, n ? n : 2000);
    else if (workload == "handover") out = handover(client, engine, n ? n : 50);
    else if (workload == "takeover") out = takeover(client, engine, n ? n : 10);
    else throw Error(errc::invalid_argument, "unknown workload '" + workload + "'; accepted: cycle, handover, takeover");
    std::cout << out.dump() << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace simba::bench

int main(int argc, char** argv) {
  try {
    return simba::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "simba-bench: " << e.what() << "\n";
    return 1;
  }
}
