// The MariaDB/MySQL liveness link of the shared push channel.
#include "backends/mysql/monitor.h"

#include "backends/mysql/connection.h"

namespace simba::mysql {
namespace {

constexpr int kSleepSeconds = 30;

class SleepLink final : public internal::PushLink {
 public:
  SleepLink(const MysqlOptions& options, const std::string& where)
      : connection_(options, where, std::chrono::seconds(kSleepSeconds + 10)) {
    park();
  }

  int socket() const override { return connection_.socket(); }
  bool subscribe(const std::string&) override { return true; }
  void unsubscribe(const std::string&) override {}
  // The SLEEP ended (after kSleepSeconds) or the connection failed (read_scalar throws).
  void read(internal::PushSink&) override {
    connection_.read_scalar();
    park();
  }

 private:
  void park() { connection_.send("SELECT SLEEP(" + std::to_string(kSleepSeconds) + ")"); }

  Connection connection_;
};

}  // namespace

std::unique_ptr<internal::PushChannel> make_monitor(const MysqlOptions& options, const std::string& where) {
  return std::make_unique<internal::PushChannel>(
      internal::PushChannelOptions{.thread_name = "simba-my-watch", .what = "monitor", .where = where},
      [options, where] { return std::make_unique<SleepLink>(options, where); });
}

}  // namespace simba::mysql
