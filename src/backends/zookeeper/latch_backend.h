// The ZooKeeper backend's class, shared by its two files: zookeeper_backend.cc (release, read,
// watch, session and node events) and acquire.cc (the acquire path: join, claim, wait behind).
// Internal to the ZooKeeper backend; see simba/zookeeper_backend.h for the design.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/common/sweep.h"
#include "backends/zookeeper/latch_book.h"
#include "backends/zookeeper/lease_judge.h"
#include "backends/zookeeper/relatives.h"
#include "backends/zookeeper/session.h"
#include "simba/zookeeper_backend.h"

namespace simba::zookeeper {

class LatchBackend final
    : public BackendOffering<Push, DemandSignal, DemandPush, IdleMarks, Administration, RawProbe, Batches> {
 public:
  explicit LatchBackend(const ZookeeperOptions& options);

  OwnerSnapshot acquire(const std::string& mutex, const std::string& id, std::chrono::milliseconds ttl,
                        std::chrono::milliseconds transition) override;
  // acquire.cc: renewals of claimed nodes and first joins pipelined on the session; the rest
  // (a waiter's look: several dependent round trips) as acquire().
  std::vector<AcquireResult> acquire_batch(const std::vector<AcquireCall>& calls) override;
  bool release(const std::string& mutex, const std::string& id) override;
  OwnerSnapshot read(const std::string& mutex) override;
  std::unique_ptr<Subscription> watch(const std::string& mutex, const std::string& contender_id,
                                      std::function<void(WatchEvent)> on_change) override;
  std::unique_ptr<Subscription> watch_demand(const std::string& mutex, const std::string& owner_id,
                                             std::function<void()> on_demand) override;
  // The session: lost when it disconnects or expires (every node of ours may be gone).
  std::unique_ptr<Subscription> watch_channel(std::function<void(WatchEvent)> on_change) override;
  bool evict(const std::string& mutex, const std::string& owner_id) override;                 // records.cc
  bool mark_idle(const std::string& mutex, const std::string& owner_id, bool idle) override;  // records.cc
  MutexListing list(const std::string& prefix, std::size_t limit) override;
  MutexListing list_derived(const std::string& name, std::size_t limit) override;  // records.cc
  std::size_t sweep(std::chrono::milliseconds idle_for, std::size_t limit) override;
  Capabilities capabilities() const override;
  std::string describe() const override { return where_; }
  // Closes the session: the server deletes every node of ours at once.
  void end_sessions() noexcept override { session_.end(); }
  double raw_once() override;

 private:
  // How often one call re-reads a latch that changed under it before giving up for this round.
  static constexpr int kRounds = 8;

  // release() without the sweep it may run after.
  bool leave(const std::string& mutex, const std::string& id);

  // acquire.cc: one round of acquire() for a contender without a claimed node.
  struct Joined {
    enum class Status { again, leading, queued, no_folder };  // no_folder: finish_join only
    Status status = Status::again;
    Entry entry;
    Reply listing;                        // the latch's children, read right after our create
    std::optional<Relatives::Look> look;  // join() only: sent right after our create
  };
  Joined join(const LatchKey& key, const std::string& mutex, const std::string& id, const std::string& folder,
              std::uint64_t generation, std::chrono::milliseconds ttl, std::chrono::milliseconds transition);
  // join() in two halves, so that a batch sends every create (and listing) at once: the
  // requests sent, then what their answers say (no_folder: the latch's folder is missing,
  // where join() creates it and says again).
  struct Joining {
    Entry entry;
    std::int64_t emptied = -1;  // when our last release here emptied the folder (take_emptied_at), or -1
    std::optional<Call> create, list;
  };
  Joining send_join(const LatchKey& key, const std::string& mutex, const std::string& id, const std::string& folder,
                    std::uint64_t generation, std::chrono::milliseconds ttl, std::chrono::milliseconds transition);
  Joined finish_join(const LatchKey& key, const std::string& mutex, const std::string& folder, Joining& joining);
  std::optional<OwnerSnapshot> take_place(const LatchKey& key, const std::string& mutex, const std::string& id,
                                          const std::string& folder, Entry& entry, const Reply& listing,
                                          bool created_now);
  std::optional<OwnerSnapshot> claim(const LatchKey& key, const std::string& mutex, const std::string& id, Entry& entry,
                                     bool created_now);
  std::optional<OwnerSnapshot> wait_behind(const LatchKey& key, const std::string& mutex, const std::string& folder,
                                           Entry& entry, const LatchNode& predecessor, const LatchNode& leader);
  // Renews a lease our node leads: nothing if the node no longer leads, else whether a node
  // waits behind it (a demand).
  std::optional<bool> renew(const LatchKey& key, const Entry& entry, const std::string& mutex, const std::string& id,
                            const std::string& folder);
  // renew()'s two steps: whether our node still leads the latch's `listing` (nothing: it does
  // not) and whether a node waits behind it (then it is rewritten); the rewrite's answer.
  std::optional<bool> leads(const Entry& entry, const std::string& mutex, const std::string& id, const Reply& listing);
  std::optional<bool> rewritten(const Reply& renewed, const std::string& mutex, const std::string& id);
  // acquire.cc: a batch's renewals. Each rewrites its lease's node (version -1), many in one
  // multi: the write restarts the clocks of waiters behind it and proves that the node still
  // leads (a leader's node leads until it is deleted) and the session lives, for one request
  // to the server, where a listing per lease would be one request each.
  struct Renewal {
    std::size_t call;
    LatchKey key;  // of the call's mutex and contender
    Entry entry;
    // A batch of few renewals also reads each latch, after the rewrite: whether someone waits
    // (a demand). A larger batch does not: those reads are what the multi saves the server.
    std::optional<Call> listing;
  };
  struct Rewrite {
    std::vector<std::size_t> renewals;  // indexes into the batch's renewals
    Call call;
  };
  std::vector<Rewrite> send_rewrites(const std::vector<AcquireCall>& calls, const std::vector<Renewal>& renewals,
                                     const std::vector<std::size_t>& which);
  // Their answers: renewed, or taken over (then the call goes on as acquire(), in `alone`), or
  // failed. A multi that failed on one node is sent again without it.
  void finish_rewrites(const std::vector<AcquireCall>& calls, const std::vector<Renewal>& renewals,
                       std::vector<Rewrite> rewrites, std::vector<AcquireResult>& results,
                       std::vector<std::size_t>& alone);
  // Our node of `key` is gone (a waiter took the lease over): says so and forgets it, so that
  // the next round joins the latch again.
  void forget_taken_over(const LatchKey& key, const std::string& mutex, const std::string& id);
  bool recover(const LatchKey& key, Entry& entry, const std::string& folder, const std::vector<LatchNode>& nodes);
  void create_folder(const std::string& mutex, const std::string& folder);
  // create_folder() in parts, for a batch: /simba's create (once for many folders) and each
  // latch folder's (a derived record's: its derived_root's first), sent; then their answers
  // checked. A latch folder whose derived_root was swept between the two creates is not made:
  // the join finds no folder and makes it again.
  struct FolderCalls {
    std::optional<Call> derived_root;
    Call latch;
  };
  Call send_root();
  FolderCalls send_latch_folder(const std::string& folder);
  void check_folder(const std::string& mutex, const Reply& made_root, FolderCalls& made);

  // records.cc: the latch folders under /simba (in derived roots too) whose names start with
  // `prefix`, sorted by name, and the derived roots looked into.
  struct Folder {
    std::string name;
    std::string path;  // latch_path(name), or another path for a folder of an earlier layout
  };
  struct DerivedRoot {
    std::string path;
    Reply listing;  // its children (and, in stat, its own)
  };
  std::vector<Folder> folders(const std::string& prefix, std::vector<DerivedRoot>* roots = nullptr);

  // The leader of `mutex` read just now, judged by how long it has looked unchanged here.
  LeaderView leader_view(const std::string& mutex, const std::string& path, const LatchNode& node, const Reply& reply,
                         Steady::time_point joined = Steady::time_point::min());

  // zookeeper_backend.cc: events, on the client's completion thread.
  void on_state(int state, bool fresh);
  void on_node(int type, const std::string& path);

  // The idle mark our node of `key` carries now (the book's; `entry`'s if it is gone). Read
  // under node_writes_, which is held until the write carrying it is sent: the session sends
  // in order, so the last write of a node's data carries the latest mark (a renewal's rewrite
  // never undoes a mark_idle() sent just before it).
  bool idle_mark(const LatchKey& key, const Entry& entry) REQUIRES(node_writes_);

  const ZookeeperOptions options_;
  const std::string where_;
  internal::AnnotatedMutex node_writes_;  // orders the sending of writes of our nodes' data
  LatchBook book_;
  internal::SweepSchedule sweeps_;
  Relatives relatives_;  // reads session_, which outlives its use (it is only used in calls)
  // Last: closed first when the backend goes, before anything its callbacks touch.
  Session session_;
};

}  // namespace simba::zookeeper
