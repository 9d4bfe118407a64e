// simba-bench: the same workloads on any backend, each against the engine's own bare
// primitive measured in the same run. One JSON object per line on stdout.
//
//   simba-bench --backend URI --workload cycle,handover,takeover,kill [--n N]
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <mysql.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <zookeeper/zookeeper.h>

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "backends/common/raw_probe.h"
#include "core/uri.h"
#include "simba/simba.h"

namespace simba::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Stats {
  double p50 = 0, p99 = 0, mean = 0;
};

Stats stats_of(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * samples.size()))]; };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  return s;
}

double round2(double v) { return std::round(v * 100) / 100; }

nlohmann::json line(const std::string& backend, const std::string& workload, std::size_t n, const Stats& s) {
  return {{"backend", backend}, {"workload", workload}, {"n", n},
          {"p50_us", round2(s.p50)}, {"p99_us", round2(s.p99)}, {"mean_us", round2(s.mean)}};
}

// Blocks until `predicate` or 30 s; a benchmark that cannot make progress stops loudly.
void await(const std::function<bool()>& predicate, const char* what) {
  auto deadline = Clock::now() + 30s;
  while (!predicate()) {
    if (Clock::now() > deadline) throw Error(errc::timeout, std::string("benchmark stuck waiting for ") + what);
    std::this_thread::yield();
  }
}

// The engine's bare primitive: what one lock + unlock cannot beat. once() runs it one time
// and returns how long that took, in microseconds.
class Raw {
 public:
  virtual ~Raw() = default;
  virtual double once() = 0;
};

class RawMutex final : public Raw {
 public:
  double once() override {
    auto start = Clock::now();
    mutex_.lock();
    mutex_.unlock();
    return micros(Clock::now() - start);
  }

 private:
  std::mutex mutex_;
};

// A bare write transaction updating one row, on its own connection to the same file.
class RawSqlite final : public Raw {
 public:
  explicit RawSqlite(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw Error(errc::unavailable, "raw: cannot open " + path);
    sqlite3_busy_timeout(db_, 5000);
    sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "CREATE TABLE IF NOT EXISTS simba_bench_raw (k TEXT PRIMARY KEY, v INTEGER);"
                      "INSERT OR IGNORE INTO simba_bench_raw VALUES ('k', 0);", nullptr, nullptr, nullptr);
    sqlite3_prepare_v2(db_, "BEGIN IMMEDIATE", -1, &begin_, nullptr);
    sqlite3_prepare_v2(db_, "UPDATE simba_bench_raw SET v = v + 1 WHERE k = 'k'", -1, &update_, nullptr);
    sqlite3_prepare_v2(db_, "COMMIT", -1, &commit_, nullptr);
  }
  ~RawSqlite() override {
    for (auto* stmt : {begin_, update_, commit_}) sqlite3_finalize(stmt);
    sqlite3_exec(db_, "DROP TABLE simba_bench_raw", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }
  double once() override {
    auto start = Clock::now();
    for (auto* stmt : {begin_, update_, commit_}) {
      if (sqlite3_step(stmt) != SQLITE_DONE) throw Error(errc::unavailable, std::string("raw: ") + sqlite3_errmsg(db_));
      sqlite3_reset(stmt);
    }
    return micros(Clock::now() - start);
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt *begin_ = nullptr, *update_ = nullptr, *commit_ = nullptr;
};

// SET NX PX + DEL on one connection: the fewest round trips a Redis lock can take.
class RawRedis final : public Raw {
 public:
  explicit RawRedis(const internal::Uri& uri) {
    context_ = redisConnectWithTimeout(uri.host.c_str(), uri.port ? uri.port : 6379, timeval{2, 0});
    if (context_ == nullptr || context_->err) throw Error(errc::unavailable, "raw: cannot connect to Redis");
    if (uri.has_password) {
      if (uri.user.empty()) call({"AUTH", uri.password});
      else call({"AUTH", uri.user, uri.password});
    }
    if (uri.path.size() > 1) call({"SELECT", uri.path.substr(1)});
  }
  ~RawRedis() override { redisFree(context_); }
  double once() override {
    auto start = Clock::now();
    call({"SET", key_, "owner", "NX", "PX", "10000"});
    call({"DEL", key_});
    return micros(Clock::now() - start);
  }

 private:
  void call(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(args.size()), argv.data(), lengths.data()));
    if (reply == nullptr) throw Error(errc::unavailable, std::string("raw: ") + context_->errstr);
    freeReplyObject(reply);
  }
  redisContext* context_ = nullptr;
  const std::string key_ = "simba-bench:raw:" + contender_id::uuid();
};

