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
#   bench/results/torch.json        PyTorch on the same rows (bench/compare/torch_rows.py)
#   bench/results/onnxruntime.json  ONNX Runtime on the same rows (bench/compare/ort_rows.py)
#   bench/results/openvino.json     OpenVINO on the same rows (bench/compare/openvino_rows.py)
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
#   scripts/bench.sh [--compare | --compare-only] [extra bench_attention flags, e.g. --benchmark_filter=P1]
# --compare: right after hwyattn's attention rows, time PyTorch, ONNX Runtime and
# OpenVINO, each in its own process, on the rows that ran, in the same run. They
# come from PyPI at the exact versions below, into the virtual environment
# $HWYATTN_CACHE/venv-compare (default ~/.cache/hwyattn/venv-compare), made on
# the first --compare (torch's Linux wheel is the CUDA build: about 6 GB with
# its nvidia-* packages, downloaded once; it runs on the CPU), never in the
# repository. A library that cannot be installed or imported is left out with
# a warning. Each prints its progress (repetitions done / total, time left).
# About 10 more minutes (estimated) on the reference machine. Needs the
# "attention" benchmark in BENCH_ONLY.
# --compare-only: no build and no hwyattn run: the other libraries on the rows
# of the existing bench/results/latest.json, then the report.
# Environment:
#   BUILD_DIR             build directory (default: build, relative to the repo root)
#   HWYATTN_BENCH_BW_MIB  bandwidth buffer size in MiB (default 1024)
#   JOBS                  parallel build jobs (default: nproc)
#   REPETITIONS           repetitions per benchmark (default 5)
#   BENCH_ONLY            space-separated subset of "attention matmul composition tiles"
#                         to run (default: all three); the report uses the JSON
#                         files present
#   WAIT_IDLE             seconds to wait for idle CPUs before each benchmark (default 30)
#   COMPARE_MIN_TIME      --compare: seconds per repetition of another library's row (default 0.3)
#   HWYATTN_CACHE         the cache holding venv-compare (default ${XDG_CACHE_HOME:-~/.cache}/hwyattn)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
REPETITIONS=${REPETITIONS:-5}
BENCH_ONLY=${BENCH_ONLY:-attention matmul composition tiles}
WAIT_IDLE=${WAIT_IDLE:-30}
COMPARE_MIN_TIME=${COMPARE_MIN_TIME:-0.3}
HWYATTN_CACHE=${HWYATTN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwyattn}
COMPARE_VENV=$HWYATTN_CACHE/venv-compare
# --compare's libraries, exact versions from PyPI (bench/README.md, "Comparing
# with other libraries"): per library, the pip requirements its script needs.
# numpy: the newest for Python 3.11; onnx writes ONNX Runtime's models.
COMPARE_NUMPY=(numpy==2.4.6)
COMPARE_TORCH=(torch==2.15.0)
COMPARE_ONNXRUNTIME=(onnxruntime==1.31.1 onnx==1.23.2)
COMPARE_OPENVINO=(openvino==2026.4.1)
COMPARE=0
COMPARE_ONLY=0
bench_args=()
for arg in "$@"; do
  case $arg in
    --compare) COMPARE=1 ;;
    --compare-only) COMPARE=1; COMPARE_ONLY=1 ;;
    *) bench_args+=("$arg") ;;
  esac
done
set -- ${bench_args[@]+"${bench_args[@]}"}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
install_missing_packages bench.sh
if ((!COMPARE_ONLY)); then
  # Benchmark-only packages, not in deps.sh's list (which the tests use): oneDNN
  # for bench_matmul's comparison. Optional: without it (no root, no network)
  # bench_matmul builds and runs the hwyattn rows only.
  HWYATTN_BENCH_PACKAGES=(libdnnl-dev)
  ( HWYATTN_PACKAGES=("${HWYATTN_BENCH_PACKAGES[@]}"); install_missing_packages bench.sh ) ||
    echo "bench.sh: warning: could not install ${HWYATTN_BENCH_PACKAGES[*]}; bench_matmul runs without oneDNN" >&2

  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_BENCH=ON
  cmake --build "$BUILD_DIR" -j"$JOBS" --target bench_attention bench_matmul bench_composition bench_tiles
fi

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

