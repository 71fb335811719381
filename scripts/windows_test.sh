#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/windows_test.sh: cross-builds hwyattn for Windows x64 with Debian's
# MinGW-w64 GCC (g++-mingw-w64-x86-64-posix: POSIX threads, libgomp) and runs
# its C and C++ tests under Wine 8 (Debian's wine64). scripts/test.sh (so
# .ci/run) runs it where the Highway archive is at hand; it also runs alone.
#
#   windows  hwyattn.dll (cmake/toolchains/x86_64-w64-mingw32.cmake,
#            cmake/windows.cmake) against Highway 1.4, built from its source
#            archive with -DHWYATTN_HIGHWAY (Debian's libhwy-dev is
#            Linux-only), GoogleTest from Debian's /usr/src/googletest
#            (package googletest) built in the same tree. Every x86 target
#            compiled as on Linux (AVX3 with the AVX512_BF16 dot products,
#            AVX2, SSE4, the portable fallback), dispatched at run time.
#            Checked on the DLL first: it exports exactly the functions
#            include/hwyattn.h declares, imports no MinGW runtime DLL (the
#            runtime and libgomp are linked in), and holds no aligned 32- or
#            64-byte vector move (GCC on Win64 cannot align the stack for
#            AVX spills: cmake/windows.cmake) and no non-temporal one on the
#            stack. Then the C API, sdpa, KV-cache and hardening suites,
#            target_test and the thread-pool example (the caller's pool
#            against OpenMP's threads, bit for bit) on:
#              - the CPU's best target, AVX3_BF16 or AVX3, when it has
#                AVX-512 (a CPU without it skips this run, saying so, and
#                only checks that the uncapped library picks its best
#                target: target_test and the example);
#              - capped at AVX2 and at SSE4 (HWYATTN_TARGET);
#            each checking the target's name (target_test:
#            HWYATTN_TEST_EXPECT_TARGET or the cap; the example's
#            "SIMD target:" line).
#            The other suites are not built here (their code does not
#            depend on the OS: the kernels per target, threading, score
#            modifiers); after a full build (cmake --build build-windows:
#            as long again) `ctest --test-dir build-windows` runs all 26 C
#            and C++ tests under Wine on the CPU's best target (they passed
#            on AVX2, and on a Zen 5's AVX3_BF16). Not built for Windows:
#            oom_test (POSIX only); not in a cross build: the bindings,
#            install and MPI tests (they run
#            the build machine's python3, cargo, go and compilers).
# Measured here (a 2-core Zen 3 shared with other builds, load 5, JOBS=2, from
# an empty build directory): build 19 min (the DLL's four kernel instances:
# AVX3, AVX2, SSE4, the fallback; Highway, GoogleTest), tests 67 s (the
# uncapped target check, then the AVX2 and SSE4 runs of the suites, 30 s
# each), the Wine prefix 14 s the first time. On a 2-core Zen 5 (AMD family 26
# model 2, AVX-512 with AVX512_BF16 and AVX512_VNNI): build 4.3 min, tests
# 23 s, all three runs passed (AVX3_BF16, then capped at AVX2 and SSE4).
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/windows_test.sh
# Environment:
#   WINDOWS_BUILD_DIR  build directory (default: build-windows)
#   JOBS               parallel build and test jobs (default: nproc)
#   HWYATTN_HIGHWAY_ARCHIVE  the Highway (>= 1.4) to build: a source tree or
#                      release archive (default: the pinned
#                      ../shared/third_party/highway-1.4.0.tar.gz, also next to
#                      the main checkout of a git worktree; without it the
#                      leg is skipped, saying so)
#   WINEPREFIX         the Wine prefix (default: ~/.cache/hwyattn/wine64, made
#                      on first use, outside the source tree)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${WINDOWS_BUILD_DIR:-build-windows}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

stamp() { echo "windows_test.sh: $* ($(date +%T), ${SECONDS}s)"; }
fail() {
  echo "windows_test.sh: FAILED: $*" >&2
  exit 1
}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
highway=$(highway_archive)
if [[ -z $highway || ! -e $highway ]]; then
  stamp "SKIPPED: no Highway archive (../shared/third_party/highway-1.4.0.tar.gz; or set HWYATTN_HIGHWAY_ARCHIVE to a Highway >= 1.4 tree or archive): Debian's libhwy-dev is Linux-only"
  exit 0