// Two one-row UPDATEs on one connection (what a lock + unlock on a table must at least do).
class RawPostgres final : public Raw {
 public:
  explicit RawPostgres(const internal::Uri& uri) {
    const std::string port = std::to_string(uri.port ? uri.port : 5432);
    const std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "";
    const char* keys[] = {"host", "port", "dbname", "user", "password", nullptr};
    const char* values[] = {uri.host.c_str(), port.c_str(), db.c_str(), uri.user.c_str(), uri.password.c_str(), nullptr};
    pg_ = PQconnectdbParams(keys, values, 0);
    if (PQstatus(pg_) != CONNECTION_OK) throw Error(errc::unavailable, "raw: cannot connect to PostgreSQL");
    exec("CREATE TABLE IF NOT EXISTS simba_bench_raw (k varchar(66) PRIMARY KEY, v bigint)");
    exec("INSERT INTO simba_bench_raw VALUES ('" + key_ + "', 0) ON CONFLICT DO NOTHING");
    PQclear(PQprepare(pg_, "raw", "UPDATE simba_bench_raw SET v = v + 1 WHERE k = $1", 1, nullptr));
  }
  ~RawPostgres() override {
    exec("DELETE FROM simba_bench_raw WHERE k = '" + key_ + "'");
    PQfinish(pg_);
  }
  double once() override {
    const char* params[] = {key_.c_str()};
    auto start = Clock::now();
    for (int i = 0; i < 2; ++i) {
      PGresult* result = PQexecPrepared(pg_, "raw", 1, params, nullptr, nullptr, 0);
      // An UPDATE that matches no row commits nothing: that would not be a fair baseline.
      bool ok = PQresultStatus(result) == PGRES_COMMAND_OK && std::string(PQcmdTuples(result)) == "1";
      PQclear(result);
      if (!ok) throw Error(errc::unavailable, std::string("raw: the UPDATE did not change one row ") + PQerrorMessage(pg_));
    }
    return micros(Clock::now() - start);
  }

 private:
  void exec(const std::string& sql) { PQclear(PQexec(pg_, sql.c_str())); }
  PGconn* pg_ = nullptr;
  const std::string key_ = "raw-" + contender_id::uuid();
};

// Two autocommit one-row UPDATEs on one connection.
class RawMysql final : public Raw {
 public:
  explicit RawMysql(const internal::Uri& uri) : mysql_(mysql_init(nullptr)) {
    const std::string db = uri.path.size() > 1 ? uri.path.substr(1) : "";
    if (!mysql_real_connect(mysql_, uri.host.c_str(), uri.user.c_str(), uri.password.c_str(), db.c_str(),
                            static_cast<unsigned>(uri.port ? uri.port : 3306), nullptr, CLIENT_FOUND_ROWS)) {
      throw Error(errc::unavailable, std::string("raw: ") + mysql_error(mysql_));
    }
    exec("CREATE TABLE IF NOT EXISTS simba_bench_raw (k varchar(66) PRIMARY KEY, v bigint) ENGINE=InnoDB");
    exec("INSERT IGNORE INTO simba_bench_raw VALUES ('" + key_ + "', 0)");
    stmt_ = mysql_stmt_init(mysql_);
    const std::string sql = "UPDATE simba_bench_raw SET v = v + 1 WHERE k = '" + key_ + "'";
    mysql_stmt_prepare(stmt_, sql.data(), sql.size());
  }
  ~RawMysql() override {
    mysql_stmt_close(stmt_);
    exec("DELETE FROM simba_bench_raw WHERE k = '" + key_ + "'");
    mysql_close(mysql_);
  }
  double once() override {
    auto start = Clock::now();
    for (int i = 0; i < 2; ++i) {
      if (mysql_stmt_execute(stmt_) != 0 || mysql_stmt_affected_rows(stmt_) != 1) {
        throw Error(errc::unavailable, "raw: the UPDATE did not change one row");
      }
    }
    return micros(Clock::now() - start);
  }

