// The contention loop: rounds on the I/O pool, notifications on a strand.
#include "core/service_core.h"

#include "base/thread_annotations.h"
#include "core/round_batcher.h"

#include <algorithm>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "base/log.h"
#include "core/contend_period.h"
#include "runtime/runtime_internal.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba::internal {
namespace {

// An empty id: an observer's contender id, or the owner a failed round saw.
const std::string kEmptyId;

// Jitter needs no per-service generator (2.5 KB each): one per thread will do.
std::mt19937_64& rng() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator;
}

std::chrono::milliseconds poll_of(const Backend& backend, const ContendOptions& options) {
  if (options.poll_interval.count() > 0) return options.poll_interval;
  return backend.capabilities().poll_interval;
}

const ContendOptions& validated(const ContendOptions& options) {
  options.validate();
  return options;
}

}  // namespace

CoreContext::CoreContext(std::shared_ptr<Backend> backend_, std::shared_ptr<Runtime> runtime_, ContendOptions options_,
                         std::shared_ptr<Telemetry> telemetry_, std::shared_ptr<RoundBatcher> batcher_)
    : backend(std::move(backend_)),
      runtime(std::move(runtime_)),
      options(validated(options_)),
      telemetry(std::move(telemetry_)),
      batcher(std::move(batcher_)),
      push(backend->push() != nullptr),
      push_acquisitions(push && backend->push()->pushes_acquisitions()),
      waiters_hear_acquisitions(push && backend->push()->waiters_hear_acquisitions()),
      watch_when_waiting(backend->capabilities().watch_when_waiting),
      poll(poll_of(*backend, options)),
      liveness(*backend, *runtime) {}

namespace {
// The hooks worth a box of their own: none for a core without functions.
std::unique_ptr<const CoreHooks> boxed(CoreHooks hooks) {
  if (!hooks.on_round && !hooks.on_lost && !hooks.on_demand) return nullptr;
  return std::make_unique<const CoreHooks>(std::move(hooks));
}
}  // namespace

ServiceCore::ServiceCore(std::shared_ptr<MutexRetriever> retriever, std::shared_ptr<MutexContender> contender,
                         std::shared_ptr<const CoreContext> context, CoreHooks hooks)
    : retriever_(std::move(retriever)),
      contender_(contender.get()),
      context_(std::move(context)),
      hooks_(boxed(std::move(hooks))),  // (a move leaves hooks.one_shot as it was)
      slot_(context_->telemetry ? &context_->telemetry->slot(retriever_->mutex()) : nullptr),
      one_shot_(hooks.one_shot) {
  if (contender_ && static_cast<MutexRetriever*>(contender_) != retriever_.get()) {
    throw Error(errc::invalid_argument, "a core's contender must be its retriever");
  }
  validate_mutex_name(retriever_->mutex());
  if (contender_) validate_contender_id(contender_->contender_id());
  auto max_bytes = context_->backend->capabilities().max_mutex_bytes;
  if (max_bytes != 0 && retriever_->mutex().size() > max_bytes) {
    throw Error(errc::invalid_argument, "mutex name of " + std::to_string(retriever_->mutex().size()) +
                                            " bytes is longer than " + context_->backend->capabilities().engine +
                                            " accepts (" + std::to_string(max_bytes) + ")");
  }
}

ServiceCore::~ServiceCore() {
  context_->liveness.leave(*this);
  internal::MutexLock lock(mutex_);
  if (timer_ != 0) context_->runtime->cancel(timer_);  // (disarmed: it would fire to nothing)
}

const std::string& ServiceCore::contender_id() const { return contender_ ? contender_->contender_id() : kEmptyId; }

void ServiceCore::see_locked(const std::string& seen) {
  if (seen.empty()) {
    last_seen_.reset();
  } else if (last_seen_) {
    *last_seen_ = seen;
  } else {
    last_seen_ = std::make_unique<std::string>(seen);
  }
}

void ServiceCore::settled_locked() {
  if (settle_waiters_ > 0) context_->settled.notify_all();
}

bool ServiceCore::current_locked(std::uint64_t generation) const {
  return generation == generation_ && is_active(status_.load(std::memory_order_acquire));
}

