// The etcd backend's acquire path: one transaction that joins the line or looks at it, the
// owner's renewals from its line's watch, and how another owner looks from here. See
// simba/etcd_backend.h for the design.
#include <algorithm>

#include "backends/etcd/etcd_backend_impl.h"
#include "backends/etcd/ops.h"
#include "base/log.h"
#include "simba/error.h"

namespace simba::etcd {
namespace {

// Lease lengths are whole seconds on etcd: ttl + transition, rounded up.
std::int64_t seconds_for(std::chrono::milliseconds lease) {
  return std::max<std::int64_t>(1, (lease.count() + 999) / 1000);
}

std::int64_t millis(std::chrono::milliseconds d) { return d.count(); }

// At most this many keys of a name's derived records are read with an owner's transaction; with
// more, whether one is held is not said (Administration::list_derived says).
constexpr std::int64_t kDerivedKeysRead = 256;

}  // namespace

// What an acquire's transaction also reads, in both branches, so that an owner hears it at the
// same revision as its grant (OwnerSnapshot): for a derived record "<name>#<suffix>", the line
// and the record of <name>; for a primitive, the keys of its derived records.
EtcdBackend::Relatives EtcdBackend::relatives_of(const std::string& mutex) const {
  Relatives relatives;
  const auto hash = mutex.rfind('#');
  if (hash != std::string::npos) {
    relatives.primitive = mutex_keys(options_.prefix, std::string_view(mutex).substr(0, hash));
  } else {
    relatives.derived_from = mutex_keys(options_.prefix, mutex).record + "#";
  }
  return relatives;
}

void EtcdBackend::add_relatives(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const Relatives& relatives) {
  if (relatives.primitive) {
    ops::add(ops, ops::first_created(relatives.primitive->contended, relatives.primitive->end));
    ops::add(ops, ops::get(relatives.primitive->record));
    return;
  }
  pb::RangeRequest derived;
  derived.set_key(relatives.derived_from);
  derived.set_range_end(relatives.derived_from.substr(0, relatives.derived_from.size() - 1) + "$");
  derived.set_keys_only(true);
  derived.set_limit(kDerivedKeysRead);
  ops::add(ops, derived);
}

// Reads what add_relatives asked for, from the ops of `response` from `first` on.
void EtcdBackend::answer_relatives(const pb::TxnResponse& response, int first, const Relatives& relatives,
                                   OwnerSnapshot& out) {
  if (response.responses_size() < first + (relatives.primitive ? 2 : 1)) return;
  if (relatives.primitive) {
    const auto& line = response.responses(first).response_range();
    const auto& record = response.responses(first + 1).response_range();
    OwnerSnapshot::Parent parent;
    if (line.kvs_size() > 0) {
      parent.held = true;  // its first key, lapsed or not: said held (a reader then reads the gate)
      parent.fencing_token = static_cast<std::uint64_t>(line.kvs(0).create_revision());
    } else if (record.kvs_size() > 0) {
      parent.fencing_token = parse_record(record.kvs(0).value()).token;
    }
    out.parent = parent;
    return;
  }
  const auto& derived = response.responses(first).response_range();
  if (derived.more()) return;  // too many to say
  // A derived record's contender key is "<record>#<suffix>/<lease>", <suffix> without '#';
  // the records themselves ("<record>#<suffix>", the last token) are no holder.
  for (const auto& kv : derived.kvs()) {
    const std::string_view rest = std::string_view(kv.key()).substr(relatives.derived_from.size());
    const auto slash = rest.find('/');
    if (slash != std::string_view::npos && rest.substr(0, slash).find('#') == std::string_view::npos) return;
  }
  out.no_derived_held = true;
}

OwnerSnapshot EtcdBackend::acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                                   std::chrono::milliseconds transition) {
  const MutexKeys keys = mutex_keys(options_.prefix, mutex);
  const std::int64_t seconds = seconds_for(ttl + transition);
  for (int round = 0; round < kRounds; ++round) {
    Entry entry = book_.begin(mutex, id, seconds);
    std::optional<OwnerSnapshot> owner;
    try {
      owner = attempt(entry, keys, ttl, transition);
    } catch (const LeaseNotFound&) {
      leases_.forget(entry.lease);  // expired under us: its keys are gone; a new lease next round
      stop_watching(entry);
      book_.done_and_forget(entry);
      continue;
    } catch (...) {
      book_.done(entry);
      throw;
    }
    book_.done(entry);
    if (owner) return *owner;
  }
  throw Error(errc::unavailable,
              "etcd at " + where_ + ": the line of mutex '" + mutex + "' kept changing while it was read; try again");
}

