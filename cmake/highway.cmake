# SPDX-License-Identifier: Apache-2.0
#
# highway.cmake: which Highway hwyattn compiles against, included by the
# top-level CMakeLists.txt before the library's targets.
#
#   HWYATTN_HIGHWAY unset (the default): the installed Highway,
#     find_package(hwy CONFIG) (Debian 12: libhwy-dev, 1.0.3). Unchanged.
#   -DHWYATTN_HIGHWAY=<dir or archive>: a Highway source tree (a checkout, or
#     an unpacked release), or a release archive (.tar.gz, .tgz, .tar.xz,
#     .tar.bz2, .zip), which is extracted into <build>/_deps/highway-src (again
#     whenever the archive's contents change). It is built here as a
#     subproject (static, position-independent, without its tests, examples,
#     contrib libraries or install rules) and hwy::hwy / hwy::hwy_test name
#     its targets, so the rest of the build is the same. A path that is no
#     Highway tree nor archive, or a Highway older than
#     HWYATTN_HWY_MIN_VERSION, stops CMake here with the reason.
#     Highway >= 1.4 is the point of the option: its POWER (PPC8/9/10), s390x
#     (Z14/Z15) and RVV targets (scripts/cross_test.sh's *-hwy14 legs); an
#     older one (>= HWYATTN_HWY_MIN_VERSION) builds too, with a warning that it
#     is not tested.
#
# What gets installed with a bundled Highway (cmake/install.cmake): no Highway
# file. The shared library links it statically (its symbols stay hidden,
# cmake/hwyattn.map), and libhwyattn.a carries the bundled Highway's objects
# inside, so it references no Highway library either: hwyattnConfig.cmake does
# not look for hwy and hwyattn.pc has no Requires.private libhwy. (The
# alternative, installing the bundled libhwy and its headers next to
# hwyattn, would put a second Highway beside the distribution's in the same
# prefix.) Consequence for static linking: a program that links libhwyattn.a
# must not link another Highway library statically as well (the same hwy::
# symbols twice, of two versions); with a shared libhwy beside it the
# archive's copy wins for the program's own calls (hidden: nothing else in the
# process sees it).
#
# Sets: HWYATTN_HWY_VERSION (e.g. 1.4.0), HWYATTN_HWY_BUNDLED (ON/OFF),
# HWYATTN_HWY_INCLUDE_DIR (the directory holding hwy/), and defines
# hwy::hwy and hwy::hwy_test.

# The oldest Highway the code builds against (Debian 12's).
set(HWYATTN_HWY_MIN_VERSION 1.0.3)
# The one the bundled path is meant for (and tested with).
set(HWYATTN_HWY_TESTED_BUNDLED_VERSION 1.4.0)

set(HWYATTN_HIGHWAY "" CACHE PATH
    "A Highway source tree or release archive (.tar.gz) to build and compile against instead of the installed Highway")

# The version a Highway source tree declares: hwy/base.h's HWY_MAJOR/MINOR/PATCH
# (Highway >= 1.1), or hwy/highway.h's (1.0.x). Empty if neither says.
function(_hwyattn_highway_tree_version dir out)
  set(${out} "" PARENT_SCOPE)
  foreach(header hwy/base.h hwy/highway.h)
    if(NOT EXISTS "${dir}/${header}")
      continue()
    endif()
    file(STRINGS "${dir}/${header}" _defines REGEX "^#define HWY_(MAJOR|MINOR|PATCH) +[0-9]+")
    set(_version "")
    foreach(part MAJOR MINOR PATCH)
      if(NOT _defines MATCHES "#define HWY_${part} +([0-9]+)")
        set(_version "")
        break()
      endif()
      list(APPEND _version "${CMAKE_MATCH_1}")
    endforeach()
    if(_version)
      list(JOIN _version "." _version)
      set(${out} "${_version}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# Whether `dir` is the top of a Highway source tree CMake can build.
function(_hwyattn_is_highway_tree dir out)
  if(IS_DIRECTORY "${dir}" AND EXISTS "${dir}/CMakeLists.txt" AND EXISTS "${dir}/hwy/highway.h"
     AND EXISTS "${dir}/hwy/targets.cc")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

if(NOT HWYATTN_HIGHWAY)
  find_package(hwy ${HWYATTN_HWY_MIN_VERSION} REQUIRED CONFIG)
  set(HWYATTN_HWY_VERSION "${hwy_VERSION}")
  set(HWYATTN_HWY_BUNDLED OFF)
  get_target_property(HWYATTN_HWY_INCLUDE_DIR hwy::hwy INTERFACE_INCLUDE_DIRECTORIES)
  list(GET HWYATTN_HWY_INCLUDE_DIR 0 HWYATTN_HWY_INCLUDE_DIR)
  return()
endif()

get_filename_component(_hwyattn_highway_input "${HWYATTN_HIGHWAY}" ABSOLUTE
                       BASE_DIR "${CMAKE_BINARY_DIR}")
if(NOT EXISTS "${_hwyattn_highway_input}")
  message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY}: no such file or directory "
                      "(give a Highway source tree or a release archive such as highway-1.4.0.tar.gz)")
