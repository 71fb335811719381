# SPDX-License-Identifier: Apache-2.0
#
# Cross-compiling hwyattn for riscv64 Linux with clang 16 (Debian 12: clang-16) and
# the GNU toolchain of g++-riscv64-linux-gnu (its libc, libstdc++ and GNU ld); tests
# run under QEMU user mode with that toolchain's root (-L /usr/riscv64-linux-gnu).
# Clang, not GCC: Debian 12's riscv64-linux-gnu-g++ 12 cannot compile Highway's RVV
# target (Highway >= 1.4 needs GCC >= 13 or clang >= 16 for it). Debian 12 has no
# riscv64 multiarch packages: Highway comes from -DHWYATTN_HIGHWAY=<Highway >= 1.4>,
# GoogleTest from a cross build of Debian's sources (package googletest), and OpenMP
# is off (clang's -fopenmp needs its own runtime, libomp, which Debian 12 has for no
# riscv64). The baseline is clang's default, rv64gc (no vector extension: Highway's
# portable fallback); add -march=rv64gcv to CMAKE_C_FLAGS and CMAKE_CXX_FLAGS for RVV
# (clang < 19 compiles it only from such a baseline: no run-time dispatch).
# scripts/cross_test.sh uses it (legs riscv64-hwy14, riscv64-scalar-hwy14); by hand:
#   cmake -S /usr/src/googletest -B build-gtest-rv -DCMAKE_TOOLCHAIN_FILE=$PWD/cmake/toolchains/riscv64-linux-gnu.cmake \
#     -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=$PWD/gtest-rv && cmake --build build-gtest-rv && cmake --install build-gtest-rv
#   cmake -S . -B build-riscv64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/riscv64-linux-gnu.cmake \
#     -DCMAKE_C_FLAGS=-march=rv64gcv -DCMAKE_CXX_FLAGS=-march=rv64gcv -DHWYATTN_HIGHWAY=highway-1.4.0.tar.gz \
#     -DHWYATTN_OPENMP=OFF -DHWYATTN_MPI=OFF -DHWYATTN_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH=$PWD/gtest-rv \
#     -DHWYATTN_QEMU_RISCV64=<a QEMU >= 8 qemu-riscv64, e.g. bookworm-backports' qemu-user's>
#   QEMU_CPU=rv64,v=true,vext_spec=v1.0,vlen=256 ctest --test-dir build-riscv64 -L native
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(CMAKE_C_COMPILER clang-16)
set(CMAKE_CXX_COMPILER clang++-16)
set(CMAKE_C_COMPILER_TARGET riscv64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET riscv64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE riscv64-linux-gnu)
# GNU ld (riscv64-linux-gnu-ld.bfd): lld 16 cannot link RISC-V's linker
# relaxations.
foreach(_kind EXE SHARED MODULE)
  set(CMAKE_${_kind}_LINKER_FLAGS_INIT -fuse-ld=bfd)
endforeach()
# Libraries and packages of the target architecture only; programs (python3,
# cargo, go) of the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# qemu-user with the cross toolchain's libc, the one the programs are linked
# against (Debian 12 has no riscv64 multiarch libc in /). The CPU comes from
# QEMU_CPU, e.g. rv64,v=true,vext_spec=v1.0,vlen=256 (QEMU 7.2's default rv64
# has no vector extension). -DHWYATTN_QEMU_RISCV64=<qemu-riscv64> names another
# QEMU than Debian 12's qemu-riscv64-static (7.2), which aborts on vector
# float-to-integer conversions (scripts/cross_test.sh says more).
if(NOT HWYATTN_QEMU_RISCV64)
  set(HWYATTN_QEMU_RISCV64 qemu-riscv64-static)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${HWYATTN_QEMU_RISCV64};-L;/usr/riscv64-linux-gnu)