 private:
  void exec(const std::string& sql) { mysql_query(mysql_, sql.c_str()); }
  MYSQL* mysql_;
  MYSQL_STMT* stmt_ = nullptr;
  const std::string key_ = "raw-" + contender_id::uuid();
};

// Create an ephemeral sequential node and delete it, on one session of its own: the latch's
// bare join and leave.
class RawZookeeper final : public Raw {
 public:
  explicit RawZookeeper(const internal::Uri& uri) {
    // One host (default port 2181) or a list "h1:2181,h2:2181" kept whole by the URI parser.
    std::string hosts = uri.host;
    if (hosts.find(',') == std::string::npos) hosts += ":" + std::to_string(uri.port ? uri.port : 2181);
    if (uri.path.size() > 1) hosts += uri.path;
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    auto deadline = Clock::now() + 5s;
    while (zh_ && zoo_state(zh_) != ZOO_CONNECTED_STATE && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    if (!zh_ || zoo_state(zh_) != ZOO_CONNECTED_STATE) throw Error(errc::unavailable, "raw: cannot connect to ZooKeeper");
    if (uri.has_password) {
      const std::string credentials = uri.user + ":" + uri.password;
      zoo_add_auth(zh_, "digest", credentials.data(), static_cast<int>(credentials.size()), nullptr, nullptr);
    }
    int rc = zoo_create(zh_, folder_.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) throw Error(errc::unavailable, std::string("raw: ") + zerror(rc));
  }
  ~RawZookeeper() override {
    zoo_delete(zh_, folder_.c_str(), -1);
    zookeeper_close(zh_);
  }
  double once() override {
    char created[512];
    auto start = Clock::now();
    int rc = zoo_create(zh_, (folder_ + "/n-").c_str(), "owner", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                        created, sizeof created);
    if (rc == ZOK) rc = zoo_delete(zh_, created, -1);
    if (rc != ZOK) throw Error(errc::unavailable, std::string("raw: ") + zerror(rc));
    return micros(Clock::now() - start);
  }

 private:
  zhandle_t* zh_ = nullptr;
  const std::string folder_ = "/simba-bench-raw-" + contender_id::uuid();
};

// The backend's own baseline on its own connection (the SQL engines): the same connection, and
// the same server process behind it, as the lock cycle's.
class RawOnBackend final : public Raw {
 public:
  explicit RawOnBackend(internal::RawProbe& probe) : probe_(probe) {}
  double once() override { return probe_.raw_once(); }

