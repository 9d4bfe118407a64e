// The single-attempt rule's message (single_attempt.h).
#include "locks/single_attempt.h"

#include "simba/duration.h"

namespace simba::internal {

std::string timeout_message(const TimeoutFacts& facts) {
  std::string message = "timed out";
  if (facts.timeout.count() >= 0) message += " after " + format_duration(facts.timeout);
  message += " waiting for mutex '" + facts.mutex + "'";
  if (!facts.contender.empty()) message += " as contender '" + facts.contender + "'";
  if (facts.held_here) {
    message += " (held in this process)";
  } else if (!facts.owner.empty() && facts.owner != facts.self) {
    message += " (owned by '" + facts.owner + "')";
  }
  if (!facts.last_error.empty()) message += "; last backend error: " + facts.last_error;
  return message;
}

}  // namespace simba::internal
