// A counting semaphore over the fleet: client.semaphore(name, permits). Eight workers call a
// payment API that takes at most three callers at once; every process that uses the name
// "payments" with 3 permits shares the same three. Then a read-write lock:
// client.shared_mutex(name).
// Usage: example-semaphore [URI] (default memory:). The README quotes the [region].
#include <simba/simba.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <stop_token>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
std::atomic<int> calling{0}, most{0};
void call_payment_api(std::uint64_t fencing_token) {
  const int now = ++calling;
  int seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {
  }
  (void)fencing_token;  // pass it on: the API can refuse a caller whose permit was taken over
  std::this_thread::sleep_for(20ms);
  --calling;
}
}  // namespace

int main(int argc, char** argv) {
  simba::Client client = simba::connect(argc > 1 ? argv[1] : "memory:");
  std::vector<std::thread> workers;
  for (int i = 0; i < 8; ++i) {
    workers.emplace_back([&client] {
      // clang-format off
      // [semaphore]
      simba::Semaphore pool = client.semaphore("payments", 3);  // at most 3 permits held at once, fleet-wide
      simba::Permit p = pool.acquire(5s);                       // throws simba::Error(errc::timeout)
      std::stop_callback on_lost(p.lost(), [] { /* the lease behind the permit was lost: stop */ });
      call_payment_api(p.fencing_token());                      // the token of its slot, p.slot()
      p.release();                                              // or its destructor; never throws
      // [semaphore]
      // clang-format on
    });
  }
  for (auto& worker : workers) worker.join();
  simba::Semaphore pool = client.semaphore("payments", 3);
  simba::Permit first = pool.try_acquire();  // one attempt per slot, no waiting: empty if none free
  std::future<simba::Permit> next = pool.acquire_async(5s);
  // clang-format off
  // [shared_mutex]
  simba::SharedMutex config = client.shared_mutex("config");  // many readers or one writer, fleet-wide
  { std::shared_lock reader(config); /* read the config */ }   // readers share it
  { std::unique_lock writer(config); /* reload it */ }         // a writer waits for the readers inside
  simba::SharedHold read = config.acquire_shared(5s);         // thread-independent; fencing_token():
  std::cout << "reading the write of token " << read.fencing_token() << "\n";  // the last write's
  read.unlock();
  simba::SharedHold write = config.acquire(5s);
  write.downgrade();                                           // a writer may become a reader
  // [shared_mutex]
  // clang-format on
  std::cout << "8 calls, at most " << most.load() << " at once; a try got slot " << first.slot() << ", the next slot "
            << next.get().slot() << "\n";
  return most.load() <= 3 ? 0 : 1;
}
