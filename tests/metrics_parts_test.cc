// The metrics' histograms kept per thread (metrics/histogram.h): every report is counted once,
// whether its thread still runs, has ended, or reports from its own end.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "metrics/histogram.h"

namespace simba::internal {
namespace {

using namespace std::chrono_literals;

constexpr auto kAcquire = static_cast<std::size_t>(BackendOp::acquire);

void report(TimingParts& parts, std::chrono::nanoseconds took) {
  parts.report([&](TimingPart& part) { part.round_trip[kAcquire].observe(took); });
}

TEST(TimingPartsTest, EachThreadsReportsAreCountedOnceWhileItRunsAndAfterItEnds) {
  TimingParts parts;
  report(parts, 50us);  // this thread's: bucket 0
  constexpr int kThreads = 4, kReports = 2000;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReports; ++i) report(parts, 200us);  // bucket 1 (100-250 µs)
      done.fetch_add(1);
    });
  }
  // While they report and end, no snapshot goes back or counts a thread twice.
  std::uint64_t last = 0;
  bool kept_order = true;
  while (done.load() < kThreads && kept_order) {
    const auto count = parts.totals().round_trip[kAcquire].snapshot().count;
    EXPECT_GE(count, last) << "a snapshot went back";
    EXPECT_LE(count, 1u + kThreads * kReports) << "a snapshot counted a thread's reports twice";
    kept_order = count >= last && count <= 1u + kThreads * kReports;
    last = count;
  }
  for (auto& thread : threads) thread.join();
  const auto totals = parts.totals().round_trip[kAcquire];
  EXPECT_EQ(totals.counts[0], 1u);
  EXPECT_EQ(totals.counts[1], std::uint64_t{kThreads} * kReports) << "an ended thread's reports are kept, once";
  EXPECT_EQ(totals.sum_ns, 50'000u + std::uint64_t{kThreads} * kReports * 200'000u);
  const auto other = parts.totals().hold.snapshot();
  EXPECT_EQ(other.count, 0u);
}

// Reports to `parts` from its destructor, which runs as its thread ends.
struct ReportsAtItsEnd {
  TimingParts* parts = nullptr;
  ~ReportsAtItsEnd() {
    if (parts) report(*parts, 300us);
  }
};

TEST(TimingPartsTest, AReportMadeAfterItsThreadsPartsEndedIsStillCounted) {
  TimingParts parts;
  std::thread([&] {
    // Made before the thread's parts, so it ends after them (thread-locals end in reverse).
    thread_local ReportsAtItsEnd at_end;
    at_end.parts = &parts;
    report(parts, 300us);
  }).join();
  EXPECT_EQ(parts.totals().round_trip[kAcquire].snapshot().count, 2u);
}

TEST(TimingPartsTest, AThreadKeepsNoPartOfTimingsGone) {
  std::thread([] {
    for (int i = 0; i < 100; ++i) {
      TimingParts parts;
      report(parts, 1ms);
      ASSERT_EQ(parts.totals().round_trip[kAcquire].snapshot().count, 1u);
    }
    EXPECT_LE(TimingParts::parts_of_this_thread(), 1u) << "a part of a TimingParts gone was kept";
  }).join();
}

}  // namespace
}  // namespace simba::internal
