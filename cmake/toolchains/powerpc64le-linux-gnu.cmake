# SPDX-License-Identifier: Apache-2.0
#
# Cross-compiling hwyattn for ppc64le Linux with Debian's powerpc64le-linux-gnu toolchain
# (g++-powerpc64le-linux-gnu) and multiarch libraries (libhwy-dev:<arch>, libgtest-dev:<arch>);
# tests run under qemu-ppc64le-static with the multiarch root (-L /).
# scripts/cross_test.sh uses it; by hand:
#   cmake -S . -B build-ppc64le -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/powerpc64le-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ppc64le)
set(CMAKE_C_COMPILER powerpc64le-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER powerpc64le-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE powerpc64le-linux-gnu)
# Libraries and packages of the target architecture only; programs (python3,
# cargo, go) of the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# qemu-user with Debian's multiarch libc: -L / (the cross toolchain's own
# /usr/powerpc64le-linux-gnu loader meets a newer libc there and pthread_create hangs).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-ppc64le-static;-L;/)
