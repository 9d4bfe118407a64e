// The subcommands that look at records: `status`, `watch`, `list`, and `release --force`.
#include <unistd.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/thread_annotations.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/terminal.h"
#include "locks/derived_records.h"

namespace simba::cli {
namespace {

std::string in(EpochMillis at, EpochMillis now) {
  return at <= 0 ? std::string() : "  (in " + format_duration(std::chrono::milliseconds(at - now)) + ")";
}

std::string caching_line(const MutexOwner& owner) {
  if (!owner.caching()) return "no";
  if (owner.idle) return "yes, idle (cached and unused: whoever asks gets it within a hand-back)";
  return "yes (a lock manager keeps it cached after use; given back when asked)";
}

}  // namespace

namespace {

// The records a semaphore or a shared mutex of that name keeps beside it (simba/semaphore.h,
// simba/shared_mutex.h), as one listing finds them.
struct Derived {
  std::map<unsigned, std::map<unsigned, MutexRecord>> slots;  // permits -> slot -> record
  std::vector<MutexRecord> readers;  // held ones only (a shared mutex's writer holds `name` itself)
  std::optional<MutexRecord> line;   // a semaphore's line of waiting requests (its holder: the first)
  bool any() const { return !slots.empty() || !readers.empty(); }
};

Derived derived_records(Client& client, const std::string& name) {
  Derived found;
  Administration* admin = client.backend()->administration();
  if (!admin) return found;
  const auto listing = admin->list(internal::derived_prefix(name), 4 * Semaphore::kMaxPermits + 2);
  for (const auto& record : listing.records) {
    const auto derived = internal::derived_record(name, record.mutex);
    if (!derived) continue;
    switch (derived->kind) {
      case internal::DerivedRecord::Kind::slot: found.slots[derived->permits][derived->slot] = record; break;
      case internal::DerivedRecord::Kind::line: found.line = record; break;
      case internal::DerivedRecord::Kind::reader:
        if (!record.owner.empty()) found.readers.push_back(record);
        break;
    }
  }
  return found;
}

std::size_t held(const std::map<unsigned, MutexRecord>& slots) {
  return static_cast<std::size_t>(
      std::count_if(slots.begin(), slots.end(), [](const auto& slot) { return !slot.second.owner.empty(); }));
}

std::string asked_line(bool demanded) {
  return demanded ? "yes (another contender asked for it since this owner got it)" : "no";
}

// "<owner>  token T  ttl at ...  (in ...)", or "(free)".
std::string holder_line(const MutexOwner& owner, EpochMillis now) {
  if (owner.empty()) return "(free)";
  return owner.owner_id + "  token " + std::to_string(owner.fencing_token) + "  ttl at " + iso_time(owner.ttl_at) +
         in(owner.ttl_at, now);
}

}  // namespace

int run_status(const BackendChoice& backend, const std::string& mutex, bool json) {
  Client client = backend.connect();
  const auto snapshot = client.snapshot(mutex);
  const auto& owner = snapshot.owner;
  const Derived derived = derived_records(client, mutex);
  // Whether someone asked for each held slot since its holder got it (the demand signal: the
  // engines record that, not who waits).
  std::map<std::string, bool> asked;
  const bool tells_asked = client.backend()->demand_signal() != nullptr;
  for (const auto& [permits, slots] : derived.slots) {
    if (!tells_asked) break;
    for (const auto& [slot, record] : slots) {
      if (!record.owner.empty()) asked[record.mutex] = client.snapshot(record.mutex).demanded;
    }
  }
  // A semaphore's name has no record of its own: its slots say it all.
  const bool plain = !(derived.slots.size() > 0 && owner.empty() && owner.fencing_token == 0);
  if (json) {
    auto out = nlohmann::json::parse(record_json(mutex, owner, snapshot.now));
    out["backend"] = client.describe();
    if (tells_asked) out["asked_for"] = snapshot.demanded;
    if (!derived.slots.empty()) {
      auto semaphores = nlohmann::json::array();
      for (const auto& [permits, slots] : derived.slots) {
        auto listed = nlohmann::json::array();
        for (const auto& [slot, record] : slots) {
          auto entry = nlohmann::json::parse(record_json(record.mutex, record.owner, snapshot.now));
          entry["slot"] = slot;
          if (tells_asked) entry["asked_for"] = asked.count(record.mutex) > 0 && asked.at(record.mutex);
          listed.push_back(entry);
        }
        semaphores.push_back({{"permits", permits}, {"held", held(slots)}, {"slots", listed}});
      }
      out["semaphores"] = semaphores;
      const bool waits = derived.line && !derived.line->owner.empty();
      out["first_waiter"] = waits ? nlohmann::json(derived.line->owner.owner_id) : nlohmann::json(nullptr);
    }
    if (!derived.readers.empty()) {
      auto readers = nlohmann::json::array();
      for (const auto& record : derived.readers)
        readers.push_back(nlohmann::json::parse(record_json(record.mutex, record.owner, snapshot.now)));
      out["shared"] = {{"writer", owner.empty() ? nlohmann::json(nullptr)
                                                : nlohmann::json::parse(record_json(mutex, owner, snapshot.now))},
                       {"readers", readers}};
    }
    std::cout << out.dump() << "\n";
    return 0;
  }
  if (plain) {
    std::cout << "mutex:          " << mutex << "\n"
              << "owner:          " << (owner.empty() ? "(none)" : owner.owner_id) << "\n"
              << "fencing token:  " << owner.fencing_token << "\n"
              << "caching:        " << caching_line(owner) << "\n"
              << "acquired at:    " << iso_time(owner.acquired_at) << "\n"
              << "ttl at:         " << iso_time(owner.ttl_at) << in(owner.ttl_at, snapshot.now) << "\n"
              << "transition at:  " << iso_time(owner.transition_at) << in(owner.transition_at, snapshot.now) << "\n";
    if (tells_asked && !owner.empty()) std::cout << "asked for:      " << asked_line(snapshot.demanded) << "\n";
  }
  for (const auto& [permits, slots] : derived.slots) {
    const auto taken = held(slots);
    std::cout << "semaphore:      " << mutex << "\n"
              << "permits:        " << permits << " (" << taken << " held, " << permits - taken << " free)\n";
    std::size_t asked_for = 0;
    for (const auto& [slot, record] : slots) {
      if (record.owner.empty()) continue;
      std::cout << "permit " << std::left << std::setw(9) << (std::to_string(slot) + ":")
                << holder_line(record.owner, snapshot.now) << (asked[record.mutex] ? "  (asked for)" : "") << "\n";
      asked_for += asked[record.mutex] ? 1 : 0;
    }
    if (tells_asked && taken == permits) {
      std::cout << "waiting:        "
                << (asked_for ? "yes: " + std::to_string(asked_for) +
                                    " of the held permits were asked for since their holders got them"
                              : std::string("none asked since the holders got their permits"))
                << "\n";
    }
  }
  if (!derived.slots.empty() && derived.line && !derived.line->owner.empty()) {
    std::cout << "first waiter:   " << derived.line->owner.owner_id << " (leads the line '" << derived.line->mutex
              << "'; the others wait behind it)\n";
  }
  if (!derived.readers.empty()) {
    // The writer holds the mutex itself (writing, or waiting for these readers to leave).
    std::cout << "writer:         " << holder_line(owner, snapshot.now) << "\n"
              << "readers:        " << derived.readers.size() << " reading processes\n";
    for (const auto& record : derived.readers)
      std::cout << "reader:         " << record.mutex << "  " << holder_line(record.owner, snapshot.now) << "\n";
  }
  std::cout << "backend:        " << client.describe() << "\n";
  return 0;
}

// One line per change of owner, as the observer hears it (push engines within their handover
// bound, others within the poll interval), until a signal: then exit 0. A semaphore's name
// (slots found by one listing at the start) watches every slot; a shared mutex's, the mutex
// (held by its writer).
int run_watch(const BackendChoice& backend, const std::string& mutex, bool json) {
  Client client = backend.connect();
  struct Shared {
    internal::AnnotatedMutex mutex;
    std::condition_variable changed;
    bool stop GUARDED_BY(mutex) = false;
    std::map<std::string, std::string> last GUARDED_BY(mutex);  // per record: owner id and token last printed
  };
  auto shared = std::make_shared<Shared>();
  handle_signals([shared](int) {
    {
      internal::MutexLock lock(shared->mutex);
      shared->stop = true;
    }
    shared->changed.notify_all();
  });
  auto print = [shared, json](const std::string& record, const MutexOwner& owner, EpochMillis now) {
    internal::MutexLock lock(shared->mutex);
    const std::string key = owner.owner_id + "@" + std::to_string(owner.fencing_token);
    auto& last = shared->last[record];
    if (key == last) return;
    last = key;
    if (json) {
      std::cout << record_json(record, owner, now) << std::endl;
    } else {
      std::cout << iso_time(now) << "  " << record << "  "
                << (owner.empty() ? std::string("free") : "owner " + owner.owner_id) << "  token "
                << owner.fencing_token << std::endl;
    }
  };
  const Derived derived = derived_records(client, mutex);
  std::vector<std::string> watched;
  for (const auto& [permits, slots] : derived.slots) {
    for (unsigned slot = 0; slot < permits; ++slot) watched.push_back(Semaphore::slot_name(mutex, slot, permits));
  }
  const bool semaphore = !watched.empty() && client.snapshot(mutex).owner.fencing_token == 0;
  if (!semaphore) watched.assign(1, mutex);
  std::vector<std::unique_ptr<MutexRetrievalService>> observers;
  for (const auto& record : watched) {
    const auto first = client.snapshot(record);
    print(record, first.owner, first.now);
    observers.push_back(client.retrieval_service(make_retriever(
        record, [print, record](const MutexState& state) { print(record, state.after, epoch_millis_now()); })));
    observers.back()->start();
  }
  internal::UniqueMutexLock lock(shared->mutex);
  shared->changed.wait(lock.native(), [&]() REQUIRES(shared->mutex) { return shared->stop; });
  lock.unlock();
  for (auto& observer : observers) observer->stop();
  return 0;
}

int run_list(const BackendChoice& backend, const std::string& prefix, std::size_t limit, bool json) {
  Client client = backend.connect();
  const MutexListing listing = administration_of(*client.backend()).list(prefix, limit);
  if (json) {
    for (const auto& record : listing.records)
      std::cout << record_json(record.mutex, record.owner, listing.now) << "\n";
  } else {
    std::size_t width = 5;
    for (const auto& record : listing.records) width = std::max(width, record.mutex.size());
    std::cout << std::left << std::setw(static_cast<int>(width)) << "MUTEX"
              << "  " << std::setw(17) << "TOKEN"
              << "  " << std::setw(26) << "TTL AT"
              << "  OWNER\n";
    for (const auto& record : listing.records) {
      const auto& owner = record.owner;
      std::cout << std::setw(static_cast<int>(width)) << record.mutex << "  " << std::setw(17) << owner.fencing_token
                << "  " << std::setw(26) << iso_time(owner.ttl_at) << "  "
                << (owner.empty() ? std::string("(free)") : owner.owner_id) << (owner.idle ? "  (idle)" : "") << "\n";
    }
  }
  std::cout.flush();
  if (listing.truncated) {
    std::cerr << "simba: more than " << limit << " mutexes match; --limit shows more\n";
  }
  return 0;
}

// Deletes whatever lease holds the mutex (evict), after a yes on a terminal unless --yes.
int run_release(const BackendChoice& backend, const std::string& mutex, bool force, bool yes) {
  if (!force) {
    return fail(code::usage, "release deletes the lease of whichever process holds '" + mutex +
                                 "'; say so with --force (simba release --force MUTEX)");
  }
  Client client = backend.connect();
  auto& administration = administration_of(*client.backend());
  for (int attempt = 0; attempt < 3; ++attempt) {
    const MutexOwner owner = client.owner(mutex);
    if (owner.empty()) {
      std::cerr << "simba: mutex '" << mutex << "' is free; nothing to release\n";
      return 0;
    }
    if (!yes && isatty(STDIN_FILENO)) {
      std::cerr << "Delete the lease of " << owner.owner_id << " on mutex '" << mutex << "' (token "
                << owner.fencing_token << ")? [y/N] " << std::flush;
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") return fail(code::not_confirmed, "not released");
      yes = true;  // asked once
    }
    if (administration.evict(mutex, owner.owner_id)) {
      std::cerr << "simba: released the lease of " << owner.owner_id << " on mutex '" << mutex << "' (token "
                << owner.fencing_token << "); it finds out at its next renewal\n";
      return 0;
    }
    // The owner changed between the read and the delete: look again.
  }
  return fail(code::unavailable, "the owner of mutex '" + mutex + "' kept changing; nothing released");
}

}  // namespace simba::cli
