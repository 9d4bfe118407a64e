// What the server backends' tests share: the wrappers' environment, and a server restart in
// the middle of a run.
#pragma once

#include <algorithm>

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "kit.h"

namespace simba::test {

// A variable the with_*.sh wrapper exported ("" when unset).
inline std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// An owner holds a mutex on `uri`; `stop_server` kills the server: the owner must be revoked
// at once (on_released well within its 3 s ttl); `start_server` brings it
// back: the owner must own again (a new on_acquired) without restarting anything. The
// fencing tokens of the two ownerships go to `token_before` and `token_after` if given.
inline void expect_restart_revokes_and_resumes(const std::string& uri, const std::function<void()>& stop_server,
                                               const std::function<void()>& start_server,
                                               std::uint64_t* token_before = nullptr,
                                               std::uint64_t* token_after = nullptr) {
  using namespace std::chrono_literals;
  ContendOptions options = tck::fast_options();
  options.ttl = 3s;  // a revocation well within it cannot be the lease running out
  options.transition = 1s;
  auto client = Client(open_backend(uri), options, std::make_shared<Runtime>());
  auto owner = std::make_shared<tck::Recorder>(tck::unique_mutex("restart"));
  auto service = client.contend_service(owner);
  service->start();
  ASSERT_TRUE(tck::wait_until([&] { return owner->acquired_count() == 1; }, 5s));
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(stop_server());
  // The revocation itself, not the belief at some later poll: a round sent after the loss may
  // still be answered by a server that is shutting down (PostgreSQL's LISTEN backend dies
  // before the one that answers a renewal), which is a real renewal of a durable lease.
  ASSERT_TRUE(tck::wait_until([&] { return owner->released_count() >= 1; }, 2s));
  const auto events = owner->events();
  const auto revoked = std::find_if(events.begin(), events.end(), [](const auto& e) { return !e.acquired; });
  ASSERT_NE(revoked, events.end());
  EXPECT_LT(revoked->at - stopped, options.ttl) << "revoked only when the lease ran out";
  ASSERT_NO_FATAL_FAILURE(start_server());
  EXPECT_TRUE(tck::wait_until([&] { return owner->acquired_count() >= 2 && service->is_owner(); }, 20s));
  EXPECT_TRUE(service->is_owner());
  std::vector<std::uint64_t> tokens;
  for (const auto& event : owner->events()) {
    if (event.acquired) tokens.push_back(event.state.after.fencing_token);
  }
  if (token_before && !tokens.empty()) *token_before = tokens.front();
  if (token_after && tokens.size() > 1) *token_after = tokens[1];
  service->stop();
}

}  // namespace simba::test
