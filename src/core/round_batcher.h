// Sends the rounds of a Client's contenders in batches, to a backend that offers Batches.
// Internal.
//
// A round that would wait for an I/O thread (a renewal, a waiter's look, a first acquisition
// of a service; only a renewal where the engine batches no acquisitions) joins a queue
// instead; an I/O thread takes every round queued by then (renewals first, at most
// Batches::max_batch()) and sends them in one round trip. Nothing waits for a batch to fill: a
// lone round goes alone as soon as a thread is free, so a quiet process pays no latency.
// Rounds pile up, and share round trips, while kMaxBatchesInFlight batches are on the wire: a
// process holding 100,000 leases renews them in a few hundred round trips instead of 100,000.
// A blocking lock's first round still goes alone on its caller's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>

#include "base/thread_annotations.h"
#include "metrics/telemetry.h"
#include "simba/backend.h"
#include "simba/runtime.h"

namespace simba::internal {

class ServiceCore;

class RoundBatcher : public std::enable_shared_from_this<RoundBatcher> {
 public:
  static constexpr unsigned kMaxBatchesInFlight = 2;

  // `backend` must offer Batches.
  RoundBatcher(std::shared_ptr<Backend> backend, std::shared_ptr<Runtime> runtime,
               std::shared_ptr<Telemetry> telemetry);

  // Queues the round of `generation` of `core`; its answer comes to ServiceCore::answer_round
  // on an I/O thread (or nothing, if the core is gone or its generation ended meanwhile).
  void submit(const std::shared_ptr<ServiceCore>& core, std::uint64_t generation, bool renewal);
  // Whether a round that is not a renewal goes through submit() (Batches::batches_acquisitions).
  bool takes(bool renewal) const noexcept { return renewal || takes_acquisitions_; }

 private:
  struct Round {
    std::weak_ptr<ServiceCore> core;
    std::uint64_t generation;
  };
  void drain();

  const std::shared_ptr<Backend> backend_;
  Batches& batches_;
  const bool takes_acquisitions_;
  const std::shared_ptr<Runtime> runtime_;
  const std::shared_ptr<Telemetry> telemetry_;

  AnnotatedMutex mutex_;
  std::deque<Round> renewals_ GUARDED_BY(mutex_);  // go first
  std::deque<Round> others_ GUARDED_BY(mutex_);
  unsigned in_flight_ GUARDED_BY(mutex_) = 0;  // drains posted or running
};

}  // namespace simba::internal
