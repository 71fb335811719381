# SPDX-License-Identifier: Apache-2.0
#
# Cross-compiling hwyattn for s390x Linux with Debian's s390x-linux-gnu toolchain
# (g++-s390x-linux-gnu) and multiarch libraries (libhwy-dev:<arch>, libgtest-dev:<arch>);
# tests run under qemu-s390x-static with the multiarch root (-L /).
# scripts/cross_test.sh uses it; by hand:
#   cmake -S . -B build-s390x -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/s390x-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR s390x)
set(CMAKE_C_COMPILER s390x-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER s390x-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE s390x-linux-gnu)
# Libraries and packages of the target architecture only; programs (python3,
# cargo, go) of the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# qemu-user with Debian's multiarch libc: -L / (the cross toolchain's own
# /usr/s390x-linux-gnu loader meets a newer libc there and pthread_create hangs).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-s390x-static;-L;/)