fi

HWYATTN_PACKAGES=(cmake make g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64 wine64 googletest)
install_missing_packages windows_test.sh

wine=/usr/lib/wine/wine64  # Debian's wine64 (the package wine adds /usr/bin/wine)
[[ -x $wine ]] || wine=$(command -v wine64 || command -v wine || true)
[[ -n $wine && -x $wine ]] || fail "no wine64 (Debian: apt-get install wine64)"
wineserver=$(dirname "$wine")/wineserver64
[[ -x $wineserver ]] || wineserver=$(command -v wineserver64 || command -v wineserver || true)
[[ -n $wineserver && -x $wineserver ]] || fail "no wineserver (Debian: apt-get install wine64)"
objdump=x86_64-w64-mingw32-objdump
cache=${HWYATTN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwyattn}
export WINEPREFIX=${WINEPREFIX:-$cache/wine64}
export WINEDEBUG=-all WINEARCH=win64
# No Wine dialogs or desktop integration (there is no display).
export WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"

# --- Build -------------------------------------------------------------------
build_start=$SECONDS
stamp "build in $BUILD (Highway from $highway)"
# Wine runs the tests at native speed: the tests' timeouts are scaled by 3
# rather than the emulators' 10, so that a hang is not waited on for long.
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-w64-mingw32.cmake \
  -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON -DHWYATTN_BUILD_BENCH=OFF \
  -DHWYATTN_BUILD_EXAMPLES=ON -DHWYATTN_MPI=OFF -DHWYATTN_HIGHWAY="$highway" \
  -DHWYATTN_GTEST_SOURCE=/usr/src/googletest -DHWYATTN_EMULATED_TIMEOUT_SCALE=3 >/dev/null
# Only what the runs use.
programs=(capi_test sdpa_test kv_attention_test hardening_test target_test thread_pool)
cmake --build "$BUILD" -j"$JOBS" --target hwyattn "${programs[@]}"
build_seconds=$((SECONDS - build_start))
bin=$BUILD/bin
dll=$bin/hwyattn.dll
[[ -f $dll ]] || fail "$dll was not built"
[[ -f $BUILD/libhwyattn.dll.a ]] || fail "no import library $BUILD/libhwyattn.dll.a"

# --- The DLL -----------------------------------------------------------------
# Exports: exactly the header's functions (each HWYATTN_API line's first
# hwyattn_ name followed by "(" or ")(", as rust/hwyattn-sys/tests/abi.rs
# reads them).
declared=$(grep -c '^HWYATTN_API ' include/hwyattn.h || true)
header=$(sed -n -E 's/^HWYATTN_API [^;(]*\(?(hwyattn_[A-Za-z0-9_]+)\)?\(.*/\1/p' include/hwyattn.h | sort -u)
names=$(grep -c . <<<"$header" || true)
((names == declared && declared > 0)) ||
  fail "read $names function names from the $declared HWYATTN_API lines of include/hwyattn.h"