void ServiceCore::start(std::optional<InlineRound> first_round) {
  ServiceStatus expected = ServiceStatus::initial;
  if (!status_.compare_exchange_strong(expected, ServiceStatus::starting)) {
    throw Error(errc::failed_precondition, "start() of the service for mutex '" + mutex() +
                                               "' needs status INITIAL, it is " + to_string(expected));
  }
  bool inline_round = first_round && context_->options.initial_delay.count() == 0;
  // A contender whose watch opens once it waits has none yet (if it owns, it hears a lost
  // channel through the context's liveness, open before its first round, and joined before
  // its generation starts: a loss between the two is before any round of it was sent); any
  // other opens its watch below, and takes the lock a second time.
  const bool deferred = contender_ && context_->watch_when_waiting;
  if (deferred) context_->liveness.join(*this);
  std::uint64_t generation;
  {
    internal::UniqueMutexLock lock(mutex_);
    await_settled_locked(lock, Clock::time_point::max(), [&]() REQUIRES(mutex_) { return stale_releases_ == 0; });
    generation = ++generation_;
    failures_ = 0;
    dormant_ = owned_ = again_ = false;
    standing_by_locked(true);
    if (!one_shot_) {
      notify_locked([self = shared_from_this()] {
        internal::MutexLock lock(self->mutex_);
        self->state_.keep(MutexState{}, self->own_id());
      });
    }
    if (deferred) inline_round = first_round_locked(generation, nullptr, /*after_watch=*/false, inline_round);
  }
  std::shared_ptr<Subscription> subscription;
  bool after_watch = false;  // the first round waits for the watch, off this thread
  if (!deferred) {
    subscription = open_watch(generation);
    if (subscription) {
      try {
        // An observer reports every change from its first round on: its watch is in place
        // first. So is a contender's where the engine needs it (ready_before_first_round): here
        // for a first round on this thread, else off it. Any other contender's first round goes
        // at once (finish_round waits if it lost).
        const bool ready_first = contender_ && subscription->ready_before_first_round();
        if (!contender_ || (ready_first && inline_round)) {
          subscription->wait_ready();
          first_round.reset();  // that took a while: the round reads the clock itself
        }
        after_watch = ready_first && !inline_round;
      } catch (const std::exception& e) {
        log_warn("cannot watch mutex '" + mutex() + "' (" + e.what() + "); polling instead");
      }
    }
    internal::MutexLock lock(mutex_);
    inline_round = first_round_locked(generation, subscription, after_watch, inline_round);
  }
  if (after_watch) {
    round_when_watched(generation, std::move(subscription), /*first=*/true);
  } else if (inline_round && first_round && first_round->answered && contender_) {
    // Answered already (take_lease()): judged as this generation's first round.
    finish_round(generation, first_round->since, BackendOp::acquire, *first_round->answered, /*counted=*/true);
  } else if (inline_round) {
    // Begun under the lock above, as a new generation's first round: nothing owned yet, so an
    // acquisition (a stop() meanwhile waits for it, and its end gives back what it took).
    run_round(generation, first_round ? std::optional(first_round->since) : std::nullopt,
              contender_ ? BackendOp::acquire : BackendOp::read);
  }
}

bool ServiceCore::may_take_lease() const {
  return contender_ && context_->watch_when_waiting && context_->options.initial_delay.count() == 0 &&
         !context_->liveness.offered();
}

bool ServiceCore::settled() const {
  internal::MutexLock lock(mutex_);
  return status_.load(std::memory_order_relaxed) == ServiceStatus::initial && !in_flight_ && stale_releases_ == 0;
}

std::optional<ServiceCore::TakenLease> ServiceCore::take_lease(Clock::time_point sent) {
  TakenLease lease;
  lease.sent = sent;
  try {
    lease.answer = context_->backend->acquire(mutex(), contender_->contender_id(), context_->options.ttl,
                                              context_->options.transition);
  } catch (const std::exception& e) {
    if (context_->telemetry) {
      context_->telemetry->round_trip(BackendOp::acquire, Clock::now() - sent);
      context_->telemetry->backend_error(BackendOp::acquire, mutex(), e.what());
    }
    return std::nullopt;
  }
  lease.answered = Clock::now();
  if (context_->telemetry) context_->telemetry->round_trip(BackendOp::acquire, lease.answered - sent);
  if (!lease.answer.owner.is_owner(contender_->contender_id())) return std::nullopt;
  lease.deadline = lease_end(sent, lease.answer);
  lease.ttl_deadline = ttl_end(sent, lease.answer);
  // A lease whose answer came back after its end by our clock (a stalled thread) is not ours
  // to act on: the rounds of start() judge that answer again and contend anew.
  if (lease.answered >= lease.deadline) return std::nullopt;
  return lease;
}

