// Redis replies that build an owner record: the input is fed to hiredis's RESP reader, and
// every reply it yields goes through owner_from_reply(), which returns a record or throws
// errc::internal, never crashes, and never returns an owner whose lease ends before `now`.
// The input is also a mutex name: its three keys map back to it (key_of), and no other key
// of the prefix is taken for one of them.
#include <cctype>
#include <cstdint>
#include <string>

#include "backends/redis/reply.h"
#include "simba/error.h"

namespace {

// hiredis 0.14 allocates an aggregate's element array as soon as it reads "*<count>" (newer
// hiredis caps the count): a count in the millions is a 5 GB calloc inside hiredis, not in
// simba's parser, so inputs that declare more than 1,000 elements are left out.
bool declares_huge_aggregate(const std::string& input) {
  for (std::size_t at = input.find('*'); at != std::string::npos; at = input.find('*', at + 1)) {
    std::size_t digits = 0;
    while (at + 1 + digits < input.size() && std::isdigit(static_cast<unsigned char>(input[at + 1 + digits]))) ++digits;
    if (digits > 3) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace simba;
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (declares_huge_aggregate(input)) return 0;
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, input.data(), input.size());
  for (int replies = 0; replies < 16; ++replies) {
    void* out = nullptr;
    if (redisReaderGetReply(reader, &out) != REDIS_OK || out == nullptr) break;
    auto* reply = static_cast<redisReply*>(out);
    try {
      const OwnerSnapshot snapshot =
          redis::owner_from_reply(*reply, std::chrono::milliseconds(400), std::chrono::milliseconds(400), "fuzz");
      if (!snapshot.owner.empty() && snapshot.owner.transition_at < snapshot.now) __builtin_trap();
    } catch (const Error& e) {
      if (e.code() != errc::internal) __builtin_trap();
    }
    freeReplyObject(reply);
  }
  redisReaderFree(reader);

  const std::string prefix = "simba";
  const auto lock = redis::key_of(prefix, redis::lock_key(prefix, input));
  const auto queue = redis::key_of(prefix, redis::queue_key(prefix, input));
  const auto fencing = redis::key_of(prefix, redis::fencing_key(prefix, input));
  if (!lock || lock->mutex != input || lock->kind != "lock") __builtin_trap();
  if (!queue || queue->mutex != input || queue->kind != "contender") __builtin_trap();
  if (!fencing || fencing->mutex != input || fencing->kind != "fencing") __builtin_trap();
  if (auto any = redis::key_of(prefix, input)) {  // a key that maps to a name maps back to itself
    const std::string again = any->kind == "lock"      ? redis::lock_key(prefix, any->mutex)
                              : any->kind == "fencing" ? redis::fencing_key(prefix, any->mutex)
                                                       : redis::queue_key(prefix, any->mutex);
    if (again != input) __builtin_trap();
  }
  return 0;
}
