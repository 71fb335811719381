#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/bench.sh: build hwyattn in Release and run the benchmarks, each
# measuring this machine's FMA peak in the same run, then write
#   bench/results/latest.json       bench_attention: the rows of bench/README.md at 1 and 2 threads,
#                                   with the peak and the read bandwidth
#   bench/results/matmul.json       bench_matmul: the packed matmul against oneDNN's sgemm
#   bench/results/composition.json  bench_composition: fused against Q K^T + softmax + P V
#   bench/results/table.md          the Markdown tables (bench/report.py)
#   bench/results/attention.svg     the attention chart
#   bench/results/matmul.svg        the matmul chart
# Each benchmark: median of 5 repetitions, interleaved at random (Google
# Benchmark's --benchmark_enable_random_interleaving): a row's repetitions
# are spread over the whole run, so a minute of load from other processes
# moves every row's median a little instead of a few rows' a lot, and the
# two sides of each comparison (hwyattn and oneDNN, fused and composed)
# alternate in time. About 3-4 minutes on the 2-core reference machine once built.
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing,
# plus libdnnl-dev, the oneDNN that bench_matmul compares with):
#   scripts/bench.sh [extra bench_attention flags, e.g. --benchmark_filter=P1]
# Environment:
#   BUILD_DIR             build directory (default: build, relative to the repo root)
#   HWYATTN_BENCH_BW_MIB  bandwidth buffer size in MiB (default 1024)
#   JOBS                  parallel build jobs (default: nproc)
#   REPETITIONS           repetitions per benchmark (default 5)
#   BENCH_ONLY            space-separated subset of "attention matmul composition"
#                         to run (default: all three); the report uses the JSON
#                         files present
#   WAIT_IDLE             seconds to wait for idle CPUs before each benchmark (default 30)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
REPETITIONS=${REPETITIONS:-5}
BENCH_ONLY=${BENCH_ONLY:-attention matmul composition}
WAIT_IDLE=${WAIT_IDLE:-30}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
install_missing_packages bench.sh
# Benchmark-only packages, not in deps.sh's list (which the tests use): oneDNN
# for bench_matmul's comparison. Optional: without it (no root, no network)
# bench_matmul builds and runs the hwyattn rows only.
HWYATTN_BENCH_PACKAGES=(libdnnl-dev)
( HWYATTN_PACKAGES=("${HWYATTN_BENCH_PACKAGES[@]}"); install_missing_packages bench.sh ) ||
  echo "bench.sh: warning: could not install ${HWYATTN_BENCH_PACKAGES[*]}; bench_matmul runs without oneDNN" >&2

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_BENCH=ON
cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_attention bench_matmul bench_composition

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
  # JSON how much CPU other processes took during the run (report.py warns).
  python3 bench/run_bench.py --json "$out.tmp" --wait-idle "$WAIT_IDLE" -- \
    "$BUILD_DIR/bench/$binary" \
    --benchmark_repetitions="$REPETITIONS" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$out.tmp" \
    --benchmark_out_format=json \
    "$@"
  mv "$out.tmp" "$out"
}

run attention bench_attention bench/results/latest.json --benchmark_enable_random_interleaving=true "$@"
run matmul bench_matmul bench/results/matmul.json --benchmark_enable_random_interleaving=true
run composition bench_composition bench/results/composition.json --benchmark_enable_random_interleaving=true
echo "bench.sh: done ($(date +%T))" >&2

python3 bench/report.py bench/results/latest.json --out-dir bench/results
