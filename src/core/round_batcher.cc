// Batched rounds: the queue, and the I/O threads that drain it.
#include "core/round_batcher.h"

#include <exception>
#include <utility>
#include <vector>

#include "base/log.h"
#include "core/service_core.h"
#include "simba/error.h"

namespace simba::internal {

RoundBatcher::RoundBatcher(std::shared_ptr<Backend> backend, std::shared_ptr<Runtime> runtime,
                           std::shared_ptr<Telemetry> telemetry)
    : backend_(std::move(backend)),
      batches_(*backend_->batches()),
      takes_acquisitions_(batches_.batches_acquisitions()),
      runtime_(std::move(runtime)),
      telemetry_(std::move(telemetry)) {}

void RoundBatcher::submit(const std::shared_ptr<ServiceCore>& core, std::uint64_t generation, bool renewal) {
  bool post;
  {
    MutexLock lock(mutex_);
    (renewal ? renewals_ : others_).push_back(Round{core, generation});
    if (telemetry_) telemetry_->queued(1);  // before a drain can take it: the gauge never dips below 0
    post = in_flight_ < kMaxBatchesInFlight;
    if (post) ++in_flight_;
  }
  if (post) {
    runtime_->post_io([self = shared_from_this()] { self->drain(); },
                      renewal ? Runtime::Priority::urgent : Runtime::Priority::normal);
  }
}

void RoundBatcher::drain() {
  const std::size_t most = std::max<std::size_t>(1, batches_.max_batch());
  for (;;) {
    std::vector<Round> rounds;
    {
      MutexLock lock(mutex_);
      for (auto* queue : {&renewals_, &others_}) {
        while (!queue->empty() && rounds.size() < most) {
          rounds.push_back(std::move(queue->front()));
          queue->pop_front();
        }
      }
      if (rounds.empty()) {
        --in_flight_;
        return;
      }
    }
    if (telemetry_) telemetry_->queued(-static_cast<std::int64_t>(rounds.size()));
    // What each round asks (a round whose generation ended asks nothing and settles itself).
    std::vector<std::shared_ptr<ServiceCore>> cores;
    std::vector<std::uint64_t> generations;
    std::vector<BackendOp> ops;
    std::vector<AcquireCall> calls;
    for (auto& round : rounds) {
      auto core = round.core.lock();
      if (!core) continue;
      auto op = core->begin_round(round.generation);
      if (!op) continue;
      calls.push_back(core->call());
      calls.back().renewal = *op == BackendOp::renew;
      cores.push_back(std::move(core));
      generations.push_back(round.generation);
      ops.push_back(*op);
    }
    if (calls.empty()) continue;
    const auto sent = ServiceCore::Clock::now();
    std::vector<AcquireResult> results;
    try {
      results = batches_.acquire_batch(calls);
      if (results.size() != calls.size()) {
        throw Error(errc::internal, backend_->describe() + ": a batch of " + std::to_string(calls.size()) +
                                        " calls got " + std::to_string(results.size()) + " answers");
      }
    } catch (...) {
      results.assign(calls.size(), AcquireResult{{}, std::current_exception()});
    }
    for (std::size_t i = 0; i < cores.size(); ++i) {
      try {
        cores[i]->answer_round(generations[i], sent, ops[i], results[i]);
      } catch (const std::exception& e) {  // never expected: the drain must go on for the others
        log_error("mutex '" + calls[i].mutex + "': a batched round's answer failed: " + e.what());
      }
    }
    // Counted once its rounds were (each answer counts its round trip): a look at the metrics
    // meanwhile never finds more batched rounds than rounds.
    if (telemetry_) telemetry_->batch(calls.size());
  }
}

}  // namespace simba::internal
