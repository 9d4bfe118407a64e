// The lock manager of one Client and its copies: its entries by mutex name, and what each
// entry contends with. Internal.
//
// A Client makes one table; copies of the Client (with_lock_options) share it. The table holds
// its entries weakly: an entry leaves the table when its last handle, holder and waiter are
// gone, and keeps the table alive while it lives.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/thread_annotations.h"
#include "core/service_core.h"

namespace simba::internal {

class LockEntry;

class LockTable : public std::enable_shared_from_this<LockTable> {
 public:
  // `context`: what every entry contends with, shared with the Client's services (its
  // telemetry never null).
  explicit LockTable(std::shared_ptr<const CoreContext> context) : context_(std::move(context)) {}

  const std::shared_ptr<const CoreContext>& context() const { return context_; }
  // The entry of `name`, made if there is none. `caches`: whether the handle asking for it
  // caches leases (LockOptions::linger > 0); a new entry's contender id says so
  // (MutexOwner::caching()). `contender_id`: empty for the table's one entry of the name (its
  // contender gets a host id); else an entry of its own that contends as that id (a Locker
  // given an id). Throws Error(errc::invalid_argument) for a name or id the backend cannot
  // hold.
  std::shared_ptr<LockEntry> entry(const std::string& name, bool caches, const std::string& contender_id = {});
  // Called by a dying entry: drops its slot unless a new entry took it already.
  void forget(const std::string& key) noexcept;
  // Entries alive (Client::lock_entries()).
  std::size_t size() const;
  // Gives back every cached lease of the entries; how many (Client::release_cached()).
  std::size_t release_cached() noexcept;
  // Holds the entries alive took from their cached leases' fast paths so far (metrics).
  std::uint64_t fast_relocks() const;

 private:
  std::vector<std::shared_ptr<LockEntry>> alive() const;

  const std::shared_ptr<const CoreContext> context_;
  mutable internal::AnnotatedMutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<LockEntry>> entries_ GUARDED_BY(mutex_);
};

}  // namespace simba::internal
