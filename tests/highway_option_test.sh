#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# -DHWYATTN_HIGHWAY's bad input (cmake/highway.cmake): each path that is not
# a usable Highway must stop CMake's configure step with a message naming
# HWYATTN_HIGHWAY and the reason. Usage: highway_option_test.sh <source dir>
set -euo pipefail
src=${1:?source directory}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A Highway-shaped tree older than the code needs (Highway 0.9 kept its
# version in hwy/highway.h, as 1.0.x does).
mkdir -p "$work/old/hwy" "$work/payload"
: >"$work/old/CMakeLists.txt"
: >"$work/old/hwy/targets.cc"
printf '#define HWY_MAJOR 0\n#define HWY_MINOR 9\n#define HWY_PATCH 0\n' >"$work/old/hwy/highway.h"
echo "not an archive" >"$work/notes.txt"
echo "no Highway in here" >"$work/payload/README"
tar -czf "$work/empty.tar.gz" -C "$work" payload

fails=0
expect() {  # expect <path> <substring of the message>
  local out
  if out=$(cmake -S "$src" -B "$work/build" -DHWYATTN_BUILD_TESTS=OFF -DHWYATTN_BUILD_BENCH=OFF \
             -DHWYATTN_HIGHWAY="$1" 2>&1); then
    echo "FAIL: HWYATTN_HIGHWAY=$1 configured" >&2
    fails=$((fails + 1))
  elif ! tr -s ' \n' '  ' <<<"$out" | grep -qF -- "$2"; then  # CMake wraps its messages
    echo "FAIL: HWYATTN_HIGHWAY=$1: no \"$2\" in CMake's output:" >&2
    echo "$out" | tail -20 >&2
    fails=$((fails + 1))
  else
    echo "ok: HWYATTN_HIGHWAY=$1: $2"
  fi
  rm -rf "$work/build"
}
expect "$work/missing" "HWYATTN_HIGHWAY=$work/missing: no such file or directory"
expect "$work/payload" "HWYATTN_HIGHWAY=$work/payload is not a Highway source tree"
expect "$work/notes.txt" "HWYATTN_HIGHWAY=$work/notes.txt is neither a directory nor an archive"
expect "$work/empty.tar.gz" "HWYATTN_HIGHWAY=$work/empty.tar.gz: the archive holds no Highway source tree"
expect "$work/old" "HWYATTN_HIGHWAY=$work/old is Highway 0.9.0; hwyattn needs >= 1.0.3"
exit $((fails > 0))
