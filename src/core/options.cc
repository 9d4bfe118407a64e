// Validation of the protocol's timing options, and their URI query spelling.
#include "simba/options.h"

#include <limits>

#include "simba/duration.h"
#include "simba/error.h"

namespace simba {

void ContendOptions::validate() const {
  auto fail = [](const std::string& why) { throw Error(errc::invalid_argument, why); };
  if (ttl.count() <= 0) fail("ttl must be > 0, got " + format_duration(ttl));
  if (transition.count() < 0) fail("transition must be >= 0, got " + format_duration(transition));
  if (ttl.count() > std::numeric_limits<std::int64_t>::max() / 4 - transition.count()) {
    fail("ttl + transition must fit in int64 milliseconds");
  }
  if (initial_delay.count() < 0) fail("initial_delay must be >= 0");
  if (poll_interval.count() < 0) fail("poll interval must be >= 0");
  if (backoff_initial.count() <= 0) fail("backoff must be > 0");
}

void ContendOptions::apply_query(std::map<std::string, std::string>& query) {
  const std::pair<const char*, std::chrono::milliseconds ContendOptions::*> fields[] = {
      {"ttl", &ContendOptions::ttl},
      {"transition", &ContendOptions::transition},
      {"initial_delay", &ContendOptions::initial_delay},
      {"poll", &ContendOptions::poll_interval},
      {"backoff", &ContendOptions::backoff_initial},
  };
  for (const auto& [key, field] : fields) {
    auto it = query.find(key);
    if (it == query.end()) continue;
    try {
      this->*field = parse_duration(it->second);
    } catch (const Error& e) {
      throw Error(errc::invalid_argument, std::string("option '") + key + "': " + e.what());
    }
    query.erase(it);
  }
}

}  // namespace simba