ServiceCore::Clock::time_point ServiceCore::lease_end(Clock::time_point sent, const OwnerSnapshot& snapshot) const {
  const auto granted = std::chrono::milliseconds(snapshot.owner.transition_at - snapshot.now);
  return sent + std::min(context_->options.ttl + context_->options.transition, granted);
}

ServiceCore::Clock::time_point ServiceCore::ttl_end(Clock::time_point sent, const OwnerSnapshot& snapshot) const {
  const auto granted_ttl = std::chrono::milliseconds(snapshot.owner.ttl_at - snapshot.now);
  return sent + std::min(context_->options.ttl, granted_ttl);
}

bool ServiceCore::first_round_locked(std::uint64_t generation, std::shared_ptr<Subscription> subscription,
                                     bool after_watch, bool inline_round) {
  watch_unconfirmed_ = contender_ && (subscription || context_->watch_when_waiting);
  subscription_ = std::move(subscription);
  awaiting_watch_ = after_watch;
  if (after_watch) {
    // round_when_watched, after the lock
  } else if (inline_round && in_flight_) {
    // A round of the last generation still runs (its stop() was on a runtime thread, which
    // does not wait): ours follows when it ends (settle_stale_locked), not beside it.
    again_ = true;
    inline_round = false;
  } else if (inline_round) {
    in_flight_ = true;
  } else {
    arm_timer_locked(generation, context_->options.initial_delay);
  }
  // Running before the lock is let go: a stale round ending now must see this generation
  // as current to start its round. (A release store: a seq_cst one is an xchg, a locked
  // read-modify-write; every reader of the status orders itself by the lock or by start() and
  // stop()'s compare-exchange, never by a store-then-load pattern.)
  status_.store(ServiceStatus::running, std::memory_order_release);
  return inline_round;
}

std::shared_ptr<Subscription> ServiceCore::open_watch(std::uint64_t generation) {
  try {
    std::weak_ptr<ServiceCore> weak = shared_from_this();
    return context_->backend->watch(mutex(), contender_id(), [weak, generation](WatchEvent event) {
      if (auto self = weak.lock()) self->on_watch(generation, event);
    });
  } catch (const std::exception& e) {
    log_warn("cannot watch mutex '" + mutex() + "' (" + e.what() + "); polling instead");
    return nullptr;
  }
}

void ServiceCore::round_when_watched(std::uint64_t generation, std::shared_ptr<Subscription> subscription, bool first) {
  context_->runtime->post_io(
      [self = shared_from_this(), generation, subscription = std::move(subscription), first]() mutable {
        if (!subscription) {
          // Opened only now that this contender waits (CoreContext::watch_when_waiting). One
          // that comes too late is let go when this task is (outside the core's lock: a watch's
          // end waits for its calls, which take that lock).
          subscription = self->open_watch(generation);
          internal::MutexLock lock(self->mutex_);
          if (!self->current_locked(generation)) return;
          if (!self->subscription_) self->subscription_ = subscription;
        }
        if (subscription) subscription->wait_ready();
        {
          internal::MutexLock lock(self->mutex_);
          if (!self->current_locked(generation)) return;
          self->watch_unconfirmed_ = false;  // in place now: a first round that loses need not wait again
          if (first) {
            if (!self->awaiting_watch_) return;
            self->awaiting_watch_ = false;
            if (self->context_->options.initial_delay.count() > 0) {
              self->arm_timer_locked(generation, self->context_->options.initial_delay);
              return;
            }
          }
        }
        self->trigger(generation, /*from_timer=*/first);
      });
}

MutexState ServiceCore::mutex_state() const {
  internal::MutexLock lock(mutex_);
  return state_.state(own_id());
}

bool ServiceCore::is_owner() const {
  internal::MutexLock lock(mutex_);
  return owned_ && Clock::now() < lease_deadline_;
}

bool ServiceCore::no_derived_held_since_won(std::uint64_t token) const {
  internal::MutexLock lock(mutex_);
  return owned_ && token != 0 && token_ == token && Clock::now() < lease_deadline_ && no_derived_since_won_;
}

