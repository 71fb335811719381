# SPDX-License-Identifier: Apache-2.0
#
# install.cmake: `cmake --install` rules for hwyattn, included at the end of the
# top-level CMakeLists.txt (after the targets hwyattn and hwyattn_static exist).
#
# Installed tree (paths from GNUInstallDirs, all relative to the prefix, so the
# tree can be moved after installation):
#
#   <libdir>/libhwyattn.so.0.4.0                shared library, SONAME libhwyattn.so.1
#   <libdir>/libhwyattn.so.1 -> .so.0.4.0       (runtime link)
#   <libdir>/libhwyattn.so   -> .so.1           (development link)
#   <libdir>/libhwyattn.a                       static library (C++, and OpenMP inside
#                                               unless built with HWYATTN_OPENMP=OFF;
#                                               with Highway's objects inside if built
#                                               against a bundled Highway, see below)
#   <includedir>/hwyattn.h                      the C ABI
#   <includedir>/hwyattn.hpp                    the header-only C++17 binding over it
#   <libdir>/cmake/hwyattn/hwyattnConfig.cmake  find_package(hwyattn CONFIG):
#                                               hwyattn::hwyattn (shared), hwyattn::hwyattn_static
#   <libdir>/cmake/hwyattn/hwyattnConfigVersion.cmake   SameMajorVersion
#   <libdir>/cmake/hwyattn/hwyattnTargets*.cmake
#   <libdir>/pkgconfig/hwyattn.pc               pkg-config --cflags --libs hwyattn
#
# Components: "runtime" (the versioned shared object and its SONAME link) and
# "dev" (everything else), for distribution packaging:
#   cmake --install build --component runtime
# A plain `cmake --install build` installs both.
#
# The consumer tests under tests/install/ exercise all of this (they are added
# from here when HWYATTN_BUILD_TESTS is on, unless tests/CMakeLists.txt already
# added that directory).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HWYATTN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/hwyattn" CACHE STRING
    "Where hwyattnConfig.cmake is installed, relative to the prefix")
set(HWYATTN_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where hwyattn.pc is installed, relative to the prefix")
mark_as_advanced(HWYATTN_INSTALL_CMAKEDIR HWYATTN_INSTALL_PKGCONFIGDIR)

# --- Libraries ---------------------------------------------------------------
# The static library keeps its exported name hwyattn::hwyattn_static while its
# file is libhwyattn.a (OUTPUT_NAME hwyattn, set in the top-level file).
set_target_properties(hwyattn_static PROPERTIES EXPORT_NAME hwyattn_static)
set_target_properties(hwyattn PROPERTIES EXPORT_NAME hwyattn)

install(TARGETS hwyattn hwyattn_static
  EXPORT hwyattnTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          COMPONENT runtime
          NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          COMPONENT dev
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
          COMPONENT runtime)
# (No INCLUDES DESTINATION: both targets already carry
# $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}> from the top-level file.)

# --- Headers -----------------------------------------------------------------
# The C header and the header-only C++ binding; nothing else under include/
# is installed.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  COMPONENT dev
  FILES_MATCHING
    PATTERN "hwyattn.h"
    PATTERN "hwyattn.hpp")

# --- Highway -------------------------------------------------------------------
# Built against the installed Highway (the default), the static library's
# users link it too: hwyattnConfig.cmake finds it (find_dependency(hwy)) and
# hwyattn.pc names it (Requires.private: libhwy; Debian's libhwy-dev ships
# libhwy.pc). Built against a bundled one (-DHWYATTN_HIGHWAY,
# cmake/highway.cmake), nothing of Highway is installed: libhwyattn.so links
# it statically (hidden) and libhwyattn.a holds its objects, so neither file
# names it and the installed tree references no Highway that is not there.
if(HWYATTN_HWY_BUNDLED)
  set(HWYATTN_CONFIG_FIND_HWY "")
  set(HWYATTN_PC_REQUIRES_PRIVATE "")
  set(HWYATTN_CONFIG_HIGHWAY "bundled ${HWYATTN_HWY_VERSION}")
