#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/bench.sh: build hwyattn in Release and run the benchmarks, each
# measuring this machine's FMA peak in the same run, then write
#   bench/results/latest.json       bench_attention: its rows (bench/README.md) at 1 and 2 threads,
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
#   bench/results/ggml.json         ggml's CPU flash attention on the same rows (bench/compare/ggml_rows.py)
#   bench/results/compare.{svg,png} hwyattn beside them, with a section in table.md
#
# Two sizes (bench/README.md, "How long a run takes"):
#   default  the attention rows of README.md's Performance table and those its
#            targets compare with (DEFAULT_ROWS below: 20 rows, 40 with the
#            thread counts), 3 repetitions; matmul, composition and tiles whole,
#            3 repetitions; 10 s of waiting for idle CPUs at most per binary.
#            About 8 minutes on the shared 2-core Zen 3 machine once built
#            (bench_attention 5.5), about 11 when other processes load it heavily.
#   --full   every row of bench_attention (90 with the thread counts), 5
#            repetitions, up to 30 s of waiting: about 28 minutes there (the
#            attention binary alone about 23).
# Each benchmark: the median of its repetitions, interleaved at random (Google
# Benchmark's --benchmark_enable_random_interleaving): a row's repetitions
# are spread over the whole run, so a minute of load from other processes
# moves every row's median a little instead of a few rows' a lot, and the
# two sides of each comparison (hwyattn and oneDNN, fused and composed)
# alternate in time.
# Progress on stderr, every 30 s per binary (bench/run_bench.py): the
# repetitions finished and the time left by the run's own repetitions so far
# ("attention: 37/120 repetitions done (40 rows x 3; 2 rows complete), 2m10s,
# about 5m20s left"); under the interleaving most rows complete near the end.
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing,
# plus libdnnl-dev, the oneDNN that bench_matmul compares with):
#   scripts/bench.sh [--full] [--compare | --compare-only] [--dry-run]
#                    [extra bench_attention flags, e.g. --benchmark_filter=P1]
# --full: every row and 5 repetitions (the published tables; see above).
# A --benchmark_filter of yours replaces the default's row selection (in either size).
# --dry-run: builds and runs nothing; prints, per binary, the rows it would run
# (from the existing binaries' --benchmark_list_tests) and the repetitions.
# --compare: right after hwyattn's attention rows, time PyTorch, ONNX Runtime,
# OpenVINO and ggml, each in its own process, on the rows that ran, in the same
# run. ggml is the pinned source of ../shared/third_party that the build
# unpacks (BUILD_DIR/third_party), built once per CPU model as shared libraries
# into $HWYATTN_CACHE (with ggml's defaults: -march=native, OpenMP; left out
# when the archive is not there). The others
# come from PyPI at the exact versions below, into the virtual environment
# $HWYATTN_CACHE/venv-compare (default ~/.cache/hwyattn/venv-compare), made on
# the first --compare (torch's Linux wheel is the CUDA build: about 6 GB with
# its nvidia-* packages, downloaded once; it runs on the CPU), never in the
# repository. A library that cannot be installed or imported is left out with
# a warning. Each prints its progress (repetitions done / total, time left).
# About 10 more minutes (estimated) on the reference machine with --full. Needs
# the "attention" benchmark in BENCH_ONLY.
# --compare-only: no build and no hwyattn run: the other libraries on the rows
# of the existing bench/results/latest.json, then the report.
# Environment:
#   BUILD_DIR             build directory (default: build, relative to the repo root)
#   HWYATTN_BENCH_BW_MIB  bandwidth buffer size in MiB (default 1024)
#   JOBS                  parallel build jobs (default: nproc)
#   REPETITIONS           repetitions per benchmark (default 3; 5 with --full)
#   BENCH_ONLY            space-separated subset of "attention matmul composition tiles"
#                         to run (default: all four); the report uses the JSON
#                         files present
#   WAIT_IDLE             seconds to wait for idle CPUs before each benchmark (default 10;
#                         30 with --full)
#   COMPARE_MIN_TIME      --compare: seconds per repetition of another library's row (default 0.3)
#   HWYATTN_CACHE         the cache holding venv-compare (default ${XDG_CACHE_HOME:-~/.cache}/hwyattn)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
BENCH_ONLY=${BENCH_ONLY:-attention matmul composition tiles}
COMPARE_MIN_TIME=${COMPARE_MIN_TIME:-0.3}
HWYATTN_CACHE=${HWYATTN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwyattn}
COMPARE_VENV=$HWYATTN_CACHE/venv-compare
# The default run's bench_attention rows (without --full): README.md's
# Performance table, plus the rows its targets are ratios of (V2 against
# V2chunk + V2decodes; P1b and M1b against P1 and M1 are both in it).
DEFAULT_ROWS=(P1 P2 P3 X1 M1 W1 P1b M1b D1 D2 D1cold D2cold D2hcold D2qcold D1qcold V1 V2 V2chunk V2decodes T1)
# --compare's libraries, exact versions from PyPI (bench/README.md, "Comparing
# with other libraries"): per library, the pip requirements its script needs.
# numpy: the newest for Python 3.11; onnx writes ONNX Runtime's models.
COMPARE_NUMPY=(numpy==2.4.6)
COMPARE_TORCH=(torch==2.15.0)
COMPARE_ONNXRUNTIME=(onnxruntime==1.31.1 onnx==1.23.2)
COMPARE_OPENVINO=(openvino==2026.4.1)
COMPARE=0
COMPARE_ONLY=0
FULL=0
DRY_RUN=0
USER_FILTER=0
bench_args=()
for arg in "$@"; do
  case $arg in
    --full) FULL=1 ;;
    --dry-run) DRY_RUN=1 ;;
    --compare) COMPARE=1 ;;
    --compare-only) COMPARE=1; COMPARE_ONLY=1 ;;
    --benchmark_filter=*) USER_FILTER=1; bench_args+=("$arg") ;;
    *) bench_args+=("$arg") ;;
  esac
