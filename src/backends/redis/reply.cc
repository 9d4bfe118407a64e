#include "backends/redis/reply.h"

#include <algorithm>

#include "simba/error.h"

namespace simba::redis {
namespace {

// Epoch milliseconds up to the year 10000, and durations as long: sums of two stay in range.
constexpr long long kLatestMillis = 253'402'300'800'000;

}  // namespace

OwnerSnapshot owner_from_reply(const redisReply& reply, std::chrono::milliseconds ttl,
                               std::chrono::milliseconds transition, const std::string& where) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 6 || reply.elements > 11 || reply.elements == 10) {
    throw Error(errc::internal, where + ": unexpected script reply");
  }
  auto integer = [&](std::size_t i, long long fallback) {
    const long long value = reply.element[i]->type == REDIS_REPLY_INTEGER ? reply.element[i]->integer : fallback;
    if (value < -2 || value > kLatestMillis * 1000)
      throw Error(errc::internal, where + ": a time or token out of range");
    return value;
  };
  OwnerSnapshot out;
  out.now = integer(3, 0);
  if (out.now > kLatestMillis) throw Error(errc::internal, where + ": the server's clock is out of range");
  out.owner.fencing_token = static_cast<std::uint64_t>(std::max<long long>(integer(2, 0), 0));
  const redisReply* id = reply.element[0];
  if (id->type != REDIS_REPLY_STRING) return out;  // no owner
  long long left = integer(1, -2);
  if (left == -1) left = (ttl + transition).count();  // a key without expiry: assume one lease
  if (left < 0) return out;                           // expired meanwhile
  if (left > kLatestMillis) throw Error(errc::internal, where + ": a lease out of range");
  out.owner.owner_id.assign(id->str, id->len);
  out.owner.transition_at = out.now + left;
  out.demanded = reply.elements >= 7 && integer(6, 0) > 0;    // someone waits in the queue
  out.owner.idle = reply.elements >= 8 && integer(7, 0) > 0;  // the owner marked this lease idle
  out.no_derived_held = reply.elements >= 9 && integer(8, 0) > 0;
  if (reply.elements == 11) {
    out.parent =
        OwnerSnapshot::Parent{integer(9, 0) > 0, static_cast<std::uint64_t>(std::max<long long>(integer(10, 0), 0))};
  }
  const long long at = integer(4, -1), holder_ttl = integer(5, -1);
  if (at >= 0 && holder_ttl >= 0 && at <= kLatestMillis && holder_ttl <= kLatestMillis) {
    out.owner.acquired_at = at;
    out.owner.ttl_at = at + holder_ttl;
  } else {
    out.owner.ttl_at = std::max<EpochMillis>(out.now, out.owner.transition_at - transition.count());
    out.owner.acquired_at = out.owner.ttl_at - ttl.count();
  }
  return out;
}

std::string lock_key(const std::string& prefix, const std::string& mutex) { return prefix + ":{" + mutex + "}"; }
std::string queue_key(const std::string& prefix, const std::string& mutex) {
  return lock_key(prefix, mutex) + ":contender";
}
std::string fencing_key(const std::string& prefix, const std::string& mutex) {
  return lock_key(prefix, mutex) + ":fencing";
}
std::string derived_index_of(const std::string& prefix, const std::string& name) {
  return lock_key(prefix, name) + ":derived";
}
std::optional<std::string> derived_index_key(const std::string& prefix, const std::string& mutex) {
  const auto hash = mutex.rfind('#');
  if (hash == std::string::npos) return std::nullopt;
  return derived_index_of(prefix, mutex.substr(0, hash));
}

// A lock key ends with "}"; the other two with "}:fencing" and "}:contender", which no lock key
// does: the suffix says which, and what is between "{" and it is the name.
std::optional<KeyOf> key_of(const std::string& prefix, std::string_view key) {
  const std::string head = prefix + ":{";
  if (key.substr(0, head.size()) != head) return std::nullopt;
  key.remove_prefix(head.size());
  for (const char* kind : {"lock", "fencing", "contender"}) {
    const std::string suffix = std::string_view(kind) == "lock" ? "}" : std::string("}:") + kind;
    if (key.size() >= suffix.size() && key.substr(key.size() - suffix.size()) == suffix) {
      return KeyOf{std::string(key.substr(0, key.size() - suffix.size())), kind};
    }
  }
  return std::nullopt;
}

}  // namespace simba::redis
