#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times Debian's PyTorch (python3-torch, 1.13) on bench_attention's rows.

    /usr/bin/python3 bench/compare/torch_rows.py --rows-from bench/results/latest.json --out OUT.json
        [--repetitions 5] [--min-time 0.3] [--threads 1,2]

The rows (and so any --benchmark_filter) come from bench_attention's JSON: the
labels carry each row's shape (bench/compare/rows.py). fp32; inputs in
[B, H, L, D] as for hwyattn. torch 1.13 has no public scaled_dot_product_attention
(it came in 2.0), so each row takes the best path 1.13 offers:

  attention rows   S = baddbmm(mask, Q, K^T, alpha=1/sqrt(D)) (bmm without a mask),
                   P = softmax(S, -1), O = bmm(P, V), on [B*H, L, D] views; causal
                   and windowed rows add a precomputed -inf mask (the full square is
                   computed; credited with the visible half's FLOPs as hwyattn is).
                   GQA rows without a mask (D1) put the query heads of a K/V head
                   into one matrix of group*Lq rows, so K and V are read in place,
                   never repeated; a masked GQA row would repeat K/V heads
                   (repeat_interleave inside the timed call).
  MHA rows (M1)    nn.MultiheadAttention(d_model, heads, batch_first=True) in eval
                   mode under inference_mode: its fast path,
                   torch._native_multi_head_attention (fused QKV projection, bmm,
                   softmax, bmm, output projection).

torch's matmuls go to the BLAS behind Debian's libblas.so.3 alternative
(OpenBLAS when libopenblas0-openmp is installed, which bench.sh --compare
does; the reference BLAS otherwise: recorded in the context as "blas").
Threads: torch.set_num_threads(n) (OpenMP, which OpenBLAS's openmp variant follows).

Timing: every (row, threads) pair runs --repetitions repetitions, all pairs'
repetitions in one random order (as Google Benchmark's random interleaving);
a repetition is one untimed call, then calls until --min-time seconds have
passed; its time is the mean per call; the median over repetitions is
reported. Each row's output is checked once against a float64 numpy reference
on three query rows (rows.py); a row that disagrees (> 1e-4 relative) is
reported as an error. Output: Google-Benchmark-like JSON, entries
BM_Compare/torch/<id>/threads:<n>, for bench/report.py.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

TOLERANCE = 1e-4


def debian_version(package):
    """The installed Debian package's version (python3-torch's 1.13.1+dfsg-4 reports itself as 1.13.0a0), or ''."""
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return ""


def blas_library():
    """The BLAS that this process loaded (from /proc/self/maps), or '?'."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    except OSError:
        return "?"
    real = sorted({os.path.realpath(p) for p in paths})
    return ", ".join(real) if real else "?"


class AttentionRow:
    """bmm + softmax + bmm on [B*H, L, D] views."""

    def __init__(self, row, inp):
        self.row = row
        self.q = torch.from_numpy(inp["q"])
        self.k = torch.from_numpy(inp["k"])
        self.v = torch.from_numpy(inp["v"])
        self.scale = 1.0 / row.D ** 0.5
        self.group = row.Hq // row.Hkv
        self.mask = None
        if row.causal or row.window:
            i = torch.arange(row.Lq).unsqueeze(1)
            j = torch.arange(row.Lk).unsqueeze(0)
            visible = j <= i if row.causal else torch.ones(row.Lq, row.Lk, dtype=torch.bool)
            if row.window:
                visible &= j > i - row.window
            self.mask = torch.zeros(row.Lq, row.Lk).masked_fill(~visible, float("-inf"))
        r = row
        self.grouped = self.group > 1 and self.mask is None
        if self.grouped:
            # Hq = Hkv * group, heads ordered [kv head][group]: the group's query rows share K and V.
            self.path = ("bmm + softmax + bmm, the %d query heads of each K/V head as one %d-row matrix "
                         "(K/V read in place)" % (self.group, self.group * r.Lq))
        elif self.group > 1:
            self.path = "bmm + softmax + bmm, K/V heads repeated %dx (repeat_interleave, timed)" % self.group
        else:
            self.path = "bmm + softmax + bmm"
        if self.mask is not None:
            self.path = self.path.replace("bmm +", "baddbmm(-inf mask) +", 1)

    def __call__(self):
        r = self.row
        if self.grouped:
            q = self.q.reshape(r.B * r.Hkv, self.group * r.Lq, r.D)
            k = self.k.reshape(r.B * r.Hkv, r.Lk, r.D)
            v = self.v.reshape(r.B * r.Hkv, r.Lk, r.D)
        else:
            k, v = self.k, self.v
            if self.group > 1:
                k = k.repeat_interleave(self.group, dim=1)
                v = v.repeat_interleave(self.group, dim=1)
            q = self.q.reshape(r.B * r.Hq, r.Lq, r.D)
            k = k.reshape(r.B * r.Hq, r.Lk, r.D)
            v = v.reshape(r.B * r.Hq, r.Lk, r.D)
        kt = k.transpose(1, 2)
        if self.mask is None:
            s = torch.bmm(q, kt).mul_(self.scale)
        else:
            s = torch.baddbmm(self.mask, q, kt, alpha=self.scale)
        p = torch.softmax(s, dim=-1)
        return torch.bmm(p, v).reshape(r.B, r.Hq, r.Lq, r.D)

    def rows_of(self, out):
        return {(b, i): out[b, :, i, :].numpy() for b, i in self.row.check_points()}


class MhaRow:
    """nn.MultiheadAttention's fast path (torch._native_multi_head_attention)."""

    def __init__(self, row, inp):
        self.row = row
        e = row.d_model
        self.module = torch.nn.MultiheadAttention(e, row.Hq, bias=True, batch_first=True).eval()
        with torch.no_grad():
            self.module.in_proj_weight.copy_(torch.from_numpy(inp["in_proj_weight"]))
            self.module.in_proj_bias.copy_(torch.from_numpy(inp["in_proj_bias"]))
            self.module.out_proj.weight.copy_(torch.from_numpy(inp["out_proj_weight"]))
            self.module.out_proj.bias.copy_(torch.from_numpy(inp["out_proj_bias"]))
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.x = torch.from_numpy(inp["x"])
        if row.Hq % 2:
            raise ValueError("row %s: nn.MultiheadAttention's fast path needs an even number of heads" % row.id)
        self.path = ("nn.MultiheadAttention(batch_first=True).eval() under inference_mode: "
                     "torch._native_multi_head_attention")

    def __call__(self):
        return self.module(self.x, self.x, self.x, need_weights=False)[0]

    def rows_of(self, out):
        return {(b, i): out[b, i, :].numpy() for b, i in self.row.check_points()}


def time_repetition(fn, min_time):
    fn()  # untimed: the inputs warm, as for hwyattn's rows
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows-from", required=True, help="bench_attention's JSON (the rows and their shapes)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per repetition")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rows, skipped, hw_context = rowlib.rows_from_json(args.rows_from)
    for rid, reason in skipped.items():
        print("torch_rows.py: %s left out: %s" % (rid, reason), file=sys.stderr)
    if not rows:
        print("torch_rows.py: no BM_Attention rows with labels in %s" % args.rows_from, file=sys.stderr)
        return 1
    threads = [int(t) for t in args.threads.split(",")]

    torch.set_grad_enabled(False)
    runners, errors = {}, {}
    with torch.inference_mode():
        for row in rows:
            inp = row.inputs()
            runner = MhaRow(row, inp) if row.d_model else AttentionRow(row, inp)
            torch.set_num_threads(max(threads))
            err = rowlib.check_error(row, runner.rows_of(runner()), row.reference(inp))
            runner.check = err
            if not err <= TOLERANCE:
                errors[row.id] = "output differs from the float64 reference: max|err|/max|ref| %.3g" % err
            runners[row.id] = runner
            print("torch_rows.py: %s: %s (checked: %.2g)" % (row.id, runner.path, err), file=sys.stderr)

        order = [(row, t) for row in rows for t in threads if row.id not in errors] * args.repetitions
        random.Random(args.seed).shuffle(order)
        times = {}
        for row, t in order:
            torch.set_num_threads(t)
            times.setdefault((row.id, t), []).append(time_repetition(runners[row.id], args.min_time))

    benchmarks = []
    for row in rows:
        for t in threads:
            runner = runners[row.id]
            extra = {"path": runner.path, "check_rel_err": runner.check}
            if row.id in errors:
                name = "BM_Compare/torch/%s/threads:%d" % (row.id, t)
                benchmarks.append({"name": name, "run_name": name, "run_type": "iteration", "label": row.label,
                                   "error_occurred": True, "error_message": errors[row.id]})
                continue
            benchmarks.append(rowlib.benchmark_entry("torch", row, t, times[(row.id, t)], extra))
    context = {
        "library": "torch",
        # report.py shows these results only beside the hwyattn run they were measured with.
        "hwyattn_run_date": hw_context.get("date", ""),
        "skipped_rows": skipped,
        "library_version": torch.__version__,
        "debian_package_version": debian_version("python3-torch"),
        "blas": blas_library(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability()
        if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability") else "?",
        "repetitions": str(args.repetitions),
        "min_time": str(args.min_time),
        "random_interleaving": "true",
        "numpy_version": np.__version__,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"context": context, "benchmarks": benchmarks}, f, indent=2)
        f.write("\n")
    return 0  # errors are in the JSON (report.py shows them)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
