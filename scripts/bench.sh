#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/bench.sh: build hwyattn in Release and run the attention benchmarks
# (BENCH.md rows at 1 and 2 threads, with this machine's FMA peak and read
# bandwidth measured in the same run), then write
#   bench/results/latest.json   Google Benchmark JSON (median of 5 repetitions)
#   bench/results/table.md      the Markdown table
#   bench/results/attention.svg the chart
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/bench.sh [extra bench_attention flags, e.g. --benchmark_filter=P1]
# Environment:
#   BUILD_DIR             build directory (default: build, relative to the repo root)
#   HWYATTN_BENCH_BW_MIB  bandwidth buffer size in MiB (default 1024)
#   JOBS                  parallel build jobs (default: nproc)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
install_missing_packages bench.sh

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_BENCH=ON
cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_attention

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
out=bench/results/latest.json
# Written to a temporary name first, so an interrupted run keeps the last good JSON.
"$BUILD_DIR/bench/bench_attention" \
  --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out.tmp" \
  --benchmark_out_format=json \
  "$@"
mv "$out.tmp" "$out"

python3 bench/report.py "$out" --out-dir bench/results
