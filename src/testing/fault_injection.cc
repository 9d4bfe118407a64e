// The fault-injecting backend of the tests.
#include "simba/testing/fault_injection.h"

#include <thread>

#include "simba/error.h"

namespace simba::testing {

void FaultInjectingBackend::before_call(const char* what) {
  calls_.fetch_add(1);
  if (auto delay = delay_ms_.load(); delay > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  if (unreachable_.load()) {
    throw Error(errc::unavailable, std::string(what) + ": " + describe() + " is unreachable (injected fault)");
  }
  int pending = fail_next_.load();
  while (pending > 0 && !fail_next_.compare_exchange_weak(pending, pending - 1)) {
  }
  if (pending > 0) throw Error(errc::unavailable, std::string(what) + ": injected failure");
}

OwnerSnapshot FaultInjectingBackend::acquire(const std::string& mutex, const std::string& contender_id,
                                             std::chrono::milliseconds ttl, std::chrono::milliseconds transition) {
  before_call("acquire");
  return ForwardingBackend::acquire(mutex, contender_id, ttl, transition);
}

bool FaultInjectingBackend::release(const std::string& mutex, const std::string& contender_id) {
  before_call("release");
  return ForwardingBackend::release(mutex, contender_id);
}

OwnerSnapshot FaultInjectingBackend::read(const std::string& mutex) {
  before_call("read");
  return ForwardingBackend::read(mutex);
}

std::unique_ptr<Subscription> FaultInjectingBackend::watch(const std::string& mutex, const std::string& contender_id,
                                                           std::function<void(WatchEvent)> on_change) {
  return ForwardingBackend::watch(mutex, contender_id, [this, on_change = std::move(on_change)](WatchEvent event) {
    if (!unreachable_.load()) on_change(event);
  });
}

}  // namespace simba::testing
