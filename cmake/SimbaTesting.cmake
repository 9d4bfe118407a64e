# What the build's GoogleTest programs share (included where tests are built).
# tests/hang_report.cc: a test program still running at SIMBA_TEST_DEADLINE_SECONDS prints the
# test it is in and every thread's stack, then aborts; linked into each of them.
set(SIMBA_HANG_REPORT_SOURCE ${PROJECT_SOURCE_DIR}/tests/hang_report.cc)

# Gives every test of the calling directory that has a TIMEOUT that deadline, a little (20 s,
# or a tenth if that is less) under it: the stacks are printed before CTest kills the test.
function(simba_report_hangs)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} TIMEOUT timeout)
    if(timeout)
      math(EXPR margin "${timeout} / 10")
      if(margin GREATER 20)
        set(margin 20)
      endif()
      math(EXPR deadline "${timeout} - ${margin}")
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT_MODIFICATION "SIMBA_TEST_DEADLINE_SECONDS=set:${deadline}")
    endif()
  endforeach()
endfunction()