std::optional<OwnerSnapshot::Parent> ServiceCore::parent_seen_since(Clock::time_point since,
                                                                    std::uint64_t token) const {
  internal::MutexLock lock(mutex_);
  if (!owned_ || token == 0 || token_ != token || Clock::now() >= lease_deadline_ || !parent_seen_ ||
      parent_round_sent_ < since) {
    return std::nullopt;
  }
  return OwnerSnapshot::Parent{parent_held_, parent_token_};
}

bool ServiceCore::is_in_ttl() const {
  internal::MutexLock lock(mutex_);
  return owned_ && Clock::now() < ttl_deadline_;
}

std::uint64_t ServiceCore::fencing_token() const {
  internal::MutexLock lock(mutex_);
  return owned_ && Clock::now() < lease_deadline_ ? token_ : 0;
}

std::chrono::milliseconds ServiceCore::handback_bound() const {
  if (context_->backend->demand_signal() == nullptr) return std::chrono::milliseconds(0);
  const bool pushed = context_->backend->demand_push() != nullptr && context_->push;
  std::chrono::milliseconds round_trips;
  {
    internal::MutexLock lock(mutex_);
    round_trips = std::min<std::chrono::milliseconds>(4 * std::chrono::milliseconds(last_round_ms_),
                                                      context_->options.ttl + context_->options.transition);
  }
  return std::chrono::milliseconds(250) + (pushed ? std::chrono::milliseconds(0) : 2 * context_->poll) + round_trips;
}

std::chrono::milliseconds ServiceCore::attempt_bound() const {
  return context_->options.ttl + context_->options.transition + handback_bound();
}

bool ServiceCore::met_caching_owner() const {
  internal::MutexLock lock(mutex_);
  return last_owner_locked().ends_with(MutexOwner::kCachingSuffix) && context_->backend->demand_signal() != nullptr;
}

ServiceCore::Clock::time_point ServiceCore::lease_deadline() const {
  internal::MutexLock lock(mutex_);
  return owned_ ? lease_deadline_ : Clock::time_point{};
}

ServiceCore::Lease ServiceCore::lease(Clock::time_point now) const {
  internal::MutexLock lock(mutex_);
  Lease lease;
  lease.owner = owned_ && now < lease_deadline_;
  lease.token = lease.owner ? token_ : 0;
  lease.generation = generation_;
  lease.deadline = owned_ ? lease_deadline_ : Clock::time_point{};
  lease.rival_seen = !last_failed_ && last_seen_;  // another's (our own is not kept there)
  lease.now = now;
  return lease;
}

std::string ServiceCore::last_owner_id() const {
  internal::MutexLock lock(mutex_);
  return last_owner_locked();
}

const std::string& ServiceCore::last_owner_locked() const {
  if (last_failed_) return kEmptyId;
  return last_owner_ours_ ? contender_id() : last_seen_ ? *last_seen_ : kEmptyId;
}

std::string ServiceCore::last_error() const {
  internal::MutexLock lock(mutex_);
  return last_failed_ && last_seen_ ? *last_seen_ : std::string();
}

std::uint64_t ServiceCore::generation() const {
  internal::MutexLock lock(mutex_);
  return generation_;
}

void ServiceCore::deliver(std::uint64_t generation, const MutexOwner& owner) {
  internal::MutexLock lock(mutex_);
  post_apply_locked(generation, owner);
}

void ServiceCore::flush() {
  if (one_shot_) return;  // it posts nothing
  auto delivered = std::make_shared<std::promise<void>>();
  auto done = delivered->get_future();
  {
    internal::MutexLock lock(mutex_);
    notify_locked([delivered] { delivered->set_value(); });
  }
  if (!SerialQueue::running_in_this_thread(this)) done.wait();
}

void ServiceCore::notify_locked(SerialQueue::Task task) {
  if (notifications_.push(std::move(task))) {
    context_->runtime->post_callback([self = shared_from_this()] { self->drain_notifications(); });
  }
}

void ServiceCore::drain_notifications() {
  std::vector<SerialQueue::Task> batch;
  {
    internal::MutexLock lock(mutex_);
    batch = notifications_.take();
  }
  SerialQueue::run(this, batch);
  bool again;
  {
    internal::MutexLock lock(mutex_);
    again = notifications_.rearm();
  }
  if (again) context_->runtime->post_callback([self = shared_from_this()] { self->drain_notifications(); });
}

void ServiceCore::on_channel_lost() {
  std::uint64_t generation;
  {
    internal::MutexLock lock(mutex_);
    generation = generation_;
  }
  on_watch(generation, WatchEvent::lost);
}