done
set -- ${bench_args[@]+"${bench_args[@]}"}
if ((FULL)); then
  REPETITIONS=${REPETITIONS:-5}
  WAIT_IDLE=${WAIT_IDLE:-30}
else
  REPETITIONS=${REPETITIONS:-3}
  WAIT_IDLE=${WAIT_IDLE:-10}
fi
# bench_attention's row selection: every row with --full or a filter of yours,
# else DEFAULT_ROWS (an anchored regex: P1 does not select P1b or TP1/P1).
attention_filter=()
if ((!FULL && !USER_FILTER)); then
  attention_filter=("--benchmark_filter=^BM_Attention/($(IFS='|'; echo "${DEFAULT_ROWS[*]}"))/threads:")
fi

# dry_run: what each binary of BENCH_ONLY would run (its --benchmark_list_tests
# with the run's flags: nothing is measured), without installing or building.
dry_run() {
  local name binary flags rows
  echo "bench.sh: $( ((FULL)) && echo "--full" || echo "default"): $REPETITIONS repetitions," \
       "up to $WAIT_IDLE s of waiting for idle CPUs per binary; binaries in $BUILD_DIR/bench"
  for name in attention matmul composition tiles; do
    [[ " $BENCH_ONLY " == *" $name "* ]] || continue
    binary=$BUILD_DIR/bench/bench_$name
    flags=()
    [[ $name == attention ]] && flags=(${attention_filter[@]+"${attention_filter[@]}"} "$@")
    if [[ ! -x $binary ]]; then
      echo "$name: $binary is not built yet ${flags[*]:+(flags: ${flags[*]})}"
      continue
    fi
    rows=$("$binary" ${flags[@]+"${flags[@]}"} --benchmark_list_tests=true 2>/dev/null) || {
      echo "$name: $binary ${flags[*]} --benchmark_list_tests failed"
      continue
    }
    echo "$name: $(grep -c . <<<"$rows") rows x $REPETITIONS repetitions${flags[*]:+ (${flags[*]})}:"
    sed 's|/min_time:[^/]*||; s|/real_time$||; s|/manual_time$||' <<<"$rows" | paste -sd' ' | fold -s -w 110 |
      sed 's|^|  |; s| *$||'
  done
  ((COMPARE)) && echo "compare: PyTorch, ONNX Runtime, OpenVINO and ggml on the attention rows, $REPETITIONS repetitions"
  return 0
}
if ((DRY_RUN)); then
  dry_run "$@"
  exit 0