std::optional<OwnerSnapshot> EtcdBackend::attempt(Entry& entry, const MutexKeys& keys, std::chrono::milliseconds ttl,
                                                  std::chrono::milliseconds transition) {
  const auto lease_length = ttl + transition;
  if (entry.lease == 0) {
    const Leases::Granted granted = leases_.lease(entry.seconds, entry.slot);
    entry.lease = granted.id;
    entry.key = keys.contender(granted.id);
    entry.revision = 0;
  }
  // An owner past its lease has stopped believing it owns: its key goes before it asks again
  // (a renewal after the lease ran out is a new acquisition, at the back of the line).
  if (entry.claimed && Steady::now() > entry.deadline) {
    stop_watching(entry);
    remove_key(entry, keys, "its lease ran out before it renewed");
    entry.lapsed_key_removed();
  }
  const auto sent = Steady::now();
  const EpochMillis sent_wall = epoch_millis_now();
  // The lease we may claim ends when asked or when the server may drop the key, whichever is
  // first; if the keep-alives so far do not cover even the ttl, one goes with this call.
  const Leases::Coverage coverage = leases_.coverage(entry.lease);
  auto covered = coverage.until;
  std::optional<Leases::Answer> kept;
  if (covered < sent + ttl) kept = leases_.refresh(entry.lease);
  if (!kept) {
    if (auto renewed = renew_from_watch(entry, sent, sent_wall, coverage, ttl, lease_length)) return renewed;
  }
  const std::uint64_t epoch = hub_.epoch();
  const bool watched = entry.flags && entry.watch != 0 && hub_.live(entry.watch);
  const std::uint64_t resyncs = entry.flags ? entry.flags->resyncs.load() : 0;

  pb::TxnRequest txn;
  ops::when_created_at(txn, entry.key, 0);
  // Absent: the last key before ours (read first), our put, the owner.
  ops::add(txn.mutable_success(), ops::last_created(keys.contended, keys.end, 0));
  ops::add_put(txn.mutable_success(), entry.key, contender_value(entry.id, false), entry.lease);
  ops::add(txn.mutable_success(), ops::first_created(keys.contended, keys.end));
  // There: our key, the owner, the last key before ours.
  ops::add(txn.mutable_failure(), ops::get(entry.key));
  ops::add(txn.mutable_failure(), ops::first_created(keys.contended, keys.end));
  if (entry.revision > 0) ops::add(txn.mutable_failure(), ops::last_created(keys.contended, keys.end, entry.revision));
  // A renewal's answer would not be heard (only a grant's is): a claimed key asks nothing.
  std::optional<Relatives> relatives;
  if (!entry.claimed) relatives = relatives_of(entry.mutex);
  const int relatives_at = txn.success_size(), relatives_at_failure = txn.failure_size();
  if (relatives) {
    add_relatives(txn.mutable_success(), *relatives);
    add_relatives(txn.mutable_failure(), *relatives);
  }
  const pb::TxnResponse response = channel_.txn(txn, "acquiring mutex '" + entry.mutex + "' for '" + entry.id + "'");

  std::int64_t revision = 0;
  std::optional<pb::KeyValue> predecessor;
  const pb::RangeResponse* line = nullptr;
  if (response.succeeded()) {
    revision = response.header().revision();
    const auto& before = response.responses(0).response_range();
    if (before.kvs_size() > 0) predecessor = before.kvs(0);
    line = &response.responses(2).response_range();
  } else {
    const auto& mine = response.responses(0).response_range();
    if (mine.kvs_size() == 0) return std::nullopt;  // gone in between: look again
    const auto mine_value = parse_contender(mine.kvs(0).value(), entry.lease);
    if (mine_value.owner_id != entry.id) {
      throw Error(errc::internal, "etcd at " + where_ + ": the key " + entry.key + " of '" + entry.id +
                                      "' holds another contender's id ('" + mine_value.owner_id + "')");
    }
    revision = mine.kvs(0).create_revision();
    line = &response.responses(1).response_range();
    if (entry.revision == revision && relatives_at_failure > 2) {
      const auto& before = response.responses(2).response_range();
      if (before.kvs_size() > 0) predecessor = before.kvs(0);
    } else if (revision > 1) {
      const auto before = channel_.range(ops::last_created(keys.contended, keys.end, revision),
                                         "reading the line of mutex '" + entry.mutex + "'");
      if (before.kvs_size() > 0) predecessor = before.kvs(0);
    }
  }
  if (revision != entry.revision) {
    entry.claimed = false;
    entry.revision = revision;
  }
  if (line->kvs_size() == 0) return std::nullopt;
  const pb::KeyValue& first = line->kvs(0);

  if (first.create_revision() == revision) {  // our key is the first: we own
    if (kept) {
      const auto answered = kept->wait_for(channel_.command_timeout());
      if (answered != std::future_status::ready || kept->get() < 0) {
        throw Error(errc::unavailable, "etcd at " + where_ + ": the keep-alive of the lease of '" + entry.id +
                                           "' on mutex '" + entry.mutex + "' was not answered");
      }
      if (kept->get() == 0) {
        throw LeaseNotFound("etcd at " + where_ + ": the lease of '" + entry.id + "' expired");
      }
      covered = std::max(covered, sent + std::chrono::seconds(kept->get()));
    }
    const auto granted = std::min(lease_length, std::chrono::duration_cast<std::chrono::milliseconds>(covered - sent));
    const bool renewal = entry.claimed;
    // The line is watched from an owner's first renewal on (a lock held for less than its ttl,
    // the common cycle, costs no watch).
    bool watched_now = false;
    if (!renewal) {
      stop_watching(entry);  // a waiter's watch of its predecessor
    } else if (!entry.flags) {
      watch_line(entry, keys, response.header().revision());
      watched_now = true;
    }
    // The key was first at this transaction; the line's watch (in place before it was sent, or
    // made from its revision on) tells of every change since, unless its stream broke meanwhile.
    if (entry.flags && hub_.epoch() == epoch && (watched || watched_now)) {
      entry.verified_epoch = epoch;
      entry.verified_resyncs = resyncs;
    } else {
      entry.verified_epoch = 0;
    }
    entry.claimed = true;
    entry.deadline = sent + granted;
    const bool idle = parse_contender(first.value(), entry.lease).idle;
    entry.owner.owner_id = entry.id;
    entry.owner.acquired_at = sent_wall;
    entry.owner.ttl_at = sent_wall + millis(std::min(ttl, granted));
    entry.owner.transition_at = sent_wall + millis(granted);
    entry.owner.fencing_token = static_cast<std::uint64_t>(revision);
    entry.owner.idle = renewal && idle;
    OwnerSnapshot out{entry.owner, epoch_millis_now()};
    out.demanded = line->count() > 1;
    if (relatives)
      answer_relatives(response, response.succeeded() ? relatives_at : relatives_at_failure, *relatives, out);
    return out;
  }

  // We wait: behind the key created last before ours, whose deletion wakes us.
  entry.claimed = false;
  if (entry.flags) stop_watching(entry);  // the owner's line watch
  if (predecessor && entry.watching != predecessor->key()) {
    stop_watching(entry);
    entry.watching = predecessor->key();
    const std::string mutex = entry.mutex, id = entry.id;
    entry.watch = hub_.add(predecessor->key(), "", response.header().revision() + 1, /*deletes_only=*/true,
                           [this, mutex, id](const pb::WatchResponse&) { wake(mutex, id, WatchEvent::released); });
  }
  std::optional<OwnerSnapshot> owner = owner_view(entry.mutex, first, line->count());
  if (!owner) {
    reap_lapsed(&first.key());  // one of ours whose lease ran out: it goes; look again
    return std::nullopt;
  }
  return owner;
}

