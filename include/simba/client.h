// simba/client.h: the entry point: one backend, its timing options, one runtime.
//
//   simba::Client client = simba::connect("sqlite:///var/lib/app/locks.db");
//   auto service = client.contend_service(my_contender);
//   service->start();
//
// A Client is a cheap, copyable handle; copies share the backend and the lock manager's
// entries (simba/mutex.h). Thread-safe.
//
// Lifespan and ownership: the backend and the runtime live as long as the last Client,
// service, Locker or Scheduler that uses them; services and Lockers may outlive the Client
// they were made from.
#pragma once

#include <memory>
#include <string>

#include "simba/backend.h"
#include "simba/contender.h"
#include "simba/metrics.h"
#include "simba/mutex.h"
#include "simba/options.h"
#include "simba/runtime.h"
#include "simba/semaphore.h"
#include "simba/service.h"
#include "simba/shared_mutex.h"

namespace simba {
class Client;
namespace internal {
class LockTable;
class RoundBatcher;
class Telemetry;
const std::shared_ptr<Telemetry>& telemetry_of(const Client& client);
}  // namespace internal

class Client {
 public:
  // Throws Error(errc::invalid_argument) if `options` are invalid.
  explicit Client(std::shared_ptr<Backend> backend, ContendOptions options = {},
                  std::shared_ptr<Runtime> runtime = Runtime::shared());

  // A service contending for contender->mutex() as contender->contender_id(). Not started.
  // Throws Error(errc::invalid_argument) for a blank name or id, or one the backend cannot hold.
  std::unique_ptr<MutexContendService> contend_service(std::shared_ptr<MutexContender> contender) const;
  std::unique_ptr<MutexContendService> contend_service(std::shared_ptr<MutexContender> contender,
                                                       const ContendOptions& options) const;
  // A service reporting owner changes of retriever->mutex(). Not started.
  std::unique_ptr<MutexRetrievalService> retrieval_service(std::shared_ptr<MutexRetriever> retriever) const;

  // The current owner, read once (no owner: MutexOwner::none() with the last fencing token).
  // Throws Error(errc::invalid_argument) for a blank name, errc::unavailable if the backend
  // cannot be reached.
  MutexOwner owner(const std::string& mutex) const;
  // The same, with the backend clock's reading when it was judged: lease times compare with
  // `now`, never with this host's clock.
  OwnerSnapshot snapshot(const std::string& mutex) const;
  // Releases `contender_id`'s lease on `mutex` if it still holds it (a late release never
  // touches a successor's lease); true if it did. For a process that must give a lease back
  // outside its service or Locker, e.g. from a signal handler thread. Throws like owner().
  bool release(const std::string& mutex, const std::string& contender_id) const;
  // The backend, for messages: scheme, host, path; never a password.
  std::string describe() const;

  // The lock manager's handle on `mutex` (simba/mutex.h): every handle of one name made by
  // this Client or its copies shares one entry, and so one remote contender. Cheap; makes no
  // backend call.
  // Throws Error(errc::invalid_argument) for a blank name or one the backend cannot hold.
  Mutex mutex(const std::string& mutex) const;
  // A copy of this client whose Mutex handles use `options` (max_hold, max_local_handovers,
  // linger); it shares this client's entries.
  // Throws Error(errc::invalid_argument) if `options` are invalid.
  Client with_lock_options(LockOptions options) const;
  // A counting semaphore of `permits` slots named `name` (simba/semaphore.h); its slots are
  // lock entries of this client, with its max_hold and max_local_handovers, never cached.
  // Cheap; makes no backend call.
  // Throws Error(errc::invalid_argument) for a blank name, or permits outside 1 ..
  // Semaphore::kMaxPermits.
  Semaphore semaphore(const std::string& name, int permits) const;
  // A read-write lock named `name` (simba/shared_mutex.h); its records are lock entries of
  // this client, with its max_hold and max_local_handovers, never cached. Cheap; makes no
  // backend call.
  // Throws Error(errc::invalid_argument) for a blank name, errc::unsupported if the backend
  // offers no Administration (a writer lists the readers' records).
  SharedMutex shared_mutex(const std::string& name) const;
  const LockOptions& lock_options() const { return lock_options_; }
  // Entries the lock manager keeps for this client and its copies: one per name with a
  // handle, a holder or a waiter.
  std::size_t lock_entries() const;
  // Gives back now every lease the lock manager keeps cached (LockOptions::linger) for this
  // client and its copies; holds and waiters go on. Call it before a planned exit:
  // a lease left cached by a process that ends lingers until it expires. Returns how many
  // leases it gave back. Blocks for one release per cached lease; never throws (failures are
  // logged; the lease then expires).
  std::size_t release_cached() const noexcept;

  // What this client and its copies counted so far (simba/metrics.h): always on, cheap to
  // take (a scrape walks the lock manager's entries once). simba::to_prometheus renders it.
  MetricsSnapshot metrics() const;
  // Per-mutex series (MetricsSnapshot::mutexes) for the first `at_most` names that get a lock
  // entry or a service from now on; the names after them are counted together under
  // kOtherMutexes, so any number of mutexes keeps a scrape bounded. 0 (the default): none.
  void label_mutexes(std::size_t at_most) const;
  // Delivers what happens (acquired, released, lost with its reason, backend errors, demands)
  // to `hook` on one event thread of this client's, in order, off the locking threads (see
  // EventHook). Replaces the hook installed before; nullptr removes it.
  void on_event(EventHook hook) const;

  const std::shared_ptr<Backend>& backend() const { return backend_; }
  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }
  const ContendOptions& options() const { return options_; }

 private:
  friend class Locker;
  friend const std::shared_ptr<internal::Telemetry>& internal::telemetry_of(const Client& client);
  // mutex(), with the entry of its own that contends as `contender_id` if that is not empty.
  Mutex mutex_as(const std::string& mutex, const std::string& contender_id) const;

  std::shared_ptr<Backend> backend_;
  ContendOptions options_;
  std::shared_ptr<Runtime> runtime_;
  LockOptions lock_options_;
  std::shared_ptr<internal::Telemetry> telemetry_;   // shared by copies
  std::shared_ptr<internal::LockTable> locks_;       // shared by copies
  std::shared_ptr<internal::RoundBatcher> batcher_;  // shared by copies; null: the backend offers no Batches
};

}  // namespace simba
