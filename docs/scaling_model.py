#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The N-machine speed model of docs/SCALING.md, and its plot (docs/scaling.svg, docs/scaling.png).

    /usr/bin/python3 docs/scaling_model.py [--core-gflops 95] [--cores 32]
        [--decode-us-per-key 0.3] [--out docs/scaling]

A rank is one machine of --cores cores, each computing attention at
--core-gflops (measured by bench/bench_mpi: a rank's compute_seconds for its
share of P3's flops); sharded decode reads the cache at --decode-us-per-key
per key of D1's shape on one core (bench_mpi's one-process row on one
thread), scaled by the cores up to --node-gbs of memory bandwidth. The
defaults are docs/SCALING.md's measurement (Zen 4, mpirun --bind-to none).
Networks: 25 and 100 Gb/s, with 5 and 20 us latency. Numpy; the plot is drawn
by bench/charts.py (matplotlib), as the benchmark charts are.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import charts as chartlib  # noqa: E402

NETWORKS = [  # (label, bytes per second, latency in seconds, colour)
    ("100 Gb/s, 5 us", 100e9 / 8, 5e-6, "#1f77b4"),
    ("100 Gb/s, 20 us", 100e9 / 8, 20e-6, "#17becf"),
    ("25 Gb/s, 5 us", 25e9 / 8, 5e-6, "#d62728"),
    ("25 Gb/s, 20 us", 25e9 / 8, 20e-6, "#ff9896"),
]


def log2ceil(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


def ring_time(L, N, rate, bw, lat, B=1, Hq=4, Hkv=4, D=128, Dv=128, elem=4, causal=True):
    """Seconds of hwyattn_mpi_ring_sdpa over N ranks (rate: flop/s per rank)."""
    flops = B * Hq * L * L * (D + Dv) * 2.0 * (0.5 if causal else 1.0)
    step = flops / (N * N * rate)                       # each rank's share, per step
    msg = lat + B * Hkv * (L / N) * (D + Dv) * elem / bw  # one K/V slice to the next rank
    collectives = 3 * log2ceil(N) * lat                  # agreement (2) + verdict
    return (N - 1) * np.maximum(step, msg) + step + collectives


def sharded_time(Lk, N, per_key, bw, lat, B=1, Hq=32, Dv=128, Lq=1):
    """Seconds of hwyattn_mpi_sharded_sdpa over N ranks (per_key: s per key, one rank)."""
    state = B * Hq * Lq * (Dv + 1) * 4 + 4              # the allreduce's block
    allreduce = 2 * log2ceil(N) * (lat + state / bw)
    agree = 2 * log2ceil(N) * lat + N * 400 / bw        # one-int allreduce + allgather
    return per_key * Lk / N + (allreduce + agree if N > 1 else 0.0)


def payoff(times_1, times_n, xs, ratio):
    """The smallest x from which times_1 / times_n >= ratio (None if never)."""
    ok = np.nonzero(times_1 / times_n >= ratio)[0]
    return int(xs[ok[0]]) if len(ok) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core-gflops", type=float, default=95.0)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--decode-us-per-key", type=float, default=0.3)
    ap.add_argument("--node-gbs", type=float, default=200.0,
                    help="memory bandwidth of one machine, GB/s (caps the decode's core scaling)")
    ap.add_argument("--out", default="docs/scaling", help="writes OUT.svg and OUT.png")
    a = ap.parse_args()
    rate = a.core_gflops * 1e9 * a.cores
    # Decode reads 2 * Hkv * D * 4 = 8 KiB of cache per key: the cores share
    # the machine's bandwidth.
    per_key_core = a.decode_us_per_key * 1e-6
    per_key = max(per_key_core / a.cores, 2 * 8 * 128 * 4 / (a.node_gbs * 1e9))

    ranks = [2, 4, 8, 16]
    dashes = {2: None, 4: (6, 3), 8: (2, 3), 16: (8, 3, 2, 3)}
    Ls = np.array([2 ** e for e in range(10, 21)], dtype=float)  # 1k .. 1M tokens
    Lks = np.array([2 ** e for e in range(10, 25)], dtype=float)  # 1k .. 16M keys
    print(f"rank = {a.cores} cores x {a.core_gflops} GFLOP/s = {rate / 1e12:.2f} TFLOP/s; "
          f"decode {per_key * 1e9:.1f} ns per key per machine")
    ring_series, dec_series = [], []
    print("\nring prefill (P3's heads: B=1, H=4, D=128, causal): L from which N machines give "
          ">= 0.9 N x (communication hidden) and >= 1.0x")
    for label, bw, lat, colour in NETWORKS:
        for N in ranks:
            t1 = ring_time(Ls, 1, rate, bw, lat)
            tn = ring_time(Ls, N, rate, bw, lat)
            ring_series.append((colour, dashes[N], t1 / tn))
            print(f"  {label:16s} N={N:2d}: >=0.9N from L={payoff(t1, tn * 0.9 * N, Ls, 1.0)}, "
                  f">=1x from L={payoff(t1, tn, Ls, 1.0)}")
    print("\nsharded decode (D1's heads: Hq=32, Hkv=8, D=128): Lk from which N machines give "
          ">= 1.0x and >= 0.5 N x")
    for label, bw, lat, colour in NETWORKS:
        for N in ranks:
            t1 = sharded_time(Lks, 1, per_key, bw, lat)
            tn = sharded_time(Lks, N, per_key, bw, lat)
            dec_series.append((colour, dashes[N], t1 / tn))
            print(f"  {label:16s} N={N:2d}: >=1x from Lk={payoff(t1, tn, Lks, 1.0)}, "
                  f">=0.5N from Lk={payoff(t1, tn * 0.5 * N, Lks, 1.0)}")

    charts, why = chartlib.load()
    if charts is None:
        sys.exit("scaling_model.py: cannot draw the plot: %s" % why)
    ylabel = "speed-up over one machine"
    written = charts.line_panels(
        a.out, "Predicted speed-up of N machines over one (docs/SCALING.md's model)",
        [("ring prefill (B=1, H=4, D=128, causal)", "sequence length L", ylabel, Ls, 16, ring_series),
         ("sharded decode (Hq=32, Hkv=8, D=128)", "cached keys Lk", ylabel, Lks, 16, dec_series)],
        [([(label, colour, None) for label, _, _, colour in NETWORKS], (0.62, 0.86)),
         ([(f"N = {N} machines", "#333", dashes[N]) for N in ranks], (0.0, 1.0))],
        f"A machine = {a.cores} cores x {a.core_gflops:g} GFLOP/s; decode {per_key * 1e9:.1f} ns per key "
        f"per machine (docs/SCALING.md).")
    print(f"\nwrote {', '.join(written)}")

if __name__ == "__main__":
    main()
