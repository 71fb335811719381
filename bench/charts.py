# SPDX-License-Identifier: Apache-2.0
"""The one plotting module of hwyattn's benchmark pictures (matplotlib, Agg backend).

Used by bench/report.py (attention, compare and matmul charts) and docs/scaling_model.py
(docs/scaling). Every figure is written twice, as <base>.svg and <base>.png, 9 inches wide
(the README's ~900 px), text kept as text in the SVG (svg.fonttype none), no date in the files
so that regenerating unchanged data gives unchanged files.

The figure functions take plain data (row ids, percentages, seconds) prepared by their caller;
nothing here reads benchmark JSON. Import with `charts = load()`: None (and a reason) when numpy
or matplotlib is missing, so that callers can skip their charts and still write their tables.
"""

import os
import textwrap

WIDTH_IN = 9.0          # inches; at 100 px per inch the README's width
PNG_DPI = 150           # PNG pixels per inch (1350 px wide, shown scaled to ~900)
BAR_IN = 0.14           # inches of height per bar: room for its 8.5 pt value label
FOOTNOTE_CHARS = 125    # a footnote line's length at 8.5 pt across 9 inches
# Colours: one hue per library or kind, light for 1 thread, dark for 2.
BLUE = ("#9ecae1", "#2171b5")
PURPLE = ("#cbc9e2", "#6a51a3")
GREEN = ("#a1d99b", "#238b45")
BROWN = ("#fdd0a2", "#d94801")
GREY = ("#d9d9d9", "#636363")
ORANGE = ("#fdae6b", "#e6550d")

_plt = None


def load():
    """(module, None) when matplotlib and numpy import, else (None, the reason)."""
    global _plt
    try:
        import numpy  # noqa: F401
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return None, "%s (Debian: python3-matplotlib)" % e
    plt.rcParams.update({
        "svg.fonttype": "none", "svg.hashsalt": "hwyattn", "font.size": 9.5, "axes.titlesize": 10.5,
        "axes.titleweight": "bold", "axes.spines.top": False, "axes.spines.right": False,
        "legend.fontsize": 8.5, "legend.frameon": False, "xtick.labelsize": 9, "ytick.labelsize": 9.5,
    })
    _plt = plt
    import sys
    return sys.modules[__name__], None


def save(fig, base):
    """Writes base.svg and base.png; returns their paths."""
    os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
    paths = [base + ".svg", base + ".png"]
    fig.savefig(paths[0], metadata={"Date": None})
    fig.savefig(paths[1], dpi=PNG_DPI, metadata={"Software": None})
    _plt.close(fig)
    return paths


def figure(title, height, rows=1, cols=1, **kw):
    """A 9-inch-wide figure with a bold title; returns (fig, 2-D array of axes)."""
    fig, axes = _plt.subplots(rows, cols, figsize=(WIDTH_IN, height), layout="constrained", squeeze=False, **kw)
    fig.suptitle(title, fontweight="bold", fontsize=11.5)
    return fig, axes


def footnote(fig, lines):
    """Grey notes under the plots (a list of strings, each one line)."""
    if lines:
        wrapped = [w for line in lines for w in textwrap.wrap(line, FOOTNOTE_CHARS)]
        fig.supxlabel("\n".join(wrapped), fontsize=8.5, color="#444", ha="left", x=0.01)


def hbars(ax, ids, series, values, fmt, xlabel, log=False, base=0.0, ref=None):
    """Grouped horizontal bars, ids top to bottom, one bar per series that has a value for the id.

    series: [(key, legend label, colour, hatch)]; values: {(id, key): number or None} (None: no bar);
    fmt(value) labels each bar's end; bars start at `base` (1 for ratios on a log axis); ref draws a
    dashed vertical line (e.g. at 100% or 1x)."""
    bars = {key: ([], [], []) for key, _, _, _ in series}
    for i, rid in enumerate(ids):
        present = [key for key, _, _, _ in series if values.get((rid, key)) is not None]
        h = 0.84 / max(len(present), 2)
        for j, key in enumerate(present):
            y = i + h * (j + 0.5 - len(present) / 2.0)
            bars[key][0].append(y)
            bars[key][1].append(values[(rid, key)])
            bars[key][2].append(h)
    for key, label, colour, hatch in series:
        ys, ws, hs = bars[key]
        if not ys:
            continue
        ax.barh(ys, [w - base for w in ws], left=base, height=[h * 0.92 for h in hs], color=colour, hatch=hatch,
                edgecolor="#555" if hatch else "white", linewidth=0.4, label=label)
        for y, w in zip(ys, ws):
            right = w >= base
            ax.annotate(fmt(w), (w, y), xytext=(3 if right else -3, 0), textcoords="offset points",
                        ha="left" if right else "right", va="center", fontsize=8.5, color="#222",
                        bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none"))
    rows_axis(ax, ids)
    vals = [v for v in values.values() if v]
    if log:
        ax.set_xscale("log")
        lo, hi = min(vals + [base]) / 1.5, max(vals + [base]) * 2.0
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if lo <= t <= hi]
        ax.set_xticks(ticks, ["%gx" % t for t in ticks])
        ax.minorticks_off()
    elif vals:
        ax.set_xlim(0, max(vals + [ref or 0]) * 1.16)
    if ref is not None:
        ax.axvline(ref, color="#333", linestyle="--", linewidth=1, zorder=1)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color="#ddd", linewidth=0.6)
    ax.set_axisbelow(True)