void ServiceCore::on_watch(std::uint64_t generation, WatchEvent event) {
  if (event == WatchEvent::lost) {
    // The backend's push channel dropped: the server may have restarted and forgotten our
    // lease. Stop acting as owner at once, then look again right away.
    {
      internal::MutexLock lock(mutex_);
      if (!current_locked(generation)) return;
      channel_lost_at_ = Clock::now();
      if (owned_) {
        log_warn("mutex '" + mutex() + "': lost the backend's push channel; no longer owner until renewed");
        revoke_locked(generation, LostReason::error);
      }
    }
    trigger(generation, false);
    return;
  }
  // A contender cares that the mutex may be free (and, where the backend asks for it, about a
  // new owner); an observer cares about every change.
  if (contender_ && event == WatchEvent::acquired && !context_->waiters_hear_acquisitions) return;
  trigger(generation, false);
}

void ServiceCore::trigger(std::uint64_t generation, bool from_timer) {
  bool renewal;  // a held lease goes before first acquisitions waiting for a thread
  {
    internal::MutexLock lock(mutex_);
    if (!current_locked(generation) || dormant_ || awaiting_watch_) return;
    if (!from_timer && owned_) return;  // An owner renews on its own schedule.
    if (in_flight_) {
      again_ = true;
      return;
    }
    disarm_timer_locked();
    in_flight_ = true;
    renewal = owned_;
    // A renewal that does not come back in time must still end the ownership at the lease's
    // deadline. Armed here, not at the win: a hold shorter than its first renewal (most) never
    // sets this timer.
    if (renewal && deadline_timer_ == 0) arm_deadline_locked(generation);
  }
  if (context_->batcher && contender_ && context_->batcher->takes(renewal)) {
    context_->batcher->submit(shared_from_this(), generation, renewal);
    return;
  }
  context_->runtime->post_io([self = shared_from_this(), generation] { self->run_round(generation); },
                             renewal ? Runtime::Priority::urgent : Runtime::Priority::normal);
}

std::optional<BackendOp> ServiceCore::begin_round(std::uint64_t generation) {
  BackendOp op = contender_ ? BackendOp::acquire : BackendOp::read;
  {
    internal::UniqueMutexLock lock(mutex_);
    if (generation != generation_) {  // stop() came before this round ran: nothing to send
      auto next = settle_stale_locked();
      lock.unlock();
      if (next) trigger(*next, true);
      return std::nullopt;
    }
    if (contender_ && owned_) op = BackendOp::renew;
  }
  return op;
}

AcquireCall ServiceCore::call() const {
  return AcquireCall{mutex(), contender_->contender_id(), context_->options.ttl, context_->options.transition};
}

void ServiceCore::run_round(std::uint64_t generation, std::optional<Clock::time_point> sent_at,
                            std::optional<BackendOp> begun) {
  const auto op = begun ? begun : begin_round(generation);
  if (!op) return;
  const auto sent = sent_at ? *sent_at : Clock::now();
  OwnerSnapshot snapshot;
  try {
    snapshot = contender_ ? context_->backend->acquire(mutex(), contender_->contender_id(), context_->options.ttl,
                                                       context_->options.transition)
                          : context_->backend->read(mutex());
  } catch (const std::exception& e) {
    if (context_->telemetry) {
      context_->telemetry->round_trip(*op, Clock::now() - sent);
      context_->telemetry->backend_error(*op, mutex(), e.what());
    }
    fail_round(generation, sent, e.what());
    return;
  }
  finish_round(generation, sent, *op, snapshot);
}

