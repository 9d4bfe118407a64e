// Connecting to Redis and turning its failures into simba errors.
#include "backends/redis/connection.h"

#include <sys/time.h>

#include "simba/error.h"

namespace simba::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

Argv::Argv(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
}

Connection::Connection(const RedisOptions& options, const std::string& where) : where_(where) {
  context_.reset(redisConnectWithTimeout(options.host.c_str(), options.port, to_timeval(options.connect_timeout)));
  if (context_ == nullptr) throw Error(errc::unavailable, where_ + ": cannot allocate a connection");
  if (context_->err) fail_transport("connecting");
  // The handshake gets the connect timeout; later commands the command timeout.
  redisSetTimeout(context(), to_timeval(options.connect_timeout));
  redisEnableKeepAlive(context());
  if (!options.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    checked(auth);
  }
  auto pong = command({"PING"});
  if (pong->type == REDIS_REPLY_ERROR) fail_reply(where_, *pong, "PING");
  if (pong->type != REDIS_REPLY_STATUS || std::string(pong->str, pong->len) != "PONG") {
    throw Error(errc::unavailable, where_ + ": the server there does not answer like Redis (PING)");
  }
  if (options.db != 0) checked({"SELECT", std::to_string(options.db)});
  redisSetTimeout(context(), to_timeval(options.command_timeout));
}

Reply Connection::command(const std::vector<std::string>& args) {
  Argv argv(args);
  auto* raw = static_cast<redisReply*>(
      redisCommandArgv(context(), static_cast<int>(args.size()), argv.pointers.data(), argv.lengths.data()));
  if (raw == nullptr) fail_transport(args.empty() ? "a command" : args[0].c_str());
  return Reply(raw);
}

std::vector<Reply> Connection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  for (const auto& args : commands) {
    Argv argv(args);
    if (redisAppendCommandArgv(context(), static_cast<int>(args.size()), argv.pointers.data(), argv.lengths.data()) !=
        REDIS_OK) {
      fail_transport("a pipeline");
    }
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context(), &raw) != REDIS_OK || raw == nullptr) fail_transport("a pipeline");
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return replies;
}

Reply Connection::checked(const std::vector<std::string>& args) {
  auto reply = command(args);
  if (reply->type == REDIS_REPLY_ERROR) fail_reply(where_, *reply, args[0].c_str());
  return reply;
}

void Connection::fail_transport(const char* doing) {
  broken_ = true;
  std::string what = context_ && context_->errstr[0] ? context_->errstr : "connection failed";
  if (context_ && context_->err == REDIS_ERR_PROTOCOL) {
    what += " (is this a Redis server?)";
  } else if (context_ && context_->err == REDIS_ERR_IO &&
             (what.find("Resource temporarily") != std::string::npos || what.find("timed out") != std::string::npos)) {
    what = "no answer within the timeout (is this a Redis server?)";
  }
  throw Error(errc::unavailable, where_ + ": " + doing + ": " + what);
}

void Connection::fail_reply(const std::string& where, const redisReply& reply, const char* doing) {
  std::string text(reply.str ? reply.str : "", reply.str ? reply.len : 0);
  std::string message = where + ": " + doing + ": " + text;
  if (starts_with(text, "WRONGPASS") || starts_with(text, "NOAUTH") || starts_with(text, "NOPERM") ||
      text.find("invalid password") != std::string::npos || text.find("without any password") != std::string::npos) {
    throw Error(errc::permission_denied, message);
  }
  if (starts_with(text, "LOADING") || starts_with(text, "BUSY") || starts_with(text, "TRYAGAIN") ||
      starts_with(text, "CLUSTERDOWN") || starts_with(text, "MASTERDOWN") || starts_with(text, "READONLY")) {
    throw Error(errc::unavailable, message);
  }
  throw Error(errc::internal, message);
}

}  // namespace simba::redis
