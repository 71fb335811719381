#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/bench.sh: build hwyattn in Release and run the benchmarks, each
# measuring this machine's FMA peak in the same run, then write
#   bench/results/latest.json       bench_attention: the rows of bench/README.md at 1 and 2 threads,
#                                   with the peak and the read bandwidth
#   bench/results/matmul.json       bench_matmul: the packed matmul against oneDNN's sgemm
#   bench/results/composition.json  bench_composition: fused against Q K^T + softmax + P V
#   bench/results/tiles.json        bench_tiles: the bf16 register tiles alone (1 thread)
#   bench/results/table.md          the Markdown tables (bench/report.py)
#   bench/results/attention.{svg,png}  the attention rows against the machine's limits
#   bench/results/matmul.{svg,png}  the matmul chart (both drawn by bench/charts.py, matplotlib)
# With --compare, also (bench/README.md, "Comparing with other libraries"):
#   bench/results/torch.json        Debian's PyTorch on the same rows (bench/compare/torch_rows.py)
#   bench/results/onnxruntime.json  ONNX Runtime from npm on the same rows (bench/compare/ort_rows.mjs)
#   bench/results/compare.{svg,png} hwyattn beside them, with a section in table.md
# Each benchmark: median of 5 repetitions, interleaved at random (Google
# Benchmark's --benchmark_enable_random_interleaving): a row's repetitions
# are spread over the whole run, so a minute of load from other processes
# moves every row's median a little instead of a few rows' a lot, and the
# two sides of each comparison (hwyattn and oneDNN, fused and composed)
# alternate in time. About 3-4 minutes on the 2-core reference machine once built.
# Progress on stderr: a line per row as its results arrive ("attention: 12/56
# BM_Attention/P1/threads:1, 2m05s"), a count every minute without one; under
# the interleaving most rows finish near the end of their binary's run.
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing,
# plus libdnnl-dev, the oneDNN that bench_matmul compares with):
#   scripts/bench.sh [--compare] [extra bench_attention flags, e.g. --benchmark_filter=P1]
# --compare: right after hwyattn's attention rows, time PyTorch (Debian's
# python3-torch, with libopenblas0-openmp as its BLAS) and ONNX Runtime (npm's
# onnxruntime-node, installed under $BUILD_DIR/compare, never in the
# repository) on the rows that ran, in the same run; about 3-5 more minutes (estimated) on
# the reference machine, plus the first npm download. Needs the "attention"
# benchmark in BENCH_ONLY.
# Environment:
#   BUILD_DIR             build directory (default: build, relative to the repo root)
#   HWYATTN_BENCH_BW_MIB  bandwidth buffer size in MiB (default 1024)
#   JOBS                  parallel build jobs (default: nproc)
#   REPETITIONS           repetitions per benchmark (default 5)
#   BENCH_ONLY            space-separated subset of "attention matmul composition tiles"
#                         to run (default: all three); the report uses the JSON
#                         files present
#   WAIT_IDLE             seconds to wait for idle CPUs before each benchmark (default 30)
#   ORT_NODE_VERSION      --compare: the onnxruntime-node version from npm (default 1.30.0)
#   COMPARE_MIN_TIME      --compare: seconds per repetition of a competitor's row (default 0.3)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
REPETITIONS=${REPETITIONS:-5}
BENCH_ONLY=${BENCH_ONLY:-attention matmul composition tiles}
WAIT_IDLE=${WAIT_IDLE:-30}
ORT_NODE_VERSION=${ORT_NODE_VERSION:-1.30.0}
COMPARE_MIN_TIME=${COMPARE_MIN_TIME:-0.3}
COMPARE=0
bench_args=()
for arg in "$@"; do
  if [[ $arg == --compare ]]; then COMPARE=1; else bench_args+=("$arg"); fi
done
set -- ${bench_args[@]+"${bench_args[@]}"}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
install_missing_packages bench.sh
# Benchmark-only packages, not in deps.sh's list (which the tests use): oneDNN
# for bench_matmul's comparison. Optional: without it (no root, no network)
# bench_matmul builds and runs the hwyattn rows only.
HWYATTN_BENCH_PACKAGES=(libdnnl-dev)
( HWYATTN_PACKAGES=("${HWYATTN_BENCH_PACKAGES[@]}"); install_missing_packages bench.sh ) ||
  echo "bench.sh: warning: could not install ${HWYATTN_BENCH_PACKAGES[*]}; bench_matmul runs without oneDNN" >&2

# --compare's competitors, from Debian and npm (optional: what cannot be
# installed is left out of the comparison with a warning).
if ((COMPARE)); then
  # OpenBLAS (the OpenMP build, which follows torch.set_num_threads) becomes
  # libblas.so.3, the BLAS of Debian's torch; without it torch's matmuls run on
  # the reference BLAS.
  HWYATTN_COMPARE_PACKAGES=(python3-torch python3-onnx libopenblas0-openmp)
  command -v node >/dev/null 2>&1 || HWYATTN_COMPARE_PACKAGES+=(nodejs)
  command -v npm >/dev/null 2>&1 || HWYATTN_COMPARE_PACKAGES+=(npm)
  ( HWYATTN_PACKAGES=("${HWYATTN_COMPARE_PACKAGES[@]}"); install_missing_packages bench.sh ) ||
    echo "bench.sh: warning: could not install ${HWYATTN_COMPARE_PACKAGES[*]}; --compare times what is there" >&2
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_BENCH=ON
cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_attention bench_matmul bench_composition bench_tiles

