// What `simba` does with its terminal and signals: the waiting line on stderr, the signal
// thread, and how owner records are printed.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "base/thread_annotations.h"
#include "simba/simba.h"

namespace simba::cli {

// The termination signals (SIGINT, SIGTERM, SIGHUP) are blocked in every thread (main() does
// it first); this starts the one thread that takes them and calls handler(sig) for each.
void handle_signals(std::function<void(int)> handler);

// For a signal that came while simba waits (nothing running): requests `stop` (the token of
// the waiting acquire: one about to begin refuses to), closes `locker` if it is still there
// (interrupting an acquire under way, which returns once what it won went back), gives back
// anything `id` won on `mutex`, reporting a failure on stderr, ends the backend's sessions
// (Backend::end_sessions: a ZooKeeper node or etcd key a round in flight made goes with them),
// and exits 128 + sig.
[[noreturn]] void give_back_and_exit(std::stop_source& stop, const std::weak_ptr<Locker>& locker, const Client& client,
                                     const std::string& mutex, const std::string& id, int sig);

// On a terminal (stderr a TTY), one line on stderr, rewritten every 500 ms while `waiting()`
// holds: the mutex, who holds it, since when this process sees that holder, and its token.
// Nothing at all when stderr is not a terminal. Cleared when waiting ends and on destruction.
class WaitingLine {
 public:
  WaitingLine(Client client, std::string mutex, std::function<bool()> waiting);
  ~WaitingLine();
  WaitingLine(const WaitingLine&) = delete;
  WaitingLine& operator=(const WaitingLine&) = delete;

 private:
  void loop();

  Client client_;
  const std::string mutex_;
  const std::function<bool()> waiting_;
  internal::AnnotatedMutex m_;
  std::condition_variable stop_changed_;
  bool stop_ GUARDED_BY(m_) = false;
  std::thread thread_;
};

// "2026-11-23T12:00:00.123Z", or "-" for 0.
std::string iso_time(EpochMillis ms);

// One owner record as a JSON object (owner null when free; times in epoch ms).
std::string record_json(const std::string& mutex, const MutexOwner& owner, EpochMillis now);

}  // namespace simba::cli