std::optional<OwnerSnapshot> EtcdBackend::owner_view(const std::string& mutex, const pb::KeyValue& kv,
                                                     std::int64_t count) {
  OwnerSnapshot out;
  const auto ours = book_.entry_of_key(mutex, kv.key());
  // A key of ours that we removed when its lease ran out, read before the removal: free, as it
  // was when our owner's belief ended (a read must not show it owned again after that).
  if (ours && !ours->claimed && ours->removed == kv.create_revision()) return std::nullopt;
  if (ours && ours->claimed) {
    if (Steady::now() > ours->deadline) return std::nullopt;
    out.owner = ours->owner;
    out.owner.idle = parse_contender(kv.value(), kv.lease()).idle;
  } else {
    const auto parsed = parse_contender(kv.value(), kv.lease());
    out.owner.owner_id = parsed.owner_id;
    out.owner.idle = parsed.idle;
    out.owner.fencing_token = static_cast<std::uint64_t>(kv.create_revision());
    const EpochMillis now = epoch_millis_now();
    const auto lease = channel_.time_to_live(kv.lease());
    // The key goes when its lease does: that is its owner's deadline, as far as this host can
    // tell (whole seconds; a lease being kept alive reads a full TTL again soon).
    const std::int64_t left = std::max<std::int64_t>(lease.ttl(), 0) * 1000;
    out.owner.transition_at = now + left;
    out.owner.ttl_at = out.owner.transition_at;
    out.owner.acquired_at = out.owner.transition_at - std::max<std::int64_t>(lease.grantedttl(), 0) * 1000;
  }
  out.owner.fencing_token = static_cast<std::uint64_t>(kv.create_revision());
  out.now = epoch_millis_now();
  out.demanded = count > 1;
  return out;
}

