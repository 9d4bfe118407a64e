// What the seam (simba/backend.h) defines out of line.
#include "simba/backend.h"

#include "simba/error.h"

namespace simba {

Administration& administration_of(Backend& backend) {
  auto* administration = backend.administration();
  if (administration == nullptr) {
    throw Error(errc::unsupported, backend.describe() + " offers no administration (list, sweep, evict)");
  }
  return *administration;
}

MutexListing Administration::list_derived(const std::string& name, std::size_t limit) {
  const std::string prefix = name + "#";
  MutexListing listing = list(prefix, limit);
  std::erase_if(listing.records, [&](const MutexRecord& record) {
    return record.mutex.find('#', prefix.size()) != std::string::npos;  // derived from another name
  });
  return listing;
}

}  // namespace simba
