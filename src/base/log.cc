// Logging through spdlog; the level comes from $SIMBA_LOG (debug, info, warn, error, off).
#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace simba::internal {
namespace {

// Created once and never destroyed, and not in spdlog's registry: threads that outlive main()
// (a detached runtime thread, a backend's listener finishing) may still log while static
// destructors run.
spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto* created = new spdlog::logger("simba", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    const char* level = std::getenv("SIMBA_LOG");
    created->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return created;
  }();
  return *instance;
}

}  // namespace

bool log_debug_enabled() { return logger().should_log(spdlog::level::debug); }
void log_debug(const std::string& message) { logger().debug(message); }
void log_info(const std::string& message) { logger().info(message); }
void log_warn(const std::string& message) { logger().warn(message); }
void log_error(const std::string& message) { logger().error(message); }

}  // namespace simba::internal
