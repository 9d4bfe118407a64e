// The lock manager: client.mutex(name). Threads, holds, futures and callbacks of one process
// share one remote contender per name; a cached lease is taken again with no backend call.
// Usage: example-mutex [URI] (default memory:). The README and docs/ quote the [regions].
#include <simba/simba.h>

#include <chrono>
#include <future>
#include <iostream>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
void use(std::uint64_t fencing_token) { std::cout << "writing with fencing token " << fencing_token << "\n"; }
void write(int batch) { std::cout << "batch " << batch << "\n"; }
}  // namespace

int main(int argc, char** argv) {
  simba::Client client = simba::connect(argc > 1 ? argv[1] : "memory:");
  // clang-format off
  // [basics]
  simba::Mutex orders = client.mutex("orders");  // cheap, copyable handle; thread-safe
  { std::scoped_lock guard(orders); /* ... */ }   // Lockable + TimedLockable, reentrant per thread
  if (orders.try_lock_for(2s)) { /* ... */ orders.unlock(); }

  simba::Hold hold = orders.acquire(5s);  // not bound to a thread; throws errc::timeout
  use(hold.fencing_token());
  std::stop_callback on_lost(hold.lost(), [] { /* lease lost or max_hold passed: stop writing */ });
  hold.unlock();  // or its destructor; never throws

  std::future<simba::Hold> f = orders.lock_async(5s);
  simba::Hold later = f.get();  // or the simba::Error (errc::timeout)
  later.unlock();
  orders.lock_async(5s, [](std::error_code ec, simba::Hold hold) {  // on the callback pool
    if (!ec) use(hold.fencing_token());                             // the hold ends with `hold`
  });
  simba::Hold bounded = orders.with_max_hold(30s).acquire(5s);  // revoked (lost()) after 30 s
  // [basics]
  // clang-format on
  bounded.unlock();

  // [caching]
  auto handle = client.mutex("orders");  // keep the handle: its entry keeps the cached lease
  for (int batch = 0; batch < 3; ++batch) {
    std::scoped_lock guard(handle);  // one remote acquire, then none
    write(batch);
  }
  auto plain = client.mutex("orders").with_linger(0ms);       // caching off for this handle
  auto no_cache = client.with_lock_options({.linger = 0ms});  // ... or for a whole client
  client.release_cached();                                    // give cached leases back now
  // [caching]

  // Four threads, one remote contender: they queue here, in order.
  std::vector<std::jthread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([orders, i]() mutable {
      std::scoped_lock guard(orders);
      std::cout << "thread " << i << " holds 'orders'\n";
    });
  }
  threads.clear();
  std::cout << "lock entries alive: " << client.lock_entries() << "\n";
}
