# SPDX-License-Identifier: Apache-2.0
#
# Tests install.cmake_* (cmake -P): configure, build and run the consumer
# project (tests/install/consumer) against the installed tree in PREFIX via
# find_package(hwyattn CONFIG) and CMAKE_PREFIX_PATH, in a fresh BINARY_DIR.
#   -DLINK=shared|static  -DLANGUAGES="C" or "C;CXX"  -DEXAMPLE=<sdpa_example.c>
#   -DCXX_EXAMPLE=<cpp_example.cc>  (with CXX) build it on the installed hwyattn.hpp
#                         and run it (it exits non-zero on a wrong result)
#   -DOPENMP=ON|OFF       how the library was built: hwyattnConfig.cmake's
#                         hwyattn_OPENMP must say so, and a static consumer of an
#                         OFF build must not need an OpenMP runtime
foreach(var SOURCE_DIR BINARY_DIR PREFIX LINK LANGUAGES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " cmdline "${ARGN}")
  message("$ ${cmdline}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${BINARY_DIR}")
# "C;CXX" would split into two arguments on its way through run()'s ARGN (the
# consumer then saw only C); it travels as "C,CXX" instead.
string(REPLACE ";" "," languages_csv "${LANGUAGES}")
set(args
  -S "${SOURCE_DIR}" -B "${BINARY_DIR}"
  "-DCMAKE_PREFIX_PATH=${PREFIX}"
  # Only the tree under test may satisfy find_package(hwyattn).
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  "-DCONSUMER_LINK=${LINK}"
  "-DCONSUMER_LANGUAGES=${languages_csv}"
  -DCMAKE_BUILD_TYPE=Release)
if(GENERATOR)
  list(APPEND args -G "${GENERATOR}")
endif()
if(C_COMPILER)
  list(APPEND args "-DCMAKE_C_COMPILER=${C_COMPILER}")
endif()
if(CXX_COMPILER AND LANGUAGES MATCHES "CXX")
  list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(EXAMPLE)
  list(APPEND args "-DCONSUMER_EXAMPLE=${EXAMPLE}")
endif()
if(CXX_EXAMPLE)
  list(APPEND args "-DCONSUMER_CXX_EXAMPLE=${CXX_EXAMPLE}")
endif()
run("configure" "${CMAKE_COMMAND}" ${args})
if(NOT "${OPENMP}" STREQUAL "" AND NOT run_output MATCHES "hwyattn_OPENMP=${OPENMP}\n")
  message(FATAL_ERROR "hwyattnConfig.cmake does not set hwyattn_OPENMP to ${OPENMP}")
endif()
run("build" "${CMAKE_COMMAND}" --build "${BINARY_DIR}" --config Release)

# The package found must be the one under PREFIX.
file(STRINGS "${BINARY_DIR}/CMakeCache.txt" found REGEX "^hwyattn_DIR:")
message("${found}")
string(FIND "${found}" "${PREFIX}/" pos)
if(NOT pos GREATER 0)
  message(FATAL_ERROR "hwyattn was not found under ${PREFIX}: ${found}")
endif()

set(exe "${BINARY_DIR}/consumer")
if(NOT EXISTS "${exe}")
  set(exe "${BINARY_DIR}/Release/consumer")
endif()
run("consumer" "${exe}")

# Linked the way it was asked to be.
if(READELF)
  execute_process(COMMAND "${READELF}" -d "${exe}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(LINK STREQUAL "static")
    if(dyn MATCHES "libhwyattn\\.so")
      message(FATAL_ERROR "static consumer still needs libhwyattn.so:\n${dyn}")
    endif()
    if(OPENMP STREQUAL "OFF" AND dyn MATCHES "lib(gomp|omp|iomp5)\\.so")
      message(FATAL_ERROR "static consumer of a HWYATTN_OPENMP=OFF build needs OpenMP:\n${dyn}")
    endif()
  elseif(NOT dyn MATCHES "NEEDED[^\n]*libhwyattn\\.so\\.[0-9]+\\]")
    message(FATAL_ERROR "shared consumer does not need libhwyattn.so.N:\n${dyn}")
  endif()
endif()

# The example must print exactly what its header comment says it prints.
if(EXAMPLE)
  file(STRINGS "${EXAMPLE}" lines)
  set(in_block FALSE)
  set(expected "")
  foreach(line IN LISTS lines)
    if(in_block)
      if(line MATCHES "^ \\*   (.*)$")
        string(APPEND expected "${CMAKE_MATCH_1}\n")
      else()
        break()
      endif()
    elseif(line MATCHES "Expected output")
      set(in_block TRUE)
    endif()
  endforeach()
  if(expected STREQUAL "")
    message(FATAL_ERROR "no 'Expected output' block in ${EXAMPLE}")
  endif()
  set(example_exe "${BINARY_DIR}/sdpa_example")
  if(NOT EXISTS "${example_exe}")
    set(example_exe "${BINARY_DIR}/Release/sdpa_example")
  endif()
  run("sdpa_example" "${example_exe}")
  # The first line names the SIMD target, which depends on the CPU.
  string(REGEX REPLACE "SIMD target: [A-Za-z0-9_]+" "SIMD target: *" got "${run_output}")
  string(REGEX REPLACE "SIMD target: [A-Za-z0-9_]+" "SIMD target: *" expected "${expected}")
  if(NOT got STREQUAL expected)
    message(FATAL_ERROR "sdpa_example output differs from its documented output.\n"
                        "documented:\n${expected}\nprinted:\n${got}")
  endif()
  message("sdpa_example prints its documented output")
endif()
if(CXX_EXAMPLE)
  set(cxx_exe "${BINARY_DIR}/cpp_example")
  if(NOT EXISTS "${cxx_exe}")
    set(cxx_exe "${BINARY_DIR}/Release/cpp_example")
  endif()
  run("cpp_example" "${cxx_exe}")
endif()
message("consumer (${LINK}, languages ${LANGUAGES}) OK")
