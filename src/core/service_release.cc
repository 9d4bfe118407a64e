// Giving a lease back: the release of a stopping contender, and the end of a core.
#include <chrono>
#include <system_error>
#include <thread>

#include "base/log.h"
#include "core/service_core.h"
#include "runtime/runtime_internal.h"
#include "simba/error.h"

namespace simba::internal {

void ServiceCore::release_remote(const char* why) noexcept {
  // A release is idempotent (only the owner's own lease goes), so one that failed on a broken
  // connection (reset, timed out) is sent again, twice at most, on a new one.
  for (int attempt = 1;; ++attempt) {
    try {
      backend_->release(mutex(), contender_->contender_id());
      return;
    } catch (const std::system_error& e) {
      if (attempt < 3 && e.code() == make_error_code(errc::unavailable)) continue;
      log_warn("mutex '" + mutex() + "': could not release the lease of " + contender_id() + " on " + why + " (" +
               e.what() + "); it expires by itself after ttl + transition");
      return;
    } catch (const std::exception& e) {
      log_warn("mutex '" + mutex() + "': releasing the lease of " + contender_id() + ": " + e.what());
      return;
    }
  }
}

void release_core(std::shared_ptr<ServiceCore>& core) noexcept {
  if (!core) return;
  core->close();
  if (!on_runtime_thread()) {
    try {
      if (core->delivers_notifications()) core->flush();  // queued notifications drop their references
    } catch (...) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (core.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  core.reset();
}

}  // namespace simba::internal
