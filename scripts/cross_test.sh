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
#            SVE_256_BF16, SVE's BFDOT tiles), at 512 bits (vq=4:
#            SVE2_BF16), at 128 bits capped at SVE2_128 (vq=1: the SVE
#            kernels' own bf16 rounding rule, no dot products), a third of
#            the attention suites' cases on each (GTest shards), and on NEON
#            with BF16 ("max" with sve=off:
#            NEON_BF16, NEON's BFDOT tiles); the fallback is picked when
#            capped (target_test) and tested on x86; target_test
#            checks each CPU's choice against the table below
#            (HWYATTN_TEST_EXPECT_TARGET, or the HWYATTN_TARGET cap).
#   ppc64el  POWER, little-endian: the attention suites on the portable
#            fallback (Highway 1.0.3 compiles nothing else there; its PPC8
#            target has no implementation yet).
#   s390x    big-endian: the portable fallback (Highway 1.0.3 has no s390x
#            SIMD target), the suites that read F16/BF16/int8 data.
# Legs against Highway 1.4 (built from its source archive with
# -DHWYATTN_HIGHWAY, cmake/highway.cmake; no libhwy-dev:<arch> needed), for
# the SIMD targets Highway 1.0.3 lacks; where the archive is at hand,
# scripts/test.sh (and so CI) runs all four, s390x-hwy14 in place of s390x,
# with CROSS_QUICK=1 for CI's 60 minutes (below; by hand, all cases):
#   ppc64el-hwy14  POWER VSX: the ppc64el leg's suites on an emulated POWER8,
#            POWER9 and POWER10, which must pick PPC8, PPC9 and PPC10
#            (target_test checks the name, HWYATTN_TEST_EXPECT_TARGET); then
#            target_test capped at PPC8 and at the fallback (SCALAR) on the
#            POWER10. With CROSS_QUICK=1 each CPU runs a third of the
#            attention suites' cases (GTest shards 0-2 of 3: every case on
#            POWER once; target_test and the C API test whole on each).
#   s390x-hwy14  z/Architecture vector facility, built for a z14 baseline
#            (-march=z14 -mzvector: Highway compiles Z14/Z15 only from there,
#            with no dispatch below it): the s390x leg's suites on QEMU's
#            "max" CPU, which must pick Z14 (QEMU 7.2 lacks z15's vector
#            enhancements 2), and target_test capped at the fallback.
#   riscv64-hwy14  RISC-V with the vector extension (RVV 1.0), compiled by
#            clang 16 for an rv64gcv baseline
#            (cmake/toolchains/riscv64-linux-gnu.cmake: Debian 12's GCC 12
#            cannot compile Highway's RVV, and clang < 19 cannot dispatch
#            between RVV and the fallback at run time): the ppc64el leg's
#            suites at VLEN 128, 256 and 512 (a third of the attention suites'
#            cases at each, GTest shards; target_test and the C API test
#            whole), each of which must pick RVV, and target_test capped at
#            the fallback (EMU128). The kernels are built for 128-bit vectors
#            (src/ops/vectors-inl.h): the longer lengths check that Highway's
#            operations keep to them. Under QEMU >= 8 (riscv64_qemu below:
#            Debian 12's 7.2 aborts on RVV's float-to-integer conversions).
#   riscv64-scalar-hwy14  rv64gc, no vector extension: on a CPU without V,
#            which must pick the fallback (EMU128), the target and C API
#            suites and a quarter of the attention suites' cases (the
#            fallback's code is what x86's EMU128 legs run case by case).
#            Both riscv64 legs build GoogleTest from Debian's sources (Debian
#            12 has no riscv64 port, so no multiarch packages) and turn
#            OpenMP off (clang's runtime, libomp, exists for no riscv64 here).
# Measured from empty build directories, JOBS=2, on a 2-core Zen 5 (AMD
# family 26): arm64 builds in 5.6 min and tests in 2.9; s390x-hwy14 1.9 and
# 1.4; ppc64el-hwy14 2.7 (4 kernel instances: PPC8/9/10 and the fallback) and
# 4.1; riscv64-hwy14 1.5 (RVV and the fallback) and 11 (sdpa_test's third
# 3.5 min per length); riscv64-scalar-hwy14 0.9 and 1.0 with CROSS_QUICK=1.
# On a busy 2-core Zen 3 the *-hwy14 legs had taken 3-5 times as long.
# Each leg builds only the executables its runs use, in its own build
# directory (<prefix><leg>, e.g. build-ppc64el-hwy14).
#
# The binding, install and MPI tests are x86-only (they run the build
# machine's python3, cargo, go and compilers against the library).
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/cross_test.sh [leg...]    legs: arm64 ppc64el s390x (the default: these
#                                     three) ppc64el-hwy14 s390x-hwy14 riscv64-hwy14
#                                     riscv64-scalar-hwy14
# Environment:
#   CROSS_BUILD_PREFIX  build directories are <prefix><leg> (default: build-)
#   JOBS                parallel build and test jobs (default: nproc)
#   TEST_TIMEOUT        per-test timeout in seconds (default 1800: emulated)
#   HWYATTN_HIGHWAY_ARCHIVE  the Highway (>= 1.4) the *-hwy14 legs build: a
#                       source tree or release archive (default: the pinned
#                       ../shared/third_party/highway-1.4.0.tar.gz, also next to
#                       the main checkout of a git worktree; without it those
#                       legs are skipped, saying so)
#   CROSS_QUICK         1: ppc64el-hwy14 runs a third of the attention
#                       suites' cases on each POWER CPU, the riscv64 legs half
#                       their share of them (GTest shard i of 2n where the leg
#                       says i of n); default 0: all (scripts/test.sh sets 1,
#                       for CI's time)
#   HWYATTN_QEMU_RISCV64  the riscv64 legs' emulator, a QEMU >= 8 qemu-riscv64
#                       (default: see riscv64_qemu below)
#   HWYATTN_CACHE       where that QEMU is kept once fetched (default
#                       ${XDG_CACHE_HOME:-~/.cache}/hwyattn)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
CROSS_BUILD_PREFIX=${CROSS_BUILD_PREFIX:-build-}
HWYATTN_CACHE=${HWYATTN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwyattn}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-1800}
CROSS_QUICK=${CROSS_QUICK:-0}
legs=("$@")
((${#legs[@]} > 0)) || legs=(arm64 ppc64el s390x)

# shellcheck source=scripts/deps.sh
source scripts/deps.sh

stamp() { echo "cross_test.sh: $* ($(date +%T), ${SECONDS}s)"; }

# What each architecture's tests run: "<QEMU_CPU>;<target the library must
# pick there>;<ctest selection>;<GTEST_FILTER>;<HWYATTN_TARGET, if any>;
# <GTest shard i/n, if any>" per line. The selections:
# every leg the library picks itself ("native", -L native), the tests
# registered once, and the capped legs named. Emulation is 20-100x slower
# than the build machine, so only the NEON leg runs every suite (the
# suites that test validation, threading and the score modifiers' rules run
# the same code at every vector width: on x86's four targets too), without
# the 1300-key decodes and the engine-like band masks of up to 3000 keys
# ($long: their code is the shorter cases', their cost sequence length; x86
# runs them on four targets); the SVE
# widths run the attention suites (every kernel: prefill, decode, the small
# one, bf16, blocks, paged caches) without the cases whose cost is sequence
# length rather than code ($quick: $long, the benchmark shapes, and the integer
# products' matrix of formats and I8 scale layouts, whose unpacking and
# quantization are the same code on every target: the NEON leg runs those;
# the SVE widths keep the cases of the integer kernel's shapes, 8 rows,
# staged odd head dims, offsets and modifiers), and the portable fallback
# runs on x86 (its EMU128 legs: the same code).
once='^(capi_test|reference_test|cpp_binding_test|softmax_test|matmul_test|tanh_test|oom_test|examples\..*)$'
int8='Kv/KvInt8Test.*'
long="-Sdpa/DecodeTest.*_Lk1300:MaskTest.BandLikeAnEngine"
quick="$long:Sdpa/BenchShapeTest.*:$int8/I8D*:$int8/I4KChannel"
quick+=":$int8/Q8_0:$int8/Q4_0:$int8/Q4_1:$int8/Q5_*:$int8/IQ4_NL:$int8/I8Gqa3:$int8/F16IsF32"
runs_for() {
  local fraction=1
  ((CROSS_QUICK)) && fraction=2
  case $1 in
    arm64)
      # Every suite but the cases whose cost is sequence length (x86's four
      # targets run them; the code they take is the shorter cases').
      echo "cortex-a72;NEON;-L ^native$;$long"
      echo "cortex-a72;NEON;-R $once;"
      echo "cortex-a72;NEON;-R ^target_test\.(NEON|foreign_name|EMU128)$;"
      # The three SVE vector lengths share the attention suites' cases: a
      # third each (GTest shards 0-2 of 3), so that every case runs on SVE
      # once (the NEON leg runs them all) and the SVE code on three lengths,
      # in a third of the emulation time; target_test and the per-target
      # kernel tests (softmax, matmul) whole on each.
      local sharded='(sdpa|kv_attention|blocks|merge|bf16)_test\.native'
      echo "max,sve-max-vq=2;SVE_256_BF16;-R ^($sharded|mha_test\.native)$;$quick;;0/3"
      echo "max,sve-max-vq=2;SVE_256_BF16;-R ^(target_test\.native|softmax_test|matmul_test|target_test\.NEON)$;"
      # tanh_test's SVE instances (NEON's and the fallback's: the NEON leg).
      echo "max,sve-max-vq=2;SVE_256_BF16;-R ^tanh_test$;*/SVE*"
      echo "max,sve-max-vq=4;SVE2_BF16;-R ^($sharded)$;$quick;;1/3"
      echo "max,sve-max-vq=4;SVE2_BF16;-R ^(target_test\.native|softmax_test|matmul_test)$;"
      echo "max,sve-max-vq=1;SVE2_128;-R ^($sharded)$;$quick;SVE2_128;2/3"
      echo "max,sve-max-vq=1;SVE2_128;-R ^(target_test\.native|softmax_test|matmul_test)$;;SVE2_128"
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
    ppc64el-hwy14)
      local suites='^((sdpa|kv_attention|target)_test\.native|capi_test)$'
      # QEMU 7.2's POWER8 raises SIGILL on glibc's mffscrni (libm's sin and
      # cos save the rounding mode with it; a real POWER8 executes it as
      # mffs): the one case that calls std::sin/std::cos is left out there.
      local power shard=0 filter
      for power in 8 9 10; do
        filter=$quick
        ((power == 8)) && filter+=":EdgeTest.RunningMaxMovesInsideKeyTiles"
        if ((CROSS_QUICK)); then
          echo "power$power;PPC$power;-R ^((sdpa|kv_attention)_test\.native)$;$filter;;$shard/3"
          echo "power$power;PPC$power;-R ^(target_test\.native|capi_test)$;"
        else
          echo "power$power;PPC$power;-R $suites;$filter"
        fi
        shard=$((shard + 1))
      done
      # The cap: a lower target, and the portable fallback (SCALAR with
      # GCC 12), on the best CPU.
      echo "power10;PPC8;-R ^target_test\.native$;;PPC8"
      echo "power10;SCALAR;-R ^target_test\.native$;;SCALAR"
      ;;
    s390x-hwy14)
      echo "max;Z14;-R ^((sdpa|kv_attention|blocks|target|paged|bf16)_test\.native|capi_test)$;$quick"
      echo "max;SCALAR;-R ^target_test\.native$;;SCALAR"
      ;;
    riscv64-hwy14)
      # The vector lengths share the attention suites' cases (GTest shards
      # 0-2 of 3, as arm64's SVE lengths): every case on RVV once, the
      # kernels on three lengths; target_test and the C API test whole on
      # each.
      local rvv='rv64,v=true,vext_spec=v1.0,vlen'
      local vlen shard=0
      for vlen in 128 256 512; do
        echo "$rvv=$vlen;RVV;-R ^((sdpa|kv_attention)_test\.native)$;$quick;;$shard/$((3 * fraction))"
        echo "$rvv=$vlen;RVV;-R ^(target_test\.native|capi_test)$;"
        shard=$((shard + 1))
      done
      # The cap: the portable fallback (EMU128 with clang) on an RVV CPU.
      echo "$rvv=256;EMU128;-R ^target_test\.native$;;EMU128"
      ;;
    riscv64-scalar-hwy14)
      # rv64gc (no vector extension): Highway's portable fallback alone, the
      # code x86's EMU128 legs test case by case: the target and C API suites
      # whole, a quarter of the attention suites' cases (GTest shard 0 of 4).
      echo "rv64,v=false;EMU128;-R ^(target_test\.native|capi_test)$;$quick"
      echo "rv64,v=false;EMU128;-R ^((sdpa|kv_attention)_test\.native)$;$quick;;0/$((4 * fraction))"
      ;;
  esac
}

