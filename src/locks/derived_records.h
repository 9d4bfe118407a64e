// Records a primitive keeps beside its name (a semaphore's slots and line, a shared mutex's
// readers).
// Internal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "simba/backend.h"

namespace simba::internal {

// Throws Error(errc::invalid_argument) if `record`, the longest record that `what` (e.g.
// "semaphore 'payments'") keeps, is longer than the backend accepts, saying by how much the
// name must shrink.
void require_record_fits(const Backend& backend, const std::string& what, const std::string& record);

// The records' names: a semaphore's slots are Semaphore::slot_name(name, k, N), "<name>#<k>of<N>";
// a shared mutex keeps "<name>" (its gate, a writer's) and one reader record per reading
// process, reader_prefix(name) + 8 hex digits.
std::string reader_prefix(const std::string& name);
// A semaphore's line of waiting processes, "<name>#wait" (a mutex: its holder waits on the slots).
std::string line_name(const std::string& name);
// The prefix every derived record of `name` starts with ("<name>#").
std::string derived_prefix(const std::string& name);

// What a record is to the primitive `name`, read from its name.
struct DerivedRecord {
  enum class Kind { slot, reader, line };
  Kind kind = Kind::slot;
  unsigned slot = 0;     // a slot's: k
  unsigned permits = 0;  // a slot's: N
};
// nullopt if `record` is none of `name`'s derived records.
std::optional<DerivedRecord> derived_record(std::string_view name, std::string_view record);

}  // namespace simba::internal
