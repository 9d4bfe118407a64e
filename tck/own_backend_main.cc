// simba-tck-own-backend: the conformance kit's lease groups on a Backend written here, that
// implements only the required part of the seam (acquire, release, read, capabilities,
// describe): no push, no demand, no idle marks, no administration. It shows that a user's
// own engine takes locks everywhere a lock is taken (contender services, Locker, the lock
// manager, the Scheduler), polled.
//   simba-tck-own-backend [GoogleTest flags...]  (default filter: the lease groups)
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kit.h"  // installed: <simba/tck/kit.h>

namespace {

using namespace std::chrono;

// One process's leases in a map, judged by the system clock: about the smallest correct
// Backend (see simba/backend.h for each method's contract).
class SmallBackend final : public simba::Backend {
 public:
  simba::OwnerSnapshot acquire(const std::string& mutex, const std::string& contender_id, milliseconds ttl,
                               milliseconds transition) override {
    std::lock_guard lock(mutex_);
    const auto now = clock_now();
    auto& record = records_[mutex];
    const bool ours = record.owner.owner_id == contender_id && record.owner.transition_at >= now;
    const bool free = record.owner.owner_id.empty() || record.owner.transition_at < now;
    if (ours || free) {
      if (!ours) {
        record.owner.owner_id = contender_id;
        record.owner.fencing_token = ++record.last_token;  // rises at every change of owner
      }
      record.owner.acquired_at = now;
      record.owner.ttl_at = now + ttl.count();
      record.owner.transition_at = record.owner.ttl_at + transition.count();
    }
    return {record.owner, now};
  }

  bool release(const std::string& mutex, const std::string& contender_id) override {
    std::lock_guard lock(mutex_);
    auto it = records_.find(mutex);
    if (it == records_.end() || it->second.owner.owner_id != contender_id) return false;
    const bool live = it->second.owner.transition_at >= clock_now();
    it->second.owner = simba::MutexOwner{};
    it->second.owner.fencing_token = it->second.last_token;  // kept: the next owner's is larger
    return live;
  }

  simba::OwnerSnapshot read(const std::string& mutex) override {
    std::lock_guard lock(mutex_);
    const auto now = clock_now();
    auto it = records_.find(mutex);
    if (it == records_.end()) return {{}, now};
    simba::MutexOwner owner = it->second.owner;
    if (owner.transition_at < now) {  // expired: no owner, the last token kept
      owner = simba::MutexOwner{};
      owner.fencing_token = it->second.last_token;
    }
    return {owner, now};
  }

  simba::Capabilities capabilities() const override {
    simba::Capabilities caps;
    caps.engine = "small";
    caps.poll_interval = milliseconds(20);
    return caps;
  }

  std::string describe() const override { return "small: (a Backend of the kit's own)"; }

 private:
  static simba::EpochMillis clock_now() {
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  }
  struct Record {
    simba::MutexOwner owner;
    std::uint64_t last_token = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Record> records_;  // guarded by mutex_
};

}  // namespace

int main(int argc, char** argv) {
  // One store for every client of a case, as a server would be.
  auto store = std::make_shared<SmallBackend>();
  // The lease groups: everything but what needs an optional interface (lock caching needs a
  // demand signal, the records cases administration) or a URI (connecting, other processes).
  std::vector<char*> args(argv, argv + argc);
  std::string filter =
      "--gtest_filter=ContendTest.*:LockerTest.*:LockManagerTest.*:SchedulerTest.*:InputTest.*:LockManagerAsioTest.*";
  bool filtered = false;
  for (int i = 1; i < argc; ++i) filtered = filtered || std::strncmp(argv[i], "--gtest_filter", 14) == 0;
  if (!filtered) args.push_back(filter.data());
  return simba::tck::run_kit(static_cast<int>(args.size()), args.data(), [store] { return store; });
}
