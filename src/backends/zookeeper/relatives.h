// What an owner hears of its relatives with its grant on ZooKeeper (OwnerSnapshot's
// no_derived_held and parent). Internal to the ZooKeeper backend.
//
// A multi cannot read, but one session's requests are answered in the order they were sent,
// and a read is answered only once the server has applied every write before it on that
// session. So reads sent right behind the write that starts a lease (the create that leads, or
// a woken waiter's claim) see every write the ensemble ordered before that one: a record made
// before the grant is seen; one made after it was made by someone whose own look after it sees
// the grant. The grant costs no extra round trip.
//
// - A derived record "<name>#<suffix>": the latch folder of <name>, read with its data. Without
//   nodes it is free and its data is the last token (as read() says); with nodes the answer is
//   left unknown (the caller looks: a lease that ran out is judged there); no folder: free.
//   A semaphore's name never has one (its slots and line are its records).
// - A primitive: only once this backend has listed its derived records (list_derived(), as a
//   shared mutex's writer does when it cannot be told), the children of its derived_root (the
//   folders of its derived records only, whatever else /simba holds) and the children of each
//   derived latch folder known then. All known ones empty, and no new one: none is held.
//   A new one: unknown, and it is known from then on. A plain mutex is never listed so, and
//   pays nothing.
//
// Those reads leave watches on what they read. The server sends a watch's event before the
// answer to any write it applies after the change, and the client hands both on in that order,
// so while no event has come since reads that saw none held, none is held at the next grant
// either: that grant sends no reads (a writer that writes again and again, readers away, pays
// what a mutex does). Any event on those folders, a listing, or a change of the session ends
// that trust until reads see none held again. Likewise a derived record whose primitive had no
// folder leaves a watch for its making (an exists), and while it has not fired, the next grants
// of that primitive's records read nothing: a semaphore's permit pays what a mutex does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/zookeeper/session.h"
#include "base/thread_annotations.h"
#include "simba/backend.h"

namespace simba::zookeeper {

class Relatives {
 public:
  explicit Relatives(Session& session) : session_(session) {}

  // The reads for `mutex`, sent now (right after the grant's write); nothing if there is
  // nothing to ask.
  struct Look {
    std::string primitive;     // the name whose derived records are asked about; empty for a derived record
    std::string gate;          // a derived record's primitive, whose folder is asked about
    std::uint64_t epoch = 0;   // the primitive's (gate's), when sent: an event since makes the look unknown
    bool trusted = false;      // the watches were in place: nothing was read
    std::optional<Call> root;  // a primitive's: the children of its derived_root (watched)
    std::vector<std::pair<std::string, Call>> folders;  // their latch folders' children (watched); the gate's folder
  };
  std::optional<Look> send(const std::string& mutex);
  // What `look` says, into `owner` (left as it is where the answer is unknown). Waits for the
  // reads. Never throws: a read that failed leaves the answer unknown.
  void answer(Look& look, OwnerSnapshot& owner);

  // The derived records of `primitive` are `names` (a listing of its derived_root just now).
  void saw_derived(const std::string& primitive, std::vector<std::string> names);

  // On the client's completion thread: a watch fired on `path`, or the session changed (its
  // watches may be gone). Quick: no call waits here.
  void changed(const std::string& path);
  void session_changed();

 private:
  struct Known {
    bool listed = false;             // its derived records were listed (names is what was found)
    std::vector<std::string> names;  // sorted
    bool trusted = false;            // the watches of reads that saw none held are all still in place
    bool absent = false;             // its latch folder was missing at an exists whose watch is still in place
    std::uint64_t epoch = 0;         // counts the events, listings and session changes that touched it
  };
  void untrust_locked(Known& known) REQUIRES(mutex_);
  // The entry of `name` if nothing touched it since its epoch was `epoch`; else null.
  Known* quiet_locked(const std::string& name, std::uint64_t epoch) REQUIRES(mutex_);
  // The gate's folder was missing at a look of epoch `epoch`: watch for its making.
  void watch_absent(const std::string& gate, std::uint64_t epoch);

  Session& session_;
  internal::AnnotatedMutex mutex_;
  std::map<std::string, Known> derived_ GUARDED_BY(mutex_);        // by primitive
  std::map<std::string, std::string> watched_ GUARDED_BY(mutex_);  // a watched path -> its primitive
};

}  // namespace simba::zookeeper
