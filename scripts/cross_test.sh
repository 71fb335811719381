#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/cross_test.sh: cross-builds hwyattn for other architectures with
# Debian's cross compilers and multiarch libraries, and runs its C and C++
# tests there under QEMU user-mode emulation. scripts/test.sh runs it after
# the x86 builds (so .ci/run does); it also runs alone.
#
#   arm64    every C/C++ suite on the target the library picks on an
#            emulated Cortex-A72 (NEON) and on SVE CPUs of 256 and 512 bits
#            ("max" with sve-max-vq=2 and 4: SVE_256 and SVE2; ~100 s each
#            on 2 idle cores), the sdpa suite at 128 (vq=1: SVE2_128), and
#            the fallback's sdpa/KV legs;
#            target_test checks each CPU's choice against the table below
#            (HWYATTN_TEST_EXPECT_TARGET).
#   ppc64el  POWER, little-endian: the portable fallback (Highway 1.0.3
#            compiles nothing else there; its PPC8 target has no
#            implementation yet).
#   s390x    big-endian: the portable fallback (Highway 1.0.3 has no s390x
#            SIMD target).
#
# The binding, install and MPI tests are x86-only (they run the build
# machine's python3, cargo, go and compilers against the library).
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/cross_test.sh [arm64] [ppc64el] [s390x]     (default: all three)
# Environment:
#   CROSS_BUILD_PREFIX  build directories are <prefix><arch> (default: build-)
#   JOBS                parallel build and test jobs (default: nproc)
#   TEST_TIMEOUT        per-test timeout in seconds (default 1800: emulated)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
CROSS_BUILD_PREFIX=${CROSS_BUILD_PREFIX:-build-}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-1800}
arches=("$@")
((${#arches[@]} > 0)) || arches=(arm64 ppc64el s390x)

# shellcheck source=scripts/deps.sh
source scripts/deps.sh

stamp() { echo "cross_test.sh: $* ($(date +%T), ${SECONDS}s)"; }

# What each architecture's tests run: "<QEMU_CPU>|<target the library must
# pick there>|<ctest selection>" per line. The selections: every leg the
# library picks itself ("native", -L native), the tests registered once, and
# the capped legs named.
once='^(capi_test|reference_test|cpp_binding_test|softmax_test|matmul_test|tanh_test|oom_test|examples\..*)$'
runs_for() {
  case $1 in
    arm64)
      echo "cortex-a72|NEON|-L ^native$"
      echo "cortex-a72|NEON|-R $once"
      echo "cortex-a72|NEON|-R ^(target_test\.(NEON|foreign_name)|(target|sdpa|kv_attention)_test\.EMU128)$"
      echo "max,sve-max-vq=2|SVE_256|-L ^native$"
      echo "max,sve-max-vq=2|SVE_256|-R ^(softmax_test|matmul_test|tanh_test|target_test\.NEON)$"
      echo "max,sve-max-vq=4|SVE2|-L ^native$"
      echo "max,sve-max-vq=4|SVE2|-R ^(softmax_test|matmul_test|tanh_test)$"
      echo "max,sve-max-vq=1|SVE2_128|-R ^((target|sdpa)_test\.native|softmax_test|matmul_test)$"
      ;;
    ppc64el)
      echo "|SCALAR|-R ^((sdpa|kv_attention|merge|hardening|target)_test\.native|capi_test)$"
      ;;
    s390x)
      # Big-endian: also the suites that build F16/BF16 tensors and pack pairs.
      echo "|SCALAR|-R ^((sdpa|kv_attention|merge|hardening|target|paged|bf16)_test\.native|capi_test|oom_test|softmax_test)$"
      ;;
  esac
}

for arch in "${arches[@]}"; do
  case $arch in
    arm64) triplet=aarch64-linux-gnu qemu=aarch64 ;;
    ppc64el) triplet=powerpc64le-linux-gnu qemu=ppc64le ;;
    s390x) triplet=s390x-linux-gnu qemu=s390x ;;
    *) echo "cross_test.sh: unknown architecture '$arch' (arm64, ppc64el, s390x)" >&2; exit 2 ;;
  esac
  HWYATTN_PACKAGES=("g++-$triplet" "libhwy-dev:$arch" "libgtest-dev:$arch" "libgomp1:$arch"
                    qemu-user-static)
  HWYATTN_FOREIGN_ARCHITECTURES=("$arch")
  install_missing_packages cross_test.sh

  build=$CROSS_BUILD_PREFIX$arch
  stamp "$arch: build in $build"
  cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="cmake/toolchains/$triplet.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON -DHWYATTN_BUILD_BENCH=OFF \
    -DHWYATTN_MPI=OFF >/dev/null
  cmake --build "$build" -j"$JOBS"
  command -v "qemu-$qemu-static" >/dev/null

  while IFS='|' read -r cpu expect selection; do
    stamp "$arch: ${cpu:-default CPU}, expecting $expect: ctest $selection"
    # shellcheck disable=SC2086  # the selection is two words
    env ${cpu:+QEMU_CPU=$cpu} HWYATTN_TEST_EXPECT_TARGET="$expect" \
      ctest --test-dir "$build" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
        $selection
  done < <(runs_for "$arch")
done
stamp "all passed on ${arches[*]}"
