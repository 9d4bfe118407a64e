// The PostgreSQL backend's push channel: LISTEN simba_mutex on one connection, for every
// watch of a backend, on the shared reconnecting loop. Internal to the PostgreSQL backend.
#pragma once

#include <memory>
#include <string>

#include "backends/common/push_channel.h"
#include "simba/postgres_backend.h"

namespace simba::postgres {

inline constexpr const char* kChannel = "simba_mutex";

// Keys are mutex names; a notification "<released|acquired>@@<mutex>" reaches the watchers of
// that mutex, "demand@@<mutex>" those of demand_key(mutex). watch() waits up to the command
// timeout for the LISTEN connection.
inline std::string demand_key(const std::string& mutex) { return std::string("\0demand:", 8) + mutex; }

std::unique_ptr<internal::PushChannel> make_listener(const PostgresOptions& options, const std::string& where);

}  // namespace simba::postgres
