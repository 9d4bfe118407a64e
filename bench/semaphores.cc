// The semaphore's and the shared mutex's workloads: their acquire + release cycles and their
// handovers to a waiting process, each against the same of a mutex of the lock manager
// (uncached, as slots are) in one run; and the throughput of 16 threads in each of 3 processes
// through a semaphore of 4 permits.
#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "report.h"
#include "workloads.h"

namespace simba::bench {

using namespace std::chrono_literals;

namespace {

// From a holder's release to the waiter's grant (the waiter: `wait` in another process), once;
// `take` takes what the holder holds, `wait` starts the waiter's request, and `asked` tells
// whether the holder's record shows the waiter's demand (its request reached the server and met
// the holder: the waiter is queued). The release waits for that, not for a fixed pause: a
// waiter that had not asked yet would win a free record outright (no handover), and one whose
// first round is slower (a semaphore's line, then its slot) would be measured differently.
//
// And the hold lasts kHeldAtLeast: a waiter that met the holder may still be setting up how it
// hears the release, for the first milliseconds of a hold (MariaDB: the owner takes its wake
// lock 0.5 ms after its win, and a waiter that asked before finds it free and asks again after
// 1, then 2 ms), and a release within them reaches it later. With holds of about 1 ms MariaDB's
// handovers, the permit's, the write lock's and the mutex's alike, fell in two modes about
// 0.8 ms apart, half the samples in each, and which mode a run's median fell in decided the
// ratio. This measures the handover to a waiter that is waiting.
constexpr auto kHeldAtLeast = 5ms;
template <class Held, class Take, class Wait, class Asked>
double handover(Take take, Wait wait, Asked asked) {
  Held held = take();
  const auto taken = Clock::now();
  auto waiting = wait();
  await(asked, "the waiter to ask for the held record", 30s, 100us);
  std::this_thread::sleep_until(taken + kHeldAtLeast);
  const auto released = Clock::now();
  held = Held();
  if (waiting.wait_for(30s) != std::future_status::ready) throw Error(errc::timeout, "semaphore: no handover");
  auto next = waiting.get();
  return micros(Clock::now() - released);
}

// Whether `record`, held by `client`, shows another contender's demand.
auto demand_on(const Client& client, std::string record) {
  return [&client, record = std::move(record)] { return client.snapshot(record).demanded; };
}

// `n` samples each of `ours` and `theirs` (one handover each), taken in turn (ours first, then
// theirs first, ...), so that both see the same machine: a handover is a few samples of a
// millisecond or two, and a busy spell that fell on one of them only would decide their ratio.
std::pair<std::vector<double>, std::vector<double>> in_turn(std::size_t n, const std::function<double()>& ours,
                                                            const std::function<double()>& theirs) {
  std::vector<double> a, b;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      a.push_back(ours());
      b.push_back(theirs());
    } else {
      b.push_back(theirs());
      a.push_back(ours());
    }
  }
  return {std::move(a), std::move(b)};
}

// A waiter blocked in `acquire` on a thread of its own, running when this returns.
template <class Acquire>
auto blocked_in(Acquire acquire) {
  auto running = std::make_shared<std::promise<void>>();
  auto asks = running->get_future();
  auto waiting = std::async(std::launch::async, [acquire, running] {
    running->set_value();
    return acquire();
  });
  asks.wait();
  return waiting;
}

// `ours` and `theirs` (each one cycle), n samples each, interleaved in blocks of 50 so both see
// the same machine.
std::pair<std::vector<double>, std::vector<double>> interleaved(std::size_t n, const std::function<void()>& ours,
                                                                const std::function<void()>& theirs) {
  std::vector<double> a, b;
  constexpr std::size_t kBlock = 50;
  auto block = [&](std::vector<double>& samples, const std::function<void()>& cycle) {
    for (std::size_t i = 0; i < kBlock && samples.size() < n; ++i) {
      const auto start = Clock::now();
      cycle();
      samples.push_back(micros(Clock::now() - start));
    }
  };
  for (bool ours_first = true; a.size() < n || b.size() < n; ours_first = !ours_first) {
    if (ours_first) {
      block(a, ours);
      block(b, theirs);
    } else {
      block(b, theirs);
      block(a, ours);
    }
  }
  return {std::move(a), std::move(b)};
}

// "Another process": its own connection; on memory: (one store per process) its own objects.
Client other_process(const Client& client, const std::string& uri, const std::string& engine) {
  ContendOptions options = client.options();
  return Client(
      engine == "memory" ? std::make_shared<ForwardingBackend>(client.backend()) : open_backend(uri, &options),
      options);
}

