# Writes a man page from a program's --help (cmake -P): the program's own words, so the page
# never drifts from the flags. Used at build time by cli/CMakeLists.txt; no help2man needed.
#
#   cmake -DPROGRAM=path -DNAME=hugepind -DSECTION=8 -DSUMMARY="..." -DVERSION=0.1.0 -DOUTPUT=file
#         [-DSUBCOMMANDS=ON] -P HelpToMan.cmake
#
# With SUBCOMMANDS, every subcommand the top-level help lists gets its own section from
# `PROGRAM SUBCOMMAND --help`.

function(run_help out)
  execute_process(COMMAND ${PROGRAM} ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${ARGN} --help failed (${rc})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Help text as roff: literal lines (nofill), backslashes and leading dots or quotes escaped.
function(roff_literal out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

run_help(top)
string(TOUPPER "${NAME}" upper)
string(TIMESTAMP today "%Y-%m-%d" UTC)
set(page ".TH ${upper} ${SECTION} \"${today}\" \"hugepin ${VERSION}\" \"hugepin\"\n")
string(APPEND page ".SH NAME\n${NAME} \\- ${SUMMARY}\n")
roff_literal(body "${top}")
string(APPEND page ".SH DESCRIPTION\n${body}")

if(SUBCOMMANDS)
  string(REGEX MATCH "Subcommands:\n(.*)" listing "${top}")
  string(REGEX MATCHALL "\n  ([a-z][a-z0-9-]*)" names "\n${CMAKE_MATCH_1}")
  foreach(entry IN LISTS names)
    string(STRIP "${entry}" sub)
    run_help(help ${sub})
    roff_literal(body "${help}")
    string(APPEND page ".SH \"${upper} ${sub}\"\n${body}")
  endforeach()
endif()

string(APPEND page ".SH SEE ALSO\nhugepin(1), hugepind(8), hugepind.conf(5), hugepin\\-plan(5), hugepin\\-shim(7);\n")
string(APPEND page "docs/README.md of the hugepin sources\n")
file(WRITE "${OUTPUT}" "${page}")
