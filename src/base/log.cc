// Logging through spdlog; the level comes from $SIMBA_LOG (debug, info, warn, error, off); the
// lines go to stderr or to the application's sink (simba/log.h).
#include "base/log.h"

#include <spdlog/sinks/base_sink.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "simba/log.h"

namespace simba::internal {
namespace {

// Lines go to the application's sink when it set one (simba::set_log_sink), else to stderr.
class SwitchSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set(LogSink sink) {
    std::lock_guard lock(base_sink<std::mutex>::mutex_);
    sink_ = std::move(sink);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!sink_) {
      stderr_.log(msg);
      return;
    }
    LogLevel level = LogLevel::error;
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug: level = LogLevel::debug; break;
      case spdlog::level::info: level = LogLevel::info; break;
      case spdlog::level::warn: level = LogLevel::warn; break;
      default: break;
    }
    try {
      sink_(level, std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {
      // A throwing sink loses its line; simba goes on.
    }
  }
  void flush_() override { stderr_.flush(); }

 private:
  LogSink sink_;
  spdlog::sinks::stderr_color_sink_st stderr_;
};

SwitchSink& switch_sink() {
  static auto* instance = new SwitchSink();  // never destroyed, like the logger
  return *instance;
}

// Created once and never destroyed, and not in spdlog's registry: threads that outlive main()
// (a detached runtime thread, a backend's listener finishing) may still log while static
// destructors run.
spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto* created = new spdlog::logger("simba", std::shared_ptr<spdlog::sinks::sink>(&switch_sink(), [](auto*) {}));
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

namespace simba {
void set_log_sink(LogSink sink) { internal::switch_sink().set(std::move(sink)); }
}  // namespace simba

namespace simba::internal {

void log_warn_once_per_host(const std::string& topic, const std::string& message) {
  std::filesystem::path folder;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    folder = std::filesystem::path(state) / "simba" / "warned";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    folder = std::filesystem::path(home) / ".local" / "state" / "simba" / "warned";
  }
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a: the same name in every build
  for (unsigned char c : topic) hash = (hash ^ c) * 1099511628211ull;
  char name[17];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash));
  std::error_code ec;
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  bool warned_before = false;
  if (!folder.empty() && !ec) {
    const int fd = ::open((folder / name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    warned_before = fd < 0 && errno == EEXIST;
  }
  if (warned_before) {
    log_info(message);
  } else {
    log_warn(message);
  }
}

}  // namespace simba::internal
