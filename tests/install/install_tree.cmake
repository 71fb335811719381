# SPDX-License-Identifier: Apache-2.0
#
# Test install.tree (cmake -P): wipe WORK_DIR, `cmake --install BUILD_DIR
# --prefix PREFIX`, then check that every file a user needs is there.
foreach(var BUILD_DIR WORK_DIR PREFIX LIBDIR INCLUDEDIR VERSION ABI)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_tree.cmake: -D${var}=... is required")
  endif()
endforeach()

# The libraries must have been built (cmake --build) before ctest runs.
foreach(lib IN LISTS BUILT_LIBS)
  if(NOT EXISTS "${lib}")
    message(FATAL_ERROR "${lib} is not built: run `cmake --build ${BUILD_DIR}` before ctest")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}); build the project first (cmake --build)")
endif()

set(expected
  "${INCLUDEDIR}/hwyattn.h"
  "${INCLUDEDIR}/hwyattn.hpp"
  "${LIBDIR}/libhwyattn.so"
  "${LIBDIR}/libhwyattn.so.${ABI}"
  "${LIBDIR}/libhwyattn.so.${VERSION}"
  "${LIBDIR}/libhwyattn.a"
  "${LIBDIR}/cmake/hwyattn/hwyattnConfig.cmake"
  "${LIBDIR}/cmake/hwyattn/hwyattnConfigVersion.cmake"
  "${LIBDIR}/cmake/hwyattn/hwyattnTargets.cmake"
  "${LIBDIR}/pkgconfig/hwyattn.pc")
if(MPI)
  list(APPEND expected
    "${INCLUDEDIR}/hwyattn_mpi.h"
    "${LIBDIR}/libhwyattn_mpi.so"
    "${LIBDIR}/libhwyattn_mpi.so.${ABI}"
    "${LIBDIR}/cmake/hwyattn/hwyattn_mpiTargets.cmake"
    "${LIBDIR}/pkgconfig/hwyattn_mpi.pc")
endif()
set(missing)
foreach(f IN LISTS expected)
  if(NOT EXISTS "${PREFIX}/${f}")
    list(APPEND missing "${f}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "missing from the installed tree: ${missing}")
endif()

# Nothing of the engine's internals may be installed: only hwyattn.h(pp) and,
# with HWYATTN_MPI, hwyattn_mpi.h.
file(GLOB_RECURSE headers RELATIVE "${PREFIX}" "${PREFIX}/${INCLUDEDIR}/*")
foreach(h IN LISTS headers)
  if(NOT h MATCHES "/hwyattn\\.h(pp)?$" AND NOT (MPI AND h MATCHES "/hwyattn_mpi\\.h$"))
    message(FATAL_ERROR "unexpected installed header: ${h}")
  endif()
endforeach()

# The package files must not hard-code the build tree or the configured prefix.
foreach(f "${LIBDIR}/pkgconfig/hwyattn.pc" "${LIBDIR}/cmake/hwyattn/hwyattnConfig.cmake"
          "${LIBDIR}/cmake/hwyattn/hwyattnTargets.cmake")
  file(READ "${PREFIX}/${f}" text)
  string(FIND "${text}" "${BUILD_DIR}" pos)
  if(NOT pos EQUAL -1)
    message(FATAL_ERROR "${f} mentions the build directory ${BUILD_DIR}")
  endif()
endforeach()

file(GLOB_RECURSE installed RELATIVE "${PREFIX}" LIST_DIRECTORIES false "${PREFIX}/*")
list(SORT installed)
string(REPLACE ";" "\n  " installed "${installed}")
message("installed into ${PREFIX}:\n  ${installed}")
