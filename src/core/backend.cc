// What the seam (simba/backend.h) defines out of line.
#include "simba/backend.h"

#include "simba/error.h"

namespace simba {

Administration& ForwardingBackend::target_administration() const {
  auto* administration = target_->administration();
  if (administration == nullptr) {
    throw Error(errc::unsupported, target_->describe() + " offers no administration (list, sweep, evict)");
  }
  return *administration;
}

}  // namespace simba
