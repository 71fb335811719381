#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/cross_test.sh: cross-builds hwyattn for other architectures with
# Debian's cross compilers and multiarch libraries, and runs its C and C++
# tests there under QEMU user-mode emulation. scripts/test.sh runs it after
# the x86 builds (so .ci/run does); it also runs alone.
#
#   arm64    every C/C++ suite on the target the library picks on an
#            emulated Cortex-A72 (NEON); the attention suites and the MHA
#            module on a 256-bit SVE CPU with BF16 ("max" with sve-max-vq=2:
#            SVE_256_BF16, SVE's BFDOT tiles), the attention suites at 512
#            bits (vq=4: SVE2_BF16), at 128 bits
#            capped at SVE2_128 (vq=1: the SVE kernels' own bf16 rounding
#            rule, no dot products), on NEON with BF16 ("max" with sve=off:
#            NEON_BF16, NEON's BFDOT tiles); the fallback is picked when
#            capped (target_test) and tested on x86; target_test
#            checks each CPU's choice against the table below
#            (HWYATTN_TEST_EXPECT_TARGET, or the HWYATTN_TARGET cap).
#   ppc64el  POWER, little-endian: the attention suites on the portable
#            fallback (Highway 1.0.3 compiles nothing else there; its PPC8
#            target has no implementation yet).
#   s390x    big-endian: the portable fallback (Highway 1.0.3 has no s390x
#            SIMD target), the suites that read F16/BF16/int8 data.
# Each architecture builds only the executables its legs run.
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

# What each architecture's tests run: "<QEMU_CPU>;<target the library must
# pick there>;<ctest selection>;<GTEST_FILTER>;<HWYATTN_TARGET, if any>" per
# line. The selections:
# every leg the library picks itself ("native", -L native), the tests
# registered once, and the capped legs named. Emulation is 20-100x slower
# than the build machine, so only the NEON leg runs every suite (the
# suites that test validation, threading and the score modifiers' rules run
# the same code at every vector width: on x86's four targets too); the SVE
# widths run the attention suites (every kernel: prefill, decode, the small
# one, bf16, blocks, paged caches) without the cases whose cost is sequence
# length rather than code ($quick: the benchmark shapes, the 36-head
# decode, the engine-like band masks of up to 3000 keys, and the integer
# products' matrix of formats and I8 scale layouts, whose unpacking and
# quantization are the same code on every target: the NEON leg runs them;
# the SVE widths keep the cases of the integer kernel's shapes, 8 rows,
# staged odd head dims, offsets and modifiers), and the portable fallback
# runs on x86 (its EMU128 legs: the same code).
once='^(capi_test|reference_test|cpp_binding_test|softmax_test|matmul_test|tanh_test|oom_test|examples\..*)$'
int8='Kv/KvInt8Test.*'
quick="-Sdpa/BenchShapeTest.*:Sdpa/DecodeTest.*_Lk1300:MaskTest.BandLikeAnEngine:$int8/I8D*:$int8/I4KChannel"
quick+=":$int8/Q8_0:$int8/Q4_0:$int8/Q4_1:$int8/Q5_*:$int8/IQ4_NL:$int8/I8Gqa3:$int8/F16IsF32"
runs_for() {
  case $1 in
    arm64)
      local attention='(sdpa|kv_attention|blocks|merge|bf16|target)_test\.native|softmax_test|matmul_test'
      echo "cortex-a72;NEON;-L ^native$;"
      echo "cortex-a72;NEON;-R $once;"
      echo "cortex-a72;NEON;-R ^target_test\.(NEON|foreign_name|EMU128)$;"
      echo "max,sve-max-vq=2;SVE_256_BF16;-R ^($attention|mha_test\.native)$;$quick"
      echo "max,sve-max-vq=2;SVE_256_BF16;-R ^(softmax_test|matmul_test|tanh_test|target_test\.NEON)$;"
      echo "max,sve-max-vq=4;SVE2_BF16;-R ^($attention)$;$quick"
      echo "max,sve-max-vq=1;SVE2_128;-R ^($attention)$;$quick;SVE2_128"
      # Armv8.6 BF16 without SVE (as Apple M2 or AmpereOne): NEON with the
      # BFDOT prefill tiles of precision = BF16.
      echo "max,sve=off;NEON_BF16;-R ^((sdpa|bf16|kv_attention|target)_test\.native)$;$quick"
      ;;
    ppc64el)
      echo ";SCALAR;-R ^((sdpa|kv_attention|target)_test\.native|capi_test)$;$quick"
      ;;
    s390x)
      # Big-endian: the suites that build F16/BF16/int8 tensors and caches,
      # pack bf16 pairs and read ggml's blocks (fp16 scales in machine order).
      echo ";SCALAR;-R ^((sdpa|kv_attention|blocks|target|paged|bf16)_test\.native|capi_test)$;$quick"
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
  # Only the executables the legs run: each test's command (ctest's JSON) is
  # the emulator and its arguments, then the build tree's executable.
  executables=$(while IFS=';' read -r _ _ selection _; do
      # shellcheck disable=SC2086  # the selection is two words
      ctest --test-dir "$build" --show-only=json-v1 $selection
    done < <(runs_for "$arch") | python3 -c '
import json, os, sys
build = os.path.abspath(sys.argv[1]) + "/"
decoder, text, names = json.JSONDecoder(), sys.stdin.read(), set()
while text.strip():
    doc, end = decoder.raw_decode(text.lstrip())
    text = text.lstrip()[end:]
    for test in doc["tests"]:
        names.update(os.path.basename(c) for c in test.get("command", []) if c.startswith(build))
print(" ".join(sorted(names)))' "$build")
  stamp "$arch: building $executables"
  # shellcheck disable=SC2086  # a list of words
  cmake --build "$build" -j"$JOBS" --target $executables
  command -v "qemu-$qemu-static" >/dev/null

  while IFS=';' read -r cpu expect selection filter cap; do
    stamp "$arch: ${cpu:-default CPU}${cap:+ capped at $cap}, expecting $expect: ctest $selection${filter:+ (GTEST_FILTER=$filter)}"
    # shellcheck disable=SC2086  # the selection is two words
    env ${cpu:+QEMU_CPU=$cpu} ${filter:+GTEST_FILTER=$filter} ${cap:+HWYATTN_TARGET=$cap} \
      HWYATTN_TEST_EXPECT_TARGET="$expect" \
      ctest --test-dir "$build" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
        $selection
  done < <(runs_for "$arch")
done
stamp "all passed on ${arches[*]}"
