#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Times hwyattn's ggml backend against ggml's CPU backend with ggml's own
# `test-backend-ops perf -o FLASH_ATTN_EXT`, on the perf cases PARAMS selects
# (by default the F32/F16/BF16 ones; the block-quantized ones with
# PARAMS='type_K=(q8_0|q4_0)'), with the same
# threads (test-backend-ops gives every backend hardware_concurrency threads).
# Each backend runs ROUNDS times, alternating, and each case keeps its best
# time (the least disturbed run on a shared machine). Prints a Markdown table:
# per case the two times, the ratio CPU / HWYATTN, and the geometric means.
#
# Usage: ggml/perf_vs_cpu.sh <test-backend-ops> <libggml-hwyattn.so> [rounds] [raw-log-dir]
# Environment: PARAMS, a test-backend-ops -p regex (default: type_K=(f16|f32|bf16)).
# The raw test-backend-ops lines stay in raw-log-dir (default: a temporary one, removed).
set -euo pipefail
tbo=${1:?path to test-backend-ops}
lib=${2:?path to libggml-hwyattn.so}
rounds=${3:-2}
params=${PARAMS:-type_K=(f16|f32|bf16)}
out=${4:-}
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
rm -f "$out/HWYATTN" "$out/CPU"

for r in $(seq 1 "$rounds"); do
  for be in HWYATTN CPU; do
    GGML_BACKEND_PATH=$lib "$tbo" perf -o FLASH_ATTN_EXT -b "$be" -p "$params" 2>&1 |
      sed -E 's/\x1b\[[0-9;]*m//g' | grep -E '^  FLASH_ATTN_EXT\(.*us/run' >>"$out/$be" || true
  done
done

python3 - "$out/HWYATTN" "$out/CPU" <<'EOF'
import math, re, sys

def best(path):
    times = {}
    for line in open(path):
        m = re.match(r"\s*FLASH_ATTN_EXT\((.*)\):.*?([0-9.]+) us/run - +([0-9.]+) ([GM])FLOP/run", line)
        if not m:
            continue
        case, us = m.group(1), float(m.group(2))
        times[case] = min(us, times.get(case, float("inf")))
        flops = float(m.group(3)) * (1e9 if m.group(4) == "G" else 1e6)
        times[case + "#flops"] = flops
    return times

hwy, cpu = best(sys.argv[1]), best(sys.argv[2])
rows, big = [], []
print("| case (hsk=hsv, nh, nr23, kv, nb, K/V) | CPU us/run | HWYATTN us/run | CPU GFLOP/s | HWYATTN GFLOP/s | speed-up |")
print("|---|---:|---:|---:|---:|---:|")
for case in cpu:
    if case.endswith("#flops") or case not in hwy:
        continue
    f = dict(kv.split("=", 1) for kv in re.split(r",(?=[A-Za-z_0-9]+=)", case))
    name = "%s, %s, %s, %s, %s, %s" % (f["hsk"], f["nh"], f["nr23"], f["kv"], f["nb"], f["type_K"])
    ratio = cpu[case] / hwy[case]
    flops = cpu[case + "#flops"]
    rows.append(ratio)
    if int(f["kv"]) >= 512:
        big.append(ratio)
    print("| %s | %.0f | %.0f | %.1f | %.1f | %.2fx |" % (name, cpu[case], hwy[case], flops / cpu[case] / 1e3,
                                                       flops / hwy[case] / 1e3, ratio))
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print()
print("Geometric mean speed-up: %.2fx over all %d cases, %.2fx over the %d with kv >= 512; slowest %.2fx."
      % (gm(rows), len(rows), gm(big), len(big), min(rows) if rows else float("nan")))
EOF
