// One hiredis connection with simba's error vocabulary. Internal to the Redis backend.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "simba/redis_backend.h"

namespace simba::redis {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A connected, authenticated connection on the configured database. Not thread-safe: one
// user at a time (the pool hands it out).
class Connection {
 public:
  // Connects, AUTHs, SELECTs and PINGs. Throws Error (unavailable / permission_denied).
  explicit Connection(const RedisOptions& options, const std::string& where);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one command and reads its reply. A transport failure throws Error(unavailable)
  // and marks the connection broken; an error reply is returned as a reply of type ERROR.
  Reply command(const std::vector<std::string>& args);
  // Like command(), but an error reply throws too (mapped by to_error()).
  Reply checked(const std::vector<std::string>& args);
  // Sends every command, then reads every reply, in order: one round trip. Error replies are
  // returned; a transport failure throws as command() does.
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands);

  bool broken() const { return broken_; }
  redisContext* context() { return context_.get(); }
  const std::string& where() const { return where_; }

  // The one place Redis failures become simba errors.
  [[noreturn]] void fail_transport(const char* doing);
  [[noreturn]] static void fail_reply(const std::string& where, const redisReply& reply, const char* doing);

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  // Freed even when the constructor throws half-way (a failed connect keeps its socket).
  std::unique_ptr<redisContext, ContextDeleter> context_;
  std::string where_;  // redacted URI, for messages
  bool broken_ = false;
};

// Formats args for redisCommandArgv / redisAppendCommandArgv.
struct Argv {
  explicit Argv(const std::vector<std::string>& args);
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
};

}  // namespace simba::redis