endif()

if(IS_DIRECTORY "${_hwyattn_highway_input}")
  _hwyattn_is_highway_tree("${_hwyattn_highway_input}" _is_tree)
  if(NOT _is_tree)
    message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY} is not a Highway source tree: it needs "
                        "CMakeLists.txt, hwy/highway.h and hwy/targets.cc at its top (a checkout of "
                        "https://github.com/google/highway or an unpacked release)")
  endif()
  set(_hwyattn_highway_source "${_hwyattn_highway_input}")
else()
  if(NOT _hwyattn_highway_input MATCHES "\\.(tar\\.gz|tgz|tar\\.xz|txz|tar\\.bz2|tbz2|tar|zip)$")
    message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY} is neither a directory nor an archive "
                        "(.tar.gz, .tgz, .tar.xz, .tar.bz2, .tar, .zip) of a Highway source tree")
  endif()
  # Extracted once per archive content: a stamp holds the archive's hash.
  file(SHA256 "${_hwyattn_highway_input}" _hwyattn_highway_hash)
  set(_extract_dir "${CMAKE_BINARY_DIR}/_deps/highway-src")
  set(_stamp "${CMAKE_BINARY_DIR}/_deps/highway-src.sha256")
  set(_old_hash "")
  if(EXISTS "${_stamp}")
    file(READ "${_stamp}" _old_hash)
  endif()
  if(NOT _old_hash STREQUAL _hwyattn_highway_hash OR NOT IS_DIRECTORY "${_extract_dir}")
    message(STATUS "hwyattn: extracting ${_hwyattn_highway_input}")
    file(REMOVE_RECURSE "${_extract_dir}" "${_stamp}")
    file(ARCHIVE_EXTRACT INPUT "${_hwyattn_highway_input}" DESTINATION "${_extract_dir}")
    file(WRITE "${_stamp}" "${_hwyattn_highway_hash}")
  endif()
  # The tree is the archive's top or its single top-level folder
  # (highway-1.4.0/ in a release archive).
  set(_hwyattn_highway_source "")
  _hwyattn_is_highway_tree("${_extract_dir}" _is_tree)
  if(_is_tree)
    set(_hwyattn_highway_source "${_extract_dir}")
  else()
    file(GLOB _tops LIST_DIRECTORIES true "${_extract_dir}/*")
    foreach(_top IN LISTS _tops)
      _hwyattn_is_highway_tree("${_top}" _is_tree)
      if(_is_tree)
        set(_hwyattn_highway_source "${_top}")
        break()
      endif()
    endforeach()
  endif()
  if(NOT _hwyattn_highway_source)
    file(REMOVE "${_stamp}")  # look again next time
    message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY}: the archive holds no Highway source tree "
                        "(CMakeLists.txt, hwy/highway.h and hwy/targets.cc, at its top or in one folder)")
  endif()
endif()

