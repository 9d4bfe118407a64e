// The PostgreSQL LISTEN link of the shared push channel.
#include "backends/postgres/listener.h"

#include "backends/postgres/connection.h"
#include "simba/error.h"

namespace simba::postgres {
namespace {

class ListenLink final : public internal::PushLink {
 public:
  ListenLink(const PostgresOptions& options, const std::string& where) : connection_(options, where) {
    connection_.run((std::string("LISTEN ") + kChannel).c_str());
  }

  int socket() const override { return PQsocket(connection_.get()); }
  bool subscribe(const std::string&) override { return true; }  // one LISTEN serves every mutex
  void unsubscribe(const std::string&) override {}

  void read(internal::PushSink& sink) override {
    PGconn* pg = connection_.get();
    if (PQconsumeInput(pg) == 0 || PQstatus(pg) != CONNECTION_OK) {
      std::string message = PQerrorMessage(pg);
      while (!message.empty() && message.back() == '\n') message.pop_back();
      throw Error(errc::unavailable, message.empty() ? "connection closed" : message);
    }
    while (PGnotify* notification = PQnotifies(pg)) {
      std::string payload = notification->extra ? notification->extra : "";
      PQfreemem(notification);
      // "<event>@@<mutex>"; the mutex may itself contain "@@".
      auto separator = payload.find("@@");
      if (separator == std::string::npos) continue;
      const std::string kind = payload.substr(0, separator);
      const std::string mutex = payload.substr(separator + 2);
      if (kind == "released") sink.deliver(mutex, WatchEvent::released);
      if (kind == "acquired") sink.deliver(mutex, WatchEvent::acquired);
      if (kind == "demand") sink.deliver(demand_key(mutex), WatchEvent::acquired);
    }
  }

 private:
  mutable Connection connection_;
};

}  // namespace

std::unique_ptr<internal::PushChannel> make_listener(const PostgresOptions& options, const std::string& where) {
  return std::make_unique<internal::PushChannel>(
      internal::PushChannelOptions{
          .thread_name = "simba-pg-listen", .what = "LISTEN", .where = where, .ready_timeout = options.command_timeout},
      [options, where] { return std::make_unique<ListenLink>(options, where); });
}

}  // namespace simba::postgres
