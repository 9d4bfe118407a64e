// The semaphore's workload: its acquire + release cycle and its handover to a waiting process,
// each against the same of a mutex of the lock manager (uncached, as slots are), in one run.
#include <future>
#include <thread>

#include "report.h"
#include "workloads.h"

namespace simba::bench {

using namespace std::chrono_literals;

namespace {

// From a holder's release to the waiter's grant (the waiter: `wait` in another process),
// `n` times; `hold` takes what the holder holds, `wait` starts the waiter's request.
template <class Held, class Take, class Wait>
std::vector<double> handovers(std::size_t n, Take take, Wait wait) {
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    Held held = take();
    auto waiting = wait();
    std::this_thread::sleep_for(2ms);  // the waiter has asked (its first round met the holder)
    const auto released = Clock::now();
    held = Held();
    if (waiting.wait_for(30s) != std::future_status::ready) throw Error(errc::timeout, "semaphore: no handover");
    auto next = waiting.get();
    samples.push_back(micros(Clock::now() - released));
  }
  return samples;
}

}  // namespace

nlohmann::json semaphore(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  const auto name = "bench/semaphore/" + contender_id::uuid();
  Semaphore pool = client.semaphore(name, 4);
  Mutex mutex = client.mutex(name + "/mutex").with_linger(0ms);
  for (int i = 0; i < 20; ++i) {  // warm up
    pool.acquire(30s).release();
    mutex.acquire(30s).unlock();
  }
  std::vector<double> cycles, mutex_cycles;
  constexpr std::size_t kBlock = 50;
  for (bool ours_first = true; cycles.size() < n; ours_first = !ours_first) {
    auto ours = [&] {
      for (std::size_t i = 0; i < kBlock && cycles.size() < n; ++i) {
        const auto start = Clock::now();
        pool.acquire(30s).release();
        cycles.push_back(micros(Clock::now() - start));
      }
    };
    auto theirs = [&] {
      for (std::size_t i = 0; i < kBlock && mutex_cycles.size() < n; ++i) {
        const auto start = Clock::now();
        mutex.acquire(30s).unlock();
        mutex_cycles.push_back(micros(Clock::now() - start));
      }
    };
    if (ours_first) {
      ours();
      theirs();
    } else {
      theirs();
      ours();
    }
  }
  // Handover to another process, one permit and one mutex.
  ContendOptions options = client.options();
  // "Another process": its own connection; on memory: (one store per process) its own objects.
  Client other(engine == "memory" ? std::make_shared<ForwardingBackend>(client.backend()) : open_backend(uri, &options),
               options);
  const std::size_t m = std::max<std::size_t>(n / 20, 10);
  Semaphore one = client.semaphore(name + "/one", 1), one_there = other.semaphore(name + "/one", 1);
  Mutex here = client.mutex(name + "/handover").with_linger(0ms),
        there = other.mutex(name + "/handover").with_linger(0ms);
  auto permit_handovers = handovers<Permit>(
      m, [&] { return one.acquire(30s); }, [&] { return one_there.acquire_async(30s); });
  auto mutex_handovers = handovers<Hold>(
      m, [&] { return here.acquire(30s); }, [&] { return there.lock_async(30s); });

  auto out = line(engine, "semaphore", n, stats_of(cycles));
  const auto theirs = stats_of(mutex_cycles);
  out["permits"] = 4;
  out["mutex_p50_us"] = round2(theirs.p50);
  out["ratio_p50"] = round2(out["p50_us"].get<double>() / theirs.p50);
  const auto handover = stats_of(permit_handovers), mutex_handover = stats_of(mutex_handovers);
  out["handover_n"] = m;
  out["handover_p50_us"] = round2(handover.p50);
  out["handover_p99_us"] = round2(handover.p99);
  out["mutex_handover_p50_us"] = round2(mutex_handover.p50);
  return out;
}

}  // namespace simba::bench
