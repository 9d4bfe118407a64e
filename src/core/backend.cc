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

}  // namespace simba
