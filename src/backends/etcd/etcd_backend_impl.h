// The etcd backend's class, shared by its files: acquire.cc (acquire, renewals from the line's
// watch, other owners' records), etcd_backend.cc (release, read, watches, lease and stream
// events) and records.cc (administration, idle marks, the raw probe). Internal to the etcd backend; see
// simba/etcd_backend.h for the design.
#pragma once

#include <optional>
#include <string>

#include "backends/common/sweep.h"
#include "backends/etcd/book.h"
#include "backends/etcd/channel.h"
#include "backends/etcd/leases.h"
#include "backends/etcd/names.h"
#include "backends/etcd/watches.h"
#include "simba/etcd_backend.h"

namespace simba::etcd {

class EtcdBackend final : public BackendOffering<Push, DemandSignal, DemandPush, IdleMarks, Administration, RawProbe> {
 public:
  explicit EtcdBackend(const EtcdOptions& options);
  ~EtcdBackend() override;

  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override;
  bool release(const std::string& mutex, const std::string& id) override;
  OwnerSnapshot read(const std::string& mutex) override;
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override;
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& owner_id,
                                             std::function<void()> on_demand) override;
  Capabilities capabilities() const override;
  std::string describe() const override { return where_; }
  // Revokes every lease of ours: etcd deletes the keys attached at once.
  void end_sessions() noexcept override { leases_.end(); }

  // records.cc
  bool evict(const std::string& mutex, const std::string& owner_id) override;
  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override;
  MutexListing list(const std::string& prefix, std::size_t limit) override;
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override;
  double raw_once() override;

 private:
  // How often one call looks again at a line that changed under it before giving up.
  static constexpr int kRounds = 8;

  // One transaction of acquire() for `entry`; nothing: look again.
  // What an acquire's transaction reads of a name's relatives (acquire.cc: relatives_of).
  struct Relatives {
    std::optional<MutexKeys> primitive;  // a derived record's primitive
    std::string derived_from;            // a primitive's record key + "#": its derived records' keys
  };
  Relatives relatives_of(const std::string& mutex) const;
  static void add_relatives(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const Relatives& relatives);
  static void answer_relatives(const pb::TxnResponse& response, int first, const Relatives& relatives,
                               OwnerSnapshot& out);
  std::optional<OwnerSnapshot> attempt(Entry& entry, const MutexKeys& keys, std::chrono::milliseconds ttl,
                                       std::chrono::milliseconds transition);
  // Deletes the key of `entry` (at its create revision, if known), leaving the record of its
  // token if it owned; true if this deleted it.
  bool remove_key(const Entry& entry, const MutexKeys& keys, const std::string& why);
  // records.cc: the key of the owner of `mutex`, if `owner_id` owns it.
  std::optional<pb::KeyValue> owner_key(const MutexKeys& keys, const std::string& mutex, const std::string& owner_id);
  // The owner `kv` stands for (times from this backend's book if it is one of ours, else from
  // its etcd lease), with `count` keys in the line; nothing if it is one of ours that lapsed.
  std::optional<OwnerSnapshot> owner_view(const std::string& mutex, const pb::KeyValue& kv, std::int64_t count);
  // What read() says of `mutex`, from the first created key of its line (with the line's
  // count) and its record (list() finds both in its range).
  OwnerSnapshot snapshot_of(const std::string& mutex, const pb::RangeResponse& line, const pb::RangeResponse& record);
  std::optional<OwnerSnapshot> renew_from_watch(Entry& entry, Steady::time_point sent, EpochMillis sent_wall,
                                                const Leases::Coverage& coverage, std::chrono::milliseconds ttl,
                                                std::chrono::milliseconds lease_length);
  void watch_line(Entry& entry, const MutexKeys& keys, std::int64_t revision);
  void stop_watching(Entry& entry);
  void wake(const std::string& mutex, const std::string& id, WatchEvent event);

  // Events of the lease and watch threads.
  // The keys of our owners whose lease ran out unrenewed (only `only_key`, if given) go.
  void reap_lapsed(const std::string* only_key);
  void lease_gone(std::int64_t lease);
  void stream_reset(bool lost);

  const EtcdOptions options_;
  const std::string where_;
  internal::SweepSchedule sweeps_;
  ContenderBook book_;
  Channel channel_;
  // Last: their threads stop first when the backend goes, before anything they call.
  WatchHub hub_;
  Leases leases_;
};

}  // namespace simba::etcd
