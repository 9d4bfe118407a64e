// The lock manager's workloads: threads of one process on one mutex (client.mutex() beside
// one Locker per thread, in the same run), and many concurrent async requests.
#include <filesystem>
#include <future>
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

// `threads` threads each take the mutex over and over for `duration` through `take` (which
// returns a release function); returns holds per second.
template <class Take>
double hammer(int threads, std::chrono::milliseconds duration, Take take) {
  std::atomic<long> holds{0};
  std::vector<std::thread> pool;
  const auto end = Clock::now() + duration;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto one = take(t);  // per thread: a Mutex handle or a Locker
      while (Clock::now() < end) {
        one->lock();
        holds.fetch_add(1, std::memory_order_relaxed);
        one->unlock();
      }
    });
  }
  for (auto& thread : pool) thread.join();
  return holds.load() / std::chrono::duration<double>(duration).count();
}

}  // namespace

nlohmann::json contended(const Client& client, const std::string& engine, std::size_t threads,
                         std::chrono::milliseconds duration) {
  const std::string name = "bench/contended/" + std::to_string(::getpid()) + "/" + std::to_string(threads);
  const int t = static_cast<int>(threads);
  double manager = hammer(t, duration, [&](int) { return std::make_unique<Mutex>(client.mutex(name)); });
  double lockers = hammer(t, duration, [&](int) { return std::make_unique<Locker>(name, client); });
  return {{"backend", engine},
          {"workload", "contended"},
          {"threads", threads},
          {"seconds", std::chrono::duration<double>(duration).count()},
          {"mutex_holds_per_s", round2(manager)},
          {"lockers_holds_per_s", round2(lockers)},
          {"ratio", round2(lockers > 0 ? manager / lockers : 0)}};
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