exports=$("$objdump" -p "$dll" | awk '/^\[Ordinal\/Name Pointer\] Table/ {on = 1; next}
  on && /^[ \t]*\[ *[0-9]+\]/ {print $NF; next} on && NF == 0 {on = 0}' | sort -u)
if [[ $exports != "$header" ]]; then
  diff <(echo "$header") <(echo "$exports") >&2 || true
  fail "hwyattn.dll's exports (>) differ from include/hwyattn.h's functions (<)"
fi
stamp "hwyattn.dll exports the header's $declared functions and nothing else"
# Imports: Windows' own DLLs only (libstdc++, libgcc, libgomp, winpthreads
# are linked in: HWYATTN_MINGW_STATIC_RUNTIME).
imports=$("$objdump" -p "$dll" | sed -n 's/^\s*DLL Name: //p' | sort -u | tr '\n' ' ')
stamp "hwyattn.dll imports: $imports"
if grep -q -i -E 'lib(stdc\+\+|gcc_s|gomp|winpthread)' <<<"$imports"; then
  fail "hwyattn.dll needs a MinGW runtime DLL: $imports"
fi
# No aligned 32/64-byte vector move at all (they would fault on a stack slot
# that the 16-byte aligned Win64 stack put off), and no non-temporal one on
# the stack.
"$objdump" -d --no-show-raw-insn "$dll" | grep -E '%[yz]mm' | grep '(' >"$BUILD/hwyattn.dll.wide-memory.txt" || true
aligned=$(grep -E '\s(vmovap[sd]|vmovdqa(32|64)?)\s' "$BUILD/hwyattn.dll.wide-memory.txt" || true)
nt_stack=$(grep -E '\svmovnt[a-z]*\s' "$BUILD/hwyattn.dll.wide-memory.txt" | grep -E '\(%r(sp|bp)' || true)
[[ -z $aligned ]] || fail "aligned 32/64-byte vector moves in hwyattn.dll: $(head -5 <<<"$aligned")"
[[ -z $nt_stack ]] || fail "non-temporal moves on the stack in hwyattn.dll: $(head -5 <<<"$nt_stack")"
stamp "hwyattn.dll: $(grep -c . "$BUILD/hwyattn.dll.wide-memory.txt" || true) 32/64-byte vector instructions with a memory operand, no aligned move among them"

# --- The Wine prefix -----------------------------------------------------------
if [[ ! -f $WINEPREFIX/system.reg ]]; then
  stamp "making the Wine prefix $WINEPREFIX"
  mkdir -p "$WINEPREFIX"
  "$wine" wineboot --init >"$WINEPREFIX.init.log" 2>&1 || true
  # The registry files are written by wineserver when it exits.
  "$wineserver" -w
  [[ -f $WINEPREFIX/system.reg ]] || fail "wineboot made no prefix in $WINEPREFIX ($WINEPREFIX.init.log)"
fi

# --- The runs ------------------------------------------------------------------
# The target this CPU should get, from /proc/cpuinfo (independently of
# Highway's CPUID reading, which the library uses), as tests/CMakeLists.txt
# reads it.
has() {
  local flag
  for flag in "$@"; do grep -q -E "^flags\s*:.*\s$flag(\s|$)" /proc/cpuinfo || return 1; done
}
if has avx512f avx512bw avx512dq avx512vl; then
  best=AVX3
  has avx512_bf16 && best=AVX3_BF16
elif has avx2 fma f16c bmi2; then
  best=AVX2
elif has sse4_2; then
  best=SSE4
else
  best=EMU128
fi
suites='capi_test|(sdpa|kv_attention|hardening|target)_test\.native'
# "<HWYATTN_TARGET, if any>;<the target the library must pick>;<ctest -R>" per line.
runs=() passed=()
if [[ $best == AVX3* ]]; then
  runs+=(";$best;^($suites|target_test\.(foreign_name|unknown_tuning))$")
else
  stamp "SKIPPED: the best-target run of the suites (AVX3_BF16 or AVX3): this CPU has no AVX-512; checking only that the uncapped library picks $best"
  runs+=(";$best;^(target_test\.(native|foreign_name|unknown_tuning))$")
fi
runs+=("AVX2;AVX2;^($suites)$" "SSE4;SSE4;^($suites)$")

test_start=$SECONDS
for run in "${runs[@]}"; do
  IFS=';' read -r cap expect selection <<<"$run"
  stamp "${cap:+capped at $cap, }expecting $expect: ctest -R '$selection'"
  env ${cap:+HWYATTN_TARGET=$cap} HWYATTN_TEST_EXPECT_TARGET="$expect" \
    ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" -R "$selection"
  # The example: the caller's pool and OpenMP's threads give the same bits;
  # its "SIMD target:" line names the target.
  out=$(env ${cap:+HWYATTN_TARGET=$cap} "$wine" "$bin/thread_pool.exe") ||
    fail "thread_pool.exe${cap:+ capped at $cap}: $out"
  echo "$out" | sed 's/^/  thread_pool.exe: /'
  got=$(sed -n 's/^SIMD target: //p' <<<"$out" | tr -d '\r')
  [[ $got == "$expect" ]] || fail "thread_pool.exe${cap:+ capped at $cap} ran on '$got', expected $expect"
  passed+=("${cap:+capped at }$expect")
done
test_seconds=$((SECONDS - test_start))
stamp "windows: build ${build_seconds}s (configure included), tests ${test_seconds}s"
stamp "all passed: $(IFS=,; echo "${passed[*]}" | sed 's/,/, /g')"