_hwyattn_highway_tree_version("${_hwyattn_highway_source}" HWYATTN_HWY_VERSION)
if(NOT HWYATTN_HWY_VERSION)
  message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY}: found no HWY_MAJOR/HWY_MINOR/HWY_PATCH in "
                      "${_hwyattn_highway_source}/hwy/base.h (nor hwy/highway.h); is it a Highway tree?")
endif()
if(HWYATTN_HWY_VERSION VERSION_LESS HWYATTN_HWY_MIN_VERSION)
  message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY} is Highway ${HWYATTN_HWY_VERSION}; hwyattn needs "
                      ">= ${HWYATTN_HWY_MIN_VERSION} (and the option is meant for >= "
                      "${HWYATTN_HWY_TESTED_BUNDLED_VERSION}: its POWER, s390x and RISC-V targets)")
endif()
if(HWYATTN_HWY_VERSION VERSION_LESS HWYATTN_HWY_TESTED_BUNDLED_VERSION)
  message(WARNING "HWYATTN_HIGHWAY: Highway ${HWYATTN_HWY_VERSION} is older than "
                  "${HWYATTN_HWY_TESTED_BUNDLED_VERSION}, the bundled version hwyattn is tested with; it may work")
endif()
message(STATUS "hwyattn: Highway ${HWYATTN_HWY_VERSION} built from ${_hwyattn_highway_source}")

# Highway's own switches (cache entries: its CMakeLists.txt reads them with
# set(CACHE) under an old policy, which a plain variable would not survive).
set(HWY_ENABLE_TESTS OFF CACHE BOOL "Highway: tests (hwyattn: bundled, off)" FORCE)
set(HWY_ENABLE_EXAMPLES OFF CACHE BOOL "Highway: examples (hwyattn: bundled, off)" FORCE)
set(HWY_ENABLE_INSTALL OFF CACHE BOOL "Highway: install rules (hwyattn: bundled, off)" FORCE)
# hwy/contrib's headers (math) are used from the tree; its libraries
# (vqsort, thread pool, image) are not, and vqsort alone takes long to build.
set(HWY_ENABLE_CONTRIB OFF CACHE BOOL "Highway: contrib libraries (hwyattn: bundled, off)" FORCE)
set(HWY_FORCE_STATIC_LIBS ON CACHE BOOL "Highway: static libraries (hwyattn: bundled)" FORCE)
# On RISC-V, Highway's own -march=rv64gcv1p0 would compile libhwy (and only
# it) for the vector extension: an rv64gc build would carry vector
# instructions, and libhwy a static target other than the kernels'. The
# bundled Highway compiles with the build's flags instead (-march=rv64gcv in
# CMAKE_CXX_FLAGS for RVV, cmake/toolchains/riscv64-linux-gnu.cmake).
set(HWY_CMAKE_RVV OFF CACHE BOOL "Highway: RISC-V -march flags (hwyattn: the build's own)" FORCE)
mark_as_advanced(HWY_ENABLE_TESTS HWY_ENABLE_EXAMPLES HWY_ENABLE_INSTALL HWY_ENABLE_CONTRIB
                 HWY_FORCE_STATIC_LIBS HWY_CMAKE_RVV)
# EXCLUDE_FROM_ALL: only what hwyattn links is built (not hwy_list_targets);
# SYSTEM: its headers are system headers to hwyattn, as /usr/include/hwy
# is (no warnings from them under -Wall -Wextra).
add_subdirectory("${_hwyattn_highway_source}" "${CMAKE_BINARY_DIR}/_deps/highway-build"
                 EXCLUDE_FROM_ALL SYSTEM)
if(NOT TARGET hwy OR NOT TARGET hwy_test)
  message(FATAL_ERROR "HWYATTN_HIGHWAY=${HWYATTN_HIGHWAY}: its CMakeLists.txt defined no targets hwy and hwy_test")
endif()
add_library(hwy::hwy ALIAS hwy)
add_library(hwy::hwy_test ALIAS hwy_test)
set(HWYATTN_HWY_BUNDLED ON)
set(HWYATTN_HWY_INCLUDE_DIR "${_hwyattn_highway_source}")
