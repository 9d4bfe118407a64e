// A hung test program's report. CTest kills a test that runs past its TIMEOUT and shows only
// that it did; the build sets SIMBA_TEST_DEADLINE_SECONDS a little under that TIMEOUT
// (simba_report_hangs, tests/CMakeLists.txt), and a program still running then prints the test it
// is in and every thread's stack (by gdb), then aborts. Without the variable nothing runs.
// Linked into every GoogleTest program of the build (never into the installed kit).
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

[[noreturn]] void report_hang(long seconds) {
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string where =
      test ? std::string(test->test_suite_name()) + "." + test->name() : "no test (between tests)";
  std::fprintf(stderr,
               "\n*** simba: this test program is still running after %ld s (SIMBA_TEST_DEADLINE_SECONDS), in %s; "
               "every thread's stack follows\n",
               seconds, where.c_str());
  std::fflush(stderr);
  // gdb is not this process's child: let it attach where the kernel allows only those.
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const std::string command = "gdb -p " + std::to_string(::getpid()) +
                              " -batch -nx -ex 'set pagination off' -ex 'thread apply all bt' </dev/null 1>&2";
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "*** simba: no stacks (gdb is missing or could not attach)\n");
  }
  std::fprintf(stderr, "*** simba: %s hung; aborting\n", where.c_str());
  std::fflush(stderr);
  std::abort();
}

[[maybe_unused]] const bool kHangReport = [] {
  const char* value = std::getenv("SIMBA_TEST_DEADLINE_SECONDS");
  const long seconds = value ? std::strtol(value, nullptr, 10) : 0;
  if (seconds <= 0) return false;
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    report_hang(seconds);
  }).detach();
  return true;
}();

}  // namespace
