// The lock manager's entries of one backend, by mutex name. Internal.
//
// One table per backend object in the process (found through a process-wide map), one entry
// per name in it; the table holds entries weakly: an entry leaves the table when its last
// handle, holder and waiter are gone.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "simba/client.h"

namespace simba::internal {

class LockEntry;

class LockTable : public std::enable_shared_from_this<LockTable> {
 public:
  // The table of `backend` (made on first use).
  static std::shared_ptr<LockTable> of(const std::shared_ptr<Backend>& backend);
  // Entries alive for `backend` (0 if it has no table).
  static std::size_t count(const std::shared_ptr<Backend>& backend);
  // Gives back every cached lease of `backend`'s entries; how many (Client::release_cached()).
  static std::size_t release_cached(const std::shared_ptr<Backend>& backend) noexcept;

  explicit LockTable(const Backend* backend) : backend_(backend) {}
  ~LockTable();

  // The entry of `name`, made with `client`'s options if there is none.
  std::shared_ptr<LockEntry> entry(const std::string& name, const Client& client);
  // Called by a dying entry: drops its slot unless a new entry took it already.
  void forget(const std::string& name) noexcept;
  std::size_t size() const;

 private:
  const Backend* const backend_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<LockEntry>> entries_;
};

}  // namespace simba::internal