def rows_height(rows, bars):
    """Inches of plot height for rows of grouped bars (hbars fills 0.84 of a row)."""
    return rows * bars * BAR_IN / 0.84


def rows_axis(ax, labels):
    """Row labels on the y axis, top to bottom, with thin lines between the rows."""
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    for i in range(1, len(labels)):
        ax.axhline(i - 0.5, color="#eee", linewidth=0.6)


def lineage_order(ids):
    """ids with each variant right after the row it extends (D1, D1cold, D1q, D1qcold, D2, ...): a row's
    parent is the longest other id its name starts with; roots keep their order in ids."""
    def lineage(rid):  # cold variants first among a row's variants: D1, D1cold, D1q, D1qcold
        chain = [rid]
        while True:
            parents = [p for p in ids if p != chain[-1] and chain[-1].startswith(p)]
            if not parents:
                return ids.index(chain[-1]), [(not r.endswith("cold"), r) for r in chain[::-1]]
            chain.append(max(parents, key=len))
    return sorted(ids, key=lineage)


def pct(v):
    return "%.0f%%" % v


def times(v):
    return ("%.1fx" if v < 9.95 else "%.0fx") % v


def duration(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            v = seconds / scale
            return ("%.0f %s" if v >= 100 else "%.3g %s") % (v, unit)


def thread_series(prefix, colours, hatch=None, key=None):
    """The 1- and 2-thread series of one kind: light for 1 thread, dark for 2."""
    return [((key or prefix, t), "%s, %d thread%s" % (prefix, t, "s" if t > 1 else ""), colours[t - 1], hatch)
            for t in (1, 2)]


def legend_above(ax, ncol):
    """The axes' legend between its title and its plot."""
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=ncol, fontsize=8.5, borderaxespad=0,
              columnspacing=1.0, handletextpad=0.4)


def limits_figure(base, title, compute, memory, latency, notes=()):
    """hwyattn against the machine's limits (bench/results/attention.*).

    compute: [(id, "fp32" or "bf16", {threads: % of that peak})]; memory: [(id, cold, {threads: % of the
    read bandwidth})]; latency: [(id, {threads: seconds per call})]."""
    n_c, n_m, n_t = max(len(compute), 1), max(len(memory), 1), max(len(latency), 1)
    height = 2.2 + rows_height(max(n_c + n_t * 1.4 + 2.5, n_m), 2) + 0.16 * len(notes)
    fig = _plt.figure(figsize=(WIDTH_IN, height), layout="constrained")
    fig.suptitle(title, fontweight="bold", fontsize=11.5)
    grid = fig.add_gridspec(2, 2, height_ratios=[n_c, n_t * 1.4])
    ax_c, ax_t, ax_m = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[:, 1])
    series = thread_series("fp32 FMA peak", BLUE, key="fp32") + thread_series("bf16 dot peak", PURPLE, key="bf16")
    vals = {(rid, (kind, t)): v for rid, kind, by_t in compute for t, v in by_t.items()}
    hbars(ax_c, [c[0] for c in compute], series, vals, pct, "% of the peak that bounds the row (dashed)", ref=100)
    ax_c.set_title("Compute-bound rows: share of the peak", pad=34)
    legend_above(ax_c, 2)
    series = thread_series("warm", GREEN, key="warm") + thread_series("cold", BROWN, hatch="///", key="cold")
    vals = {(rid, ("cold" if cold else "warm", t)): v for rid, cold, by_t in memory for t, v in by_t.items()}
    hbars(ax_m, [m[0] for m in memory], series, vals, pct, "% of the streaming read bandwidth (dashed)", ref=100)
    ax_m.set_title("Memory-bound rows: share of the bandwidth", pad=34)
    legend_above(ax_m, 2)
    vals = {(rid, ("t", t)): v * 1e9 for rid, by_t in latency for t, v in by_t.items()}
    hbars(ax_t, [l[0] for l in latency], thread_series("latency", GREY, key="t"), vals,
          lambda v: duration(v * 1e-9), "ns per call")
    ax_t.set_title("Tiny call: latency per call")
    footnote(fig, notes)
    return save(fig, base)


