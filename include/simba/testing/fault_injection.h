// simba/testing/fault_injection.h: a backend that fails on command, for tests of failure
// handling. Part of the simba::testing library (link simba::testing).
//
// Wraps any backend. Faults apply to acquire, release and read; watch and capabilities pass
// through (an unreachable engine's push channel is simply silent: no changes are forwarded).
// Thread-safe: faults may be switched while other threads use the backend.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "simba/backend.h"

namespace simba::testing {

class FaultInjectingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // The next `count` calls throw Error(errc::unavailable).
  void fail_next(int count) { fail_next_.store(count); }
  // Every call first sleeps `delay` (a slow network, or a stalled process).
  void set_delay(std::chrono::milliseconds delay) { delay_ms_.store(delay.count()); }
  // While unreachable, every call throws Error(errc::unavailable) and pushes are dropped.
  void set_unreachable(bool unreachable) { unreachable_.store(unreachable); }
  // Calls made so far (acquire + release + read), faulted or not.
  long calls() const { return calls_.load(); }

  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override;
  bool release(const std::string& mutex, const std::string& contender_id) override;
  OwnerSnapshot read(const std::string& mutex) override;
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override;

 private:
  void before_call(const char* what);

  std::atomic<int> fail_next_{0};
  std::atomic<long> delay_ms_{0};
  std::atomic<bool> unreachable_{false};
  std::atomic<long> calls_{0};
};

}  // namespace simba::testing
