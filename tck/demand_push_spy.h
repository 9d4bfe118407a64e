// A backend of the kit's own cases over the engine under test: counts reads and releases, and
// pushes demands nobody made on command (tck/cache_cases.cc, tests/sqlite_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kit.h"
#include "simba/backend.h"

namespace simba::tck {

// A backend that counts reads and releases and can push a demand nobody made, as
// DemandPush::watch_demand() may (ZooKeeper: a waiter left; SQLite: another mutex's ring in a
// shared slot of its wake board; any engine: a push channel that dropped). It offers a demand
// push on every engine: the engine's own where it has one, else only the pushes made here.
class DemandPushSpy : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  DemandPush* demand_push() noexcept override { return this; }

  OwnerSnapshot read(const std::string& mutex) override {
    reads_.fetch_add(1);
    return ForwardingBackend::read(mutex);
  }
  bool release(const std::string& mutex, const std::string& contender_id) override {
    releases_.fetch_add(1);
    return ForwardingBackend::release(mutex, contender_id);
  }
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& owner_id,
                                             std::function<void()> on_demand) override {
    auto inner = target()->demand_push() ? ForwardingBackend::watch_demand(mutex, owner_id, on_demand) : nullptr;
    std::lock_guard lock(mutex_);
    const auto id = ++next_id_;
    watches_[id] = std::move(on_demand);
    return std::make_unique<Watch>(std::move(inner), [this, id] {
      std::lock_guard lock(mutex_);
      watches_.erase(id);
    });
  }

  bool watching() const {
    std::lock_guard lock(mutex_);
    return !watches_.empty();
  }
  // Calls every demand watch, as a push without a demand would.
  void push_without_demand() {
    std::lock_guard lock(mutex_);
    for (const auto& [id, on_demand] : watches_) on_demand();
  }

  // What it counted so far.
  struct Counts {
    long reads = 0;
    long releases = 0;
  };
  Counts counts() const { return {reads_.load(), releases_.load()}; }
  // Waits until the owner answered the pushes made after `before`: it released, or it read its
  // record six times (its look at each push, and its demand polls, at most 100 ms apart, after
  // them: a lease given back for a push is released before those). false: neither in `timeout`.
  bool answered_since(Counts before, std::chrono::milliseconds timeout) const {
    return wait_until([&] { return released_since(before) || reads_.load() >= before.reads + 6; }, timeout);
  }
  bool released_since(Counts before) const { return releases_.load() > before.releases; }

 private:
  class Watch : public Subscription {
   public:
    Watch(std::unique_ptr<Subscription> inner, std::function<void()> forget)
        : inner_(std::move(inner)), forget_(std::move(forget)) {}
    ~Watch() override { forget_(); }

   private:
    std::unique_ptr<Subscription> inner_;
    std::function<void()> forget_;
  };

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 0;                               // guarded by mutex_
  std::map<std::uint64_t, std::function<void()>> watches_;  // guarded by mutex_
  std::atomic<long> reads_{0};
  std::atomic<long> releases_{0};
};

}  // namespace simba::tck
