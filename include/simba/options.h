// simba/options.h: timing of the contention protocol.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace simba {

struct ContendOptions {
  // How long a lease lasts before its owner renews it. Must be > 0. Default: 10s.
  std::chrono::milliseconds ttl{std::chrono::seconds(10)};
  // Grace after ttl during which only the owner may renew. Must be >= 0. Default: 6s.
  std::chrono::milliseconds transition{std::chrono::seconds(6)};
  // Delay before a started service first contends. Must be >= 0. Default: 0.
  std::chrono::milliseconds initial_delay{0};
  // For backends without a push channel: how often a waiting contender or an observer looks
  // again. 0 takes the backend's own default (Capabilities::poll_interval). Default: 0.
  std::chrono::milliseconds poll_interval{0};
  // First delay after a backend error; doubles per consecutive error, with jitter, up to
  // max(ttl, backoff_initial). Must be > 0. Default: 100ms.
  std::chrono::milliseconds backoff_initial{100};

  // Throws Error(errc::invalid_argument) naming the bad field.
  void validate() const;

  // Applies "ttl", "transition", "initial_delay", "poll" and "backoff" from URI query
  // parameters, removing them from `query`; other keys are left for the backend.
  void apply_query(std::map<std::string, std::string>& query);
};

}  // namespace simba