fi

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
  # meanwhile it prints to stderr every 30 s the repetitions finished and the
  # time left (Google Benchmark's --v=2 call log, which it adds and counts;
  # the previous run's time from the previous JSON).
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

# ggml_lib: prints the directory of libggml-base.so and libggml-cpu.so built
# from the pinned ggml that the hwyattn build unpacked ($BUILD_DIR/third_party,
# ggml/CMakeLists.txt), building them into $HWYATTN_CACHE the first time (one
# build per CPU model: -march=native code); prints nothing (with a warning)
# when there is no such source or the build fails.
ggml_lib() {
  local src cpu_key dir
  src=$(ls -d "$BUILD_DIR"/third_party/ggml-* 2>/dev/null | head -1)
  if [[ -z $src || ! -f $src/CMakeLists.txt ]]; then
    echo "bench.sh: warning: no ggml source in $BUILD_DIR/third_party (../shared/third_party/ggml-*.tar.gz" \
         "was not there at configure time); ggml left out" >&2
    return 0
  fi
  cpu_key=$(awk -F': ' '/^(cpu family|model)\t/ {printf "%s-", $2} /^model name/ {exit}' /proc/cpuinfo 2>/dev/null)
  dir=$HWYATTN_CACHE/$(basename "$src")-shared-$(uname -m)-${cpu_key%-}
  if [[ ! -f $dir/src/libggml-cpu.so ]]; then
    echo "bench.sh: compare: building ggml's CPU backend from $src into $dir" >&2
    { cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BUILD_TESTS=OFF \
        -DGGML_BUILD_EXAMPLES=OFF && cmake --build "$dir" -j"$JOBS" --target ggml-base ggml-cpu; } \
      >"$dir.log" 2>&1 || {
      echo "bench.sh: warning: building ggml failed ($dir.log); ggml left out" >&2
      return 0
    }
  fi
  echo "$dir/src"
}

# compare: PyTorch, ONNX Runtime, OpenVINO and ggml on the rows of
# bench/results/latest.json (its labels carry the shapes; a --benchmark_filter
# applies to them too), right after hwyattn's rows, each in its own process.
# Each is optional: a library that cannot run is left out with a warning, and
# hwyattn's results stand.
compare() {
  [[ " $BENCH_ONLY " == *" attention "* ]] || {
    echo "bench.sh: warning: --compare needs the attention benchmark in BENCH_ONLY; skipped" >&2
    return 0
  }
  local lib script ready k=0 ggml_dir args
  rm -f bench/results/torch.json bench/results/onnxruntime.json bench/results/openvino.json \
    bench/results/ggml.json
  ready=$(compare_venv)
  [[ -x $COMPARE_VENV/bin/python ]] || return 0  # numpy is needed by every script
  ggml_dir=$(ggml_lib)
  [[ -n $ggml_dir ]] && ready="$ready ggml"
  [[ -n ${ready// /} ]] || return 0
  for lib in $ready; do
    k=$((k + 1))
    args=()
    case $lib in
      torch) script=torch_rows.py ;;
      onnxruntime) script=ort_rows.py ;;
      openvino) script=openvino_rows.py ;;
      ggml) script=ggml_rows.py; args=(--ggml-lib "$ggml_dir") ;;
    esac
    echo "bench.sh: compare $k/$(wc -w <<<"$ready"): $lib ($(date +%T))" >&2
    python3 bench/run_bench.py --json "bench/results/$lib.json.tmp" --wait-idle "$WAIT_IDLE" -- \
      "$COMPARE_VENV/bin/python" "bench/compare/$script" ${args[@]+"${args[@]}"} \
      --rows-from bench/results/latest.json \
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

run attention bench_attention bench/results/latest.json --benchmark_enable_random_interleaving=true \
  ${attention_filter[@]+"${attention_filter[@]}"} "$@"
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
