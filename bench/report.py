#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns the benchmarks' Google Benchmark JSON into Markdown tables and SVG charts.

    python3 bench/report.py [bench/results/latest.json] [--out-dir bench/results]
        [--matmul bench/results/matmul.json] [--composition bench/results/composition.json]

--matmul and --composition default to matmul.json and composition.json next to
the attention JSON, and are skipped when the file does not exist.

Input: the file written by
    bench_attention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
        --benchmark_out=bench/results/latest.json --benchmark_out_format=json
The median aggregates are used; a run without repetitions uses its single
(or median) iteration entry instead.

Output:
    <out-dir>/table.md        one line per benchmark row (bench/README.md): time, GFLOP/s and % of the
                              measured FMA peak at 1 and 2 threads, 2t/1t scaling,
                              K/V GB/s for decode rows, the row's target
    table.md, more sections   bench_matmul: hwyattn's packed matmul against oneDNN's
                              sgemm (GFLOP/s, % of peak, hwyattn/oneDNN) at 1 and 2
                              threads; bench_composition: the fused kernel against
                              Q K^T + softmax + P V on the library's matmul (speed-up
                              of fusion); bench_tiles (tiles.json): the bf16 register
                              tiles alone against the bf16 dot peak
    table.md, "Against other  with scripts/bench.sh --compare: PyTorch, ONNX Runtime, OpenVINO and ggml
      libraries"              on the same rows (torch.json, onnxruntime.json, openvino.json, ggml.json next to the
                              attention JSON, from bench/compare/; used only when written in the
                              same run as it)
  and the charts, each as .svg and .png (bench/charts.py, matplotlib):
    <out-dir>/attention.*     the rows against the machine's limits: compute-bound rows as % of
                              the peak that bounds them (fp32 FMA or bf16 dot), memory-bound rows
                              as % of the read bandwidth (warm and cold), the tiny call's latency
    <out-dir>/compare.*       with competitors: hwyattn's speed-up over each on the rows they ran,
                              and every library's share of the machine's limits
    <out-dir>/matmul.*        the matmul against oneDNN as % of the FMA peak

