#include "cli/terminal.h"
#include "base/thread_annotations.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

namespace simba::cli {

void handle_signals(std::function<void(int)> handler) {
  std::thread([handler = std::move(handler)] {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) handler(sig);
    }
  }).detach();
}

void give_back_and_exit(std::stop_source& stop, const std::weak_ptr<Locker>& locker, const Client& client,
                        const std::string& mutex, const std::string& id, int sig) {
  stop.request_stop();  // first: then no acquire can begin after the close
  if (auto alive = locker.lock()) alive->close();
  try {
    client.release(mutex, id);
  } catch (const std::exception& e) {
    std::cerr << "simba: " << e.what() << "\n";
  }
  // The process ends here, destroying nothing: end the sessions that would otherwise outlive
  // it (ZooKeeper's, etcd's leases), so that nothing a round in flight left there stays
  // until their timeout.
  client.backend()->end_sessions();
  std::_Exit(128 + sig);
}

WaitingLine::WaitingLine(Client client, std::string mutex, std::function<bool()> waiting)
    : client_(std::move(client)), mutex_(std::move(mutex)), waiting_(std::move(waiting)) {
  if (isatty(STDERR_FILENO)) thread_ = std::thread([this] { loop(); });
}

WaitingLine::~WaitingLine() {
  {
    internal::MutexLock lock(m_);
    stop_ = true;
  }
  stop_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WaitingLine::loop() {
  std::string holder;
  std::uint64_t token = 0;
  auto since = std::chrono::steady_clock::now();
  bool shown = false;
  internal::UniqueMutexLock lock(m_);
  while (!stop_) {
    lock.unlock();
    std::string line;
    if (waiting_()) {
      try {
        const MutexOwner owner = client_.owner(mutex_);
        if (owner.owner_id != holder || owner.fencing_token != token) {
          holder = owner.owner_id;
          token = owner.fencing_token;
          since = std::chrono::steady_clock::now();
        }
        const auto seconds =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since).count();
        line = "simba: waiting for mutex '" + mutex_ + "': " +
               (holder.empty() ? std::string("free, contending")
                               : "held by " + holder + " for " + std::to_string(seconds) + "s (token " +
                                     std::to_string(token) + ")");
      } catch (const std::exception& e) {
        line = "simba: waiting for mutex '" + mutex_ + "': " + e.what();
      }
    }
    if (!line.empty() || shown) {
      std::cerr << "\r\033[K" << line << std::flush;
      shown = !line.empty();
    }
    lock.lock();
    stop_changed_.wait_for(lock.native(), std::chrono::milliseconds(500), [&]() REQUIRES(m_) { return stop_; });
  }
  if (shown) std::cerr << "\r\033[K" << std::flush;
}

std::string iso_time(EpochMillis ms) {
  if (ms <= 0) return "-";
  std::time_t seconds = ms / 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buffer, static_cast<int>(ms % 1000));
  return out;
}

std::string record_json(const std::string& mutex, const MutexOwner& owner, EpochMillis now) {
  nlohmann::json out = {
      {"mutex", mutex},
      {"owner", owner.empty() ? nlohmann::json(nullptr) : nlohmann::json(owner.owner_id)},
      {"fencing_token", owner.fencing_token},
      {"caching", owner.caching()},
      {"idle", owner.idle},
      {"acquired_at", owner.acquired_at},
      {"ttl_at", owner.ttl_at},
      {"transition_at", owner.transition_at},
      {"now", now},
  };
  return out.dump();
}

}  // namespace simba::cli
