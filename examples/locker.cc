// Locker: block until this process owns "orders", work, release on scope exit.
#include <simba/simba.h>

#include <iostream>
#include <mutex>

int main() {
  // [locker]
  simba::Client client = simba::connect("sqlite:///tmp/simba-example.db");

  simba::Locker locker("orders", client);
  try {
    locker.acquire(std::chrono::seconds(10));  // throws simba::Error(errc::timeout)
  } catch (const simba::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cout << "holding 'orders' with fencing token " << locker.fencing_token() << "\n";
  if (locker.lease_token().stop_requested()) return 1;  // the lease was lost: stop working
  locker.close();                                       // or let the destructor release

  // Locker is TimedLockable: the standard guards work.
  {
    std::unique_lock guard(locker);
    std::cout << "holding again, token " << locker.fencing_token() << "\n";
  }
  if (std::unique_lock guard(locker, std::chrono::milliseconds(500)); guard.owns_lock()) {
    std::cout << "won within 500ms\n";
  }
  // [locker]
}
