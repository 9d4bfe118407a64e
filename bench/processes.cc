// Workloads about processes: a `simba lock` process killed while it holds the mutex, and one
// process holding many mutexes.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "report.h"
#include "workloads.h"

namespace simba::bench {
namespace {

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

}  // namespace

using namespace std::chrono_literals;

// The owner is a `simba lock` process (the CLI beside this binary) that gets SIGKILLed while
// it holds the mutex; measured from the kill to the waiter's on_acquired. Its bound is the
// lease the engine granted (`lease_us`: ttl 200ms + transition 100ms here; on ZooKeeper the
// holder asks for 16 s, which the session caps at 9/10 of the session timeout).
nlohmann::json kill(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  const auto cli = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "simba";
  if (!std::filesystem::exists(cli)) throw Error(errc::unavailable, "kill workload needs " + cli.string());
  // Where a lease does not lapse by time alone but ends with its holder's session (ZooKeeper),
  // a lease longer than the session, so that the session timeout (which caps it) is what the
  // takeover waits for.
  const bool session_bound = !client.backend()->capabilities().lease_lapses_by_time;
  ContendOptions options = client.options();
  options.ttl = session_bound ? 10s : 200ms;
  options.transition = session_bound ? 6s : 100ms;
  Client fast(client.backend(), options, client.runtime());
  std::vector<double> samples;
  EpochMillis granted_lease_ms = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string mutex = "bench/kill/" + contender_id::uuid();
    std::vector<std::string> args = {cli.string(),   "lock",
                                     "--backend",    uri,
                                     "--ttl",        format_duration(options.ttl),
                                     "--transition", format_duration(options.transition),
                                     mutex,          "--",
                                     "sleep",        "600"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: the kill takes its child too
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw Error(errc::unavailable, "cannot start " + cli.string());
    auto deadline = Clock::now() + 30s;
    while (fast.owner(mutex).empty()) {
      if (Clock::now() > deadline)
        throw Error(errc::timeout, "benchmark stuck waiting for the simba lock process to own");
      std::this_thread::sleep_for(5ms);
    }
    // The lease the engine granted the process (ZooKeeper caps it by the session timeout).
    const MutexOwner held = fast.owner(mutex);
    granted_lease_ms = held.transition_at - held.acquired_at;
    auto b = std::make_shared<Stamp>(mutex);
    auto waiter = fast.contend_service(b);
    waiter->start();
    await([&] { return !waiter->after_owner().empty(); }, "the waiter to see the owner");
    if (b->acquired_at()) throw Error(errc::internal, "the waiter owned while the simba lock process held the mutex");
    ::kill(-pid, SIGKILL);
    auto killed = Clock::now();
    waitpid(pid, nullptr, 0);
    deadline = Clock::now() + 60s;
    while (!b->acquired_at() && Clock::now() < deadline) std::this_thread::sleep_for(100us);
    if (!b->acquired_at()) throw Error(errc::timeout, "benchmark stuck waiting for the takeover after a kill");
    samples.push_back(micros(*b->acquired_at() - killed));
    waiter->stop();
  }
  auto out = line(engine, "kill", n, stats_of(samples));
  out["lease_us"] = granted_lease_ms * 1000;
  // How long past the lease the takeover came, at p99 (the engine's expiry and wake-up).
  out["p99_over_lease_us"] = out["p99_us"].get<double>() - static_cast<double>(granted_lease_ms) * 1000;
  return out;
}

// The round trips a Client's rounds took so far: rounds sent alone, plus the batches that
// carried the others.
std::uint64_t round_trips(const MetricsSnapshot& metrics) {
  std::uint64_t rounds = 0;
  for (auto op : {BackendOp::acquire, BackendOp::renew})
    rounds += metrics.round_trip[static_cast<std::size_t>(op)].count;
  return rounds - metrics.batched_rounds + metrics.batches;
}

// The leases lost so far, by why ({} for none).
nlohmann::json lost_reasons(const MetricsSnapshot& metrics) {
  auto out = nlohmann::json::object();
  for (std::size_t r = 0; r < kLostReasons; ++r) {
    if (metrics.lost[r] != 0) out[to_string(static_cast<LostReason>(r))] = metrics.lost[r];
  }
  return out;
}

// One process holds `n` mutexes (ttl 5s, transition 1s) for `duration`: how long taking them
// all took, the threads it needs, resident memory per held mutex, round trips per ttl while
// holding (renewals; batched where the engine takes batches), and renewals missed (an owner
// that lost its lease).
nlohmann::json scale(const Client& client, const std::string& engine, std::size_t n, std::chrono::seconds duration) {
  ContendOptions options = client.options();
  options.ttl = 5s;
  options.transition = 1s;
  Client held(client.backend(), options, client.runtime());
  // Every lease lost, by the Client's count: a contender hears the latest state only, so a
  // lease lost and won again before its callbacks ran would not reach lost().
  const auto lost_leases = [&] {
    const auto metrics = held.metrics();
    return static_cast<long>(std::accumulate(metrics.lost.begin(), metrics.lost.end(), std::uint64_t{0}));
  };
  const auto begun = Clock::now();
  const long rss_before = resident_bytes();
  std::atomic<long> acquired{0}, lost{0};
  std::mutex latency_mutex;
  std::vector<double> latencies;  // of each mutex's first acquisition
  std::vector<bool> taken_once(n) /* GUARDED_BY(latency_mutex) */;
  std::vector<Clock::time_point> started(n);  // GUARDED_BY(latency_mutex) once the first contender starts
  std::vector<std::unique_ptr<MutexContendService>> services;
  services.reserve(n);
  // What every contender's callback updates. The callback captures only it and its index, so
  // std::function keeps it inline: the harness adds no allocation of its own per mutex.
  const auto on_acquired = [&](std::size_t i) {
    acquired.fetch_add(1);
    std::lock_guard lock(latency_mutex);
    if (!taken_once[i]) latencies.push_back(micros(Clock::now() - started[i]));
    taken_once[i] = true;
  };
  const std::string prefix = "bench/scale/" + contender_id::uuid() + "/";
  for (std::size_t i = 0; i < n; ++i) {
    {
      std::lock_guard lock(latency_mutex);
      started[i] = Clock::now();
    }
    auto contender = make_contender(
        prefix + std::to_string(i), [&on_acquired, i](const MutexState&) { on_acquired(i); },
        [&](const MutexState&) { lost.fetch_add(1); });
    services.push_back(held.contend_service(contender));
    services.back()->start();
  }
  try {
    // At least 30 s, and 1 ms a mutex: ZooKeeper takes 100,000 in about a minute here.
    const auto timeout = std::max<std::chrono::milliseconds>(30s, std::chrono::milliseconds(n));
    // A lease lost meanwhile is taken again: held is acquisitions less losses.
    await([&] { return acquired.load() - lost.load() == static_cast<long>(n); }, "every mutex to be held", timeout,
          1ms);
  } catch (const Error& e) {
    throw Error(errc::timeout, std::string(e.what()) + " (" + std::to_string(acquired.load() - lost.load()) + " of " +
                                   std::to_string(n) + " held, " + std::to_string(lost_leases()) +
                                   " lost: " + lost_reasons(held.metrics()).dump() + ")");
  }
  const auto all_held = Clock::now() - begun;
  const long lost_taking = lost_leases();
  const long rss_held = resident_bytes();
  const int threads = thread_count();
  const auto trips_before = round_trips(held.metrics());
  const auto holding_since = Clock::now();
  std::this_thread::sleep_for(duration);
  const auto trips = round_trips(held.metrics()) - trips_before;
  const double held_s = std::chrono::duration<double>(Clock::now() - holding_since).count();
  const long missed = lost_leases();
  std::size_t owners = 0;
  for (auto& service : services) owners += service->is_owner();
  const auto lost_by_reason = lost_reasons(held.metrics());
  const auto stopping_since = Clock::now();
  for (auto& service : services) service->stop();
  const auto stopped = Clock::now() - stopping_since;
  const long lost_stopping = lost_leases() - missed;
  const auto destroying_since = Clock::now();
  services.clear();
  const auto destroyed = Clock::now() - destroying_since;
  std::lock_guard lock(latency_mutex);
  auto out = line(engine, "scale", n, stats_of(latencies));
  out["duration_s"] = duration.count();
  out["ttl_ms"] = options.ttl.count();
  out["acquire_all_ms"] = round2(std::chrono::duration<double, std::milli>(all_held).count());
  out["round_trips_per_ttl"] =
      round2(static_cast<double>(trips) / held_s * std::chrono::duration<double>(options.ttl).count());
  out["threads"] = threads;
  out["rss_per_mutex_bytes"] = (rss_held - rss_before) / static_cast<long>(n);
  out["missed_renewals"] = missed;
  out["missed_while_acquiring"] = lost_taking;
  out["lost_by_reason"] = lost_by_reason;
  out["owners_at_end"] = owners;
  // Stopping releases every lease, one at a time: a lease that ran out meanwhile is lost too.
  out["stop_all_ms"] = round2(std::chrono::duration<double, std::milli>(stopped).count());
  out["lost_while_stopping"] = lost_stopping;
  // Then destroying the stopped services, one after another.
  out["destroy_all_ms"] = round2(std::chrono::duration<double, std::milli>(destroyed).count());
  return out;
}

}  // namespace simba::bench
