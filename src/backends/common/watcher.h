// One watch of a backend's push channel, and the handle that ends it. Internal to backends.
//
// Calls happen under the watcher's own mutex, and the handle's destructor takes that mutex
// too: once the destructor returns, no call is running and none will start (the contract of
// Backend::watch).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::internal {

struct Watcher {
  explicit Watcher(std::function<void(WatchEvent)> callback, std::vector<std::string> watched_keys = {})
      : on_event(std::move(callback)), keys(std::move(watched_keys)) {}

  void call(WatchEvent event) {
    internal::MutexLock lock(mutex);
    if (alive) on_event(event);
  }
  void end() {
    internal::MutexLock lock(mutex);
    alive = false;
  }

  internal::AnnotatedMutex mutex;
  bool alive GUARDED_BY(mutex) = true;
  // A push channel's lazy watch whose keys it does not listen to yet (under the channel's lock).
  bool pending = false;
  const std::function<void(WatchEvent)> on_event;
  // What it listens to (channels, mutex names). A push channel, under its own lock, moves them
  // into its table of keys once it listens, and keeps pointers to them in `listened`: each key
  // is stored once, however many watch it (two keys a contender on Redis, about 100 bytes each).
  std::vector<std::string> keys;
  std::vector<const std::string*> listened;
};

using WatcherList = std::vector<std::shared_ptr<Watcher>>;

// Tells each of `watchers` of `event` (a watcher whose watch ended hears nothing).
inline void tell(const WatcherList& watchers, WatchEvent event) {
  for (const auto& watcher : watchers) watcher->call(event);
}

// Ends the watch, then runs `on_end` (for the backend's bookkeeping). wait_ready() runs
// `ready`, if any (Subscription::wait_ready); ready_before_first_round() says what it was given.
class WatchHandle final : public Subscription {
 public:
  WatchHandle(std::shared_ptr<Watcher> watcher, std::function<void()> on_end = {}, std::function<void()> ready = {},
              bool ready_before_first_round = false)
      : watcher_(std::move(watcher)),
        on_end_(std::move(on_end)),
        ready_(std::move(ready)),
        ready_before_first_round_(ready_before_first_round) {}
  ~WatchHandle() override {
    watcher_->end();
    if (on_end_) on_end_();
  }
  void wait_ready() override {
    if (ready_) ready_();
  }
  bool ready_before_first_round() const noexcept override { return ready_before_first_round_; }

 private:
  std::shared_ptr<Watcher> watcher_;
  std::function<void()> on_end_;
  std::function<void()> ready_;
  const bool ready_before_first_round_;
};

// A WatchHandle whose end action is kept as it is, not in a std::function (which puts any
// closure of more than two words on the heap): a watch per mutex, at 100,000 mutexes.
template <class OnEnd>
class WatchHandleWith final : public Subscription {
 public:
  WatchHandleWith(std::shared_ptr<Watcher> watcher, OnEnd on_end)
      : watcher_(std::move(watcher)), on_end_(std::move(on_end)) {}
  ~WatchHandleWith() override {
    watcher_->end();
    on_end_();
  }
  WatchHandleWith(const WatchHandleWith&) = delete;
  WatchHandleWith& operator=(const WatchHandleWith&) = delete;

 private:
  const std::shared_ptr<Watcher> watcher_;
  OnEnd on_end_;
};

// Ends the watch, then runs `on_end` (noexcept in effect: it runs in a destructor).
template <class OnEnd>
std::unique_ptr<Subscription> watch_handle(std::shared_ptr<Watcher> watcher, OnEnd on_end) {
  return std::make_unique<WatchHandleWith<OnEnd>>(std::move(watcher), std::move(on_end));
}

}  // namespace simba::internal