 private:
  internal::RawProbe& probe_;
};

std::unique_ptr<Raw> raw_for(const std::string& uri, Backend& backend) {
  if (auto* probe = dynamic_cast<internal::RawProbe*>(&backend)) return std::make_unique<RawOnBackend>(*probe);
  auto parsed = internal::parse_uri(uri);
  if (parsed.scheme == "memory") return std::make_unique<RawMutex>();
  if (parsed.scheme == "sqlite") {
    return std::make_unique<RawSqlite>(parsed.host == "localhost" ? parsed.path : parsed.host + parsed.path);
  }
  if (parsed.scheme == "redis") return std::make_unique<RawRedis>(parsed);
  if (parsed.scheme == "postgresql" || parsed.scheme == "postgres") return std::make_unique<RawPostgres>(parsed);
  if (parsed.scheme == "mysql" || parsed.scheme == "mariadb") return std::make_unique<RawMysql>(parsed);
  if (parsed.scheme == "zookeeper") return std::make_unique<RawZookeeper>(parsed);
  return nullptr;
}

// Locker acquire + release, interleaved in blocks with the raw primitive so both see the
// same machine conditions.
nlohmann::json cycle(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  Locker locker("bench/cycle/" + contender_id::uuid(), client);
  auto raw = raw_for(uri, *client.backend());
  for (int i = 0; i < 50; ++i) {  // warm up
    locker.acquire();
    locker.unlock();
    if (raw) raw->once();
  }
  std::vector<double> samples, raw_samples;
  samples.reserve(n);
  // Blocks of each, the order swapped every block: whatever runs right after the other
  // (e.g. a database backend process that has been idle) pays a cost the other does not.
  constexpr std::size_t kBlock = 100;
  auto run_cycles = [&] {
    for (std::size_t i = 0; i < kBlock && samples.size() < n; ++i) {
      auto start = Clock::now();
      locker.acquire();
      locker.unlock();
      samples.push_back(micros(Clock::now() - start));
    }
  };
  auto run_raw = [&] {
    for (std::size_t i = 0; raw && i < kBlock && raw_samples.size() < n; ++i) raw_samples.push_back(raw->once());
  };
  for (bool cycle_first = true; samples.size() < n; cycle_first = !cycle_first) {
    if (cycle_first) {
      run_cycles();
      run_raw();
    } else {
      run_raw();
      run_cycles();
    }
  }
  auto out = line(engine, "cycle", n, stats_of(samples));
  if (raw) {
    auto raw_stats = stats_of(raw_samples);
    out["raw_p50_us"] = round2(raw_stats.p50);
    out["raw_p99_us"] = round2(raw_stats.p99);
    out["ratio_p50"] = round2(out["p50_us"].get<double>() / raw_stats.p50);
  }
  return out;
}

// Records when a contender acquired, for latency measurements.
class Stamp : public ContenderBase {
 public:
  using ContenderBase::ContenderBase;
  void on_acquired(const MutexState&) override {
    std::lock_guard lock(mutex_);
    acquired_at_ = Clock::now();
  }
  std::optional<Clock::time_point> acquired_at() const {
    std::lock_guard lock(mutex_);
    return acquired_at_;
  }
  void reset() {
    std::lock_guard lock(mutex_);
    acquired_at_.reset();
  }

 private:
  mutable std::mutex mutex_;
  std::optional<Clock::time_point> acquired_at_;
};

// Release by the owner to the next owner's on_acquired.
nlohmann::json handover(const Client& client, const std::string& engine, std::size_t n) {
  auto mutex = "bench/handover/" + contender_id::uuid();
  auto a = std::make_shared<Stamp>(mutex), b = std::make_shared<Stamp>(mutex);
  auto first = client.contend_service(a), second = client.contend_service(b);
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    a->reset();
    b->reset();
    first->start();
    await([&] { return first->is_owner(); }, "the first owner");
    second->start();
    await([&] { return second->after_owner().owner_id == a->contender_id(); }, "the waiter to see the owner");
    auto released = Clock::now();
    first->stop();
    await([&] { return b->acquired_at().has_value(); }, "the handover");
    samples.push_back(micros(*b->acquired_at() - released));
    second->stop();
  }
  return line(engine, "handover", n, stats_of(samples));
}

