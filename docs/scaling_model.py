#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The N-machine speed model of docs/SCALING.md, and its plot (docs/scaling.svg).

    /usr/bin/python3 docs/scaling_model.py [--core-gflops 95] [--cores 32]
        [--decode-us-per-key 0.3] [--out docs/scaling.svg]

A rank is one machine of --cores cores, each computing attention at
--core-gflops (measured by bench/bench_mpi: a rank's compute_seconds for its
share of P3's flops); sharded decode reads the cache at --decode-us-per-key
per key of D1's shape on one core (bench_mpi's one-process row on one
thread), scaled by the cores up to --node-gbs of memory bandwidth. The
defaults are docs/SCALING.md's measurement (Zen 4, mpirun --bind-to none).
Networks: 25 and 100 Gb/s, with 5 and 20 us latency. Numpy and the standard
library only; the SVG is written by hand.
"""
import argparse
import math

import numpy as np

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


def svg_panel(x0, y0, w, h, xs, series, title, xlabel, ymax):
    """series: [(label, colour, dash, ys)]; log2 x axis, linear y axis."""
    lx0, lx1 = math.log2(xs[0]), math.log2(xs[-1])
    px = lambda x: x0 + (math.log2(x) - lx0) / (lx1 - lx0) * w
    py = lambda y: y0 + h - min(y, ymax) / ymax * h
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 10}" text-anchor="middle" font-size="14">{title}</text>',
           f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>']
    for e in range(int(lx0), int(lx1) + 1):
        x = px(2 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + h}" stroke="#eee"/>')
        if e % 2 == 0:
            lab = (f"{2 ** e >> 20}M" if e >= 20 else f"{2 ** e >> 10}k" if e >= 10
                   else str(2 ** e))
            out.append(f'<text x="{x:.1f}" y="{y0 + h + 15}" text-anchor="middle" '
                       f'font-size="11">{lab}</text>')
    for t in range(0, int(ymax) + 1, 2 if ymax > 8 else 1):
        y = py(t)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{t}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 32}" text-anchor="middle" '
               f'font-size="12">{xlabel}</text>')
    out.append(f'<text x="{x0 - 32}" y="{y0 + h / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 {x0 - 32} {y0 + h / 2})">speed-up over one machine</text>')
    for label, colour, dash, ys in series:
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.6" '
                   f'stroke-dasharray="{dash}"/>')
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core-gflops", type=float, default=95.0)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--decode-us-per-key", type=float, default=0.3)
    ap.add_argument("--node-gbs", type=float, default=200.0,
                    help="memory bandwidth of one machine, GB/s (caps the decode's core scaling)")
    ap.add_argument("--out", default="docs/scaling.svg")
    a = ap.parse_args()
    rate = a.core_gflops * 1e9 * a.cores
    # Decode reads 2 * Hkv * D * 4 = 8 KiB of cache per key: the cores share
    # the machine's bandwidth.
    per_key_core = a.decode_us_per_key * 1e-6
    per_key = max(per_key_core / a.cores, 2 * 8 * 128 * 4 / (a.node_gbs * 1e9))

    ranks = [2, 4, 8, 16]
    dashes = {2: "", 4: "6,3", 8: "2,3", 16: "8,3,2,3"}
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
            ring_series.append((f"{label}, N={N}", colour, dashes[N], t1 / tn))
            print(f"  {label:16s} N={N:2d}: >=0.9N from L={payoff(t1, tn * 0.9 * N, Ls, 1.0)}, "
                  f">=1x from L={payoff(t1, tn, Ls, 1.0)}")
    print("\nsharded decode (D1's heads: Hq=32, Hkv=8, D=128): Lk from which N machines give "
          ">= 1.0x and >= 0.5 N x")
    for label, bw, lat, colour in NETWORKS:
        for N in ranks:
            t1 = sharded_time(Lks, 1, per_key, bw, lat)
            tn = sharded_time(Lks, N, per_key, bw, lat)
            dec_series.append((f"{label}, N={N}", colour, dashes[N], t1 / tn))
            print(f"  {label:16s} N={N:2d}: >=1x from Lk={payoff(t1, tn, Lks, 1.0)}, "
                  f">=0.5N from Lk={payoff(t1, tn * 0.5 * N, Lks, 1.0)}")

    W, H = 980, 470
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif">', f'<rect width="{W}" height="{H}" fill="white"/>']
    svg += svg_panel(70, 40, 380, 300, Ls, ring_series,
                     "ring prefill (B=1, H=4, D=128, causal)", "sequence length L", 16)
    svg += svg_panel(560, 40, 380, 300, Lks, dec_series,
                     "sharded decode (Hq=32, Hkv=8, D=128)", "cached keys Lk", 16)
    y = 395
    for i, (label, _, _, colour) in enumerate(NETWORKS):
        x = 70 + i * 220
        svg.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{colour}" '
                   f'stroke-width="2"/><text x="{x + 30}" y="{y + 4}" font-size="12">{label}</text>')
    for i, N in enumerate(ranks):
        x = 70 + i * 220
        svg.append(f'<line x1="{x}" y1="{y + 22}" x2="{x + 24}" y2="{y + 22}" stroke="#333" '
                   f'stroke-width="1.6" stroke-dasharray="{dashes[N]}"/>'
                   f'<text x="{x + 30}" y="{y + 26}" font-size="12">N = {N} machines</text>')
    svg.append(f'<text x="70" y="{H - 12}" font-size="11" fill="#555">model of docs/SCALING.md: '
               f'a machine = {a.cores} cores x {a.core_gflops:g} GFLOP/s; decode '
               f'{per_key * 1e9:.1f} ns per key per machine</text>')
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