// An owner watches its line from the revision of a transaction that showed it first: its key's
// deletion, a key joining (a demand) and its idle mark, so that its renewals need not ask the
// server.
void EtcdBackend::watch_line(Entry& entry, const MutexKeys& keys, std::int64_t revision) {
  stop_watching(entry);
  auto flags = std::make_shared<OwnerFlags>();
  const std::string key = entry.key, mutex = entry.mutex, id = entry.id;
  entry.flags = flags;
  entry.watch = hub_.add(keys.contended, keys.end, revision + 1, /*deletes_only=*/false,
                         [this, flags, key, mutex, id](const pb::WatchResponse& response) {
                           if (response.events_size() == 0) ++flags->resyncs;  // made again: look
                           for (const auto& event : response.events()) {
                             if (event.kv().key() == key) {
                               if (event.type() == pb::Event::DELETE) {
                                 flags->gone = true;
                                 wake(mutex, id, WatchEvent::lost);  // the owner finds out now
                               } else {
                                 flags->idle = parse_contender(event.kv().value(), event.kv().lease()).idle;
                               }
                             } else if (event.type() == pb::Event::PUT && event.kv().version() == 1) {
                               flags->demanded = true;
                             }
                           }
                         });
}

// A renewal without a round trip: a transaction showed our key first, the watch on the line, in
// place since, has seen neither its deletion nor a break, and the lease's keep-alives are
// answered. The lease counts from the last keep-alive the server answered (the last word from
// it: a partitioned owner stops believing within a lease of the partition, as after a round
// trip), and ends no later than the server keeps the key.
std::optional<OwnerSnapshot> EtcdBackend::renew_from_watch(Entry& entry, Steady::time_point sent, EpochMillis sent_wall,
                                                           const Leases::Coverage& coverage,
                                                           std::chrono::milliseconds ttl,
                                                           std::chrono::milliseconds lease_length) {
  if (!entry.claimed || !entry.flags || entry.verified_epoch == 0 || entry.flags->gone) return std::nullopt;
  if (entry.flags->resyncs.load() != entry.verified_resyncs) return std::nullopt;
  if (hub_.epoch() != entry.verified_epoch || !hub_.live(entry.watch)) return std::nullopt;
  const auto from = std::min(sent, coverage.confirmed_sent);
  const auto granted =
      std::min(lease_length, std::chrono::duration_cast<std::chrono::milliseconds>(coverage.until - from));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(sent - from);
  if (granted <= waited + std::chrono::milliseconds(1)) return std::nullopt;  // nothing left: ask the server
  entry.deadline = from + granted;
  entry.owner.acquired_at = sent_wall - waited.count();
  entry.owner.ttl_at = entry.owner.acquired_at + millis(std::min(ttl, granted));
  entry.owner.transition_at = entry.owner.acquired_at + millis(granted);
  entry.owner.idle = entry.flags->idle;
  OwnerSnapshot out{entry.owner, epoch_millis_now()};
  out.demanded = entry.flags->demanded;
  return out;
}
}  // namespace simba::etcd