# compare_venv: makes $COMPARE_VENV (python3 -m venv) when missing and installs
# into it, from PyPI, the pinned requirements of each library not yet there at
# its version; prints the libraries that are ready ("torch onnxruntime openvino").
compare_venv() {
  local py=$COMPARE_VENV/bin/python
  if [[ ! -x $py ]]; then
    echo "bench.sh: compare: making the virtual environment $COMPARE_VENV" >&2
    mkdir -p "$HWYATTN_CACHE"
    python3 -m venv "$COMPARE_VENV" >&2 || {
      echo "bench.sh: warning: python3 -m venv $COMPARE_VENV failed (python3-venv?); no other libraries" >&2
      rm -rf "$COMPARE_VENV"
      return 0
    }
  fi
  # pip_ready REQUIREMENT...: every name==version installed (importlib.metadata), else pip install them.
  pip_ready() {
    "$py" - "$@" <<'PY' 2>/dev/null && return 0
import sys
from importlib import metadata
for req in sys.argv[1:]:
    name, version = req.split("==")
    if metadata.version(name) != version:
        sys.exit(1)
PY
    echo "bench.sh: compare: pip install $* (into $COMPARE_VENV)" >&2
    "$py" -m pip install --disable-pip-version-check --progress-bar off "$@" >&2
  }
  pip_ready "${COMPARE_NUMPY[@]}" || {
    echo "bench.sh: warning: could not install ${COMPARE_NUMPY[*]}; no other libraries" >&2
    return 0
  }
  local lib module reqs ready=()
  for lib in torch onnxruntime openvino; do
    case $lib in
      torch) module=torch; reqs=("${COMPARE_TORCH[@]}") ;;
      onnxruntime) module="onnxruntime, onnx"; reqs=("${COMPARE_ONNXRUNTIME[@]}") ;;
      openvino) module=openvino; reqs=("${COMPARE_OPENVINO[@]}") ;;
    esac
    if ! pip_ready "${reqs[@]}"; then
      echo "bench.sh: warning: could not install ${reqs[*]}; $lib left out" >&2
    elif ! "$py" -c "import numpy, $module" >/dev/null 2>&1; then
      echo "bench.sh: warning: $py cannot import $module; $lib left out" >&2
    else
      ready+=("$lib")
    fi
  done
  echo "${ready[*]}"
}

# compare: PyTorch, ONNX Runtime and OpenVINO on the rows of
# bench/results/latest.json (its labels carry the shapes; a --benchmark_filter
# applies to them too), right after hwyattn's rows, each in its own process.
# Each is optional: a library that cannot run is left out with a warning, and
# hwyattn's results stand.
compare() {
  [[ " $BENCH_ONLY " == *" attention "* ]] || {
    echo "bench.sh: warning: --compare needs the attention benchmark in BENCH_ONLY; skipped" >&2
    return 0
  }
  local lib script ready k=0
  rm -f bench/results/torch.json bench/results/onnxruntime.json bench/results/openvino.json
  ready=$(compare_venv)
  [[ -n $ready ]] || return 0
  for lib in $ready; do
    k=$((k + 1))
    case $lib in
      torch) script=torch_rows.py ;;
      onnxruntime) script=ort_rows.py ;;
      openvino) script=openvino_rows.py ;;
    esac
    echo "bench.sh: compare $k/$(wc -w <<<"$ready"): $lib ($(date +%T))" >&2
    python3 bench/run_bench.py --json "bench/results/$lib.json.tmp" --wait-idle "$WAIT_IDLE" -- \
      "$COMPARE_VENV/bin/python" "bench/compare/$script" --rows-from bench/results/latest.json \
      --out "bench/results/$lib.json.tmp" --repetitions "$REPETITIONS" --min-time "$COMPARE_MIN_TIME" &&
      mv "bench/results/$lib.json.tmp" "bench/results/$lib.json" ||
      echo "bench.sh: warning: bench/compare/$script failed; $lib left out" >&2
  done
}

if ((COMPARE_ONLY)); then
  [[ -f bench/results/latest.json ]] || { echo "bench.sh: --compare-only needs bench/results/latest.json" >&2; exit 1; }
  compare
  report_py=python3
  [[ -x /usr/bin/python3 ]] && report_py=/usr/bin/python3
  "$report_py" bench/report.py bench/results/latest.json --out-dir bench/results
  exit 0
fi

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