void ServiceCore::answer_round(std::uint64_t generation, Clock::time_point sent, BackendOp op,
                               const AcquireResult& result) {
  if (!result.error) {
    finish_round(generation, sent, op, result.snapshot);
    return;
  }
  std::string what;
  try {
    std::rethrow_exception(result.error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "a batched round failed with a non-standard exception";
  }
  if (context_->telemetry) {
    context_->telemetry->round_trip(op, Clock::now() - sent);
    context_->telemetry->backend_error(op, mutex(), what);
  }
  fail_round(generation, sent, what);
}

void ServiceCore::finish_round(std::uint64_t generation, Clock::time_point sent, BackendOp op,
                               const OwnerSnapshot& snapshot, bool counted) {
  const bool claims = contender_ && snapshot.owner.is_owner(contender_->contender_id());
  bool demanded = false;
  bool look_when_watched = false;             // once the watch is in place, look again
  std::shared_ptr<Subscription> unconfirmed;  // that watch (null: to be opened)
  RoundTimes times{sent, {}};
  {
    internal::UniqueMutexLock lock(mutex_);
    if (!current_locked(generation)) {
      // A round of an earlier generation: drop it (end_stale_round).
      auto next = settle_stale_locked();
      const bool release = stale_round_releases_locked();
      lock.unlock();
      end_stale_round(next, release, "a round that ended after stop()");
      return;
    }
    in_flight_ = false;
    settled_locked();
    failures_ = 0;
    last_failed_ = false;
    last_owner_ours_ = contender_ && snapshot.owner.owner_id == contender_->contender_id();
    see_locked(last_owner_ours_ ? kEmptyId : snapshot.owner.owner_id);
    if (owned_ && sent >= lease_deadline_) {
      // The renewal left after our lease had run out by our own clock (the process stalled,
      // its timers fired late): whatever this answer says, the old lease lapsed and someone
      // may have held the mutex meanwhile. That is a loss, whichever timer ran first.
      log_warn("mutex '" + mutex() + "': the renewal of " + contender_id() +
               " left after its lease had run out (the process stalled?); no longer owner");
      revoke_locked(generation, LostReason::stall);
    }
    // The lease counts from when the request was sent, and lasts what we asked for or what
    // the backend granted, whichever is shorter (ZooKeeper caps it by the session timeout).
    const auto lease_deadline = lease_end(sent, snapshot);
    // A dormant core (a lock entry's that lost its lease) never claims again until stop().
    // A round sent before the push channel was lost may have been answered by a server that
    // then forgot the lease (a restart): only a round sent after the loss proves ownership.
    const bool before_loss = sent <= channel_lost_at_;
    const auto now = Clock::now();
    times.answered = now;
    last_round_ms_ = static_cast<std::uint16_t>(
        std::clamp<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(now - sent).count(), 0, UINT16_MAX));
    // The answer's time, read once for both (a clock read costs ~30 ns here): the round trip
    // counts the wait for this lock too, which is short.
    if (context_->telemetry && !counted) context_->telemetry->round_trip(op, now - sent);
    bool ours = claims && !dormant_ && !before_loss && now < lease_deadline;
    if (ours && owned_ && snapshot.owner.fencing_token != token_) {
      // A new token: our lease ended between renewals (released by force, or expired by the
      // backend's clock) and this renewal took it anew: a loss, then perhaps a new ownership.
      log_warn("mutex '" + mutex() + "': the lease of " + contender_id() + " ended between renewals (token " +
               std::to_string(token_) + " -> " + std::to_string(snapshot.owner.fencing_token) + "); no longer owner");
      revoke_locked(generation, LostReason::evicted);
      ours = !dormant_;
    }
    times.ours = ours;
    if (ours) {
      const bool won = !owned_;
      owned_ = true;
      lease_deadline_ = lease_deadline;
      ttl_deadline_ = ttl_end(sent, snapshot);
      token_ = snapshot.owner.fencing_token;
      if (won) {
        no_derived_since_won_ = snapshot.no_derived_held;
        parent_seen_ = snapshot.parent.has_value();
        parent_held_ = parent_seen_ && snapshot.parent->held;
        parent_token_ = parent_seen_ ? snapshot.parent->fencing_token : 0;
        parent_round_sent_ = sent;
        won_locked(now);
      }
      // Renewed: the next renewal arms the deadline again (trigger()).
      cancel_deadline_locked();
      post_apply_locked(generation, snapshot.owner);
      demanded = snapshot.demanded;
    } else if (claims) {
      // The answer came back after the lease it granted had run out by our clock, or was sent
      // before the push channel was lost: not ours to act on. Treat it as a lost lease and
      // try again (after a loss the owner was already revoked).
      if (owned_) {
        log_warn("mutex '" + mutex() + "': the renewal of " + contender_id() +
                 " came back after its lease had run out; no longer owner");
        revoke_locked(generation, LostReason::stall);
      }
      again_ = true;
    } else {
      if (owned_) {
        log_warn("mutex '" + mutex() + "': " + contender_id() + " found it " +
                 (snapshot.owner.empty() ? std::string("free") : "owned by '" + snapshot.owner.owner_id + "'") +
                 " at a renewal; no longer owner");
        owned_ = false;
        cancel_deadline_locked();
        lost_locked(generation, LostReason::evicted);
      }
      post_apply_locked(generation, snapshot.owner);
    }
    if (!ours && watch_unconfirmed_) {
      // A release between this round and the watch's start would go unheard.
      watch_unconfirmed_ = false;
      look_when_watched = true;
      unconfirmed = subscription_;  // null: not opened yet
    }
    RoundPolicy policy;
    policy.observer = !contender_;
    policy.ours = ours;
    policy.again = again_;
    policy.push = context_->push;
    policy.push_acquisitions = context_->push_acquisitions;
    policy.ttl = context_->options.ttl;
    policy.poll = context_->poll;
    const auto delay = next_round_delay(snapshot.owner, snapshot.now,
                                        contender_ ? contender_->contender_id() : std::string_view(), policy, rng());
    again_ = false;
    // An owner's next renewal counts from when this round was sent, as its lease does: a round
    // trip that took long (a queue of batches, a busy server) then shortens the wait for the
    // renewal, not the transition that is its slack.
    const auto due = ours ? std::max(sent + delay, now) : now + delay;
    // Batched, renewals of many leases go together (renewal_tick).
    if (!dormant_)
      arm_timer_locked(generation, ours && context_->batcher ? renewal_tick(due, now, context_->options.ttl) : due);
    // A renewal due no sooner than the deadline (no transition, a lease the backend cut
    // short) would arm it too late: arm it now.
    if (ours && due >= lease_deadline_) arm_deadline_locked(generation);
  }
  if (look_when_watched) round_when_watched(generation, std::move(unconfirmed), /*first=*/false);
  if (demanded && hooks_ && hooks_->on_demand) hooks_->on_demand();
  if (hooks_ && hooks_->on_round) hooks_->on_round(times);
}

