// Workloads within one process: a lock cycle against the engine's bare primitive, handover
// from a release, takeover after an owner vanished.
#include <stdexcept>

#include "report.h"
#include "simba/testing/fault_injection.h"
#include "workloads.h"

namespace simba::bench {

using namespace std::chrono_literals;

// Locker acquire + release, interleaved in blocks with the raw primitive so both see the
// same machine conditions. // The baseline is the engine's own (Backend::raw_probe(), which every engine here offers),
// run on the backend's own connection: on a small VM which core a server process wakes on moves a round trip by tens of
// microseconds, and that differs from one connection to the next.
nlohmann::json cycle(const Client& client, const std::string& engine, std::size_t n) {
  Locker locker("bench/cycle/" + contender_id::uuid(), client);
  auto* raw = client.backend()->raw_probe();
  for (int i = 0; i < 50; ++i) {  // warm up
    locker.acquire();
    locker.unlock();
    if (raw) raw->raw_once();
    if (raw) (void)raw->fenced_once();
  }
  std::vector<double> samples, raw_samples, fenced_samples;
  samples.reserve(n);
  // Blocks of each, the order swapped every block: whatever runs right after the other
  // (e.g. a database backend process that has been idle) pays a cost the other does not.
  constexpr std::size_t kBlock = 100;
  auto run_cycles = [&] {
    for (std::size_t i = 0; i < kBlock && samples.size() < n; ++i) {
      auto start = Clock::now();
      locker.acquire();
      locker.unlock();
      samples.push_back(micros(Clock::now() - start));
    }
  };
  // The engine's least fenced cycle too where the primitive issues no token (Redis), in turn.
  auto run_raw = [&] {
    for (std::size_t i = 0; raw && i < kBlock && raw_samples.size() < n; ++i) raw_samples.push_back(raw->raw_once());
    for (std::size_t i = 0; raw && i < kBlock && fenced_samples.size() < n; ++i) {
      const auto took = raw->fenced_once();
      if (!took) break;
      fenced_samples.push_back(*took);
    }
  };
  // The engine's own acquire + release, called on the Backend with no library above it (no
  // Locker, lock entry or contender): what of the cycle is the engine's protocol, and what the
  // layers above it add. A name and contender id of its own, released every time.
  const std::string engine_mutex = "bench/cycle-engine/" + contender_id::uuid();
  const std::string engine_id = contender_id::uuid();
  const auto ttl = client.options().ttl, transition = client.options().transition;
  Backend& engine_backend = *client.backend();
  std::vector<double> engine_samples;
  auto run_engine = [&] {
    for (std::size_t i = 0; i < kBlock && engine_samples.size() < n; ++i) {
      auto start = Clock::now();
      const auto owner = engine_backend.acquire(engine_mutex, engine_id, ttl, transition).owner;
      const bool released = engine_backend.release(engine_mutex, engine_id);
      engine_samples.push_back(micros(Clock::now() - start));
      if (!owner.is_owner(engine_id) || !released) {
        throw std::runtime_error("the engine's own cycle did not take and give back a free mutex (owner '" +
                                 owner.owner_id + "')");
      }
    }
  };
  // What one steady_clock read costs in this run (a VM's can move by 2x from minute to minute):
  // the library reads the clock 5 times a cycle, so on a fast engine it is a large share.
  std::vector<double> clock_samples;
  auto run_clock = [&] {
    constexpr int kReads = 1000;
    const auto start = Clock::now();
    for (int i = 0; i < kReads; ++i) (void)Clock::now();  // a call into libstdc++: not elided
    clock_samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kReads);
  };
  for (bool cycle_first = true; samples.size() < n; cycle_first = !cycle_first) {
    if (cycle_first) {
      run_cycles();
      run_engine();
      run_raw();
    } else {
      run_raw();
      run_engine();
      run_cycles();
    }
    run_clock();
  }
  auto out = line(engine, "cycle", n, stats_of(samples));
  out["clock_read_ns"] = round2(stats_of(clock_samples).p50);
  const auto engine_stats = stats_of(engine_samples);
  out["engine_p50_us"] = round2(engine_stats.p50);
  out["engine_ratio_p50"] = round2(out["p50_us"].get<double>() / engine_stats.p50);  // the layers above it
  const auto raw_stats = stats_of(raw_samples);
  if (raw) {
    out["raw_p50_us"] = round2(raw_stats.p50);
    out["raw_p99_us"] = round2(raw_stats.p99);
    out["ratio_p50"] = round2(out["p50_us"].get<double>() / raw_stats.p50);
  }
  if (!fenced_samples.empty()) {
    const auto fenced = stats_of(fenced_samples);
    out["fenced_p50_us"] = round2(fenced.p50);
    out["fenced_ratio_p50"] = round2(out["p50_us"].get<double>() / fenced.p50);  // the protocol's cost past the token's
    if (raw) out["fenced_over_raw"] = round2(fenced.p50 / raw_stats.p50);
  }
  return out;
}

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
    auto faulty = std::make_shared<simba::testing::FaultInjectingBackend>(client.backend());
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

}  // namespace simba::bench
