// The Redis backend's push channel: SUBSCRIBE on one connection, for every watch of a
// backend, on the shared reconnecting loop. Internal to the Redis backend.
#pragma once

#include <memory>
#include <string>

#include "backends/common/push_channel.h"
#include "simba/redis_backend.h"

namespace simba::redis {

// Keys are channels; "released@@..." and "acquired@@..." messages become events. watch()
// waits up to the command timeout for the server to confirm the subscriptions; a channel
// without watchers stays subscribed for 10 s.
std::unique_ptr<internal::PushChannel> make_subscriber(const RedisOptions& options, const std::string& where);

}  // namespace simba::redis
