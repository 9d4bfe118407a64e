// Client: makes services over one backend and runtime.
#include "simba/client.h"

#include "core/round_batcher.h"
#include "core/service_core.h"
#include "locks/lock_table.h"
#include "locks/semaphore_state.h"
#include "locks/shared_mutex_state.h"
#include "simba/error.h"

namespace simba {
namespace {

using internal::ServiceCore;

// The public service interfaces, forwarded to a ServiceCore.
template <class Interface>
class ServiceAdapter : public Interface {
 public:
  explicit ServiceAdapter(std::shared_ptr<ServiceCore> core) : core_(std::move(core)) {}
  ~ServiceAdapter() override { internal::release_core(core_); }
  ServiceStatus status() const override { return core_->status(); }
  const std::string& mutex() const override { return core_->mutex(); }
  MutexState mutex_state() const override { return core_->mutex_state(); }
  void start() override { core_->start(); }
  void stop() override { core_->stop(); }
  void close() noexcept override { core_->close(); }

 protected:
  std::shared_ptr<ServiceCore> core_;
};

using RetrievalServiceImpl = ServiceAdapter<MutexRetrievalService>;

class ContendServiceImpl final : public ServiceAdapter<MutexContendService> {
 public:
  using ServiceAdapter::ServiceAdapter;
  const std::string& contender_id() const override { return core_->contender_id(); }
  bool is_owner() const override { return core_->is_owner(); }
  bool is_in_ttl() const override { return core_->is_in_ttl(); }
  std::uint64_t fencing_token() const override { return core_->fencing_token(); }
};

template <class T>
const std::shared_ptr<T>& require(const std::shared_ptr<T>& p, const char* what) {
  if (!p) throw Error(errc::invalid_argument, std::string(what) + " must not be null");
  return p;
}

}  // namespace

const char* to_string(ServiceStatus status) noexcept {
  switch (status) {
    case ServiceStatus::initial: return "INITIAL";
    case ServiceStatus::starting: return "STARTING";
    case ServiceStatus::running: return "RUNNING";
    case ServiceStatus::stopping: return "STOPPING";
  }
  return "UNKNOWN";
}

Client::Client(std::shared_ptr<Backend> backend, ContendOptions options, std::shared_ptr<Runtime> runtime)
    : backend_(std::move(backend)), options_(options), runtime_(std::move(runtime)) {
  require(backend_, "backend");
  require(runtime_, "runtime");
  options_.validate();
  telemetry_ = std::make_shared<internal::Telemetry>(backend_->capabilities().engine);
  if (backend_->batches()) batcher_ = std::make_shared<internal::RoundBatcher>(backend_, runtime_, telemetry_);
  locks_ = std::make_shared<internal::LockTable>(
      std::make_shared<const internal::CoreContext>(backend_, runtime_, options_, telemetry_, batcher_));
}

std::unique_ptr<MutexContendService> Client::contend_service(std::shared_ptr<MutexContender> contender) const {
  require(contender, "contender");
  // The Client's own options: the context its lock table shares with its other services.
  return std::make_unique<ContendServiceImpl>(std::make_shared<ServiceCore>(contender, contender, locks_->context()));
}

std::unique_ptr<MutexContendService> Client::contend_service(std::shared_ptr<MutexContender> contender,
                                                             const ContendOptions& options) const {
  require(contender, "contender");
  auto context = std::make_shared<const internal::CoreContext>(backend_, runtime_, options, telemetry_, batcher_);
  return std::make_unique<ContendServiceImpl>(std::make_shared<ServiceCore>(contender, contender, std::move(context)));
}

std::unique_ptr<MutexRetrievalService> Client::retrieval_service(std::shared_ptr<MutexRetriever> retriever) const {
  require(retriever, "retriever");
  // An observer sends no renewals: the batcher in the context is never asked.
  auto core = std::make_shared<ServiceCore>(retriever, nullptr, locks_->context());
  return std::make_unique<RetrievalServiceImpl>(std::move(core));
}

MutexOwner Client::owner(const std::string& mutex) const { return snapshot(mutex).owner; }

OwnerSnapshot Client::snapshot(const std::string& mutex) const {
  validate_mutex_name(mutex);
  return backend_->read(mutex);
}

bool Client::release(const std::string& mutex, const std::string& contender_id) const {
  validate_mutex_name(mutex);
  validate_contender_id(contender_id);
  return backend_->release(mutex, contender_id);
}

std::string Client::describe() const { return backend_->describe(); }

Mutex Client::mutex(const std::string& mutex) const { return mutex_as(mutex, {}); }

Mutex Client::mutex_as(const std::string& mutex, const std::string& contender_id) const {
  validate_mutex_name(mutex);
  const auto linger = lock_options_.linger.value_or(options_.ttl);
  return Mutex(locks_->entry(mutex, linger.count() > 0, contender_id), lock_options_.max_hold, linger,
               lock_options_.max_local_handovers);
}

Semaphore Client::semaphore(const std::string& name, int permits) const {
  validate_mutex_name(name);
  if (permits < 1 || permits > static_cast<int>(Semaphore::kMaxPermits)) {
    throw Error(errc::invalid_argument, "semaphore '" + name + "': permits must be 1 to " +
                                            std::to_string(Semaphore::kMaxPermits) + ", got " +
                                            std::to_string(permits));
  }
  return Semaphore(
      internal::make_semaphore_state(name, static_cast<unsigned>(permits), backend_, [this](const std::string& slot) {
        return Mutex(locks_->entry(slot, false, {}), lock_options_.max_hold, std::chrono::milliseconds(0),
                     lock_options_.max_local_handovers);
      }));
}

SharedMutex Client::shared_mutex(const std::string& name) const {
  validate_mutex_name(name);
  const auto poll =
      options_.poll_interval.count() > 0 ? options_.poll_interval : backend_->capabilities().poll_interval;
  return SharedMutex(
      internal::make_shared_mutex_state(name, backend_, options_, poll, [this](const std::string& record) {
        return Mutex(locks_->entry(record, false, {}), lock_options_.max_hold, std::chrono::milliseconds(0),
                     lock_options_.max_local_handovers);
      }));
}

Client Client::with_lock_options(LockOptions options) const {
  options.validate();
  Client copy = *this;
  copy.lock_options_ = options;
  return copy;
}

std::size_t Client::lock_entries() const { return locks_->size(); }

std::size_t Client::release_cached() const noexcept { return locks_->release_cached(); }

MetricsSnapshot Client::metrics() const {
  return telemetry_->snapshot([this] { return locks_->fast_relocks(); });
}

void Client::label_mutexes(std::size_t at_most) const { telemetry_->label_mutexes(at_most); }

void Client::on_event(EventHook hook) const { telemetry_->on_event(std::move(hook)); }

const std::shared_ptr<internal::Telemetry>& internal::telemetry_of(const Client& client) { return client.telemetry_; }

}  // namespace simba
