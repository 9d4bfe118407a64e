// simba-bench: the same workloads on any backend, each against the engine's own bare
// primitive measured in the same run. One JSON object per line on stdout.
//
//   simba-bench --backend URI --workload
//   cycle,handover,takeover,kill,scale,contended,async,semaphore,rwlock,relock,pingpong,remote_ask
//   [--n N]
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <thread>

#include "report.h"
#include "targets.h"
#include "workloads.h"

namespace simba::bench {
namespace {

int run(int argc, char** argv) {
  CLI::App app{"simba-bench: lock workloads against the engine's bare primitive; JSON lines"};
  std::string uri = "memory:";
  std::string workloads = "cycle,handover,takeover";
  std::size_t n = 0;
  int duration = 60;
  app.add_option("--backend", uri, "Backend URI (default memory:)");
  app.add_option(
      "--workload", workloads,
      "Comma-separated: cycle, handover, takeover, kill, scale, contended, parallel, async, semaphore, rwlock, "
      "relock, pingpong, remote_ask");
  app.add_option("--n", n,
                 "Samples per workload, or mutexes for scale (default: cycle 2000, handover 200, "
                 "takeover 10, kill 10, scale 10000, async 10000 requests on n/10 names, semaphore 1000, rwlock 1000; "
                 "contended runs 1, 4 "
                 "and 16 threads, parallel 1, 2 and 4)");
  app.add_option("--duration", duration, "Seconds the scale workload holds its mutexes (default 60)");
  int contended_seconds = 3;
  app.add_option("--contended-seconds", contended_seconds,
                 "Seconds per contended and parallel run and of the semaphore's throughput run (default 3)");
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
  std::cout << nlohmann::json {
    {"backend", engine}, {"workload", "env"}, {"uri", backend->describe()},
        {"cores", std::thread::hardware_concurrency()},
#if defined(__OPTIMIZE__)
        {"optimized", true}
#else
    {
      "optimized", false
    }
#endif
  }
  .dump() << std::endl;
  std::stringstream list(workloads);
  for (std::string workload; std::getline(list, workload, ',');) {
    nlohmann::json out;
    if (workload == "cycle")
      out = cycle(client, engine, n ? n : 2000);
    else if (workload == "handover")
      out = handover(client, engine, n ? n : 200);
    else if (workload == "takeover")
      out = takeover(client, engine, n ? n : 10);
    else if (workload == "kill")
      out = kill(client, uri, engine, n ? n : 10);
    else if (workload == "scale")
      out = scale(client, engine, n ? n : 10000, std::chrono::seconds(duration));
    else if (workload == "semaphore")
      out = semaphore(client, uri, engine, n ? n : 1000, std::chrono::seconds(contended_seconds));
    else if (workload == "rwlock")
      out = rwlock(client, uri, engine, n ? n : 1000);
    else if (workload == "relock")
      out = relock(client, engine, n ? n : 200000);
    else if (workload == "pingpong")
      out = pingpong(client, uri, engine, n ? n : 200);
    else if (workload == "remote_ask")
      out = remote_ask(client, uri, engine, n ? n : 100);
    else if (workload == "async")
      out = async_requests(client, engine, n ? n : 10000, n ? std::max<std::size_t>(n / 10, 1) : 1000,
                           std::chrono::seconds(30));
    else if (workload == "contended") {
      for (std::size_t threads : {1, 4, 16}) {
        auto out = contended(client, engine, threads, std::chrono::seconds(contended_seconds));
        judge(out);
        std::cout << out.dump() << std::endl;
      }
      continue;
    } else if (workload == "parallel") {
      double one = 0;
      for (std::size_t threads : {1, 2, 4}) {
        auto out = parallel(client, engine, threads, std::chrono::seconds(contended_seconds), one);
        if (threads == 1) one = out["holds_per_s"].get<double>();
        judge(out);
        std::cout << out.dump() << std::endl;
      }
      continue;
    } else
      throw Error(errc::invalid_argument, "unknown workload '" + workload +
                                              "'; accepted: cycle, handover, takeover, kill, scale, contended, "
                                              "parallel, async, semaphore, rwlock, relock, pingpong, remote_ask");
    judge(out);
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
