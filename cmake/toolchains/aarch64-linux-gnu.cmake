# SPDX-License-Identifier: Apache-2.0
#
# Cross-compiling hwyattn for aarch64 Linux with Debian's aarch64-linux-gnu toolchain
# (g++-aarch64-linux-gnu) and multiarch libraries (libhwy-dev:<arch>, libgtest-dev:<arch>);
# tests run under qemu-aarch64-static with the multiarch root (-L /).
# scripts/cross_test.sh uses it; by hand:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and packages of the target architecture only; programs (python3,
# cargo, go) of the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# qemu-user with Debian's multiarch libc: -L / (the cross toolchain's own
# /usr/aarch64-linux-gnu loader meets a newer libc there and pthread_create hangs).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static;-L;/)