void ServiceCore::fail_round(std::uint64_t generation, Clock::time_point sent, const std::string& what) {
  {
    internal::UniqueMutexLock lock(mutex_);
    if (!current_locked(generation)) {
      // Its command may still have run on the server (an answer lost or late): as an answered one.
      auto next = settle_stale_locked();
      const bool release = stale_round_releases_locked();
      lock.unlock();
      end_stale_round(next, release, "a round that failed after stop()");
      return;
    }
    in_flight_ = false;
    settled_locked();
    ++failures_;
    last_owner_ours_ = false;
    last_failed_ = true;
    see_locked(what);
    if (owned_) revoke_locked(generation, LostReason::error);
    auto delay = backoff_delay(failures_, context_->options.backoff_initial, context_->options.ttl, rng());
    if ((failures_ & (failures_ - 1)) == 0) {  // 1st, 2nd, 4th, 8th... failure in a row
      log_warn("mutex '" + mutex() + "': backend error (" + std::to_string(failures_) + " in a row): " + what +
               "; retrying in " + format_duration(delay));
    }
    again_ = false;
    if (!dormant_) arm_timer_locked(generation, delay);
  }
  if (hooks_ && hooks_->on_round) hooks_->on_round(RoundTimes{sent, Clock::now()});
}

bool ServiceCore::stale_round_releases_locked() {
  const bool release = contender_ && !is_active(status_.load(std::memory_order_acquire));
  if (release) ++stale_releases_;  // a start() meanwhile waits for it (the next generation has the same id)
  return release;
}

void ServiceCore::end_stale_round(std::optional<std::uint64_t> next, bool release, const char* why) {
  if (!release) {
    if (next) trigger(*next, true);
    return;
  }
  release_lease(why);
  internal::MutexLock lock(mutex_);
  if (--stale_releases_ == 0) settled_locked();
}

std::optional<std::uint64_t> ServiceCore::settle_stale_locked() {
  in_flight_ = false;
  settled_locked();
  if (!again_) return std::nullopt;
  // The current generation asked for a round while this one ran (trigger() found it in
  // flight): nothing else will start it.
  again_ = false;
  return generation_;
}

void ServiceCore::arm_deadline_locked(std::uint64_t generation) {
  deadline_timer_ = RuntimeAccess::schedule_weak_at(
      *context_->runtime, lease_deadline_, weak_from_this(),
      [](void* self, std::uint64_t generation) { static_cast<ServiceCore*>(self)->on_lease_deadline(generation); },
      generation);
}

void ServiceCore::cancel_deadline_locked() {
  if (deadline_timer_ != 0) context_->runtime->cancel(std::exchange(deadline_timer_, 0));
}

