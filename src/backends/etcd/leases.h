// The etcd leases of one backend and their keep-alive stream. Internal to the etcd backend.
//
// One lease per (length in seconds, slot): the contenders of the backend that ask for leases
// of one length share one, except that two contenders of one mutex need two keys, so two
// leases (slot 0, 1, ...). One bidirectional LeaseKeepAlive stream keeps them all: a thread
// sends a keep-alive for each lease every sixth of its TTL (so the server keeps it at least
// 5/6 of its TTL ahead) and another reads the answers. An owner's renewal asks for a
// keep-alive of its own when the confirmed ones do not cover even its ttl (Leases::refresh). A lease the server reports
// gone (TTL 0) is dropped and reported; the stream reconnects by itself when it breaks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "backends/etcd/channel.h"
#include "base/thread_annotations.h"

namespace simba::etcd {

using Steady = std::chrono::steady_clock;

class Leases {
 public:
  struct Events {
    std::function<void(std::int64_t lease)> on_gone;  // the server no longer has this lease
    std::function<void()> on_tick;                    // every tick (~50 ms), on the sending thread
  };
  Leases(Channel& channel, Events events);
  // end().
  ~Leases();
  // Stops both threads and revokes every lease (their keys go with them), once; lease() then
  // throws errc::unavailable (Backend::end_sessions).
  void end() noexcept;

  struct Granted {
    std::int64_t id = 0;
    std::chrono::seconds ttl{0};
  };
  // The lease of `seconds` and `slot`, granted now if there is none. Throws Error.
  Granted lease(std::int64_t seconds, int slot);

  // What the server confirmed of `lease`: when the last keep-alive it answered (or the grant)
  // was sent, and until when it keeps the lease at least. Both the epoch if it is unknown.
  struct Coverage {
    Steady::time_point confirmed_sent;
    Steady::time_point until;
  };
  Coverage coverage(std::int64_t lease);

  // A keep-alive answer: the lease's TTL in seconds (0: gone), or -1 when the stream broke first.
  using Answer = std::shared_future<std::int64_t>;
  // Sends a keep-alive of `lease` now and returns its answer. An unknown lease, or no stream
  // within the command timeout, answers -1 at once.
  Answer refresh(std::int64_t lease);

  // Drops a lease the caller found gone (a call said "lease not found").
  void forget(std::int64_t lease);

 private:
  struct Lease {
    std::int64_t seconds = 0;  // asked for
    int slot = 0;
    std::chrono::seconds ttl{0};         // granted
    Steady::time_point confirmed_sent;   // when the last keep-alive answered (or the grant) went
    Steady::time_point confirmed_until;  // when the server keeps it at least until
    Steady::time_point last_sent;
    std::deque<std::pair<Steady::time_point, std::shared_ptr<std::promise<std::int64_t>>>> pending;
  };
  using Stream = grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>;

  void read_loop();
  void tick_loop();
  // Sends a keep-alive of `id` (its Lease is `lease`); the answer goes to `promise` if any.
  void send_locked(std::int64_t id, Lease& lease, std::shared_ptr<std::promise<std::int64_t>> promise) REQUIRES(mutex_);
  void answer(const pb::LeaseKeepAliveResponse& response);
  void drop_locked(std::int64_t id, std::int64_t answer) REQUIRES(mutex_);

  Channel& channel_;
  const Events events_;
  internal::AnnotatedMutex grant_mutex_;  // one grant at a time, so a slot gets one lease
  internal::AnnotatedMutex mutex_;
  std::condition_variable wake_;
  bool closing_ GUARDED_BY(mutex_) = false;
  std::map<std::int64_t, Lease> leases_ GUARDED_BY(mutex_);                          // by lease id
  std::map<std::pair<std::int64_t, int>, std::int64_t> by_slot_ GUARDED_BY(mutex_);  // (seconds, slot) -> id
  grpc::ClientContext* context_ GUARDED_BY(mutex_) = nullptr;                        // the open stream's
  Stream* stream_ GUARDED_BY(mutex_) = nullptr;
  std::thread reader_;
  std::thread ticker_;
};

}  // namespace simba::etcd
