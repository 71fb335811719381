# SPDX-License-Identifier: Apache-2.0
#
# Cross-compiling hwyattn for Windows x64 with Debian's MinGW-w64 GCC, the
# POSIX thread model (g++-mingw-w64-x86-64-posix: std::thread and libgomp's
# OpenMP need it; the win32 model has neither). Builds hwyattn.dll with its
# import library libhwyattn.dll.a (cmake/windows.cmake); tests run under
# Wine (wine64). Debian's libhwy-dev is Linux-only: configure with
# -DHWYATTN_HIGHWAY=<Highway >= 1.4 tree or archive>, and for the tests
# -DHWYATTN_GTEST_SOURCE=/usr/src/googletest (package googletest).
# scripts/windows_test.sh uses it; by hand:
#   cmake -S . -B build-windows -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-w64-mingw32.cmake \
#     -DHWYATTN_HIGHWAY=../shared/third_party/highway-1.4.0.tar.gz -DHWYATTN_MPI=OFF \
#     -DHWYATTN_GTEST_SOURCE=/usr/src/googletest
#   WINEPREFIX=~/.cache/hwyattn/wine64 WINEDEBUG=-all ctest --test-dir build-windows
# GCC on Win64 keeps 32- and 64-byte vectors on a stack that is only 16-byte
# aligned; cmake/windows.cmake adds the assembler option that makes that
# safe (read there).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
# Libraries and headers of the target only; programs of the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian's wine64 (Wine 8): the 64-bit loader itself (the package "wine",
# which adds /usr/bin/wine, is not needed). WINEPREFIX and WINEDEBUG come
# from the environment (scripts/windows_test.sh sets them).
find_program(HWYATTN_WINE NAMES wine64 wine PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
if(HWYATTN_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${HWYATTN_WINE}")
endif()