// The owner vanishes without releasing (its backend goes unreachable); the waiter takes over
// once the lease runs out. Reported with the lease (ttl + transition) it cannot beat.
nlohmann::json takeover(const Client& client, const std::string& engine, std::size_t n) {
  ContendOptions options = client.options();
  options.ttl = 200ms;
  options.transition = 100ms;
  Client fast(client.backend(), options, client.runtime());
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    auto mutex = "bench/takeover/" + contender_id::uuid();
    auto faulty = std::make_shared<FaultInjectingBackend>(client.backend());
    Client doomed(faulty, options, client.runtime());
    auto a = std::make_shared<Stamp>(mutex), b = std::make_shared<Stamp>(mutex);
    auto owner = doomed.contend_service(a);
    owner->start();
    await([&] { return owner->is_owner(); }, "the owner");
    auto waiter = fast.contend_service(b);
    waiter->start();
    await([&] { return waiter->after_owner().owner_id == a->contender_id(); }, "the waiter to see the owner");
    auto last_renewal = owner->after_owner().acquired_at;
    faulty->set_unreachable(true);
    await([&] { return b->acquired_at().has_value(); }, "the takeover");
    // From the owner's last renewal, as judged by the backend's clock, to the new owner.
    auto taken = waiter->after_owner().acquired_at;
    samples.push_back(static_cast<double>(taken - last_renewal) * 1000.0);
    waiter->stop();
    faulty->set_unreachable(false);
    owner->stop();
  }
  auto out = line(engine, "takeover", n, stats_of(samples));
  out["lease_us"] = (options.ttl + options.transition).count() * 1000;
  return out;
}

// The owner is a `simba lock` process (the CLI beside this binary) that gets SIGKILLed while
// it holds the mutex; measured from the kill to the waiter's on_acquired. Its bound is the
// lease (ttl 200ms + transition 100ms here), or on ZooKeeper the owner's session timeout (the
// URI's session_timeout), which caps the lease and after which the server drops the node.
nlohmann::json kill(const Client& client, const std::string& uri, const std::string& engine, std::size_t n) {
  const auto cli = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "simba";
  if (!std::filesystem::exists(cli)) throw Error(errc::unavailable, "kill workload needs " + cli.string());
  // On ZooKeeper a lease longer than the session, so that the session timeout (which caps
  // it) is what the takeover waits for.
  const bool session_bound = engine == "zookeeper";
  ContendOptions options = client.options();
  options.ttl = session_bound ? 10s : 200ms;
  options.transition = session_bound ? 6s : 100ms;
  Client fast(client.backend(), options, client.runtime());
  std::vector<double> samples;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string mutex = "bench/kill/" + contender_id::uuid();
    std::vector<std::string> args = {cli.string(), "lock", "--backend", uri, "--ttl", format_duration(options.ttl),
                                     "--transition", format_duration(options.transition), mutex, "--", "sleep", "600"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: the kill takes its child too
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw Error(errc::unavailable, "cannot start " + cli.string());
    auto deadline = Clock::now() + 30s;
    while (fast.owner(mutex).empty()) {
      if (Clock::now() > deadline) throw Error(errc::timeout, "benchmark stuck waiting for the simba lock process to own");
      std::this_thread::sleep_for(5ms);
    }
    auto b = std::make_shared<Stamp>(mutex);
    auto waiter = fast.contend_service(b);
    waiter->start();
    await([&] { return !waiter->after_owner().empty(); }, "the waiter to see the owner");
    if (b->acquired_at()) throw Error(errc::internal, "the waiter owned while the simba lock process held the mutex");
    ::kill(-pid, SIGKILL);
    auto killed = Clock::now();
    waitpid(pid, nullptr, 0);
    deadline = Clock::now() + 60s;
    while (!b->acquired_at() && Clock::now() < deadline) std::this_thread::sleep_for(100us);
    if (!b->acquired_at()) throw Error(errc::timeout, "benchmark stuck waiting for the takeover after a kill");
    samples.push_back(micros(*b->acquired_at() - killed));
    waiter->stop();
  }
  auto out = line(engine, "kill", n, stats_of(samples));
  if (session_bound) {
    auto query = internal::parse_uri(uri).query;
    auto session = query.count("session_timeout") ? parse_duration(query["session_timeout"]) : 10000ms;
    out["session_timeout_us"] = session.count() * 1000;
  } else {
    out["lease_us"] = (options.ttl + options.transition).count() * 1000;
  }
  return out;
}

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// One process holds `n` mutexes (ttl 2s, transition 1s) for `duration`: the threads it needs,
// resident memory per held mutex, and renewals missed (an owner that lost its lease).
nlohmann::json scale(const Client& client, const std::string& engine, std::size_t n, std::chrono::seconds duration) {
  ContendOptions options = client.options();
  options.ttl = 2s;
  options.transition = 1s;
  Client held(client.backend(), options, client.runtime());
  const long rss_before = resident_bytes();
  std::atomic<long> acquired{0}, lost{0};
  std::mutex latency_mutex;
  std::vector<double> latencies;
  std::vector<std::unique_ptr<MutexContendService>> services;
  services.reserve(n);
  const std::string prefix = "bench/scale/" + contender_id::uuid() + "/";
  for (std::size_t i = 0; i < n; ++i) {
    auto started = Clock::now();
    auto contender = make_contender(
        prefix + std::to_string(i),
        [&, started](const MutexState&) {
          acquired.fetch_add(1);
          std::lock_guard lock(latency_mutex);
          latencies.push_back(micros(Clock::now() - started));
        },
        [&](const MutexState&) { lost.fetch_add(1); });
    services.push_back(held.contend_service(contender));
    services.back()->start();
  }
  await([&] { return acquired.load() == static_cast<long>(n); }, "every mutex to be held");
  const long rss_held = resident_bytes();
  const int threads = thread_count();
  std::this_thread::sleep_for(duration);
  const long missed = lost.load();
  std::size_t owners = 0;
  for (auto& service : services) owners += service->is_owner();
  for (auto& service : services) service->stop();
  auto out = line(engine, "scale", n, stats_of(latencies));
  out["duration_s"] = duration.count();
  out["threads"] = threads;
  out["rss_per_mutex_bytes"] = (rss_held - rss_before) / static_cast<long>(n);
  out["missed_renewals"] = missed;
  out["owners_at_end"] = owners;
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"simba-bench: lock workloads against the engine's bare primitive; JSON lines"};
  std::string uri = "memory:";
  std::string workloads = "cycle,handover,takeover";
  std::size_t n = 0;
  int duration = 60;
  app.add_option("--backend", uri, "Backend URI (default memory:)");
  app.add_option("--workload", workloads, "Comma-separated: cycle, handover, takeover, kill, scale");
  app.add_option("--n", n, "Samples per workload, or mutexes for scale (default: cycle 2000, handover 200, "
                           "takeover 10, kill 10, scale 10000)");
  app.add_option("--duration", duration, "Seconds the scale workload holds its mutexes (default 60)");
  CLI11_PARSE(app, argc, argv);
