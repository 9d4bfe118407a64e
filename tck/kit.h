// The conformance kit's helpers: the backend under test, unique names, bounded waits, and a
// contender that records what it is told. Shared by the kit's cases and the unit tests.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "simba/backend.h"
#include "simba/memory_backend.h"
#include "simba/simba.h"
#include "simba/testing/fault_injection.h"
#include "simba/testing/simulated_clock.h"

namespace simba::tck {

// The backend under test. By default open_backend(backend_uri()); a backend that has no URI
// (your own Backend implementation) runs the kit through a factory instead:
//
//   simba::tck::set_backend_factory([] { return std::make_shared<MyBackend>(...); });
//
// Every call must return a backend on the same store (several clients of a case contend
// through it), e.g. one shared instance, or a new connection to the same server.
using BackendFactory = std::function<std::shared_ptr<Backend>()>;
void set_backend_factory(BackendFactory factory);
std::shared_ptr<Backend> make_backend();

// The URI under test (set by simba-tck's --backend; default "memory:"); empty while a
// factory is set.
const std::string& backend_uri();
void set_backend_uri(std::string uri);

// Runs every case of the kit on the backend under test: parses GoogleTest's flags and
// --backend URI from the command line unless a factory is set. Returns the exit code.
// simba-tck's main() is this. An engine of one's own proves itself with the installed kit
// (find_package(simba COMPONENTS tck), target simba::tck, #include <simba/tck/kit.h>):
//
//   int main(int argc, char** argv) {
//     return simba::tck::run_kit(argc, argv, [] { return std::make_shared<MyBackend>(...); });
//   }
//
// (tck/own_backend_main.cc runs the lease groups so, on a Backend written there.)
int run_kit(int argc, char** argv);
int run_kit(int argc, char** argv, BackendFactory factory);

// Timing the kit runs with: short, so the suite stays fast.
ContendOptions fast_options();

// A fresh client on the backend under test, with fast_options(), on its own runtime.
Client make_client(const ContendOptions& options = fast_options());

// A mutex name no other test or run uses: "tck/<test, cut to 40 bytes>/<random>", at most 54
// bytes (Simba's SQL table holds 66).
std::string unique_mutex(const std::string& hint = "");

// How long a check waits for what should come at once (a callback, a wake-up, a release seen):
// long enough for a loaded, sanitized machine; a check that passes waits only as long as it takes.
inline constexpr std::chrono::seconds kSoon{5};

// Waits until `predicate` holds or `timeout` passes; returns the predicate's last value.
bool wait_until(const std::function<bool()>& predicate, std::chrono::milliseconds timeout);

// A timeout that outlasts the first round of a request on `client`'s backend however loaded the
// machine is: one whole lease (ttl + transition, the bound the library itself gives a single
// attempt's first round), the engine's poll interval, and four times the slowest of three
// reads of the record timed just now. For cases whose check needs what a round learned (the
// owner, the last backend error) before the request times out.
std::chrono::milliseconds first_round_bound(const Client& client);

// A client of "another process" on the same store as `client`: its own backend object, so
// its own lock table and remote contenders, as a second process would have.
Client other_process(const Client& client);

// While three threads of `client` take `mutex` over and over (1 ms holds), another process
// asks with try_lock_for(timeout). How long it took to get it, or nullopt if it never did.
std::optional<std::chrono::milliseconds> other_process_gets_past_busy_threads(const Client& client,
                                                                              const std::string& mutex,
                                                                              std::chrono::milliseconds timeout);

// A lock request that ended (timed out, cancelled) left nothing behind: with the holder gone,
// nobody takes `mutex` (400 ms), and `client` keeps no lock entry.
void expect_left_nothing(const Client& client, const std::string& mutex);

// Runs one (disabled) case of this binary as a child process on the backend under test, with
// `env` added to this process's environment; the child's pid, or -1 if it could not start.
pid_t spawn_case(const std::string& gtest_case, const std::vector<std::string>& env);

// Number of threads of this process (/proc/self/task).
int thread_count();

// An engine whose acquire() calls (renewals included) are counted, in all and by record, with
// the contender ids that made them; its read() calls by record; and its list_derived() calls.
class AcquireCounting : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override {
    {
      std::lock_guard lock(mutex_);
      ++asked_[mutex];
      ++calls_;
      contenders_.insert(contender_id);
    }
    return ForwardingBackend::acquire(mutex, contender_id, ttl, transition);
  }
  int asked(const std::string& record) const {
    std::lock_guard lock(mutex_);
    auto it = asked_.find(record);
    return it == asked_.end() ? 0 : it->second;
  }
  int calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  OwnerSnapshot read(const std::string& mutex) override {
    {
      std::lock_guard lock(mutex_);
      ++reads_[mutex];
    }
    return ForwardingBackend::read(mutex);
  }
  int reads(const std::string& record) const {
    std::lock_guard lock(mutex_);
    auto it = reads_.find(record);
    return it == reads_.end() ? 0 : it->second;
  }
  MutexListing list_derived(const std::string& name, std::size_t limit) override {
    listings_.fetch_add(1);
    return ForwardingBackend::list_derived(name, limit);
  }
  int listings() const { return listings_.load(); }
  std::set<std::string> contenders() const {
    std::lock_guard lock(mutex_);
    return contenders_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> asked_;  // guarded by mutex_
  std::map<std::string, int> reads_;  // guarded by mutex_
  int calls_ = 0;                     // guarded by mutex_
  std::set<std::string> contenders_;  // guarded by mutex_
  std::atomic<int> listings_{0};
};

// A contender that records every notification, thread-safely.
class Recorder : public ContenderBase {
 public:
  struct Event {
    bool acquired;  // else released
    MutexState state;
    std::chrono::steady_clock::time_point at;
    std::string thread;
  };

  explicit Recorder(std::string mutex, std::string id = contender_id::host())
      : ContenderBase(std::move(mutex), std::move(id)) {}

  void on_acquired(const MutexState& state) override { record(true, state); }
  void on_released(const MutexState& state) override { record(false, state); }

  std::vector<Event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  int acquired_count() const { return count(true); }
  int released_count() const { return count(false); }
  // An extra hook run inside the callback (on the callback executor).
  std::function<void(bool acquired, const MutexState&)> hook;

 private:
  void record(bool acquired, const MutexState& state);
  int count(bool acquired) const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (auto& e : events_) n += e.acquired == acquired;
    return n;
  }

  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace simba::tck
