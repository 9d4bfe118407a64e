// simba-redis-floor PORT: three lock cycles against one Redis on loopback, 100 at a time in turn
// (6,000 each) on one hiredis connection, as a JSON line of their p50s: the bare primitive
// (SET NX PX + DEL), the least fenced cycle (a script of SET NX PX + HINCRBY, one of GET + DEL:
// RawProbe::fenced_once's) and simba's own acquire and release scripts, each as the Redis backend
// has it (read from its source, SIMBA_REDIS_BACKEND_SOURCE), without the library around them: where a Redis cycle's
// time goes (docs/benchmarks.md, "The Redis cycle against the least fenced one").
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

class Redis {
 public:
  explicit Redis(int port) : context_(redisConnect("127.0.0.1", port)) {
    if (!context_ || context_->err) throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  ~Redis() { redisFree(context_); }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  std::string call(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (!reply) throw std::runtime_error("connection lost");
    std::string out = reply->str ? std::string(reply->str, reply->len) : std::string();
    const bool failed = reply->type == REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    if (failed) throw std::runtime_error(args[0] + ": " + out);
    return out;
  }

 private:
  redisContext* context_;
};

// The body of `constexpr const char* NAME = R"lua(...)lua";` in the backend's source.
std::string script_of(const std::string& source, const std::string& name) {
  const std::string open = "constexpr const char* " + name + " = R\"lua(", close = ")lua\";";
  const auto begin = source.find(open);
  if (begin == std::string::npos) throw std::runtime_error("no script " + name + " in the backend's source");
  const auto body = begin + open.size();
  return source.substr(body, source.find(close, body) - body);
}

double p50(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: simba-redis-floor PORT [REDIS_BACKEND_SOURCE]\n");
    return 2;
  }
  try {
    std::ifstream file(argc > 2 ? argv[2] : SIMBA_REDIS_BACKEND_SOURCE);
    std::stringstream source;
    source << file.rdbuf();
    Redis redis(std::atoi(argv[1]));
    auto load = [&](const std::string& body) { return redis.call({"SCRIPT", "LOAD", body}); };
    const std::string least_acquire = load(script_of(source.str(), "kFencedAcquire"));
    const std::string least_release = load(script_of(source.str(), "kFencedRelease"));
    const std::string acquire = load(script_of(source.str(), "kAcquire"));
    const std::string release = load(script_of(source.str(), "kRelease"));
    const std::string key = "simba:{bench-floor}", hash = key + ":fencing";
    const std::vector<std::function<void()>> cycles{
        [&] {
          redis.call({"SET", key + ":raw", "owner", "NX", "PX", "10000"});
          redis.call({"DEL", key + ":raw"});
        },
        [&] {
          redis.call({"EVALSHA", least_acquire, "2", key, hash, "owner", "30000"});
          redis.call({"EVALSHA", least_release, "1", key, "owner"});
        },
        [&] {
          // As RedisBackend sends them: KEYS lock, hash, queue, derived index; ARGV id, lease,
          // channel, ttl, sweep_idle, demand channel (acquire); lock, queue, hash; id, prefix, idle.
          redis.call({"EVALSHA", acquire, "4", key, hash, key + ":contender", key + ":derived", "owner", "30000", key,
                      "20000", "3600000", key + ":demand"});
          redis.call({"EVALSHA", release, "3", key, key + ":contender", hash, "owner", key + ":", "3600000"});
        }};
    std::vector<std::vector<double>> samples(cycles.size());
    for (std::size_t round = 0; round < 60; ++round) {
      for (std::size_t k = 0; k < cycles.size(); ++k) {
        const std::size_t which = (k + round) % cycles.size();  // each goes first in turn
        for (int i = 0; i < 100; ++i) {
          const auto start = Clock::now();
          cycles[which]();
          samples[which].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
      }
    }
    redis.call({"DEL", hash});
    const double raw = p50(samples[0]), least = p50(samples[1]), simba = p50(samples[2]);
    std::printf(
        "{\"raw_p50_us\":%.2f,\"least_fenced_p50_us\":%.2f,\"least_fenced_over_raw\":%.2f,"
        "\"simba_scripts_p50_us\":%.2f,\"simba_scripts_over_raw\":%.2f}\n",
        raw, least, least / raw, simba, simba / raw);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "simba-redis-floor: %s\n", e.what());
    return 1;
  }
}