# The Highway of the *-hwy14 legs: highway_archive (scripts/deps.sh).

# The riscv64 legs' GoogleTest: Debian 12 has no libgtest-dev:riscv64 (no
# riscv64 port), so Debian's sources (package googletest, /usr/src/googletest)
# are cross-built into <build>/_googletest with the leg's toolchain and flags;
# the leg's configure finds them (CMAKE_PREFIX_PATH=<build>/_googletest/install).
build_googletest() {
  local build=$1
  shift
  cmake -S /usr/src/googletest -B "$build/_googletest/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$PWD/$build/_googletest/install" "$@" >/dev/null
  cmake --build "$build/_googletest/build" -j"$JOBS" >/dev/null
  cmake --install "$build/_googletest/build" >/dev/null
}

# The qemu-riscv64 of the riscv64 legs, or nothing. Debian 12's
# qemu-user-static (QEMU 7.2) aborts on RVV code: translating a vector
# float-to-integer conversion that rounds toward zero (vfcvt.rtz.x.f.v,
# vfncvt.rtz.x.f.w: Highway's ConvertTo and DemoteTo, and the compiler's
# vectorized casts) as the first rounding instruction of a block fails its
# assertion "decode_save_opc: Assertion `ctx->insn_start != NULL' failed"
# (QEMU issue 1441, fixed in QEMU 8.0). So: $HWYATTN_QEMU_RISCV64 if set; the
# system's qemu-riscv64-static if it is QEMU >= 8; else the static
# qemu-riscv64 of Debian's bookworm-backports package qemu-user (QEMU 10),
# fetched once with apt-get download (a private package list; nothing is
# installed) into $HWYATTN_CACHE/qemu-user-bookworm-backports.
riscv64_qemu() {
  if [[ -n ${HWYATTN_QEMU_RISCV64:-} ]]; then
    realpath "$HWYATTN_QEMU_RISCV64"
    return
  fi
  local major
  major=$(qemu-riscv64-static --version 2>/dev/null | sed -n 's/^qemu-riscv64 version \([0-9]*\)\..*/\1/p')
  if [[ -n $major ]] && ((major >= 8)); then
    command -v qemu-riscv64-static
    return
  fi
  local dir=$HWYATTN_CACHE/qemu-user-bookworm-backports
  if [[ ! -x $dir/qemu-riscv64 ]]; then
    local tmp apt
    tmp=$(mktemp -d)
    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$dir"
    echo "deb [arch=$(dpkg --print-architecture)] http://deb.debian.org/debian bookworm-backports main" \
      >"$tmp/sources.list"
    apt=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/nonexistent
         -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o APT::Sandbox::User=root)
    if apt-get "${apt[@]}" update >&2 && (cd "$tmp" && apt-get "${apt[@]}" download qemu-user >&2); then
      dpkg-deb --fsys-tarfile "$tmp"/qemu-user_*.deb | tar -x -O ./usr/bin/qemu-riscv64 >"$dir/qemu-riscv64.part" &&
        chmod +x "$dir/qemu-riscv64.part" && mv "$dir/qemu-riscv64.part" "$dir/qemu-riscv64"
    fi
    rm -rf "$tmp"
  fi
  [[ -x $dir/qemu-riscv64 ]] && echo "$dir/qemu-riscv64"
}

