# Helpers that give every hugepin target the same flags and every test the same shape.

set(HUGEPIN_WARNINGS -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(HUGEPIN_WERROR)
  list(APPEND HUGEPIN_WARNINGS -Werror)
endif()

set(HUGEPIN_SANITIZE "")
if(HUGEPIN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "HUGEPIN_FUZZ needs clang (libFuzzer): CC=clang-14 CXX=clang++-14 cmake ...")
  endif()
  # Coverage for libFuzzer in every hugepin target; only the fuzz targets link the fuzzer's main.
  set(HUGEPIN_SANITIZE -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                       -fno-omit-frame-pointer)
elseif(HUGEPIN_TSAN)
  set(HUGEPIN_SANITIZE -fsanitize=thread)
elseif(HUGEPIN_ASAN)
  # UBSan's findings fail the run instead of scrolling past.
  set(HUGEPIN_SANITIZE -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
endif()

# hugepin_target_defaults(TARGET): include root, warnings, sanitizers.
function(hugepin_target_defaults target)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${HUGEPIN_WARNINGS}>
                                           $<$<COMPILE_LANGUAGE:CXX>:${HUGEPIN_SANITIZE}>
                                           $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  if(HUGEPIN_SANITIZE)
    target_link_options(${target} PRIVATE ${HUGEPIN_SANITIZE})
  endif()
endfunction()

# hugepin_library(NAME SOURCES ... [LIBS ...]): a static library of one folder.
function(hugepin_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  hugepin_target_defaults(${name})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
endfunction()

# hugepin_test(NAME SOURCES ... [LIBS ...] [GATED NEEDS name ...] [LABELS ...] [RESOURCE_LOCK ...]
#              [TIMEOUT s])
# One doctest binary, one ctest test. GATED tests bring their own main (tests/support/gate.h):
# they exit 77 with one line saying what is missing when the machine lacks a prerequisite, which
# ctest reports as skipped. NEEDS names those prerequisites as HUGEPIN_TEST_MISSING spells them;
# the test NAME_skips plays a machine without each in turn and checks that the binary skips.
function(hugepin_test name)
  cmake_parse_arguments(ARG "GATED" "TIMEOUT" "SOURCES;LIBS;LABELS;RESOURCE_LOCK;NEEDS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  hugepin_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} hugepin_test_support doctest::doctest)
  if(ARG_GATED AND NOT ARG_NEEDS)
    message(FATAL_ERROR "hugepin_test(${name} GATED ...) names no NEEDS")
  endif()
  if(NOT ARG_GATED)
    target_link_libraries(${name} PRIVATE hugepin_test_main)
  else()
    string(REPLACE ";" "," needs "${ARG_NEEDS}")
    add_test(NAME ${name}_skips COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${name}> -DNEEDS=${needs}
                                        -P ${PROJECT_SOURCE_DIR}/cmake/ExpectSkip.cmake)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${ARG_TIMEOUT}
                                          LABELS "${ARG_LABELS}")
  if(ARG_RESOURCE_LOCK)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK "${ARG_RESOURCE_LOCK}")
  endif()
endfunction()
