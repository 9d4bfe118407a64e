// Lock caching's workloads: a cached re-lock against a std::mutex, the contended ping-pong of
// two processes with caching on and off, and how soon another process gets a cached lease.
// "Another process" is a client over a backend object of its own (its own lock table).
#include <atomic>
#include <mutex>
#include <thread>

#include "report.h"
#include "workloads.h"

namespace simba::bench {
namespace {

constexpr int kBlock = 1000;  // operations per timed block: a clock read costs about one

// Per-operation microseconds of `op`, timed in blocks of kBlock.
template <class Op>
std::vector<double> per_op(std::size_t blocks, Op op) {
  std::vector<double> samples;
  for (std::size_t b = 0; b < blocks; ++b) {
    const auto start = Clock::now();
    for (int i = 0; i < kBlock; ++i) op();
    samples.push_back(micros(Clock::now() - start) / kBlock);
  }
  return samples;
}

std::string unique_name(const char* workload) {
  return std::string("bench/") + workload + "/" + std::to_string(::getpid()) + "/" +
         std::to_string(Clock::now().time_since_epoch().count());
}

// Two clients take turns: each locks, holds 1 ms, unlocks, and asks again only once the other
// has the mutex. Returns the handover times (one's unlock to the other's lock returning).
std::vector<double> alternate(const Client& a, const Client& b, std::chrono::milliseconds linger, std::size_t n) {
  const auto name = unique_name("pingpong");
  Mutex sides[2] = {a.mutex(name).with_linger(linger), b.mutex(name).with_linger(linger)};
  std::atomic<int> holder{-1};
  std::atomic<long> released_ns{0};
  std::vector<double> handovers;
  std::mutex samples_mutex;
  auto play = [&](int me) {
    for (std::size_t round = 0; round < n; ++round) {
      sides[me].lock();
      const auto at = Clock::now().time_since_epoch().count();
      if (round > 0 || me == 1) {
        std::lock_guard lock(samples_mutex);
        if (released_ns.load() != 0) handovers.push_back((at - released_ns.load()) / 1000.0);
      }
      holder.store(me);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      released_ns.store(Clock::now().time_since_epoch().count());
      sides[me].unlock();
      await([&] { return holder.load() != me || (me == 1 && round + 1 == n); }, "the other side to take the mutex");
    }
  };
  std::thread first(play, 0);
  await([&] { return holder.load() == 0; }, "the first side to take the mutex");
  std::thread second(play, 1);
  first.join();
  second.join();
  a.release_cached();
  b.release_cached();
  return handovers;
}

}  // namespace

nlohmann::json relock(const Client& client, const std::string& engine, std::size_t n) {
  auto m = client.mutex(unique_name("relock")).with_linger(std::chrono::seconds(60));
  m.lock();  // the remote acquisition; from here on the lease is cached
  m.unlock();
  std::mutex plain;
  const std::size_t blocks = std::max<std::size_t>(n / kBlock, 10);
  std::vector<double> cached, baseline;
  for (std::size_t round = 0; round < 10; ++round) {  // interleaved: both see the same machine
    for (double v : per_op(blocks / 10 + 1, [&] {
           m.lock();
           m.unlock();
         }))
      cached.push_back(v);
    for (double v : per_op(blocks / 10 + 1, [&] {
           plain.lock();
           plain.unlock();
         }))
      baseline.push_back(v);
  }
  const bool still_cached = client.owner(m.name()).fencing_token ==
                            m.with_linger(std::chrono::seconds(60)).acquire(std::chrono::seconds(5)).fencing_token();
  client.release_cached();
  auto s = stats_of(cached), r = stats_of(baseline);
  auto out = line(engine, "relock", cached.size() * kBlock, s);
  out["std_mutex_p50_us"] = round2(r.p50 * 1000) / 1000;
  out["p50_ns"] = round2(s.p50 * 1000);
  out["std_mutex_p50_ns"] = round2(r.p50 * 1000);
  out["ratio_p50"] = round2(r.p50 > 0 ? s.p50 / r.p50 : 0);
  out["lease_kept"] = still_cached;
  return out;
}

nlohmann::json pingpong(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  if (!client.backend()->capabilities().multi_process) {
    return {{"backend", engine}, {"workload", "pingpong"}, {"skipped", "one process only"}};
  }
  ContendOptions options = client.options();
  Client other(open_backend(uri, &options), options);
  std::vector<double> on, off;
  for (int round = 0; round < 4; ++round) {  // interleaved halves
    for (double v : alternate(client, other, options.ttl, n / 4 + 1)) on.push_back(v);
    for (double v : alternate(client, other, std::chrono::milliseconds(0), n / 4 + 1)) off.push_back(v);
  }
  auto s_on = stats_of(on), s_off = stats_of(off);
  return {{"backend", engine},
          {"workload", "pingpong"},
          {"n", on.size()},
          {"caching_p50_us", round2(s_on.p50)},
          {"caching_p99_us", round2(s_on.p99)},
          {"no_caching_p50_us", round2(s_off.p50)},
          {"no_caching_p99_us", round2(s_off.p99)},
          {"ratio_p50", round2(s_off.p50 > 0 ? s_on.p50 / s_off.p50 : 0)}};
}

nlohmann::json remote_ask(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  if (!client.backend()->capabilities().multi_process) {
    return {{"backend", engine}, {"workload", "remote_ask"}, {"skipped", "one process only"}};
  }
  ContendOptions options = client.options();
  Client other(open_backend(uri, &options), options);
  const auto name = unique_name("remote_ask");
  auto cacher = client.mutex(name).with_linger(std::chrono::seconds(60));
  auto asker = other.mutex(name).with_linger(std::chrono::milliseconds(0));
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    cacher.lock();
    cacher.unlock();  // cached by the first client
    const auto start = Clock::now();
    auto hold = asker.acquire(std::chrono::seconds(30));
    samples.push_back(micros(Clock::now() - start));
    hold.unlock();
  }
  client.release_cached();
  return line(engine, "remote_ask", n, stats_of(samples));
}

}  // namespace simba::bench
