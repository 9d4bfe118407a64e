// The kit's case files, as run_kit() links them, and what several of them share. Internal to
// the kit.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>

#include "kit.h"

namespace simba::tck {

// A runtime as make_client() gives each client (4 I/O threads, 2 callback threads), for a
// client over a backend of the case's own.
std::shared_ptr<Runtime> make_runtime();

// Leases of a second and a second, for cases whose many holders contend for long: a loaded,
// sanitized machine may still stall a renewal past one, and a holder whose lease ran out is
// rightly replaced, so their order checks hold only while no holder lost its lease.
inline ContendOptions steady_options() {
  auto options = fast_options();
  options.ttl = std::chrono::seconds(1);
  options.transition = std::chrono::seconds(1);
  return options;
}

// A stalled process, as its timers and rounds see it: every I/O thread of `client`'s runtime
// blocked by a task of this one until wake() (or the end of this one). all_blocked() says
// whether they were all blocked within kSoon of the start.
class StalledIoThreads {
 public:
  explicit StalledIoThreads(const Client& client) : threads_(client.runtime()->options().io_threads) {
    woken_ = wake_.get_future().share();
    for (unsigned i = 0; i < threads_; ++i) {
      client.runtime()->post_io([woken = woken_, blocked = blocked_] {  // (may outlive this)
        blocked->fetch_add(1);
        woken.wait();
      });
    }
    all_blocked_ = wait_until([this] { return blocked_->load() == threads_; }, kSoon);
  }
  StalledIoThreads(const StalledIoThreads&) = delete;
  StalledIoThreads& operator=(const StalledIoThreads&) = delete;
  ~StalledIoThreads() { wake(); }
  bool all_blocked() const { return all_blocked_; }
  void wake() {
    if (!woken_now_) wake_.set_value();
    woken_now_ = true;
  }

 private:
  const unsigned threads_;
  std::promise<void> wake_;
  std::shared_future<void> woken_;
  std::shared_ptr<std::atomic<unsigned>> blocked_ = std::make_shared<std::atomic<unsigned>>(0);
  bool all_blocked_ = false;
  bool woken_now_ = false;
};

int link_batch_cases();
int link_cache_cases();
int link_connect_cases();
int link_contend_cases();
int link_locker_cases();
int link_lock_cases();
int link_records_cases();
int link_semaphore_cases();
int link_rwlock_cases();
#ifdef SIMBA_TCK_WITH_ASIO
int link_lock_asio_cases();
#endif

}  // namespace simba::tck