def compare_figure(base, title, ids, competitors, speedups, limits, limit_names, latency_text, notes=()):
    """hwyattn against other libraries (bench/results/compare.*), only rows a competitor ran.

    competitors: [display name]; speedups: {(id, name, threads): hwyattn's speed-up over it};
    limits: {(id, library, threads): % of the machine's limit}, library "hwyattn" or a competitor's
    name; limit_names: {id: 'FMA peak', ...}; latency_text: {id: text} for rows drawn as latencies."""
    height = 2.0 + rows_height(len(ids), 2 * max(len(competitors), 1)) + 0.16 * len(notes)
    fig, axes = figure(title, height, 1, 2, gridspec_kw={"width_ratios": [1.2, 1]}, sharey=True)
    ax_s, ax_l = axes[0]
    palette = [BLUE, ORANGE, PURPLE, GREEN]
    series = []
    for k, name in enumerate(competitors):
        series += thread_series("over " + name, palette[k % len(palette)], key=name)
    vals = {(rid, (name, t)): v for (rid, name, t), v in speedups.items()}
    hbars(ax_s, ids, series, vals, times, "speed-up, log scale (right of 1x: hwyattn faster)",
          log=True, base=1.0, ref=1.0)
    libs = ["hwyattn"] + list(competitors)
    # Room between each title and its plot for the legends' rows (2 columns left, 3 right).
    pad = 8 + 13 * max(-(-len(series) // 2), -(-2 * len(libs) // 3), 2)
    ax_s.set_title("hwyattn's speed-up over the other libraries", pad=pad)
    legend_above(ax_s, 2)
    markers = ["D", "o", "s", "^"]
    colours = [GREEN[1]] + [palette[k % len(palette)][1] for k in range(len(competitors))]
    for k, lib in enumerate(libs):
        for t in (1, 2):
            pts = [(limits[(rid, lib, t)], i) for i, rid in enumerate(ids) if (rid, lib, t) in limits]
            if pts:
                ax_l.scatter([p[0] for p in pts], [p[1] + (0.17 if t == 2 else -0.17) for p in pts],
                             marker=markers[k % 4], s=34, label="%s, %dt" % (lib, t), zorder=3,
                             facecolors=colours[k] if t == 2 else "white", edgecolors=colours[k], linewidths=1.3)
    top = max(list(limits.values()) + [100.0]) * 1.06
    for i, rid in enumerate(ids):
        if rid in limit_names:
            ax_l.annotate(limit_names[rid], (1.01, i), xycoords=("axes fraction", "data"), ha="left", va="center",
                          fontsize=8.5, color="#444")
        elif rid in latency_text:
            ax_l.annotate(latency_text[rid], (top * 0.02, i), ha="left", va="center", fontsize=8.5, color="#222",
                          bbox=dict(boxstyle="square,pad=0.2", fc="white", ec="none"))
    ax_l.set_xlim(0, top)
    ax_l.axvline(100, color="#333", linestyle="--", linewidth=1, zorder=1)
    ax_l.grid(axis="x", color="#ddd", linewidth=0.6)
    ax_l.set_axisbelow(True)
    ax_l.tick_params(axis="y", length=0)
    ax_l.set_xlabel("% of the limit named at the right")
    ax_l.set_title("Everyone against the machine's limits", pad=pad)
    legend_above(ax_l, 3)
    footnote(fig, notes)
    return save(fig, base)


def matmul_figure(base, title, ids, impls, pct_of_peak, notes=()):
    """The packed matmul against another SGEMM: % of the FMA peak per (id, impl display name, threads)."""
    height = 1.7 + rows_height(len(ids), 2 * max(len(impls), 1))
    fig, axes = figure(title, height)
    ax = axes[0][0]
    palette = [GREEN, BLUE, ORANGE]
    series = [s for t in (0, 1) for k, name in enumerate(impls)
              for s in thread_series(name, palette[k % len(palette)], key=name)[t:t + 1]]
    vals = {(rid, (name, t)): v for (rid, name, t), v in pct_of_peak.items()}
    hbars(ax, ids, series, vals, pct, "% of the fp32 FMA peak measured in the same run (dashed)", ref=100)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8.5)
    footnote(fig, notes)
    return save(fig, base)


def line_panels(base, title, panels, legends, caption):
    """Side-by-side line plots on a log2 x axis (docs/scaling).

    panels: [(title, xlabel, ylabel, xs, ymax, [(colour, dash, ys)])], dash a matplotlib dash tuple or
    None for solid; legends: per panel, ([(label, colour, dash)], (x, y) of the legend's upper left in
    axes fractions): place it where no curve runs."""
    fig, axes = figure(title, 5.0, 1, len(panels))
    for ax, (ptitle, xlabel, ylabel, xs, ymax, series), (legend, corner) in zip(axes[0], panels, legends):
        style = lambda dash: (0, dash) if dash else "-"
        for colour, dash, ys in series:
            ax.plot(xs, ys, color=colour, linestyle=style(dash), linewidth=1.5)
        ax.set_xscale("log", base=2)
        ticks = [x for x in xs if int(x).bit_length() % 2 == 1]
        ax.set_xticks(ticks, [_pow2_label(x) for x in ticks])
        ax.minorticks_off()
        ax.set_xlim(xs[0], xs[-1])
        ax.set_ylim(0, ymax)
        ax.set_title(ptitle)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(color="#eee")
        handles = [_plt.Line2D([], [], color=c, linestyle=style(d), label=l) for l, c, d in legend]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=corner, fontsize=8.5, handlelength=4)
    footnote(fig, [caption])
    return save(fig, base)


def _pow2_label(x):
    x = int(x)
    return "%dM" % (x >> 20) if x >= 1 << 20 else "%dk" % (x >> 10) if x >= 1 << 10 else str(x)