# The 2-thread figures need both cores: warn if something else is using them
# (CPU idle time over one second, from /proc/stat).
if [[ -r /proc/stat ]]; then
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
  sleep 1
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  total=$(( (b1+b2+b3+b4+b5+b6+b7+b8) - (a1+a2+a3+a4+a5+a6+a7+a8) ))
  idle=$(( (b4+b5) - (a4+a5) ))
  if (( total > 0 && 100 * idle / total < 90 )); then
    echo "bench.sh: warning: the CPUs are only $((100 * idle / total))% idle; other processes" \
         "compete for the cores, so the 2-thread figures may be low (see the peak check in table.md)" >&2
  fi
fi

mkdir -p bench/results
# run <name> <binary> <json> [flags...]: each JSON is written to a temporary
# name first, so an interrupted run keeps the last good one.
run() {
  local name=$1 binary=$2 out=$3
  shift 3
  [[ " $BENCH_ONLY " == *" $name "* ]] || return 0
  echo "bench.sh: $name ($(date +%T))" >&2
  # run_bench.py waits (up to WAIT_IDLE s) for idle CPUs, then records in the
  # JSON how much CPU other processes took during the run (report.py warns);
  # meanwhile it prints to stderr a line per row as its results arrive (k/n,
  # the row, the time elapsed; the last run's time from the previous JSON).
  python3 bench/run_bench.py --json "$out.tmp" --wait-idle "$WAIT_IDLE" --progress "$name" --previous "$out" -- \
    "$BUILD_DIR/bench/$binary" \
    --benchmark_repetitions="$REPETITIONS" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$out.tmp" \
    --benchmark_out_format=json \
    "$@"
  mv "$out.tmp" "$out"
}

# compare: PyTorch and ONNX Runtime on the rows of bench/results/latest.json
# (its labels carry the shapes; a --benchmark_filter applies to them too),
# right after hwyattn's rows. Each is optional: a competitor that cannot run
# is left out with a warning, and hwyattn's results stand.
compare() {
  [[ " $BENCH_ONLY " == *" attention "* ]] || {
    echo "bench.sh: warning: --compare needs the attention benchmark in BENCH_ONLY; skipped" >&2
    return 0
  }
  local py=python3 compare_dir="$BUILD_DIR/compare"
  [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3  # Debian's, with its numpy, torch and onnx
  rm -f bench/results/torch.json bench/results/onnxruntime.json
  echo "bench.sh: compare: PyTorch ($(date +%T))" >&2
  if "$py" -c "import numpy, torch" 2>/dev/null; then
    python3 bench/run_bench.py --json bench/results/torch.json.tmp --wait-idle "$WAIT_IDLE" -- \
      "$py" bench/compare/torch_rows.py --rows-from bench/results/latest.json \
      --out bench/results/torch.json.tmp --repetitions "$REPETITIONS" --min-time "$COMPARE_MIN_TIME" &&
      mv bench/results/torch.json.tmp bench/results/torch.json ||
      echo "bench.sh: warning: bench/compare/torch_rows.py failed; PyTorch left out" >&2
  else
    echo "bench.sh: warning: $py cannot import numpy and torch (python3-torch); PyTorch left out" >&2
  fi
  echo "bench.sh: compare: ONNX Runtime ($(date +%T))" >&2
  if ! "$py" -c "import numpy, onnx" 2>/dev/null || ! command -v node >/dev/null 2>&1; then
    echo "bench.sh: warning: no python3-onnx or no node; ONNX Runtime left out" >&2
    return 0
  fi
  # npm's onnxruntime-node carries the CPU build; --ignore-scripts skips its
  # postinstall, which would fetch the CUDA providers from outside npm.
  local have
  have=$(node -p "require('$(realpath -m "$compare_dir")/node_modules/onnxruntime-node/package.json').version" \
         2>/dev/null || true)
  if [[ $have != "$ORT_NODE_VERSION" ]]; then
    mkdir -p "$compare_dir"
    npm install --prefix "$compare_dir" --ignore-scripts --no-save --no-package-lock --no-audit --no-fund \
      "onnxruntime-node@$ORT_NODE_VERSION" >&2 || {
      echo "bench.sh: warning: npm install onnxruntime-node@$ORT_NODE_VERSION failed; ONNX Runtime left out" >&2
      return 0
    }
  fi
  rm -rf "$compare_dir/onnx"
  if "$py" bench/compare/make_onnx.py --rows-from bench/results/latest.json --out-dir "$compare_dir/onnx" &&
     python3 bench/run_bench.py --json bench/results/onnxruntime.json.tmp --wait-idle "$WAIT_IDLE" -- \
       node bench/compare/ort_rows.mjs --modules "$compare_dir/node_modules" \
       --manifest "$compare_dir/onnx/manifest.json" --out bench/results/onnxruntime.json.tmp \
       --repetitions "$REPETITIONS" --min-time "$COMPARE_MIN_TIME"; then
    mv bench/results/onnxruntime.json.tmp bench/results/onnxruntime.json
  else
    echo "bench.sh: warning: the ONNX Runtime comparison failed; left out" >&2
  fi
}

run attention bench_attention bench/results/latest.json --benchmark_enable_random_interleaving=true "$@"
if ((COMPARE)); then compare; fi
run matmul bench_matmul bench/results/matmul.json --benchmark_enable_random_interleaving=true
run composition bench_composition bench/results/composition.json --benchmark_enable_random_interleaving=true
run tiles bench_tiles bench/results/tiles.json --benchmark_enable_random_interleaving=true
echo "bench.sh: done ($(date +%T))" >&2

# Debian's python3, which has python3-matplotlib (deps.sh) for the charts;
# another python3 without it writes the tables only.
report_py=python3
[[ -x /usr/bin/python3 ]] && report_py=/usr/bin/python3
"$report_py" bench/report.py bench/results/latest.json --out-dir bench/results