# Each leg's build and test times, printed at the end.
times=()

for leg in "${legs[@]}"; do
  arch=${leg%-hwy14}
  arch=${arch%-scalar}
  case $arch in
    arm64) triplet=aarch64-linux-gnu qemu=aarch64 ;;
    ppc64el) triplet=powerpc64le-linux-gnu qemu=ppc64le ;;
    s390x) triplet=s390x-linux-gnu qemu=s390x ;;
    riscv64) triplet=riscv64-linux-gnu qemu=riscv64 ;;
    *) arch='' ;;
  esac
  case $leg in
    arm64 | ppc64el | s390x | ppc64el-hwy14 | s390x-hwy14 | riscv64-hwy14 | riscv64-scalar-hwy14) ;;
    *) arch='' ;;
  esac
  if [[ -z $arch ]]; then
    echo "cross_test.sh: unknown leg '$leg' (arm64, ppc64el, s390x, ppc64el-hwy14, s390x-hwy14," \
      "riscv64-hwy14, riscv64-scalar-hwy14)" >&2
    exit 2
  fi
  # Highway: Debian's libhwy-dev:<arch> (1.0.3), or for the *-hwy14 legs
  # one built from source (-DHWYATTN_HIGHWAY).
  config=()
  if [[ $leg == *-hwy14 ]]; then
    highway=$(highway_archive)
    if [[ -z $highway || ! -e $highway ]]; then
      stamp "$leg: SKIPPED: no Highway archive (../shared/third_party/highway-1.4.0.tar.gz; or set HWYATTN_HIGHWAY_ARCHIVE to a Highway >= 1.4 tree or archive)"
      times+=("$leg: skipped (no Highway archive)")
      continue
    fi
    config+=("-DHWYATTN_HIGHWAY=$highway")
    # libstdc++6:<arch> for QEMU's -L / (libhwy-dev:<arch> brings it on the
    # other legs; the cross compiler's copy is not where the loader looks).
    HWYATTN_PACKAGES=("g++-$triplet" "libgtest-dev:$arch" "libgomp1:$arch" "libstdc++6:$arch"
                      qemu-user-static)
  else
    HWYATTN_PACKAGES=("g++-$triplet" "libhwy-dev:$arch" "libgtest-dev:$arch" "libgomp1:$arch"
                      qemu-user-static)
  fi
  if [[ $leg == s390x-hwy14 ]]; then
    # Highway's Z14/Z15 targets need a z14 baseline (no run-time dispatch
    # below it): the whole build is for z14 and later.
    config+=("-DCMAKE_C_FLAGS=-march=z14 -mzvector" "-DCMAKE_CXX_FLAGS=-march=z14 -mzvector")
  fi
  HWYATTN_FOREIGN_ARCHITECTURES=("$arch")
  emulator=qemu-$qemu-static
  # riscv64: clang 16 with the GNU cross toolchain
  # (cmake/toolchains/riscv64-linux-gnu.cmake), no multiarch packages (Debian
  # 12 has no riscv64 port): GoogleTest cross-built from Debian's sources,
  # OpenMP off (clang's runtime, libomp, exists for no riscv64 here).
  riscv_flags=()
  if [[ $arch == riscv64 ]]; then
    HWYATTN_PACKAGES=(clang-16 "g++-$triplet" googletest qemu-user-static)
    HWYATTN_FOREIGN_ARCHITECTURES=()
    # QEMU runs riscv64 code slower than arm64's (a decode call of 1.7 M
    # multiply-adds: 40 ms on the fallback, 90 ms on RVV, whose vsetvli end
    # QEMU's translation blocks), and a third of sdpa_test takes 8 to 10
    # minutes of CPU: the tests' timeouts are scaled by 40 rather than 10.
    config+=(-DHWYATTN_OPENMP=OFF -DHWYATTN_EMULATED_TIMEOUT_SCALE=40)
    if [[ $leg == riscv64-hwy14 ]]; then
      # RVV with clang < 19 needs a vector baseline (Highway has no run-time
      # dispatch between RVV and the fallback there): the build is for
      # rv64gcv CPUs; riscv64-scalar-hwy14 builds for rv64gc.
      riscv_flags=(-DCMAKE_C_FLAGS=-march=rv64gcv -DCMAKE_CXX_FLAGS=-march=rv64gcv)
    fi
    # QEMU >= 8 (riscv64_qemu); rv64gc code runs on Debian 12's 7.2 too, at
    # half the speed.
    emulator=$(riscv64_qemu || true)
    if [[ -z $emulator && $leg == riscv64-hwy14 ]]; then
      stamp "$leg: SKIPPED: no QEMU >= 8 for riscv64 (Debian 12's qemu-user-static 7.2 aborts on RVV's" \
        "vector conversions; bookworm-backports' qemu-user could not be fetched; or set HWYATTN_QEMU_RISCV64)"
      times+=("$leg: skipped (no QEMU >= 8 for riscv64)")
      continue
    fi
    emulator=${emulator:-qemu-riscv64-static}
    stamp "$leg: emulator $emulator ($("$emulator" --version 2>/dev/null | head -1))"
    config+=("${riscv_flags[@]}" "-DHWYATTN_QEMU_RISCV64=$emulator")
  fi
  install_missing_packages cross_test.sh

  build=$CROSS_BUILD_PREFIX$leg
  build_start=$SECONDS
  stamp "$leg: build in $build"
  if [[ $arch == riscv64 ]]; then
    build_googletest "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$triplet.cmake" "${riscv_flags[@]}"
    config+=("-DCMAKE_PREFIX_PATH=$PWD/$build/_googletest/install")
  fi
  cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="cmake/toolchains/$triplet.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON -DHWYATTN_BUILD_BENCH=OFF \
    -DHWYATTN_MPI=OFF "${config[@]}" >/dev/null
  # Only the executables the legs run (each test's command is the emulator
  # and its arguments, then the build tree's executable).
  selections=()
  while IFS=';' read -r _ _ selection _; do
    ((${#selections[@]} == 0)) || selections+=(--)
    # shellcheck disable=SC2206  # the selection is two words
    selections+=($selection)
  done < <(runs_for "$leg")
  executables=$(scripts/ctest_executables.py "$build" "${selections[@]}")
  stamp "$leg: building $executables"
  # shellcheck disable=SC2086  # a list of words
  cmake --build "$build" -j"$JOBS" --target $executables
  command -v "$emulator" >/dev/null
  build_seconds=$((SECONDS - build_start))
  test_start=$SECONDS

  while IFS=';' read -r cpu expect selection filter cap shard; do
    stamp "$leg: ${cpu:-default CPU}${cap:+ capped at $cap}, expecting $expect: ctest $selection${filter:+ (GTEST_FILTER=$filter)}${shard:+, shard $shard}"
    # shellcheck disable=SC2086  # the selection is two words
    env ${cpu:+QEMU_CPU=$cpu} ${filter:+GTEST_FILTER=$filter} ${cap:+HWYATTN_TARGET=$cap} \
      ${shard:+GTEST_SHARD_INDEX=${shard%/*} GTEST_TOTAL_SHARDS=${shard#*/}} \
      HWYATTN_TEST_EXPECT_TARGET="$expect" \
      ctest --test-dir "$build" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" \
        $selection
  done < <(runs_for "$leg")
  times+=("$leg: build ${build_seconds}s (configure included), tests $((SECONDS - test_start))s")
  stamp "${times[-1]}"
done
printf 'cross_test.sh: %s\n' "${times[@]}"
stamp "all passed on ${legs[*]}"