// 16 threads in each of 3 processes take a permit of one semaphore of 4, hold it 1 ms and give
// it back, for `duration`: permits granted per second, and the most holders at once (never
// above 4, by the lease's grant and release as each thread sees them).
nlohmann::json throughput(const Client& client, const std::string& uri, const std::string& engine,
                          const std::string& name, std::chrono::milliseconds duration) {
  constexpr unsigned kProcesses = 3, kThreads = 16, kPermits = 4;
  std::vector<Client> processes{client};
  for (unsigned p = 1; p < kProcesses; ++p) processes.push_back(other_process(client, uri, engine));
  std::atomic<std::uint64_t> granted{0}, failed{0};
  std::mutex inside_mutex;
  int inside = 0, most_inside = 0;  // guarded by inside_mutex
  const auto until = Clock::now() + duration;
  std::vector<std::jthread> threads;
  for (auto& process : processes) {
    Semaphore pool = process.semaphore(name, kPermits);
    for (unsigned t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, pool]() mutable {
        while (Clock::now() < until) {
          try {
            Permit permit = pool.acquire(std::chrono::seconds(30));
            {
              std::lock_guard lock(inside_mutex);
              most_inside = std::max(most_inside, ++inside);
            }
            std::this_thread::sleep_for(1ms);
            {
              std::lock_guard lock(inside_mutex);
              --inside;
            }
            permit.release();
            granted.fetch_add(1, std::memory_order_relaxed);
          } catch (const Error&) {
            failed.fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
    }
  }
  const auto started = Clock::now();
  threads.clear();  // joins
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return {{"processes", kProcesses},
          {"threads_per_process", kThreads},
          {"permits", kPermits},
          {"granted", granted.load()},
          {"failed", failed.load()},
          {"per_second", round2(static_cast<double>(granted.load()) / seconds)},
          {"most_holders_at_once", most_inside}};
}

}  // namespace

nlohmann::json semaphore(const Client& client, const std::string& uri, const std::string& engine, std::size_t n,
                         std::chrono::milliseconds throughput_for) {
  const auto name = "bench/semaphore/" + contender_id::uuid();
  Semaphore pool = client.semaphore(name, 4);
  Mutex mutex = client.mutex(name + "/mutex").with_linger(0ms);
  for (int i = 0; i < 20; ++i) {  // warm up
    pool.acquire(30s).release();
    mutex.acquire(30s).unlock();
  }
  auto [cycles, mutex_cycles] = interleaved(
      n, [&] { pool.acquire(30s).release(); }, [&] { mutex.acquire(30s).unlock(); });
  // Handover to another process, one permit and one mutex.
  Client other = other_process(client, uri, engine);
  const std::size_t m = std::max<std::size_t>(n / 20, 10);
  Semaphore one = client.semaphore(name + "/one", 1), one_there = other.semaphore(name + "/one", 1);
  Mutex here = client.mutex(name + "/handover").with_linger(0ms),
        there = other.mutex(name + "/handover").with_linger(0ms);
  auto [permit_handovers, mutex_handovers] = in_turn(
      m,
      [&] {
        return handover<Permit>([&] { return one.acquire(30s); }, [&] { return one_there.acquire_async(30s); },
                                demand_on(client, Semaphore::slot_name(name + "/one", 0, 1)));
      },
      [&] {
        return handover<Hold>([&] { return here.acquire(30s); }, [&] { return there.lock_async(30s); },
                              demand_on(client, name + "/handover"));
      });

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
  out["throughput"] = throughput(client, uri, engine, name + "/throughput", throughput_for);
  return out;
}

nlohmann::json rwlock(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  const auto name = "bench/rwlock/" + contender_id::uuid();
  SharedMutex lock = client.shared_mutex(name);
  Mutex mutex = client.mutex(name + "/mutex").with_linger(0ms);
  for (int i = 0; i < 20; ++i) {  // warm up
    lock.acquire(30s).unlock();
    lock.acquire_shared(30s).unlock();
    mutex.acquire(30s).unlock();
  }
  auto [writes, mutex_cycles] = interleaved(
      n, [&] { lock.acquire(30s).unlock(); }, [&] { mutex.acquire(30s).unlock(); });
  auto [reads, mutex_again] = interleaved(
      n, [&] { lock.acquire_shared(30s).unlock(); }, [&] { mutex.acquire(30s).unlock(); });
  mutex_cycles.insert(mutex_cycles.end(), mutex_again.begin(), mutex_again.end());
  // The write lock's handover to a writer in another process, against a mutex's.
  Client other = other_process(client, uri, engine);
  const std::size_t m = std::max<std::size_t>(n / 20, 10);
  SharedMutex here = client.shared_mutex(name + "/handover"), there = other.shared_mutex(name + "/handover");
  Mutex mutex_here = client.mutex(name + "/mutex-handover").with_linger(0ms),
        mutex_there = other.mutex(name + "/mutex-handover").with_linger(0ms);
  // Both waiters block in acquire() on a thread of their own (a SharedMutex has no async
  // form), so both handovers wake that thread and then the bench's.
  auto [write_handovers, mutex_handovers] = in_turn(
      m,
      [&] {
        return handover<SharedHold>([&] { return here.acquire(30s); },
                                    [&] { return blocked_in([&there] { return there.acquire(30s); }); },
                                    demand_on(client, name + "/handover"));
      },
      [&] {
        return handover<Hold>([&] { return mutex_here.acquire(30s); },
                              [&] { return blocked_in([&mutex_there] { return mutex_there.acquire(30s); }); },
                              demand_on(client, name + "/mutex-handover"));
      });

  auto out = line(engine, "rwlock", n, stats_of(writes));
  const auto theirs = stats_of(mutex_cycles), read = stats_of(reads);
  out["mutex_p50_us"] = round2(theirs.p50);
  out["ratio_p50"] = round2(out["p50_us"].get<double>() / theirs.p50);
  out["read_p50_us"] = round2(read.p50);
  out["read_p99_us"] = round2(read.p99);
  out["read_ratio_p50"] = round2(read.p50 / theirs.p50);
  const auto handover = stats_of(write_handovers), mutex_handover = stats_of(mutex_handovers);
  out["handover_n"] = m;
  out["handover_p50_us"] = round2(handover.p50);
  out["handover_p99_us"] = round2(handover.p99);
  out["mutex_handover_p50_us"] = round2(mutex_handover.p50);
  return out;
}

}  // namespace simba::bench
