// Metrics and the event hook: what a Client counted, as a snapshot and as Prometheus' text,
// and every acquisition, release, loss, backend error and demand as it happens.
// Usage: example-metrics [URI] (default memory:). The README and docs/ quote the [regions].
#include <simba/simba.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  std::mutex printing;  // outlives the client: its hook prints until the client goes
  simba::Client client = simba::connect(argc > 1 ? argv[1] : "memory:");
  // [hook]
  client.label_mutexes(100);  // per-mutex series for the first 100 names; the rest as "(other)"
  client.on_event([&printing](const simba::Event& e) {  // one event thread, in order, never the locking thread
    std::scoped_lock lock(printing);
    std::cout << simba::to_string(e.kind) << " " << e.mutex << " token " << e.token;
    if (e.kind == simba::EventKind::lost) std::cout << " (" << simba::to_string(e.reason) << ")";
    if (e.kind == simba::EventKind::backend_error) std::cout << ": " << e.error;
    std::cout << "\n";
  });
  // [hook]
  auto orders = client.mutex("orders");
  for (int i = 0; i < 3; ++i) {
    std::scoped_lock guard(orders);  // one hold, then two cached re-locks
  }
  client.mutex("orders").acquire(5s).unlock();
  std::scoped_lock lock(printing);  // the hook prints too
  // [metrics]
  simba::MetricsSnapshot m = client.metrics();
  std::cout << "acquisitions " << m.acquisitions << ", cached re-locks " << m.cached_relocks << ", lost "
            << m.lost[static_cast<std::size_t>(simba::LostReason::stall)] << " by a stall\n";
  std::string text = simba::to_prometheus(m);  // serve it at /metrics
  // [metrics]
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("simba_mutex_acquisitions_total")) std::cout << line << "\n";
  }
}
