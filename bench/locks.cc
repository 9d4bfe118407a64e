// The lock manager's workloads: threads of one process on one mutex (client.mutex() beside
// one Locker per thread, in the same run), threads on a mutex each, and many concurrent async
// requests.
#include <algorithm>
#include <filesystem>
#include <future>
#include <numeric>
#include <thread>

#include "report.h"
#include "workloads.h"

namespace simba::bench {
namespace {

int threads_now() {
  int n = 0;
  for ([[maybe_unused]] auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// What `threads` threads did taking the mutex over and over: holds per second, and the
// fewest holds one thread got against the mean (1: even turns; near 0: a thread starved).
struct Hammered {
  double holds_per_s = 0;
  double min_thread_share = 0;
};

// `threads` threads each take the mutex over and over for `duration` through `take` (which
// returns a handle with lock() and unlock()).
template <class Take>
Hammered hammer(int threads, std::chrono::milliseconds duration, Take take) {
  std::vector<long> holds(threads, 0);  // each thread writes its own, read after join()
  std::vector<std::thread> pool;
  const auto end = Clock::now() + duration;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto one = take(t);  // per thread: a Mutex handle or a Locker
      long mine = 0;
      while (Clock::now() < end) {
        one->lock();
        ++mine;
        one->unlock();
      }
      holds[t] = mine;
    });
  }
  for (auto& thread : pool) thread.join();
  const double total = std::accumulate(holds.begin(), holds.end(), 0.0);
  const double fewest = static_cast<double>(*std::min_element(holds.begin(), holds.end()));
  return {total / std::chrono::duration<double>(duration).count(), total > 0 ? fewest * threads / total : 0};
}

}  // namespace

nlohmann::json contended(const Client& client, const std::string& engine, std::size_t threads,
                         std::chrono::milliseconds duration) {
  const std::string name = "bench/contended/" + std::to_string(::getpid()) + "/" + std::to_string(threads);
  const int t = static_cast<int>(threads);
  const auto manager = hammer(t, duration, [&](int) { return std::make_unique<Mutex>(client.mutex(name)); });
  const auto lockers = hammer(t, duration, [&](int) { return std::make_unique<Locker>(name, client); });
  return {{"backend", engine},
          {"workload", "contended"},
          {"threads", threads},
          {"seconds", std::chrono::duration<double>(duration).count()},
          {"mutex_holds_per_s", round2(manager.holds_per_s)},
          {"lockers_holds_per_s", round2(lockers.holds_per_s)},
          {"mutex_min_thread_share", round2(manager.min_thread_share)},
          {"lockers_min_thread_share", round2(lockers.min_thread_share)},
          {"ratio", round2(lockers.holds_per_s > 0 ? manager.holds_per_s / lockers.holds_per_s : 0)}};
}

nlohmann::json parallel(const Client& client, const std::string& engine, std::size_t threads,
                        std::chrono::milliseconds duration, double one_thread_per_s) {
  const std::string prefix = "bench/parallel/" + std::to_string(::getpid()) + "/" + std::to_string(threads) + "/";
  const auto lockers = hammer(static_cast<int>(threads), duration,
                              [&](int t) { return std::make_unique<Locker>(prefix + std::to_string(t), client); });
  nlohmann::json out{{"backend", engine},
                     {"workload", "parallel"},
                     {"threads", threads},
                     {"seconds", std::chrono::duration<double>(duration).count()},
                     {"holds_per_s", round2(lockers.holds_per_s)},
                     {"min_thread_share", round2(lockers.min_thread_share)}};
  if (one_thread_per_s > 0) out["scaling"] = round2(lockers.holds_per_s / one_thread_per_s);
  return out;
}

nlohmann::json async_requests(const Client& client, const std::string& engine, std::size_t requests, std::size_t names,
                              std::chrono::milliseconds timeout) {
  const std::string prefix = "bench/async/" + std::to_string(::getpid()) + "/";
  std::atomic<long> completed{0}, timed_out{0}, failed{0}, pending{static_cast<long>(requests)};
  std::atomic<int> peak{threads_now()};
  std::promise<void> all;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < requests; ++i) {
    client.mutex(prefix + std::to_string(i % names)).lock_async(timeout, [&](std::error_code ec, Hold hold) {
      if (!ec && hold) {
        completed.fetch_add(1);
      } else if (ec == errc::timeout) {
        timed_out.fetch_add(1);
      } else {
        failed.fetch_add(1);
      }
      if (pending.fetch_sub(1) == 1) all.set_value();
      // `hold` ends here: the next request of that name gets it.
    });
  }
  auto done = all.get_future();
  while (done.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {
    int now = threads_now();
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    if (Clock::now() - start > timeout + std::chrono::seconds(60)) {
      throw Error(errc::timeout, "async workload: requests neither completed nor timed out");
    }
  }
  return {{"backend", engine},
          {"workload", "async"},
          {"requests", requests},
          {"names", names},
          {"completed", completed.load()},
          {"timed_out", timed_out.load()},
          {"failed", failed.load()},
          {"peak_threads", peak.load()},
          {"seconds", round2(std::chrono::duration<double>(Clock::now() - start).count())}};
}

}  // namespace simba::bench