#if !defined(__OPTIMIZE__)
  std::cerr << "simba-bench: WARNING: built without optimisation; figures are not representative\n";
#endif
  // Injected faults are expected here: keep their warnings out of the figures.
  setenv("SIMBA_LOG", "error", /*overwrite=*/0);
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);  // the raw ZooKeeper session's chatter
  ContendOptions options;
  auto backend = open_backend(uri, &options);
  Client client(backend, options);
  auto engine = backend->capabilities().engine;
  std::cout << nlohmann::json{{"backend", engine}, {"workload", "env"}, {"uri", internal::parse_uri(uri).redacted()},
                              {"cores", std::thread::hardware_concurrency()},
#if defined(__OPTIMIZE__)
                              {"optimized", true}
#else
                              {"optimized", false}
#endif
                             }.dump()
            << std::endl;
  std::stringstream list(workloads);
  for (std::string workload; std::getline(list, workload, ',');) {
    nlohmann::json out;
    if (workload == "cycle") out = cycle(client, uri, engine, n ? n : 2000);
    else if (workload == "handover") out = handover(client, engine, n ? n : 200);
    else if (workload == "takeover") out = takeover(client, engine, n ? n : 10);
    else if (workload == "kill") out = kill(client, uri, engine, n ? n : 10);
    else if (workload == "scale") out = scale(client, engine, n ? n : 10000, std::chrono::seconds(duration));
    else throw Error(errc::invalid_argument, "unknown workload '" + workload + "'; accepted: cycle, handover, takeover, kill, scale");
    std::cout << out.dump() << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace simba::bench

int main(int argc, char** argv) {
  try {
    return simba::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "simba-bench: " << e.what() << "\n";
    return 1;
  }
}