The tables need Python 3's standard library only; without matplotlib (Debian's
python3-matplotlib) and numpy the charts are skipped with a message.
"""

import argparse
import json
import os
import re
import sys

ROW_ORDER = ["P1", "P2", "P3", "D1", "D2", "X1", "M1", "T1"]

# bench/README.md's targets, 1 thread / 2 threads.
TARGETS = {
    "P1": ">= 85% / 82% of peak",
    "X1": ">= 85% / 82% of peak",
    "P2": ">= 82% / 78% of peak",
    "P3": ">= 82% / 78% of peak",
    "M1": ">= 82% / 78% of peak",
    "D1": "<= 0.35 ms on 2t",
    "D2": ">= 90% of read bw on 2t",
    "T1": "<= 0.15 us on 1t",
}

# Row ids: letters, digits and underscores (D1q8_0, P1q8_0); TP1's pool rows (BM_Attention/TP1/P1/...) do not match.
NAME_RE = re.compile(r"^BM_Attention/(?P<id>[A-Za-z0-9_]+)/threads:(?P<threads>\d+)")
MATMUL_RE = re.compile(r"^BM_Matmul/(?P<impl>hwyattn|onednn)/(?P<id>[A-Za-z0-9_]+)/threads:(?P<threads>\d+)")
COMPOSITION_RE = re.compile(
    r"^BM_Composition/(?P<id>[A-Za-z0-9]+)/(?P<impl>fused|composed)/threads:(?P<threads>\d+)")

TILES_RE = re.compile(r"^BM_Bf16Tile/(?P<kind>score|value)/(?P<arg>[a-z]+:\d+)")

COMPARE_RE = re.compile(r"^BM_Compare/(?P<lib>[A-Za-z0-9_.-]+)/(?P<id>[A-Za-z0-9_]+)/threads:(?P<threads>\d+)")
# bench/compare's result files, in the order of the table's columns, with their display names.
COMPETITORS = [("torch", "torch.json", "PyTorch"), ("onnxruntime", "onnxruntime.json", "ONNX Runtime"),
               ("openvino", "openvino.json", "OpenVINO"), ("ggml", "ggml.json", "ggml")]

MATMUL_ORDER = ["sq512", "sq1024", "sq2048", "m1_qkv", "m1_out"]
MATMUL_NOTES = {
    "m1_qkv": "M1 Q/K/V projection (B*L rows)",
    "m1_out": "M1 output projection",
}
COMPOSITION_ORDER = ["P1", "P2", "P3", "D1", "D2", "X1", "M1a", "T1"]
COMPOSITION_NOTES = {
    "M1a": "M1's attention, no projections",
    "P2": "composed: full S and P V, masked in the softmax",
    "P3": "composed: full S and P V, masked in the softmax",
    "D1": "composed: each K and V^T packed once for its group's 4 query rows",
}

UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def cpu_model(context=None):
    """The CPU the run recorded (bench/run_bench.py's cpu_model), else this machine's."""
    if context and context.get("cpu_model"):
        return context["cpu_model"]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_bench
    return run_bench.cpu_model() or "unknown CPU"


def as_float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def load_medians(path, name_re, key_of):
    """Returns (context, {key: entry}) with the median of each run; key_of(match) makes the key."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    context = data.get("context", {})
    medians = {}
    iterations = {}
    for b in data.get("benchmarks", []):
        m = name_re.match(b.get("run_name") or b.get("name", ""))
        if not m:
            continue
        key = key_of(m)
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = b
        else:
            iterations.setdefault(key, []).append(b)
    results = dict(medians)
    for key, runs in iterations.items():
        if key in results:
            continue
        ok = [r for r in runs if not r.get("error_occurred")]
        if not ok:
            results[key] = runs[0]
            continue
        # No aggregates: take the run with the median time.
        ok.sort(key=lambda r: r["real_time"])
        results[key] = ok[len(ok) // 2]
    return context, results


def load_results(path):
    """Attention rows: (context, {(id, threads): entry})."""
    return load_medians(path, NAME_RE, lambda m: (m.group("id"), int(m.group("threads"))))


def seconds(entry):
    return entry["real_time"] * UNIT_SECONDS.get(entry.get("time_unit", "ns"), 1e-9)


def fmt_time(entry):
    """Wall time per call in the unit the benchmark reported it in (ms for most rows)."""
    if entry is None:
        return "-"
    if entry.get("error_occurred"):
        return "error"
    unit = entry.get("time_unit", "ns")
    value = entry["real_time"]
    digits = {"s": 3, "ms": 3, "us": 2, "ns": 0}.get(unit, 3)
    return "%.*f %s" % (digits, value, unit)


def fmt_num(value, digits=1):
    if value is None:
        return "-"
    if value != 0 and abs(value) < 0.1:
        return "%.3f" % value
    return "%.*f" % (digits, value)


def counter(entry, name):
    if entry is None or entry.get("error_occurred"):
        return None
    return as_float(entry.get(name))


def ordered_ids(results):
    ids = {k[0] for k in results}
    known = [i for i in ROW_ORDER if i in ids]
    return known + sorted(ids - set(known))


def per_row_counter(results, name):
    """'D1 1t 41.8, D1 2t 43.9, ...': a counter of every row and thread count that has it."""
    return ", ".join(
        "%s %dt %s" % (rid, t, fmt_num(counter(results.get((rid, t)), name)))
        for rid in ordered_ids(results)
        for t in (1, 2)
        if counter(results.get((rid, t)), name)
    )


def write_table(path, context, results, source, extra_sections=()):
    peaks = {t: as_float(context.get("fma_peak_gflops_%dt" % t)) for t in (1, 2)}
    bws = {t: as_float(context.get("read_bw_gbps_%dt" % t)) for t in (1, 2)}
    lines = []
    lines.append("# hwyattn attention benchmarks")
    lines.append("")
    lines.append(
        "%s, %s (%s CPUs), hwyattn %s, SIMD target %s. Measured in the same run: "
        "fp32 FMA peak %s / %s GFLOP/s (1 / 2 threads, %s), streaming read %s / %s GB/s "
        "(%s MiB buffer)."
        % (
            context.get("date", "unknown date"),
            cpu_model(context),
            context.get("num_cpus", "?"),
            context.get("hwyattn_version", "?"),
            context.get("simd_target", "?"),
            fmt_num(peaks[1]),
            fmt_num(peaks[2]),
            context.get("peak_target", "?"),
            fmt_num(bws[1]),
            fmt_num(bws[2]),
            context.get("bw_buffer_mib", "?"),
        )
    )
    reps = {
        e.get("repetitions")
        for e in results.values()
        if e.get("run_type") == "aggregate" and (e.get("repetitions") or 0) > 1
    }
    lines.append("")
    how = ("Median of %s repetitions" % "/".join(str(r) for r in sorted(reps))) if reps else "Single run"
    if reps and context.get("random_interleaving") == "true":
        how += (
            " (Google Benchmark's random interleaving: the repetitions of all rows run in random order, "
            "so each row's median samples the whole run rather than one stretch of it)"
        )
    lines.append(
        "%s, wall time per call; GFLOP/s by the formulas of bench/README.md "
        "(causal rows count only the unmasked half). Source: `%s`." % (how, source)
    )
    load = context.get("load_avg")
    if isinstance(load, list) and load:
        lines.append("")
        lines.append("Load average when the run started: %s." % ", ".join("%.2f" % x for x in load))
    lines.extend(contention_note(context))
    if peaks[1] and peaks[2] and peaks[2] < 1.6 * peaks[1]:
        lines.append("")
        lines.append(
            "**Warning:** the 2-thread FMA peak is only %.2fx the 1-thread one: the second core was "
            "busy with another process during this run, so the 2-thread figures are not reliable."
            % (peaks[2] / peaks[1])
        )
    if context.get("library_build_type") == "debug":
        lines.append("")
        lines.append(
            "(Google Benchmark warns that its own library was built as debug: Debian's "
            "libbenchmark; it does not affect the timed code.)"
        )
    if any(counter(e, "fma_peak_GFLOPS") for e in results.values()):
        lines.append("")
        lines.append(
            "%% peak is against the FMA peak measured right before each repetition of the row (best of "
            "3 x 50 ms; the clock and the co-tenants' share of the core drift within minutes), median "
            "over the repetitions: %s GFLOP/s. Against the start-up peak above the rows are at %s%%."
            % (per_row_counter(results, "fma_peak_GFLOPS"),
               per_row_counter(results, "pct_startup_peak"))
        )
    if any(counter(e, "read_bw_GBps") for e in results.values()):
        lines.append("")
        lines.append(
            "Decode rows' %% read bw is against the streaming read measured again right before each row "
            "(the machine's memory bandwidth drifts within minutes): %s GB/s."
            % per_row_counter(results, "read_bw_GBps")
        )
    if any(counter(e, "same_size_read_GBps") for e in results.values()):
        lines.append("")
        lines.append(
            "They are also compared with re-reading a buffer of the row's K/V size, measured right before "
            "each repetition of the row (median of 10 passes: as much stays in cache between passes as "
            "other processes leave of the L3 at that moment, as for the K/V between decode calls): %s GB/s."
            % per_row_counter(results, "same_size_read_GBps")
        )
    if any(counter(e, "pages_read_GBps") for e in results.values()):
        lines.append("")
        lines.append(
            "Paged rows ('pages') are also compared with a plain loop reading the same pages in the same "
            "order right before the row (bench/README.md, pages_read_GBps): %s GB/s."
            % per_row_counter(results, "pages_read_GBps")
        )
    lines.append("")
    lines.append(
        "| id | shape | time 1t | GFLOP/s 1t | % peak 1t | time 2t | GFLOP/s 2t | % peak 2t "
        "| 2t/1t | K/V GB/s 1t / 2t (% read bw, % same-size re-read) | target (bench/README.md) |"
    )
    lines.append("|----|-------|--------:|-----------:|----------:|--------:|-----------:|----------:"
                 "|------:|------|------|")
    for rid in ordered_ids(results):
        e1 = results.get((rid, 1))
        e2 = results.get((rid, 2))
        shape = (e1 or e2 or {}).get("label", "")
        scaling = "-"
        if e1 and e2 and not e1.get("error_occurred") and not e2.get("error_occurred"):
            scaling = "%.2fx" % (seconds(e1) / seconds(e2))
        bw = "-"
        if counter(e1, "GBps") is not None or counter(e2, "GBps") is not None:
            parts = []
            for t, e in ((1, e1), (2, e2)):
                g, p = counter(e, "GBps"), counter(e, "pct_bw")
                pw = counter(e, "pct_warm_bw")
                pp = counter(e, "pct_pages")  # paged rows: against a plain loop over the same pages
                if g is None:
                    parts.append("-")
                elif bws[t] and pw:
                    parts.append("%.1f (%.0f%%, %.0f%%)" % (g, p or 0.0, pw))
                elif bws[t] and pp:
                    parts.append("%.1f (%.0f%%; pages %.0f%%)" % (g, p or 0.0, pp))
                elif bws[t]:
                    parts.append("%.1f (%.0f%%)" % (g, p or 0.0))
                else:
                    parts.append("%.1f" % g)
            bw = " / ".join(parts)
        cells = [
            rid,
            shape,
            fmt_time(e1),
            fmt_num(counter(e1, "GFLOPS")),
            fmt_num(counter(e1, "pct_peak")) if peaks[1] else "-",
            fmt_time(e2),
            fmt_num(counter(e2, "GFLOPS")),
            fmt_num(counter(e2, "pct_peak")) if peaks[2] else "-",
            scaling,
            bw,
            TARGETS.get(rid, ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        for e in (e1, e2):
            if e is not None and e.get("error_occurred"):
                lines.append("")
                lines.append("%s: error: %s" % (rid, e.get("error_message", "")))
    lines.append("")
    for section in extra_sections:
        lines.extend(section)
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def contention_note(context):
    """Markdown lines warning that other processes took CPU time during the run (bench/run_bench.py)."""
    other = as_float(context.get("other_cpu_pct"))
    if other is None:
        return []
    if other <= 10.0:
        return ["", "Other processes used %.0f%% of a core during this run (bench/run_bench.py)." % other]
    return ["", "**Warning:** other processes used %.0f%% of a core on average during this run "
            "(bench/run_bench.py): the 2-thread figures (and possibly the 1-thread ones) are low." % other]


def peaks_of(context):
    return {t: as_float(context.get("fma_peak_gflops_%dt" % t)) for t in (1, 2)}


def reps_text(results):
    reps = {
        e.get("repetitions")
        for e in results.values()
        if e.get("run_type") == "aggregate" and (e.get("repetitions") or 0) > 1
    }
    return ("median of %s repetitions" % "/".join(str(r) for r in sorted(reps))) if reps else "single run"


def gflops_cell(entry, peak):
    g = counter(entry, "GFLOPS")
    if g is None:
        return "error" if entry is not None and entry.get("error_occurred") else "-"
    if peak:
        return "%.1f (%.0f%%)" % (g, counter(entry, "pct_peak") or 0.0)
    return "%.1f" % g


def ratio_cell(a, b):
    """a / b of two GFLOPS counters, or '-'."""
    ga, gb = counter(a, "GFLOPS"), counter(b, "GFLOPS")
    if not ga or not gb:
        return "-"
    return "%.2f" % (ga / gb)


def ordered(keys, order):
    known = [i for i in order if i in keys]
    return known + sorted(set(keys) - set(known))


def matmul_section(context, results, source):
    """Markdown lines: hwyattn's packed matmul against oneDNN's sgemm."""
    peaks = peaks_of(context)
    have_dnnl = any(k[0] == "onednn" for k in results)
    lines = ["## Matmul: hwyattn's packed matmul against oneDNN", ""]
    lines.append(
        "Y = X W^T, W [N][K] in nn.Linear's layout. hwyattn: `PackedWeights::Pack` once outside the timed "
        "loop (as the MHA module does), X packed on every `Linear` call. oneDNN %s (`dnnl_sgemm('N', 'T')`, "
        "ISA %s): packs inside every call. Same process, same inputs; %s, hwyattn and oneDNN repetitions "
        "randomly interleaved. GFLOP/s = 2*M*N*K / time, (%% of the FMA peak measured in this run: "
        "%s / %s GFLOP/s at 1 / 2 threads). Thread check at start-up (sq1024, 2t/1t): hwyattn %sx, oneDNN %sx. "
        "Source: `%s`."
        % (
            context.get("onednn_version", "?"),
            context.get("onednn_isa", "?"),
            reps_text(results),
            fmt_num(peaks[1]),
            fmt_num(peaks[2]),
            context.get("threads_check_hwyattn_2t_speedup", "?"),
            context.get("threads_check_onednn_2t_speedup", "-"),
            source,
        )
    )
    lines.extend(contention_note(context))
    if not have_dnnl:
        lines.append("")
        lines.append("bench_matmul was built without oneDNN (libdnnl-dev): hwyattn rows only.")
    if peaks[1] and peaks[2] and peaks[2] < 1.6 * peaks[1]:
        lines.append("")
        lines.append("**Warning:** the 2-thread FMA peak is only %.2fx the 1-thread one: the 2-thread rows are "
                     "not reliable." % (peaks[2] / peaks[1]))
    lines.append("")
    lines.append("| problem | shape | hwyattn 1t | oneDNN 1t | hwyattn/oneDNN 1t | hwyattn 2t | oneDNN 2t "
                 "| hwyattn/oneDNN 2t | 2t/1t hwyattn / oneDNN |")
    lines.append("|---------|-------|-----------:|----------:|------------------:|-----------:|----------:"
                 "|------------------:|------|")
    for pid in ordered({k[1] for k in results}, MATMUL_ORDER):
        h1, h2 = results.get(("hwyattn", pid, 1)), results.get(("hwyattn", pid, 2))
        d1, d2 = results.get(("onednn", pid, 1)), results.get(("onednn", pid, 2))
        shape = (h1 or h2 or d1 or d2 or {}).get("label", "")
        if pid in MATMUL_NOTES:
            shape += " (%s)" % MATMUL_NOTES[pid]
        lines.append("| " + " | ".join([
            pid,
            shape,
            gflops_cell(h1, peaks[1]),
            gflops_cell(d1, peaks[1]),
            ratio_cell(h1, d1),
            gflops_cell(h2, peaks[2]),
            gflops_cell(d2, peaks[2]),
            ratio_cell(h2, d2),
            "%s / %s" % (ratio_cell(h2, h1), ratio_cell(d2, d1)),
        ]) + " |")
    return lines


def tiles_section(context, results, source):
    """Markdown lines: the bf16 register tiles alone against the bf16 dot peak."""
    peak = as_float(context.get("bf16_peak_gflops_1t"))
    lines = ["## The bf16 register tiles alone", ""]
    lines.append(
        "The prefill's AVX512_BF16 tiles called as the kernel calls them at P1b's shape (bench/README.md, "
        "\"bench_tiles\"), 1 thread, %s; %% of the vdpbf16ps peak measured in this run (%s GFLOP/s). "
        "Source: `%s`." % (reps_text(results), fmt_num(peak), source))
    lines.extend(contention_note(context))
    lines.append("")
    lines.append("| tile | calls | time | GFLOP/s | % of the bf16 peak |")
    lines.append("|------|-------|-----:|--------:|-------------------:|")
    for (kind, arg) in sorted(results):
        e = results[(kind, arg)]
        if e.get("error_occurred"):
            lines.append("| %s | %s | %s | - | - |" % (kind, arg, e.get("error_message", "error")))
            continue
        lines.append("| %s | %s | %s | %s | %s |" % (
            kind, arg, fmt_time(e), fmt_num(as_float(e.get("GFLOPS"))),
            fmt_num(as_float(e.get("pct_bf16_peak")))))
    return lines


def composition_section(context, results, source):
    """Markdown lines: the fused kernel against the unfused composition."""
    peaks = peaks_of(context)
    lines = ["## Fused against composed attention", ""]
    lines.append(
        "composed = per (batch, kv head), the query rows of its GQA group together: S = Q K^T on the "
        "library's matmul (K packed on every call), a separate "
        "row softmax over the whole Lq x Lk matrix (Highway, three passes), O = P V (V^T packed on every call); "
        "heads split over the threads. fused = `hwyattn_sdpa`. Same process and inputs, outputs checked "
        "against each other; %s, fused and composed repetitions randomly interleaved. GFLOP/s by bench/README.md's "
        "formulas for both (the composed P2 and P3 execute the full square but are credited with the causal "
        "half), "
        "%% of the FMA peak measured in this run (%s / %s GFLOP/s). Source: `%s`."
        % (reps_text(results), fmt_num(peaks[1]), fmt_num(peaks[2]), source)
    )
    lines.extend(contention_note(context))
    if peaks[1] and peaks[2] and peaks[2] < 1.6 * peaks[1]:
        lines.append("")
        lines.append("**Warning:** the 2-thread FMA peak is only %.2fx the 1-thread one: the 2-thread rows are "
                     "not reliable." % (peaks[2] / peaks[1]))
    lines.append("")
    lines.append("| id | shape | fused 1t | composed 1t | fusion speed-up 1t | fused 2t | composed 2t "
                 "| fusion speed-up 2t |")
    lines.append("|----|-------|---------:|------------:|-------------------:|---------:|------------:"
                 "|-------------------:|")

    def cell(e, peak):
        if e is None:
            return "-"
        if e.get("error_occurred"):
            return "error"
        return "%s, %s" % (fmt_time(e), gflops_cell(e, peak))

    def speedup(fused, composed):
        if not fused or not composed or fused.get("error_occurred") or composed.get("error_occurred"):
            return "-"
        return "%.2fx" % (seconds(composed) / seconds(fused))

    for rid in ordered({k[0] for k in results}, COMPOSITION_ORDER):
        f1, f2 = results.get((rid, "fused", 1)), results.get((rid, "fused", 2))
        c1, c2 = results.get((rid, "composed", 1)), results.get((rid, "composed", 2))
        shape = (f1 or f2 or c1 or c2 or {}).get("label", "")
        if rid in COMPOSITION_NOTES:
            shape += " (%s)" % COMPOSITION_NOTES[rid]
        lines.append("| " + " | ".join([
            rid, shape, cell(f1, peaks[1]), cell(c1, peaks[1]), speedup(f1, c1),
            cell(f2, peaks[2]), cell(c2, peaks[2]), speedup(f2, c2),
        ]) + " |")
        for e in (f1, f2, c1, c2):
            if e is not None and e.get("error_occurred"):
                lines.append("")
                lines.append("%s: error: %s" % (rid, e.get("error_message", "")))
    return lines


def load_competitors(json_dir, context):
    """[(lib, display name, context, {(id, threads): entry}, path)] of bench/compare's result files next to
    the attention JSON that were written in the same run as it (their hwyattn_run_date is its date)."""
    found = []
    for lib, filename, display in COMPETITORS:
        path = os.path.join(json_dir, filename)
        if not os.path.exists(path):
            continue
        cctx, cres = load_medians(path, COMPARE_RE, lambda m: (m.group("lib"), m.group("id"), int(m.group("threads"))))
        if cctx.get("hwyattn_run_date") != context.get("date"):
            print("report.py: %s is from another run (hwyattn run %s, this one %s); left out"
                  % (path, cctx.get("hwyattn_run_date"), context.get("date")), file=sys.stderr)
            continue
        found.append((lib, display, cctx, {(k[1], k[2]): e for k, e in cres.items() if k[0] == lib}, path))
    return found


def compare_cell(entry, peak):
    """'1.23 ms, 245.1 (88%)': time, GFLOP/s and % of the start-up peak."""
    if entry is None:
        return "-"
    if entry.get("error_occurred"):
        return "error"
    g = counter(entry, "GFLOPS")
    pct = " (%.0f%%)" % (100.0 * g / peak) if g is not None and peak else ""
    return "%s, %s%s" % (fmt_time(entry), fmt_num(g), pct)


def compare_section(context, results, competitors, source):
    """Markdown lines: hwyattn beside the other libraries on the same rows."""
    peaks = peaks_of(context)
    names = ["hwyattn"] + [c[1] for c in competitors]
    lines = ["## Against other libraries", ""]
    versions = [competitor_version(lib, display, cctx) + ", %s, `%s`" % (reps_text_of(cctx), rel_path(path))
                for lib, display, cctx, _, path in competitors]
    lines.append(
        "Same machine, same rows, same inputs in the same run: each library's script (bench/compare/) ran in its "
        "own process right after hwyattn's rows, its own repetitions randomly interleaved, each output checked "
        "once against a float64 reference (a wrong output is an error, not timed). %s. hwyattn: `%s`. Cells: "
        "time per call, GFLOP/s by bench/README.md's formulas for every library (causal rows credited with the "
        "visible half only), and %% of the FMA peak measured at the start of the run (%s / %s GFLOP/s at 1 / 2 "
        "threads)." % ("; ".join(versions), source, fmt_num(peaks[1]), fmt_num(peaks[2])))
    for lib, display, cctx, _, _ in competitors:
        for note in contention_note(cctx):
            lines.append(note.replace("this run", "%s's part of the run" % display) if note else note)
    lines.append("")
    header = ["id", "shape"] + ["%s %dt" % (n, t) for t in (1, 2) for n in names]
    header.append("hwyattn speed-up over the fastest other, 1t / 2t")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["----", "-------"] + ["------:"] * (2 * len(names)) + ["------:"]) + "|")
    ids = ordered_ids(results)
    for rid in ids:
        cells = [rid, (results.get((rid, 1)) or results.get((rid, 2)) or {}).get("label", "")]
        speedups = []
        for t in (1, 2):
            hw = results.get((rid, t))
            cells.append(compare_cell(hw, peaks[t]))
            others = []
            for _, _, _, cres, _ in competitors:
                e = cres.get((rid, t))
                cells.append(compare_cell(e, peaks[t]))
                if e is not None and not e.get("error_occurred"):
                    others.append(seconds(e))
            if hw is not None and not hw.get("error_occurred") and others:
                speedups.append("%.2fx" % (min(others) / seconds(hw)))
            else:
                speedups.append("-")
        cells.append(" / ".join(speedups))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("What each library ran (bench/README.md, \"Comparing with other libraries\"):")
    lines.append("")
    lines.append("- hwyattn: `hwyattn_sdpa`; M1 `hwyattn_mha_forward`; the KV-cache rows (D1q, V1, V2, ...) "
                 "`hwyattn_kv_attention`.")
    for lib, display, cctx, cres, _ in competitors:
        by_path = {}
        errors = []
        for rid in ids:
            paths = {t: describe_path(cres[(rid, t)]) for t in (1, 2) if (rid, t) in cres}
            for t in (1, 2):
                e = cres.get((rid, t))
                if e is not None and e.get("error_occurred"):
                    errors.append("%s %dt: %s" % (rid, t, e.get("error_message", "")))
            distinct = {p for p in paths.values() if p}
            for p in sorted(distinct):
                tags = [t for t, q in paths.items() if q == p]
                by_path.setdefault(p, []).append(rid if len(distinct) == 1 else
                                                 rid + " " + "/".join("%dt" % t for t in tags))
        parts = ["%s: %s" % (", ".join(rows), p) for p, rows in by_path.items()]
        lines.append("- %s: %s." % (display, "; ".join(parts) if parts else "no rows"))
        for err in errors:
            lines.append("  - error: %s" % err)
    # Rows a library left out: those no other library ran, with the reasons, then each library's own.
    ran = {rid for _, _, _, cres, _ in competitors for (rid, _) in cres}
    reasons = {}  # id -> {display: reason}
    for _, display, cctx, _, _ in competitors:
        for rid, why in (cctx.get("skipped_rows") or {}).items():
            reasons.setdefault(rid, {})[display] = why
    nobody = [rid for rid in ordered(reasons, ROW_ORDER) if rid not in ran]
    if nobody:
        lines.append("- Not run by the other libraries: %s." % "; ".join(
            "%s (%s)" % (rid, skip_reasons(reasons[rid])) for rid in nobody))
    for _, display, _, _, _ in competitors:
        own = [rid for rid in ordered(reasons, ROW_ORDER) if rid in ran and display in reasons[rid]]
        if own:
            lines.append("- Not run by %s: %s." % (display, "; ".join(
                "%s (%s)" % (rid, reasons[rid][display]) for rid in own)))
    return lines


def skip_reasons(by_library):
    """'reason' when the libraries that gave one agree, else 'PyTorch: ...; OpenVINO: ...'."""
    distinct = sorted(set(by_library.values()))
    if len(distinct) == 1:
        return distinct[0]
    return "; ".join("%s: %s" % (lib, why) for lib, why in by_library.items())


def describe_path(entry):
    """What a library ran for a row, with what it reported it did (OpenVINO: the plugin's SDPA node)."""
    path = entry.get("path")
    if path and entry.get("sdpa_runtime"):
        path += " [the plugin ran: %s%s]" % (entry["sdpa_runtime"], (
            ", inference precision %s" % entry["inference_precision"]) if entry.get("inference_precision") else "")
    return path


def competitor_version(lib, display, cctx):
    """'PyTorch 2.15.0 (PyPI, ...)': the version and where it came from, as the result file records them."""
    v = "%s %s" % (display, cctx.get("library_version", "?"))
    if lib == "ggml":
        return v + " (%s)" % cctx.get("installed_from", "built from source")
    if cctx.get("installed_from"):
        details = ["PyPI"]
        if lib == "torch":
            details += ["CPU capability %s" % cctx.get("cpu_capability", "?"),
                        "BLAS %s %s, oneDNN %s" % (cctx.get("blas", "?"), cctx.get("mkl", "").split("-")[0],
                                                    cctx.get("onednn", "?"))]
        elif lib == "onnxruntime":
            details += ["%s, models written with onnx %s, opset %s" % (
                cctx.get("execution_provider", "CPU"), cctx.get("onnx_version", "?"), cctx.get("onnx_opset", "?"))]
        elif lib == "openvino":
            details += ["CPU plugin, capabilities %s" % cctx.get("cpu_capabilities", "?").replace(" ", ", ")]
        return v + " (%s)" % "; ".join(details)
    # Result files of the earlier scripts (Debian's torch 1.13, npm's onnxruntime-node).
    if lib == "torch":
        v += " (Debian's python3-torch%s; BLAS: %s)" % (
            (" " + cctx["debian_package_version"]) if cctx.get("debian_package_version") else "",
            os.path.basename(cctx.get("blas", "?").split(", ")[-1]))
    elif lib == "onnxruntime":
        v += " (npm's onnxruntime-node, CPU provider, Node %s)" % cctx.get("node_version", "?")
    return v


def reps_text_of(context):
    reps = context.get("repetitions")
    return ("median of %s repetitions" % reps) if reps and reps != "1" else "single repetition"


def rel_path(path):
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


# bench/README.md: T1's target is a latency; V2decodes is memory-bound but reports no bytes counter.
LATENCY_ROWS = {"T1"}
NO_BYTES_ROWS = {"V2decodes"}


def run_line(context):
    """'AMD EPYC (2 CPUs), AVX3_BF16, 2026-11-26': the machine and day of a run, for captions."""
    return "%s (%s CPUs), SIMD target %s, %s" % (cpu_model(context), context.get("num_cpus", "?"),
                                                 context.get("simd_target", "?"), context.get("date", "?")[:10])


def limits_chart(charts, base, context, results):
    """attention.*: every row against the limit that bounds it."""
    compute, memory, latency, left_out = [], [], [], []
    for rid in charts.lineage_order(ordered_ids(results)):
        es = {t: results.get((rid, t)) for t in (1, 2)}
        if rid in LATENCY_ROWS:
            latency.append((rid, {t: seconds(e) for t, e in es.items() if counter(e, "GFLOPS") is not None}))
        elif any(counter(e, "GBps") is not None for e in es.values()):
            memory.append((rid, rid.endswith("cold"), {t: counter(e, "pct_bw") for t, e in es.items()
                                                        if counter(e, "pct_bw") is not None}))
        elif any(counter(e, "pct_bf16_peak") for e in es.values()):
            compute.append((rid, "bf16", {t: counter(e, "pct_bf16_peak") for t, e in es.items()
                                          if counter(e, "pct_bf16_peak")}))
        elif rid in NO_BYTES_ROWS or not any(counter(e, "pct_peak") is not None for e in es.values()):
            left_out.append(rid)
        else:
            compute.append((rid, "fp32", {t: counter(e, "pct_peak") for t, e in es.items()
                                          if counter(e, "pct_peak") is not None}))
    notes = ["%s, %s. Rows and shapes: bench/README.md and table.md." % (run_line(context), reps_text(results)),
             "Peaks and bandwidth measured in the same run, right before each row's repetitions. Warm: K/V as "
             "the previous call left them (from L3 when they fit, so above 100% of the memory's bandwidth); "
             "cold: flushed from every cache before each call."]
    if left_out:
        notes.append("Not drawn: %s (memory-bound, no bytes counter; its time is in table.md)." % ", ".join(left_out))
    return charts.limits_figure(base, "hwyattn %s against the machine's limits" % context.get("hwyattn_version", ""),
                                compute, memory, latency, notes)


def compare_chart(charts, base, context, results, competitors):
    """compare.*: hwyattn's speed-up over each competitor, and everyone's share of the machine's limits."""
    names = [c[1] for c in competitors]
    peaks, bws = peaks_of(context), {t: as_float(context.get("read_bw_gbps_%dt" % t)) for t in (1, 2)}
    bf16_peaks = {t: as_float(context.get("bf16_peak_gflops_%dt" % t)) for t in (1, 2)}
    ok = lambda e: e is not None and not e.get("error_occurred")
    ids, speedups, limits, limit_names, latencies = [], {}, {}, {}, {}
    for rid in ordered_ids(results):
        libs = [("hwyattn", results)] + [(c[1], c[3]) for c in competitors]
        if not any(ok(res.get((rid, t))) for _, res in libs[1:] for t in (1, 2)):
            continue
        ids.append(rid)
        for name, res in libs:
            for t in (1, 2):
                e, hw = res.get((rid, t)), results.get((rid, t))
                if not ok(e):
                    continue
                if name != "hwyattn" and ok(hw):
                    speedups[(rid, name, t)] = seconds(e) / seconds(hw)
                if rid in LATENCY_ROWS:
                    continue
                if counter(results.get((rid, 1)) or results.get((rid, 2)), "GBps") is not None:
                    limit_names[rid] = "read bw"
                    if counter(e, "GBps") is not None and bws[t]:
                        limits[(rid, name, t)] = 100.0 * counter(e, "GBps") / bws[t]
                elif counter(e, "GFLOPS") is not None and bf16_peaks[t] and "precision=bf16" in (hw or {}).get(
                        "label", ""):
                    limit_names[rid] = "bf16 dot peak"
                    limits[(rid, name, t)] = 100.0 * counter(e, "GFLOPS") / bf16_peaks[t]
                elif counter(e, "GFLOPS") is not None and peaks[t]:
                    limit_names[rid] = "FMA peak"
                    limits[(rid, name, t)] = 100.0 * counter(e, "GFLOPS") / peaks[t]
        if rid in LATENCY_ROWS:
            latencies[rid] = "latency per call, 1 / 2 threads:\n" + "\n".join(
                "%s %s" % (name, " / ".join(charts.duration(seconds(res[(rid, t)])) if ok(res.get((rid, t)))
                                            else "-" for t in (1, 2))) for name, res in libs)
    if not ids:
        return []
    left_out = [rid for rid in ordered_ids(results) if rid not in ids]
    others = ["%s %s" % (c[1], c[2].get("library_version", "").split("+")[0]) for c in competitors]
    title = "hwyattn %s against %s" % (context.get("hwyattn_version", ""), " and ".join(
        [", ".join(others[:-1]), others[-1]] if len(others) > 1 else others))
    notes = ["%s; each library's median time per call, all in the same run." % run_line(context),
             "Limits measured at the start of hwyattn's run: FMA peak %s / %s GFLOP/s, streaming read %s / %s GB/s "
             "(1 / 2 threads). The decode rows run warm (K/V as the previous call left them, partly from L3: "
             "above 100%% of the read bandwidth). Shapes: bench/README.md, table.md."
             % (fmt_num(peaks[1]), fmt_num(peaks[2]), fmt_num(bws[1]), fmt_num(bws[2]))]
    if left_out:
        notes.append("Rows no other library ran, left out here (why: table.md): %s." % ", ".join(left_out))
    return charts.compare_figure(base, title, ids, names, speedups, limits, limit_names, latencies, notes)


def matmul_chart(charts, base, context, results):
    """matmul.*: the packed matmul against oneDNN as % of the FMA peak."""
    impls = [("hwyattn", "hwyattn"), ("onednn", "oneDNN %s" % context.get("onednn_version", ""))]
    impls = [(k, n) for k, n in impls if any(key[0] == k for key in results)]
    ids = ordered({k[1] for k in results}, MATMUL_ORDER)
    vals = {(pid, name, t): counter(results.get((impl, pid, t)), "pct_peak")
            for impl, name in impls for pid in ids for t in (1, 2)}
    notes = ["%s, %s. Shapes (M x N x K): table.md, bench/README.md. FMA peak measured right before each row's "
             "repetitions." % (run_line(context), reps_text(results))]
    return charts.matmul_figure(base, "fp32 matmul Y = X W^T: hwyattn's packed matmul against %s sgemm"
                                % impls[-1][1] if len(impls) > 1 else "fp32 matmul Y = X W^T: hwyattn",
                                ids, [n for _, n in impls], vals, notes)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="?", default=os.path.join(here, "results", "latest.json"))
    ap.add_argument("--out-dir", default=os.path.join(here, "results"))
    ap.add_argument("--matmul", default=None, help="bench_matmul JSON (default: matmul.json next to json)")
    ap.add_argument("--composition", default=None,
                    help="bench_composition JSON (default: composition.json next to json)")
    args = ap.parse_args(argv)
    context, results = load_results(args.json)
    if not results:
        print("report.py: no BM_Attention results in %s" % args.json, file=sys.stderr)
        return 1
    os.makedirs(args.out_dir, exist_ok=True)
    table = os.path.join(args.out_dir, "table.md")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import charts as chartlib
    charts, why = chartlib.load()
    if charts is None:
        print("report.py: no charts (%s); the tables are written" % why, file=sys.stderr)
    out = lambda name: os.path.join(args.out_dir, name)

    rel = rel_path
    json_dir = os.path.dirname(os.path.abspath(args.json))
    sections = []
    written = [table]
    matmul_json = args.matmul or os.path.join(json_dir, "matmul.json")
    if os.path.exists(matmul_json):
        mctx, mres = load_medians(matmul_json, MATMUL_RE,
                                  lambda m: (m.group("impl"), m.group("id"), int(m.group("threads"))))
        if mres:
            sections.append(matmul_section(mctx, mres, rel(matmul_json)))
            if charts:
                written += matmul_chart(charts, out("matmul"), mctx, mres)
                sections[-1] += ["", "Chart: `matmul.svg`, `matmul.png`."]
    elif args.matmul:
        print("report.py: %s does not exist" % matmul_json, file=sys.stderr)
        return 1
    comp_json = args.composition or os.path.join(json_dir, "composition.json")
    if os.path.exists(comp_json):
        cctx, cres = load_medians(comp_json, COMPOSITION_RE,
                                  lambda m: (m.group("id"), m.group("impl"), int(m.group("threads"))))
        if cres:
            sections.append(composition_section(cctx, cres, rel(comp_json)))
    elif args.composition:
        print("report.py: %s does not exist" % comp_json, file=sys.stderr)
        return 1
    tiles_json = os.path.join(json_dir, "tiles.json")
    if os.path.exists(tiles_json):
        tctx, tres = load_medians(tiles_json, TILES_RE, lambda m: (m.group("kind"), m.group("arg")))
        if tres:
            sections.append(tiles_section(tctx, tres, rel(tiles_json)))
    competitors = load_competitors(json_dir, context)
    if competitors:
        sections.insert(0, compare_section(context, results, competitors, rel(args.json)))
        if charts:
            written += compare_chart(charts, out("compare"), context, results, competitors)
            sections[0] += ["", "Chart: `compare.svg`, `compare.png`."]
    if charts:
        written += limits_chart(charts, out("attention"), context, results)
    write_table(table, context, results, rel(args.json), sections)
    with open(table, encoding="utf-8") as f:
        sys.stdout.write(f.read())
    print("wrote %s" % ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
