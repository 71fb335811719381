#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ggml's own op test against hwyattn's ggml backend (ctest ggml_test_backend_ops):
# builds test-backend-ops of the ggml source tree <ggml-src> into <ggml-build>
# (once; later runs only check it is up to date), then runs
#   GGML_BACKEND_PATH=<backend> test-backend-ops test -o FLASH_ATTN_EXT -b HWYATTN
# which compares every flash-attention case the backend claims (supports_op)
# with ggml's CPU backend (NMSE). Passes when every claimed case passes and at
# least <min-claimed> cases are claimed (so that a backend claiming nothing
# cannot pass); then ggml/status_test.cc (errors at compute time, declined
# layouts). Exit 77 (skipped) when there is no ggml source tree.
#
# Then ggml/quants_test.cc: hwyattn_kv_cache_write into ggml's block formats
# gives the bytes of ggml's reference quantizers, and hwyattn reads them as
# ggml's dequantizers do.
#
# The claims are counted over every case (`test-backend-ops support`, no
# computation). Under CI=true the test runs the cases of the float K/V types
# and q8_0 (llama.cpp's usual quantized cache), leaving out five block
# formats, q4_0, q4_1, q5_0, q5_1 and iq4_nl (their CPU reference is the
# slowest part of the run; blocks_test, quants_test and kv_attention_test
# check those formats), and the 75-token batches (nb=75: about half of the
# remaining cases' arithmetic; 1, 3 and 32 tokens stay, hwyattn's own suites
# test query tiles cut anywhere): this test is the normal suite's longest
# (1000-1760 s with them on 2 busy cores). A run outside CI, or with
# GGML_TEST_ALL_TYPES=1, tests every case.
#
# Usage: ggml_test_backend_ops.sh <ggml-src> <ggml-build> <libggml-hwyattn.so> <min-claimed> <libhwyattn.so>
set -euo pipefail

src=${1:-}
build=${2:?ggml build directory}
backend=${3:-}
min_claimed=${4:-1}
libhwyattn=${5:-}

if [[ -z $src || ! -f $src/CMakeLists.txt ]]; then
  echo "SKIP: no ggml source tree (the pinned ggml-d99724f.tar.gz was not found next to the checkout," \
       "and CMake was not given -DHWYATTN_GGML=<ggml source tree>)"
  exit 77
fi
if [[ -z $backend || ! -f $backend ]]; then
  echo "FAIL: the backend library '$backend' was not built" >&2
  exit 1
fi

# ggml's CPU backend as its defaults build it (GGML_NATIVE: -march=native),
# its tests, no examples; only the targets test-backend-ops needs.
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_BUILD_EXAMPLES=OFF \
    -DGGML_BUILD_TESTS=ON >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log"
    exit 1
  }
fi
start=$SECONDS
nice cmake --build "$build" --target test-backend-ops -j2 >"$build.build.log" 2>&1 || {
  tail -50 "$build.build.log"
  exit 1
}
echo "test-backend-ops built or up to date in $((SECONDS - start)) s"

log=$build/test-backend-ops.flash_attn_ext.log
# What the backend claims, over every case.
GGML_BACKEND_PATH=$backend "$build/bin/test-backend-ops" support -o FLASH_ATTN_EXT -b HWYATTN \
  >"$log.support" 2>&1 || true
cases=$(grep -c '^  FLASH_ATTN_EXT(' "$log.support" || true)
declined=$(grep '^  FLASH_ATTN_EXT(' "$log.support" | grep -c 'NOT SUPPORTED' || true)
claimed=$((cases - declined))
filter=()
if [[ ${CI:-} == true && -z ${GGML_TEST_ALL_TYPES:-} ]]; then
  filter=(-p '^(?!.*type_[KV]=(q4_0|q4_1|q5_0|q5_1|iq4_nl),)(?!.*,nb=75,)')
  echo "CI: testing every K/V type but q4_0, q4_1, q5_0, q5_1 and iq4_nl, batches but nb=75 (GGML_TEST_ALL_TYPES=1: all)"
fi
start=$SECONDS
status=0
GGML_BACKEND_PATH=$backend "$build/bin/test-backend-ops" test -o FLASH_ATTN_EXT -b HWYATTN \
  "${filter[@]}" >"$log" 2>&1 || status=$?
echo "test-backend-ops test -o FLASH_ATTN_EXT -b HWYATTN: exit $status in $((SECONDS - start)) s"

# The backend must have been loaded from GGML_BACKEND_PATH and tested.
if ! grep -q "Backend HWYATTN: " "$log"; then
  tail -30 "$log"
  echo "FAIL: test-backend-ops did not test the HWYATTN backend (not loaded?)" >&2
  exit 1
fi
total=$(grep -c '^  FLASH_ATTN_EXT(' "$log" || true)
unsupported=$(grep '^  FLASH_ATTN_EXT(' "$log" | grep -c 'not supported' || true)
failed=$(grep '^  FLASH_ATTN_EXT(' "$log" | grep -c 'FAIL' || true)
summary=$(grep -E '^ +[0-9]+/[0-9]+ tests passed' "$log" | tail -1 | tr -s ' ')
echo "FLASH_ATTN_EXT cases: $cases; claimed by HWYATTN: $claimed; declined: $declined;" \
     "tested: $((total - unsupported)) of the $total run; failed: $failed;" \
     "test-backend-ops says:$summary"
if [[ $failed -ne 0 || $status -ne 0 ]]; then
  grep '^  FLASH_ATTN_EXT(' "$log" | grep 'FAIL' | head -20
  echo "FAIL: cases failed (full log: $log)" >&2
  exit 1
fi
if [[ $((total - unsupported)) -lt 1 ]]; then
  echo "FAIL: no case was tested" >&2
  exit 1
fi
if [[ $claimed -lt $min_claimed ]]; then
  echo "FAIL: the backend claims $claimed cases, fewer than the $min_claimed it must" >&2
  exit 1
fi

# What test-backend-ops does not check (status_test.cc): an hwyattn error in
# graph_compute is a ggml status with hwyattn's message, a declined layout a
# supports_op false. Linked against the same ggml build.
libdir=$(dirname "$(find "$build" -name 'libggml-base.so' -print -quit)")
"${CXX:-c++}" -std=c++17 -O1 -I"$src/include" "$(dirname "$0")/status_test.cc" -L"$libdir" -lggml \
  -lggml-base -Wl,-rpath,"$libdir" -o "$build/hwyattn_status_test"
GGML_BACKEND_PATH=$backend "$build/hwyattn_status_test"

# ggml's block formats: hwyattn's writes against ggml's reference quantizers.
"${CXX:-c++}" -std=c++17 -O1 -I"$src/include" -I"$(dirname "$0")/../include" \
  "$(dirname "$0")/quants_test.cc" -L"$libdir" -lggml-base "$libhwyattn" \
  -Wl,-rpath,"$libdir" -Wl,-rpath,"$(dirname "$libhwyattn")" -o "$build/hwyattn_quants_test"
"$build/hwyattn_quants_test"
