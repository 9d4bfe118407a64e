// Unit tests of the protocol's value types, delays, ids, durations, URIs and options.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "base/log.h"
#include "core/contend_period.h"
#include "core/uri.h"
#include "simba/simba.h"

namespace simba {
namespace {

using namespace std::chrono_literals;

MutexOwner owner_of(std::string id, EpochMillis acquired, EpochMillis ttl, EpochMillis transition) {
  return MutexOwner{std::move(id), acquired, acquired + ttl, acquired + ttl + transition, 1};
}

TEST(MutexOwnerTest, TtlIsStrictAndTransitionIsInclusive) {
  auto owner = owner_of("a", 1000, 100, 50);  // ttl_at 1100, transition_at 1150
  EXPECT_TRUE(owner.is_in_ttl(1099));
  EXPECT_FALSE(owner.is_in_ttl(1100));
  EXPECT_TRUE(owner.is_in_transition(1150));
  EXPECT_FALSE(owner.is_in_transition(1151));
  EXPECT_TRUE(owner.has_owner(1150));
  EXPECT_FALSE(owner.has_owner(1151));
  EXPECT_TRUE(owner.is_owner("a"));
  EXPECT_FALSE(owner.is_owner("b"));
  EXPECT_TRUE(MutexOwner::none().empty());
  EXPECT_EQ(MutexOwner::none().transition_at, 0);
}

TEST(MutexStateTest, OnlyAChangeOfOwnerIdIsAChange) {
  auto a1 = owner_of("a", 1000, 100, 50);
  auto a2 = owner_of("a", 1100, 100, 50);  // a renewal
  auto b = owner_of("b", 1200, 100, 50);
  EXPECT_FALSE((MutexState{a1, a2}).changed());
  EXPECT_FALSE((MutexState{a1, a2}).acquired("a"));
  EXPECT_TRUE((MutexState{a1, b}).changed());
  EXPECT_TRUE((MutexState{a1, b}).acquired("b"));
  EXPECT_TRUE((MutexState{a1, b}).released("a"));
  EXPECT_FALSE((MutexState{a1, b}).released("b"));
  EXPECT_TRUE((MutexState{MutexOwner::none(), a1}).acquired("a"));
  EXPECT_TRUE((MutexState{a1, MutexOwner::none()}).released("a"));
  EXPECT_TRUE((MutexState{a1, b}).is_owner("b"));
}

TEST(MutexContenderTest, DefaultNotifyRoutesToAcquiredAndReleased) {
  std::vector<std::string> calls;
  auto contender = make_contender(
      "m", [&](const MutexState&) { calls.push_back("acquired"); },
      [&](const MutexState&) { calls.push_back("released"); }, "a");
  auto a = owner_of("a", 1, 10, 0), a_renewed = owner_of("a", 5, 10, 0), b = owner_of("b", 20, 10, 0);
  contender->notify_owner({MutexOwner::none(), a});
  contender->notify_owner({a, a_renewed});  // unchanged: ignored
  contender->notify_owner({a_renewed, b});
  contender->notify_owner({b, MutexOwner::none()});  // not about "a"
  EXPECT_EQ(calls, (std::vector<std::string>{"acquired", "released"}));
}

TEST(ContendPeriodTest, OwnerRenewsAtTheSoftExpiry) {
  std::mt19937_64 rng(1);
  auto owner = owner_of("a", 1000, 100, 50);
  EXPECT_EQ(internal::next_delay(owner, "a", 1000, rng), 100ms);
  EXPECT_EQ(internal::next_delay(owner, "a", 1100, rng), 0ms);
  EXPECT_EQ(internal::next_delay(owner, "a", 5000, rng), 0ms);  // clamped
}

// Batched renewals fall on a grid of ttl/8 (10 ms to 1 s): renewals due anywhere within one
// step of it are moved back to the step's start, so they go off together and share round
// trips; never later than due, and never into the past (then it stays as due).
TEST(ContendPeriodTest, RenewalsDueWithinAGridStepAreMovedToItsStart) {
  using TimePoint = std::chrono::steady_clock::time_point;
  const auto ttl = 400ms;  // a step of 50 ms
  const TimePoint step(std::chrono::seconds(1000));
  const TimePoint now = step - 300ms;
  for (auto due : {step, step + 1ms, step + 25ms, step + 49ms}) {
    EXPECT_EQ(internal::renewal_tick(due, now, ttl), step) << (due - step).count();
  }
  EXPECT_EQ(internal::renewal_tick(step + 50ms, now, ttl), step + 50ms) << "the next step";
  EXPECT_EQ(internal::renewal_tick(step + 30ms, step + 10ms, ttl), step + 30ms) << "the step is past: as due";
  EXPECT_EQ(internal::renewal_tick(step + 30ms, step, ttl), step + 30ms) << "the step is now: as due";
  // The step is clamped: 10 ms for short leases, 1 s for long ones.
  EXPECT_EQ(internal::renewal_tick(step + 9ms, now, 40ms), step);
  EXPECT_EQ(internal::renewal_tick(step + 10ms, now, 40ms), step + 10ms);
  EXPECT_EQ(internal::renewal_tick(step + 999ms, step - 5s, std::chrono::hours(1)), step);
}

// The smallest and largest next delay of a non-owner over many draws.
std::pair<std::int64_t, std::int64_t> delay_range(const MutexOwner& owner, EpochMillis now, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::int64_t lo = 1 << 30, hi = -1;
  for (int i = 0; i < 20000; ++i) {
    auto d = internal::next_delay(owner, "b", now, rng).count();
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  return {lo, hi};
}

TEST(ContendPeriodTest, NonOwnerJitterIsZeroToOneSecondWithoutTransition) {
  auto owner = owner_of("a", 1000, 100, 0);  // transition_at == ttl_at == 1100
  // transition_at - now = 1000, plus [0, 1000)
  EXPECT_EQ(delay_range(owner, 100, 2), std::make_pair(std::int64_t{1000}, std::int64_t{1999}));
}

TEST(ContendPeriodTest, NonOwnerJitterStartsAtMinus200WithTransition) {
  auto owner = owner_of("a", 1000, 100, 50);  // transition_at 1150
  // transition_at - now = 1000, plus [-200, 1000)
  EXPECT_EQ(delay_range(owner, 150, 3), std::make_pair(std::int64_t{800}, std::int64_t{1999}));
  // Near the end of the transition the negative jitter clamps to zero, never below.
  EXPECT_EQ(delay_range(owner, 1150, 4).first, 0);
}

TEST(ContendPeriodTest, WaitersProbeJustAfterTheHardExpiry) {
  std::mt19937_64 rng(5);
  auto owner = owner_of("a", 1000, 100, 50);  // transition_at 1150: takeable from 1151
  for (int i = 0; i < 1000; ++i) {
    auto d = internal::expiry_probe_delay(owner, 150, rng).count();
    EXPECT_GE(d, 1001);
    EXPECT_LE(d, 1020);
    EXPECT_GE(internal::expiry_probe_delay(owner, 5000, rng).count(), 1);  // already expired
  }
}

TEST(ContendPeriodTest, NextRoundDelayFollowsWhatTheBackendPushes) {
  std::mt19937_64 rng(6);
  internal::RoundPolicy policy;
  policy.ttl = 1000ms;
  policy.poll = 25ms;
  auto owner = owner_of("a", 1000, 100, 50);  // ttl_at 1100, transition_at 1150
  // An observer of a free mutex waits a ttl with push, polls without.
  policy.observer = true;
  policy.push = policy.push_acquisitions = true;
  EXPECT_EQ(internal::next_round_delay(MutexOwner::none(), 1000, "", policy, rng), 1000ms);
  EXPECT_EQ(internal::next_round_delay(owner, 1000, "", policy, rng), 151ms);  // just after the hard expiry
  policy.push_acquisitions = false;
  EXPECT_EQ(internal::next_round_delay(owner, 1000, "", policy, rng), 25ms);
  // A waiter with push sleeps until about the expiry; without push it polls.
  policy.observer = false;
  policy.push = policy.push_acquisitions = true;
  auto waiting = internal::next_round_delay(owner, 1000, "b", policy, rng);
  EXPECT_GE(waiting, 151ms);
  EXPECT_LE(waiting, 170ms);
  policy.push = false;
  EXPECT_EQ(internal::next_round_delay(owner, 1000, "b", policy, rng), 25ms);
  // A claim that came back too late is retried at once; an owner renews at the soft expiry.
  policy.again = true;
  EXPECT_EQ(internal::next_round_delay(owner, 1000, "b", policy, rng), 0ms);
  policy.again = false;
  policy.ours = true;
  EXPECT_EQ(internal::next_round_delay(owner, 1000, "a", policy, rng), 100ms);
}

TEST(ContendPeriodTest, BackoffDoublesWithJitterUpToTheCap) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 1000; ++i) {
    auto first = internal::backoff_delay(1, 100ms, 10s, rng);
    EXPECT_GE(first, 50ms);
    EXPECT_LE(first, 100ms);
    auto fourth = internal::backoff_delay(4, 100ms, 10s, rng);
    EXPECT_GE(fourth, 400ms);
    EXPECT_LE(fourth, 800ms);
    auto capped = internal::backoff_delay(40, 100ms, 10s, rng);
    EXPECT_GE(capped, 5s);
    EXPECT_LE(capped, 10s);
  }
}

TEST(ContenderIdTest, HostIdsAreCounterPidAtHostAndUnique) {
  auto digits = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    auto id = contender_id::host();  // {counter}:{pid}@{host}
    auto colon = id.find(':'), at = id.find('@');
    ASSERT_TRUE(colon != std::string::npos && at != std::string::npos && colon < at) << id;
    EXPECT_TRUE(digits(id.substr(0, colon))) << id;
    EXPECT_EQ(id.substr(colon + 1, at - colon - 1), std::to_string(getpid())) << id;
    EXPECT_GT(id.size(), at + 1) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

TEST(ContenderIdTest, UuidIdsAre32HexDigits) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    auto id = contender_id::uuid();
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

TEST(ContenderBaseTest, RejectsBlankNamesAndIdsWithInvalidArgument) {
  struct C : ContenderBase {
    using ContenderBase::ContenderBase;
  };
  for (const std::string& bad : {std::string(""), std::string(" "), std::string("\t"), std::string("x\0y", 3)}) {
    try {
      C c(bad, "id");
      FAIL() << "accepted mutex name of " << bad.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
    }
    EXPECT_THROW(C("m", bad), Error);
  }
  EXPECT_THROW(C("m", "a@@b"), Error);
  C ok("m", "a@b");
  EXPECT_EQ(ok.mutex(), "m");
  EXPECT_EQ(ok.contender_id(), "a@b");
}

TEST(DurationTest, ParsesMillisecondsSecondsMinutesAndHours) {
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("10s"), 10s);
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration("2m"), 120s);
  EXPECT_EQ(parse_duration("1h"), 3600s);
  EXPECT_EQ(parse_duration("0ms"), 0ms);
  for (const char* bad : {"", "10", "s", "-1s", "10x", "1.2.3s", "0.5ms", " 1s", "1e3s"}) {
    try {
      parse_duration(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
  try {
    parse_duration("-5s");
    FAIL() << "accepted '-5s'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(10s), "10s");
  EXPECT_EQ(format_duration(120s), "2m");
  EXPECT_EQ(format_duration(0ms), "0ms");
}

TEST(UriTest, ParsesEveryPartAndNeverShowsThePassword) {
  auto uri = internal::parse_uri("redis://user:s%40cret@host.example:6380/2?prefix=app&ttl=5s");
  EXPECT_EQ(uri.scheme, "redis");
  EXPECT_EQ(uri.user, "user");
  EXPECT_EQ(uri.password, "s@cret");
  EXPECT_EQ(uri.host, "host.example");
  EXPECT_EQ(uri.port, 6380);
  EXPECT_EQ(uri.path, "/2");
  EXPECT_EQ(uri.query.at("prefix"), "app");
  EXPECT_EQ(uri.redacted().find("cret"), std::string::npos) << uri.redacted();
  EXPECT_EQ(internal::parse_uri("sqlite:///tmp/x.db").path, "/tmp/x.db");
  EXPECT_EQ(internal::parse_uri("memory:").scheme, "memory");
  EXPECT_EQ(internal::parse_uri("zookeeper://[::1]:2181/chroot").host, "::1");
  for (const char* bad :
       {"nocolon", "redis://h:99999", "redis://h:x", "x://h?novalue", "a b://h", "sqlite:///x?ttl=1s&ttl=2s"}) {
    EXPECT_THROW(internal::parse_uri(bad), Error) << bad;
  }
}

// Found by fuzzing (fuzz/regressions/uri): control characters passed on to the engine, and a
// scheme could start with '+'. Both are refused, saying where.
TEST(UriTest, ControlCharactersAndBadSchemeStartsAreRefusedNamingThem) {
  try {
    internal::parse_uri(std::string("redis://u:pw@127.0.0\x18.1:6637/0"));
    ADD_FAILURE() << "a control character was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("control character 0x18 at byte 20"), std::string::npos) << e.what();
  }
  EXPECT_THROW(internal::parse_uri("+redis://h:1"), Error);
  EXPECT_THROW(internal::parse_uri(std::string("sqlite:///tmp/a\0b.db", 20)), Error);
}

// A loopback port this test holds closed: bound but never listening, so a connection to it is
// refused, and no other program can take it meanwhile. No test assumes a well-known port is
// free (a developer's machine may run Redis or ZooKeeper on theirs).
class ClosedPort {
 public:
  ClosedPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      ADD_FAILURE() << "cannot hold a loopback port closed";
    }
    port_ = ntohs(address.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  std::string at() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

TEST(ConnectTest, BadUrisSayWhatIsWrongAndWhatIsAccepted) {
  ClosedPort closed, closed_too;
  const std::string nobody = closed.at();
  auto code_of = [](const std::string& uri) {
    try {
      open_backend(uri);
    } catch (const Error& e) {
      return std::make_pair(e.code(), std::string(e.what()));
    }
    return std::make_pair(std::error_code(), std::string());
  };
  auto [unknown, unknown_what] = code_of("ftp://x");
  EXPECT_EQ(unknown, errc::invalid_argument);
  EXPECT_NE(unknown_what.find("'ftp'"), std::string::npos);
  EXPECT_NE(unknown_what.find("memory:"), std::string::npos);
#if SIMBA_HAS_REDIS && SIMBA_HAS_ZOOKEEPER && SIMBA_HAS_SQLITE
  auto [missing, missing_what] = code_of("rediss://u:hunter2@" + nobody);
  EXPECT_EQ(missing, errc::unsupported);
  EXPECT_EQ(missing_what.find("hunter2"), std::string::npos);
  const std::string hosts = nobody + "," + closed_too.at();
  auto [no_zookeeper, no_zookeeper_what] = code_of("zookeeper://u:hunter2@" + hosts + "/chroot?connect_timeout=200ms");
  EXPECT_EQ(no_zookeeper, errc::unavailable);
  EXPECT_EQ(no_zookeeper_what.find("hunter2"), std::string::npos) << no_zookeeper_what;
  EXPECT_NE(no_zookeeper_what.find(hosts + "/chroot"), std::string::npos) << no_zookeeper_what;
  // A host without a port gets ZooKeeper's 2181 (a name that never resolves: nothing is reached).
  auto [defaulted, defaulted_what] = code_of("zookeeper://" + nobody + ",nohost.invalid/chroot?connect_timeout=200ms");
  EXPECT_NE(defaulted_what.find(nobody + ",nohost.invalid:2181/chroot"), std::string::npos) << defaulted_what;
  EXPECT_EQ(code_of("zookeeper://" + nobody + "/chroot/").first, errc::invalid_argument);
  EXPECT_EQ(code_of("zookeeper://" + nobody + "?session_timeout=soon").first, errc::invalid_argument);
  EXPECT_EQ(code_of("zookeeper://127.0.0.1:0," + nobody).first, errc::invalid_argument);  // port 0 in a list
  EXPECT_EQ(code_of("zookeeper://u@" + nobody).first, errc::invalid_argument);            // user without password
  auto [unreachable, unreachable_what] = code_of("redis://u:hunter2@" + nobody + "?connect_timeout=200ms");
  EXPECT_EQ(unreachable, errc::unavailable);
  EXPECT_EQ(unreachable_what.find("hunter2"), std::string::npos) << unreachable_what;
  EXPECT_EQ(code_of("redis://" + nobody + "/x").first, errc::invalid_argument);  // db is not a number
  EXPECT_EQ(code_of("redis://" + nobody + "?prefix=").first, errc::invalid_argument);
  EXPECT_EQ(code_of("sqlite://").first, errc::invalid_argument);
  EXPECT_EQ(code_of("sqlite:///nonexistent-dir/x/y.db").first, errc::unavailable);
#endif
  EXPECT_EQ(code_of("memory:?bogus=1").first, errc::invalid_argument);
  EXPECT_EQ(code_of("memory:?ttl=0ms").first, errc::invalid_argument);
  EXPECT_EQ(code_of("memory:?ttl=ten").first, errc::invalid_argument);
  ContendOptions options;
  open_backend("memory:?ttl=2s&transition=1s&initial_delay=5ms&poll=10ms", &options);
  EXPECT_EQ(options.ttl, 2s);
  EXPECT_EQ(options.transition, 1s);
  EXPECT_EQ(options.initial_delay, 5ms);
  EXPECT_EQ(options.poll_interval, 10ms);
}

TEST(ContendOptionsTest, ValidationNamesTheBadField) {
  ContendOptions options;
  options.ttl = 0ms;
  try {
    options.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("ttl"), std::string::npos);
  }
  options = {};
  options.transition = -1ms;
  EXPECT_THROW(options.validate(), Error);
  options = {};
  options.ttl = std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max() - 5);
  EXPECT_THROW(options.validate(), Error);
  EXPECT_NO_THROW(ContendOptions{}.validate());
}

TEST(LogSinkTest, LinesGoToTheApplicationsSinkUntilItIsRemoved) {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view line) {
    std::lock_guard lock(mutex);
    lines.emplace_back(level, std::string(line));
  });
  ::testing::internal::CaptureStderr();
  internal::log_warn("a warning for the sink");
  internal::log_error("an error for the sink");
  set_log_sink({});
  internal::log_warn("a warning for stderr");
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::make_pair(LogLevel::warn, std::string("a warning for the sink")));
  EXPECT_EQ(lines[1], std::make_pair(LogLevel::error, std::string("an error for the sink")));
  EXPECT_EQ(err.find("for the sink"), std::string::npos) << err;
  EXPECT_NE(err.find("a warning for stderr"), std::string::npos) << err;
}

}  // namespace
}  // namespace simba
