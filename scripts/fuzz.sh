#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/fuzz.sh: a long fuzzing campaign. Builds the libFuzzer targets
# with clang-14 under AddressSanitizer + UndefinedBehaviorSanitizer (as
# scripts/test.sh --sanitizers does), then runs every target in turn on all
# cores (one independent libFuzzer process per core), keeping its corpus
# between runs outside the repository, and prints the executions and the
# findings (crash files) of each target and in total.
#
#   fuzz_sdpa  hwyattn_sdpa, hwyattn_mha_forward, hwyattn_merge_states,
#              hwyattn_kv_cache_write, hwyattn_kv_attention
#   fuzz_mpi   hwyattn_mpi_sharded_sdpa, hwyattn_mpi_ring_sdpa,
#              hwyattn_mpi_ring_slice, on one rank (each process under
#              mpirun -np 1); built when CMake finds MPI
#
# Usage (from anywhere):
#   scripts/fuzz.sh                      # 1 hour per target
#   scripts/fuzz.sh --time 36000         # 10 hours per target
#   scripts/fuzz.sh --runs 10000000      # 10 million executions per target
#   scripts/fuzz.sh --targets fuzz_mpi --time 600
# Options (or the environment variable in brackets):
#   --time S      seconds per target, all processes together running S s
#                 [FUZZ_SECONDS, default 3600]
#   --runs N      executions per target instead of a time (split evenly
#                 over the processes) [FUZZ_RUNS]
#   --round S     in time mode, restart the processes every S seconds so
#                 that each reads the others' new inputs from the shared
#                 corpus [FUZZ_ROUND, default 900]
#   --jobs N      processes per target [FUZZ_JOBS, default: nproc]
#   --corpus DIR  where corpora and crash files are kept
#                 [FUZZ_CORPUS, default /var/tmp/hwyattn-fuzz-corpus]:
#                 DIR/<target>/ the corpus (seeded from tests/fuzz/corpus),
#                 DIR/<target>-findings/ crash-*, leak-*, timeout-*, oom-*
#                 files, DIR/logs/ each process's output
#   --targets "A B"  which targets [FUZZ_TARGETS, default: all built]
#   --build DIR   the build directory [FUZZ_BUILD_DIR, default build-fuzz]
#   --nice N      niceness of the fuzzers [FUZZ_NICE, default 10]
# Exits 1 if the run found anything (new files in a findings directory).
# Reproduce a finding: build-fuzz/tests/fuzz/<target> <file> (fuzz_mpi:
# under mpirun -np 1; as root Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, which this script sets).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-3600}
RUNS=${FUZZ_RUNS:-}
ROUND=${FUZZ_ROUND:-900}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
CORPUS=${FUZZ_CORPUS:-/var/tmp/hwyattn-fuzz-corpus}
TARGETS=${FUZZ_TARGETS:-}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
NICE=${FUZZ_NICE:-10}
while [[ $# -gt 0 ]]; do
  case $1 in
    --time) SECONDS_PER_TARGET=$2; RUNS=; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --round) ROUND=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --corpus) CORPUS=$2; shift 2 ;;
    --targets) TARGETS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --nice) NICE=$2; shift 2 ;;
    -h|--help) sed -n '3,45p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $CORPUS in
  "$PWD"|"$PWD"/*) echo "fuzz.sh: keep the corpus outside the repository ($CORPUS)" >&2; exit 2 ;;
esac

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
HWYATTN_PACKAGES+=("${HWYATTN_SANITIZER_PACKAGES[@]}")
install_missing_packages fuzz.sh

echo "fuzz.sh: building the fuzz targets in $BUILD (clang-14, ASan + UBSan)"
CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHWYATTN_BUILD_TESTS=OFF -DHWYATTN_BUILD_BENCH=OFF -DHWYATTN_BUILD_EXAMPLES=OFF \
  -DHWYATTN_SANITIZE=address,undefined -DHWYATTN_BUILD_FUZZ=ON >/dev/null
built=()
for t in fuzz_sdpa fuzz_mpi; do
  if cmake --build "$BUILD" -j"$JOBS" --target "$t" >"$BUILD/fuzz-build-$t.log" 2>&1; then
    built+=("$t")
  elif grep -q "No rule to make target\|unknown target" "$BUILD/fuzz-build-$t.log"; then
    echo "fuzz.sh: $t not in this build (fuzz_mpi needs MPI)"
  else
    cat "$BUILD/fuzz-build-$t.log" >&2
    exit 1
  fi
done
[[ -n $TARGETS ]] || TARGETS="${built[*]}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$CORPUS/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One process: prints its log's executed units at the end (0 if none).
run_one() {  # target, index, round, libFuzzer flags...
  local target=$1 index=$2 round=$3
  shift 3
  local log="$CORPUS/logs/$target.$round.$index.log"
  local cmd=("$BUILD/tests/fuzz/$target" "$@" -print_final_stats=1 -seed=$((RANDOM * 32768 + RANDOM + index))
             -artifact_prefix="$CORPUS/$target-findings/" "$CORPUS/$target")
  if [[ $target == fuzz_mpi ]]; then
    cmd=(mpirun -np 1 "${cmd[@]}")
  fi
  nice -n "$NICE" "${cmd[@]}" >"$log" 2>&1 || true
}

units_of() {  # log files... -> sum of stat::number_of_executed_units
  cat "$@" 2>/dev/null | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}'
}

total=0
found=0
report=()
for target in $TARGETS; do
  [[ -x $BUILD/tests/fuzz/$target ]] || { echo "fuzz.sh: no $BUILD/tests/fuzz/$target" >&2; exit 2; }
  mkdir -p "$CORPUS/$target" "$CORPUS/$target-findings"
  cp -n tests/fuzz/corpus/* "$CORPUS/$target"/ 2>/dev/null || true
  before=$(ls "$CORPUS/$target-findings" | wc -l)
  rm -f "$CORPUS/logs/$target".*.log
  start=$SECONDS
  if [[ -n $RUNS ]]; then
    echo "fuzz.sh: $target, $RUNS executions over $JOBS processes"
    per=$(((RUNS + JOBS - 1) / JOBS))
    for ((i = 0; i < JOBS; ++i)); do run_one "$target" "$i" 0 -runs="$per" & done
    wait
  else
    echo "fuzz.sh: $target for ${SECONDS_PER_TARGET}s on $JOBS processes (rounds of ${ROUND}s)"
    left=$SECONDS_PER_TARGET
    round=0
    while ((left > 0)); do
      slice=$((left < ROUND ? left : ROUND))
      for ((i = 0; i < JOBS; ++i)); do
        run_one "$target" "$i" "$round" -max_total_time="$slice" &
      done
      wait
      left=$((left - slice))
      round=$((round + 1))
    done
  fi
  elapsed=$((SECONDS - start))
  units=$(units_of "$CORPUS/logs/$target".*.log)
  after=$(ls "$CORPUS/$target-findings" | wc -l)
  corpus_size=$(ls "$CORPUS/$target" | wc -l)
  total=$((total + units))
  line="$target: $units executions in ${elapsed}s ($((units / (elapsed > 0 ? elapsed : 1))) exec/s"
  line+=" on $JOBS processes), corpus $corpus_size inputs, $((after - before)) new findings"
  report+=("$line")
  if ((after > before)); then
    found=1
    ls -t "$CORPUS/$target-findings" | head -n $((after - before)) | sed "s|^|  $CORPUS/$target-findings/|"
  fi
  # A process that stopped on a finding says why at the end of its log.
  grep -l "ERROR: libFuzzer\|ERROR: AddressSanitizer\|runtime error:\|fuzz: " \
    "$CORPUS/logs/$target".*.log 2>/dev/null | sed 's/^/  see /' || true
done

echo "fuzz.sh: summary"
for line in "${report[@]}"; do echo "  $line"; done
echo "  total: $total executions; corpora and findings in $CORPUS"
exit "$found"