else()
  set(HWYATTN_CONFIG_FIND_HWY "find_dependency(hwy ${HWYATTN_HWY_MIN_VERSION} CONFIG)")
  set(HWYATTN_PC_REQUIRES_PRIVATE "Requires.private: libhwy >= ${HWYATTN_HWY_MIN_VERSION}")
  set(HWYATTN_CONFIG_HIGHWAY "installed ${HWYATTN_HWY_VERSION}")
endif()

# --- CMake package -------------------------------------------------------------
install(EXPORT hwyattnTargets
  NAMESPACE hwyattn::
  FILE hwyattnTargets.cmake
  DESTINATION "${HWYATTN_INSTALL_CMAKEDIR}"
  COMPONENT dev)

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/hwyattnConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/hwyattnConfig.cmake"
  INSTALL_DESTINATION "${HWYATTN_INSTALL_CMAKEDIR}")
# 0.x: SameMajorVersion means "any 0.y.z satisfies a request for 0.1"; the
# binary contract is the SONAME (HWYATTN_ABI_VERSION), checked at run time
# with hwyattn_abi_version().
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/hwyattnConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(FILES
    "${PROJECT_BINARY_DIR}/cmake/hwyattnConfig.cmake"
    "${PROJECT_BINARY_DIR}/cmake/hwyattnConfigVersion.cmake"
  DESTINATION "${HWYATTN_INSTALL_CMAKEDIR}"
  COMPONENT dev)

# --- pkg-config ----------------------------------------------------------------
# The .pc file finds the prefix from its own location (${pcfiledir}), so the
# installed tree is relocatable and `cmake --install --prefix <dir>` works
# without reconfiguring.
if(IS_ABSOLUTE "${HWYATTN_INSTALL_PKGCONFIGDIR}")
  message(FATAL_ERROR "HWYATTN_INSTALL_PKGCONFIGDIR must be relative to the prefix")
endif()
file(RELATIVE_PATH HWYATTN_PC_PREFIX_FROM_PCDIR
  "/prefix/${HWYATTN_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" HWYATTN_PC_PREFIX_FROM_PCDIR "${HWYATTN_PC_PREFIX_FROM_PCDIR}")
# OpenMP flags for static linking, as the compiler spells them (-fopenmp for
# GCC); none in a HWYATTN_OPENMP=OFF build, which the variable `openmp` says.
if(HWYATTN_OPENMP)
  set(HWYATTN_PC_OPENMP_FLAGS "${OpenMP_CXX_FLAGS}")
else()
  set(HWYATTN_PC_OPENMP_FLAGS "")
endif()
set(HWYATTN_PC_OPENMP ${HWYATTN_OPENMP_BUILT})
configure_file("${CMAKE_CURRENT_LIST_DIR}/hwyattn.pc.in"
               "${PROJECT_BINARY_DIR}/hwyattn.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/hwyattn.pc"
  DESTINATION "${HWYATTN_INSTALL_PKGCONFIGDIR}"
  COMPONENT dev)

# --- The MPI component (HWYATTN_MPI=ON): its own targets, header and .pc -------
if(TARGET hwyattn_mpi)
  include("${PROJECT_SOURCE_DIR}/mpi/install.cmake")
endif()

# --- Consumer tests (tests/install/) -----------------------------------------
# tests/CMakeLists.txt may add tests/install itself; it then sets the global
# property HWYATTN_INSTALL_TESTS_ADDED (tests/install/CMakeLists.txt does), and
# we do not add it twice. Not in a cross build: the consumers are built and
# run by the build machine's tools.
if(HWYATTN_BUILD_TESTS AND NOT CMAKE_CROSSCOMPILING
   AND EXISTS "${PROJECT_SOURCE_DIR}/tests/install/CMakeLists.txt")
  get_property(_hwyattn_install_tests_added GLOBAL PROPERTY HWYATTN_INSTALL_TESTS_ADDED)
  if(NOT _hwyattn_install_tests_added)
    enable_testing()
    add_subdirectory("${PROJECT_SOURCE_DIR}/tests/install"
                     "${PROJECT_BINARY_DIR}/tests/install")
  endif()
  unset(_hwyattn_install_tests_added)
endif()
