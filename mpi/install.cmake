# SPDX-License-Identifier: Apache-2.0
#
# `cmake --install` rules for libhwyattn_mpi, included by cmake/install.cmake
# when the target exists (HWYATTN_MPI=ON). Adds to the installed tree:
#
#   <libdir>/libhwyattn_mpi.so.0.4.0, .so.1, .so   (components runtime / dev)
#   <includedir>/hwyattn_mpi.h
#   <libdir>/cmake/hwyattn/hwyattn_mpiTargets*.cmake  hwyattn::hwyattn_mpi, loaded by
#                                   find_package(hwyattn CONFIG COMPONENTS mpi)
#   <libdir>/pkgconfig/hwyattn_mpi.pc  pkg-config --cflags --libs hwyattn_mpi
#                                   (Requires hwyattn; MPI's include and link flags as
#                                   CMake found them)
install(TARGETS hwyattn_mpi
  EXPORT hwyattn_mpiTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          COMPONENT runtime
          NAMELINK_COMPONENT dev
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
          COMPONENT runtime)
install(FILES "${PROJECT_SOURCE_DIR}/include/hwyattn_mpi.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  COMPONENT dev)
install(EXPORT hwyattn_mpiTargets
  NAMESPACE hwyattn::
  FILE hwyattn_mpiTargets.cmake
  DESTINATION "${HWYATTN_INSTALL_CMAKEDIR}"
  COMPONENT dev)

# MPI's flags for the .pc file, from FindMPI (system paths, outside the prefix).
set(HWYATTN_MPI_PC_CFLAGS "")
foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
  string(APPEND HWYATTN_MPI_PC_CFLAGS " -I${dir}")
endforeach()
foreach(flag IN LISTS MPI_C_COMPILE_OPTIONS)
  string(APPEND HWYATTN_MPI_PC_CFLAGS " ${flag}")
endforeach()
set(HWYATTN_MPI_PC_LIBS "")
foreach(lib IN LISTS MPI_C_LIBRARIES)
  string(APPEND HWYATTN_MPI_PC_LIBS " ${lib}")
endforeach()
configure_file("${CMAKE_CURRENT_LIST_DIR}/hwyattn_mpi.pc.in"
               "${PROJECT_BINARY_DIR}/hwyattn_mpi.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/hwyattn_mpi.pc"
  DESTINATION "${HWYATTN_INSTALL_PKGCONFIGDIR}"
  COMPONENT dev)
