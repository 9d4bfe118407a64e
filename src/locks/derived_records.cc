// Records a primitive keeps beside its name.
#include "locks/derived_records.h"

#include "simba/error.h"

namespace simba::internal {

void require_record_fits(const Backend& backend, const std::string& what, const std::string& record) {
  const auto capabilities = backend.capabilities();
  const auto most = capabilities.max_mutex_bytes;
  if (most == 0 || record.size() <= most) return;
  throw Error(errc::invalid_argument, what + ": its records ('" + record + "', " + std::to_string(record.size()) +
                                          " bytes) are longer than " + capabilities.engine + " accepts (" +
                                          std::to_string(most) + "): shorten the name by " +
                                          std::to_string(record.size() - most));
}

}  // namespace simba::internal
