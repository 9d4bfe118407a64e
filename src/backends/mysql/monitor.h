// The MariaDB/MySQL backend's liveness monitor: a connection parked in SELECT SLEEP(), on the
// shared reconnecting push channel. There is no push channel for owner changes on this engine
// (waiters poll); when the server goes away the parked read fails at once, which tells owners
// to stop believing (WatchEvent::lost), and `released` after the reconnect makes everyone look
// again. Internal to the MySQL backend.
#pragma once

#include <memory>
#include <string>

#include "backends/common/push_channel.h"
#include "simba/mysql_backend.h"

namespace simba::mysql {

// Watch with no keys. watch() does not wait for the connection.
std::unique_ptr<internal::PushChannel> make_monitor(const MysqlOptions& options, const std::string& where);

}  // namespace simba::mysql
