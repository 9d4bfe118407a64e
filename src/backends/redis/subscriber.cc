// The Redis pub/sub link of the shared push channel.
#include "backends/redis/subscriber.h"

#include "backends/redis/connection.h"

namespace simba::redis {
namespace {

class PubSubLink final : public internal::PushLink {
 public:
  PubSubLink(const RedisOptions& options, const std::string& where) : connection_(options, where) {
    // Reads block only when poll() said there is data: no read timeout on this connection.
    redisSetTimeout(connection_.context(), timeval{0, 0});
  }

  int socket() const override { return connection_.context()->fd; }
  bool subscribe(const std::string& channel) override {
    send("SUBSCRIBE", channel);
    return false;  // confirmed by the server's "subscribe" reply
  }
  void unsubscribe(const std::string& channel) override { send("UNSUBSCRIBE", channel); }

  void read(internal::PushSink& sink) override {
    redisContext* context = connection_.context();
    if (redisBufferRead(context) != REDIS_OK) connection_.fail_transport("reading pub/sub");
    void* raw = nullptr;
    while (redisGetReplyFromReader(context, &raw) == REDIS_OK && raw != nullptr) {
      Reply reply(static_cast<redisReply*>(raw));
      raw = nullptr;
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) continue;
      auto text = [&](std::size_t i) {
        auto* e = reply->element[i];
        return e->type == REDIS_REPLY_STRING ? std::string(e->str, e->len) : std::string();
      };
      const std::string kind = text(0);
      if (kind == "message") {
        const std::string payload = text(2);
        if (payload.rfind("released@@", 0) == 0) sink.deliver(text(1), WatchEvent::released);
        if (payload.rfind("acquired@@", 0) == 0) sink.deliver(text(1), WatchEvent::acquired);
        if (payload.rfind("demand@@", 0) == 0) sink.deliver(text(1), WatchEvent::acquired);  // a demand channel
      } else if (kind == "subscribe") {
        sink.confirmed(text(1));
      }
    }
    if (context->err) connection_.fail_transport("reading pub/sub");
  }

 private:
  void send(const char* command, const std::string& channel) {
    const std::vector<std::string> args = {command, channel};
    Argv argv(args);  // points into args
    redisAppendCommandArgv(connection_.context(), 2, argv.pointers.data(), argv.lengths.data());
    int done = 0;
    while (!done) {
      if (redisBufferWrite(connection_.context(), &done) != REDIS_OK) connection_.fail_transport("subscribing");
    }
  }

  mutable Connection connection_;
};

}  // namespace

std::unique_ptr<internal::PushChannel> make_subscriber(const RedisOptions& options, const std::string& where) {
  return std::make_unique<internal::PushChannel>(
      internal::PushChannelOptions{.thread_name = "simba-redis-sub",
                                   .what = "pub/sub",
                                   .where = where,
                                   .ready_timeout = options.command_timeout,
                                   .linger = std::chrono::seconds(10)},
      [options, where] { return std::make_unique<PubSubLink>(options, where); });
}

}  // namespace simba::redis