void ServiceCore::on_lease_deadline(std::uint64_t generation) {
  internal::MutexLock lock(mutex_);
  if (!current_locked(generation) || !owned_ || Clock::now() < lease_deadline_) return;
  log_warn("mutex '" + mutex() + "': the lease of " + contender_id() +
           " ran out before it could be renewed; no longer owner");
  revoke_locked(generation, LostReason::stall);
}

void ServiceCore::revoke_locked(std::uint64_t generation, LostReason reason) {
  owned_ = false;
  cancel_deadline_locked();
  lost_locked(generation, reason);
  post_apply_locked(generation, MutexOwner::none());
}

void ServiceCore::won_locked(Clock::time_point now) {
  owned_since_ = now;
  if (!context_->telemetry || one_shot_) return;  // a lock entry counts its holds instead
  standing_by_locked(false);
  context_->telemetry->acquired(*slot_, mutex(), contender_id(), token_, std::nullopt);
}

void ServiceCore::standing_by_locked(bool waiting) {
  // A service's contender that does not own the mutex waits for it (a standby leader); a lock
  // entry's requests are counted by the entry, an observer waits for nothing.
  if (!context_->telemetry || one_shot_ || !contender_ || waiting == standing_by_) return;
  standing_by_ = waiting;
  context_->telemetry->waiting(*slot_, waiting ? 1 : -1);
}

void ServiceCore::lost_locked(std::uint64_t generation, LostReason reason) {
  if (context_->telemetry) {
    const auto held = Clock::now() - owned_since_;
    context_->telemetry->lost(*slot_, reason, mutex(), contender_id(), token_, held);
    if (!one_shot_) context_->telemetry->ended(*slot_, held);
    standing_by_locked(true);  // a service contends on
  }
  if (one_shot_) dormant_ = true;
  if (hooks_ && hooks_->on_lost) {
    // Not under our lock: the hook may call back into this core (an entry stopping it).
    context_->runtime->post_io([on_lost = hooks_->on_lost, generation] { on_lost(generation); });
  }
}

void ServiceCore::post_apply_locked(std::uint64_t generation, const MutexOwner& owner) {
  if (one_shot_) return;
  notify_locked([self = shared_from_this(), generation, owner] { self->apply(generation, owner); });
}

void ServiceCore::arm_timer_locked(std::uint64_t generation, std::chrono::milliseconds delay) {
  arm_timer_locked(generation, Clock::now() + delay);
}

void ServiceCore::arm_timer_locked(std::uint64_t generation, Clock::time_point at) {
  if (generation != generation_) return;  // (an ended generation's round never runs)
  due_ = true;
  due_at_ = at;
  if (timer_ != 0 && timer_at_ <= at) return;  // it fires first, then arms again for due_at_
  if (timer_ != 0) context_->runtime->cancel(timer_);
  schedule_timer_locked(at);
}

void ServiceCore::schedule_timer_locked(Clock::time_point at) {
  timer_at_ = at;
  timer_ = RuntimeAccess::schedule_weak_at(
      *context_->runtime, at, weak_from_this(),
      [](void* self, std::uint64_t sequence) { static_cast<ServiceCore*>(self)->on_timer(sequence); },
      ++timer_sequence_);
}

void ServiceCore::on_timer(std::uint64_t sequence) {
  std::uint64_t generation;
  {
    internal::MutexLock lock(mutex_);
    if (sequence != timer_sequence_) return;  // replaced while it fired: the new one is pending
    timer_ = 0;
    if (!due_) return;
    if (Clock::now() < due_at_) {
      schedule_timer_locked(due_at_);
      return;
    }
    due_ = false;
    generation = generation_;
  }
  trigger(generation, true);
}

void ServiceCore::apply(std::uint64_t generation, const MutexOwner& owner) {
  MutexState next;
  {
    internal::MutexLock lock(mutex_);
    if (!current_locked(generation)) {
      // Stale: drop it, unless it tells an owner that it is no longer owner.
      bool claims = contender_ && owner.is_owner(contender_->contender_id());
      if (claims || !state_.after_ours()) return;
    }
    next = MutexState{state_.after(own_id()), owner};
    state_.keep(next, own_id());
  }
  try {
    retriever_->notify_owner(next);
  } catch (const std::exception& e) {
    log_error("mutex '" + mutex() + "': a callback threw: " + e.what());
  } catch (...) {
    log_error("mutex '" + mutex() + "': a callback threw a non-standard exception");
  }
}

}  // namespace simba::internal
