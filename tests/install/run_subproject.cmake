# SPDX-License-Identifier: Apache-2.0
#
# Test install.add_subdirectory (cmake -P): configure tests/install/subproject,
# which add_subdirectory()s hwyattn's source tree, with find_package(GTest) and
# find_package(benchmark) disabled (a REQUIRED lookup of either then fails the
# configure), build its consumer (which builds libhwyattn) and run it.
#   -DSOURCE_DIR=<the repository> -DBINARY_DIR=<fresh directory>
#   -DGENERATOR, -DC_COMPILER, -DCXX_COMPILER: the parent build's
foreach(var SOURCE_DIR BINARY_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_subproject.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " cmdline "${ARGN}")
  message("$ ${cmdline}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${BINARY_DIR}")
set(args
  -S "${SOURCE_DIR}/tests/install/subproject" -B "${BINARY_DIR}"
  "-DHWYATTN_SOURCE_DIR=${SOURCE_DIR}"
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
  # What is tested is the wiring: Debug (-O0), and on x86 the portable
  # fallback alone, compile the library in a fraction of Release's time.
  -DCMAKE_BUILD_TYPE=Debug
  "-DHWYATTN_EXTRA_DISABLED_TARGETS=HWY_SSE4|HWY_AVX2|HWY_AVX3")
if(GENERATOR)
  list(APPEND args -G "${GENERATOR}")
endif()
if(C_COMPILER)
  list(APPEND args "-DCMAKE_C_COMPILER=${C_COMPILER}")
endif()
if(CXX_COMPILER)
  list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
run("configure" "${CMAKE_COMMAND}" ${args})
# Only what the consumer needs: libhwyattn and the program.
run("build" "${CMAKE_COMMAND}" --build "${BINARY_DIR}" --target consumer --parallel 2)
run("consumer" "${BINARY_DIR}/consumer")
message("add_subdirectory(hwyattn) consumer OK")
