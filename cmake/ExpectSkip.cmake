# The skip path of a GATED test (cmake/HugepinTargets.cmake): runs BINARY once per prerequisite in
# NEEDS (comma-separated) with HUGEPIN_TEST_MISSING naming that one, as on a machine without it.
# Each run must exit 77 and print the one line "SKIP: needs ..." naming it (tests/support/gate.h).
#   cmake -DBINARY=path -DNEEDS=io_uring,O_DIRECT -P ExpectSkip.cmake
string(REPLACE "," ";" needs "${NEEDS}")
foreach(need IN LISTS needs)
  set(ENV{HUGEPIN_TEST_MISSING} "${need}")
  execute_process(COMMAND "${BINARY}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc STREQUAL "77")
    message(FATAL_ERROR "${BINARY} without ${need}: exit ${rc}, not 77 (skipped)\n${out}${err}")
  endif()
  if(NOT out MATCHES "^SKIP: needs [^\n]*\\(HUGEPIN_TEST_MISSING names ${need}\\)[^\n]*\n$")
    message(FATAL_ERROR "${BINARY} without ${need}: not one line naming it\n${out}${err}")
  endif()
  message(STATUS "${need}: ${out}")
endforeach()
