// The etcd backend: etcd's lock recipe (one key per contender under the mutex's prefix, the
// first created owns) with leases whose times simba judges. See simba/etcd_backend.h for the
// design. Here: release, read, the watches and the events of the lease and watch streams; the
// acquire path is in acquire.cc, administration in records.cc.
#include "backends/etcd/etcd_backend_impl.h"

#include <algorithm>

#include "backends/etcd/ops.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba {
namespace etcd {
namespace {

using internal::tell;
using internal::Watcher;
using internal::WatchHandle;

std::string describe_of(const EtcdOptions& options) {
  std::string where = "etcd://";
  if (!options.user.empty()) where += options.user + ":***@";
  for (std::size_t i = 0; i < options.endpoints.size(); ++i) where += (i ? "," : "") + options.endpoints[i];
  return where + "?prefix=" + options.prefix;
}

}  // namespace

EtcdBackend::EtcdBackend(const EtcdOptions& options)
    : options_(options),
      where_(describe_of(options)),
      sweeps_(options.sweep_idle),
      channel_(options, where_),
      hub_(channel_, [this](bool lost) { stream_reset(lost); }),
      leases_(channel_,
              Leases::Events{[this](std::int64_t lease) { lease_gone(lease); }, [this] { reap_lapsed(nullptr); }}) {}

EtcdBackend::~EtcdBackend() = default;

bool EtcdBackend::release(const std::string& mutex, const std::string& id) {
  auto known = book_.peek(mutex, id);
  if (!known) return false;
  Entry entry = book_.begin(mutex, id, known->seconds);
  bool released = false;
  try {
    stop_watching(entry);
    if (entry.lease != 0) {
      const bool believed = entry.claimed && Steady::now() <= entry.deadline;
      released = remove_key(entry, mutex_keys(options_.prefix, mutex), "") && believed;
    }
  } catch (...) {
    book_.done(entry);
    throw;
  }
  book_.done_and_forget(entry);
  sweeps_.maybe(where_, [&](std::chrono::milliseconds idle) { sweep(idle, internal::kSweepBatch); });
  return released;
}

bool EtcdBackend::remove_key(const Entry& entry, const MutexKeys& keys, const std::string& why) {
  pb::TxnRequest txn;
  // Only this key, as this contender made it: never a newer key of the same lease and slot.
  if (entry.revision > 0) {
    ops::when_created_at(txn, entry.key, entry.revision);
  }
  ops::add_delete(txn.mutable_success(), entry.key);
  if (entry.claimed && entry.revision > 0) {
    ops::add_put(txn.mutable_success(), keys.record,
                 record_value({static_cast<std::uint64_t>(entry.revision), epoch_millis_now()}), 0);
  }
  const auto response = channel_.txn(txn, "removing the key of '" + entry.id + "' from mutex '" + entry.mutex + "'");
  const bool deleted = response.succeeded() && response.responses(0).response_delete_range().deleted() > 0;
  if (deleted && !why.empty()) {
    internal::log_warn("mutex '" + entry.mutex + "': removed the key of " + entry.id + ": " + why);
  }
  return deleted;
}

OwnerSnapshot EtcdBackend::read(const std::string& mutex) {
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  pb::TxnRequest txn;  // no comparison: both reads at one revision
  ops::add(txn.mutable_success(), ops::first_created(keys.contended, keys.end));
  ops::add(txn.mutable_success(), ops::get(keys.record));
  const auto response = channel_.txn(txn, "reading the owner of mutex '" + mutex + "'");
  return snapshot_of(mutex, response.responses(0).response_range(), response.responses(1).response_range());
}

OwnerSnapshot EtcdBackend::snapshot_of(const std::string& mutex, const pb::RangeResponse& line,
                                       const pb::RangeResponse& record) {
  if (line.kvs_size() == 0) {
    MutexOwner none;
    if (record.kvs_size() > 0) none.fencing_token = parse_record(record.kvs(0).value()).token;
    return {none, epoch_millis_now()};
  }
  if (auto owner = owner_view(mutex, line.kvs(0), line.count())) return *owner;
  // One of ours whose lease ran out (its key goes at the next tick): free, with its token.
  MutexOwner none;
  none.fencing_token = static_cast<std::uint64_t>(line.kvs(0).create_revision());
  return {none, epoch_millis_now()};
}

std::unique_ptr<Subscription> EtcdBackend::watch(const std::string& mutex, const std::string& contender_id,
                                                 std::function<void(WatchEvent)> on_change) {
  auto watcher = std::make_shared<Watcher>(std::move(on_change));
  if (!contender_id.empty()) {
    // A waiter is woken when its predecessor goes; acquire() watches it.
    book_.add_contender(mutex, contender_id, watcher);
    return std::make_unique<WatchHandle>(
        watcher, [this, mutex, contender_id, watcher] { book_.drop_contender(mutex, contender_id, watcher); });
  }
  // An observer hears every change of the line.
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  book_.add_observer(watcher);
  const auto id = hub_.add(keys.contended, keys.end, 0, /*deletes_only=*/false, [watcher](const pb::WatchResponse& r) {
    bool released = r.events_size() == 0;  // an empty response: the watch was made again, look
    bool acquired = false;
    for (const auto& event : r.events()) (event.type() == pb::Event::DELETE ? released : acquired) = true;
    if (released) watcher->call(WatchEvent::released);
    if (acquired) watcher->call(WatchEvent::acquired);
  });
  return std::make_unique<WatchHandle>(watcher, [this, id, watcher] {
    hub_.remove(id);
    book_.drop_observer(watcher);
  });
}

// The owner watches its line: a key created behind its own is a demand (a waiter's key is
// itself the demand). The count read when the watch starts shows one already there.
std::unique_ptr<Subscription> EtcdBackend::watch_demand(const std::string& mutex, const std::string& owner_id,
                                                        std::function<void()> on_demand) {
  auto watcher = std::make_shared<Watcher>([on_demand](WatchEvent) { on_demand(); });
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  book_.add_observer(watcher);  // a dropped stream is a possible demand too
  const auto id =
      hub_.add(keys.contended, keys.end, 0, /*deletes_only=*/false, [watcher, owner_id](const pb::WatchResponse& r) {
        bool demand = r.events_size() == 0;
        for (const auto& event : r.events()) {
          if (event.type() == pb::Event::PUT && event.kv().version() == 1 &&
              parse_contender(event.kv().value(), event.kv().lease()).owner_id != owner_id) {
            demand = true;
          }
        }
        if (demand) watcher->call(WatchEvent::acquired);
      });
  auto handle = std::make_unique<WatchHandle>(watcher, [this, id, watcher] {
    hub_.remove(id);
    book_.drop_observer(watcher);
  });
  pb::RangeRequest count = ops::first_created(keys.contended, keys.end);
  count.set_count_only(true);
  count.set_limit(0);
  if (channel_.range(count, "watching the line of mutex '" + mutex + "'").count() > 1) on_demand();
  return handle;
}

Capabilities EtcdBackend::capabilities() const {
  Capabilities caps;
  caps.engine = "etcd";
  caps.poll_interval = std::chrono::milliseconds(1000);
  caps.multi_process = true;
  caps.multi_host = true;
  caps.max_mutex_bytes = 16 * 1024;
  return caps;
}

void EtcdBackend::stop_watching(Entry& entry) {
  if (entry.watch != 0) hub_.remove(entry.watch);
  entry.watch = 0;
  entry.watching.clear();
  entry.flags.reset();
  entry.verified_epoch = 0;
}

void EtcdBackend::wake(const std::string& mutex, const std::string& id, WatchEvent event) {
  tell(book_.contenders_of(mutex, id), event);
}

// On the lease thread, every tick: the keys of our owners whose lease ran out unrenewed go, so
// a waiter anywhere takes over (leases lapse by time, whatever the process does).
void EtcdBackend::reap_lapsed(const std::string* only_key) {
  for (Entry& entry : book_.take_lapsed(Steady::now(), only_key)) {
    try {
      stop_watching(entry);
      remove_key(entry, mutex_keys(options_.prefix, entry.mutex), "its lease ran out unrenewed");
      entry.lapsed_key_removed();
      book_.done(entry);
    } catch (const std::exception& e) {
      book_.done(entry);  // tried again at the next tick
      internal::log_warn(e.what());
    }
  }
}

void EtcdBackend::lease_gone(std::int64_t lease) {
  for (Entry& entry : book_.drop_lease(lease)) {
    stop_watching(entry);
    wake(entry.mutex, entry.id, WatchEvent::lost);
  }
}

void EtcdBackend::stream_reset(bool lost) { tell(book_.everyone(), lost ? WatchEvent::lost : WatchEvent::released); }

}  // namespace etcd

std::shared_ptr<Backend> make_etcd_backend(const EtcdOptions& options) {
  if (options.endpoints.empty()) throw Error(errc::invalid_argument, "etcd: no endpoint given");
  if (options.prefix.empty()) throw Error(errc::invalid_argument, "etcd: the prefix must not be empty");
  if (options.command_timeout.count() <= 0 || options.dial_timeout.count() <= 0) {
    throw Error(errc::invalid_argument, "etcd: dial_timeout and command_timeout must be positive");
  }
  return std::make_shared<etcd::EtcdBackend>(options);
}

}  // namespace simba
