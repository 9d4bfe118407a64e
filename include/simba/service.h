// simba/service.h: services that run the contention protocol for one mutex.
//
// A MutexRetrievalService watches who owns a mutex without contending; a MutexContendService
// also contends for it on behalf of one contender. Both are made by a Client.
//
// Lifecycle (compare-and-set; anything else is Error(errc::failed_precondition)):
//
//   INITIAL --start()--> STARTING --> RUNNING --stop()--> STOPPING --> INITIAL
//
// Each start() begins a new generation: results of an earlier generation are dropped, except
// that a release is still applied. stop() releases the remote lease and, if this contender
// owned the mutex, delivers on_released before it returns (when stop() is called from inside
// a callback of the same service, on_released runs right after that callback returns). A
// round in flight (a renewal, an attempt) ends first, so no lease of this contender is left
// once stop() returns; from inside a callback that round's own end gives back what it got.
// On a backend error an owner is revoked locally at once (on_released) and the service
// retries with exponential backoff and jitter. Destroying a running service stops it.
// Lifespan: a service keeps its backend, runtime and contender alive and may outlive the
// Client that made it.
// All methods are thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "simba/owner.h"

namespace simba {

// Lifecycle of a service: INITIAL -> STARTING -> RUNNING -> STOPPING -> INITIAL.
enum class ServiceStatus { initial, starting, running, stopping };

const char* to_string(ServiceStatus status) noexcept;
inline bool is_active(ServiceStatus status) noexcept {
  return status == ServiceStatus::starting || status == ServiceStatus::running;
}

class MutexRetrievalService {
 public:
  virtual ~MutexRetrievalService() = default;

  virtual ServiceStatus status() const = 0;
  bool running() const { return is_active(status()); }
  virtual const std::string& mutex() const = 0;
  // The last change delivered (or being delivered) to the retriever.
  virtual MutexState mutex_state() const = 0;
  MutexOwner before_owner() const { return mutex_state().before; }
  MutexOwner after_owner() const { return mutex_state().after; }
  bool has_owner() const { return !after_owner().empty(); }

  virtual void start() = 0;
  virtual void stop() = 0;
  // Stops if running. Never throws.
  virtual void close() noexcept = 0;
};

class MutexContendService : public MutexRetrievalService {
 public:
  virtual const std::string& contender_id() const = 0;
  // Time-aware: true only while this contender owns the mutex and, by this process's
  // monotonic clock, less than ttl + transition has passed since the winning request was
  // sent. A stalled or partitioned owner turns false before anyone else can win.
  virtual bool is_owner() const = 0;
  // is_owner() and less than ttl has passed since the winning request was sent.
  virtual bool is_in_ttl() const = 0;
  // The fencing token of this contender's ownership while is_owner(); else 0.
  virtual std::uint64_t fencing_token() const = 0;
};

}  // namespace simba
