// The lock manager from Asio coroutines: three tasks on one thread take "orders" in turn, then
// share the 2 permits of the semaphore "payments"; no thread blocks while they wait.
// Usage: example-coroutine [URI] (default memory:).
#include <simba/asio.h>
#include <simba/simba.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <iostream>

using namespace std::chrono_literals;

// [coroutine]
asio::awaitable<void> work(simba::Mutex orders, int id) {
  try {
    simba::Hold hold = co_await simba::async_lock(orders, 5s, asio::use_awaitable);
    std::cout << "task " << id << " holds '" << hold.mutex() << "', token " << hold.fencing_token() << "\n";
    asio::steady_timer pause(co_await asio::this_coro::executor, 50ms);
    co_await pause.async_wait(asio::use_awaitable);
    if (hold.lost().stop_requested()) std::cout << "task " << id << " lost the lease\n";
  } catch (const std::system_error& e) {  // simba::errc::timeout, or the backend's error
    std::cerr << "task " << id << ": " << e.what() << "\n";
  }
}
// [coroutine]

// [coroutine_permit]
asio::awaitable<void> pay(simba::Semaphore payments, int id) {
  simba::Permit permit = co_await simba::async_acquire(payments, 5s, asio::use_awaitable);
  std::cout << "task " << id << " holds permit " << permit.slot() << " of '" << permit.semaphore() << "'\n";
  asio::steady_timer pause(co_await asio::this_coro::executor, 50ms);
  co_await pause.async_wait(asio::use_awaitable);
}  // the permit goes back with `permit`
// [coroutine_permit]

int main(int argc, char** argv) {
  simba::Client client = simba::connect(argc > 1 ? argv[1] : "memory:");
  asio::io_context io;
  for (int id = 1; id <= 3; ++id) asio::co_spawn(io, work(client.mutex("orders"), id), asio::detached);
  io.run();
  simba::Semaphore payments = client.semaphore("payments", 2);
  for (int id = 1; id <= 3; ++id) asio::co_spawn(io, pay(payments, id), asio::detached);
  io.restart();
  io.run();
}
