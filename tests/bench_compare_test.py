#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_compare_test: bench/report.py's comparison section and chart, and bench/compare/rows.py, no library.

ReportTest runs report.py on small made-up fixtures: an hwyattn run (P1, the bf16 row P1b, the decode row
D1, the KV-cache row D1q, D1q4_0 over ggml's blocks, and D1cold, which no other library runs) and the three
peers' results in the format bench/compare/rows.py's run_peer writes for torch_rows.py, ort_rows.py and
openvino_rows.py (PyTorch fails D1's check: an `error` cell; ONNX Runtime leaves out the bf16 row, PyTorch and
OpenVINO the int8 and int4 caches). Every cell, speed-up, path, reason and version line of the section, and
the chart's rows, legends, bar labels and notes, are checked against values worked out by hand here. Peer
files of another run are left out. The earlier scripts' result files (Debian's torch 1.13, npm's ONNX
Runtime), which report.py still names as such, are checked too.

RowsTest checks rows.py's parsing of bench_attention's labels against hand-written shapes (the bf16, the
KV-cache, the block-format rows and those it must refuse), its FLOP and byte counts, the bf16 inputs and
tolerance, the int8 cache, and a float64 reference worked out by hand.

FakePeerTest runs rows.run_peer, the harness of all three scripts, on a stand-in library written here in
numpy (none of torch, onnxruntime or openvino is needed): a candidate with the wrong scale must be reported
as an `error` and never timed, one that raises too, a row the library cannot express is listed with its
reason; the results have the fixtures' format, and report.py shows them.

Skipped (77) without numpy; the chart's checks without matplotlib.
"""

import contextlib
import copy
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REPORT = os.path.join(REPO, "bench", "report.py")

try:
    import numpy as np
except ImportError:
    print("bench_compare_test: numpy is not importable; skipped")
    sys.exit(77)
try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False
sys.path.insert(0, os.path.join(REPO, "bench", "compare"))
import rows as rowlib  # noqa: E402

DATE = "2030-01-02T03:04:05+00:00"
# Labels as bench_attention writes them (bench/bench_attention.cc: Shape, KvShape).
P1 = "B=1 Hq=8 Hkv=8 Lq=1024 Lk=1024 D=64"
P1B = P1 + " q=bf16 kv=bf16 precision=bf16"
D1 = "B=1 Hq=32 Hkv=8 Lq=1 Lk=4096 D=128"
D1Q = "seqs=1 Hq=32 Hkv=8 D=128 kv=i8(per-token scales) pages=0"
D1Q4 = D1 + " kv=q4_0"
V1 = "seqs=16 Hq=32 Hkv=8 D=128 kv=bf16 pages=16"

COLD = "K/V flushed from the caches before each call; the other libraries are timed warm only"
TORCH_NO_INT = "K and V in i8: made-up torch reason"
TORCH_NO_INT4 = "K and V in q4_0: made-up torch reason"
OV_NO_INT = "K and V in i8: made-up OpenVINO reason"
OV_NO_INT4 = "K and V in q4_0: made-up OpenVINO reason"
ORT_NO_BF16 = "bf16 products: made-up ONNX Runtime reason"
TORCH_P1 = "F.scaled_dot_product_attention: _scaled_dot_product_flash_attention_for_cpu"
TORCH_P1B = "F.scaled_dot_product_attention (bf16): _scaled_dot_product_flash_attention_for_cpu"
TORCH_D1_ERROR = ("F.scaled_dot_product_attention (enable_gqa=True): output differs from the float64 reference: "
                  "max|err|/max|ref| 0.5 > 0.0001")
ORT_ATTENTION = "ONNX Attention (opset 24) on [B, H, L, D]"
ORT_MHA = "com.microsoft MultiHeadAttention (Q as [B, Lq, Hq*D], K and V [B, H, Lk, D])"
ORT_GQA = "com.microsoft GroupQueryAttention (its KV cache as past/present (shared buffers), cache %s)"
OV_SDPA = "ScaledDotProductAttention (opset13)"
OV_GQA = "ScaledDotProductAttention (opset13) (the 4 query heads of a K/V head as one 4-row query)"
OV_RAN = " [the plugin ran: Subgraph jit_avx2_f32, runtime f32, inference precision f32]"


def hw_entry(rid, threads, ms, gflops, label, min_time="0.400", timing="real_time", **counters):
    """bench_attention's median aggregate of a row (run with --benchmark_report_aggregates_only)."""
    name = "BM_Attention/%s/threads:%d/min_time:%s/%s" % (rid, threads, min_time, timing)
    entry = {"name": name + "_median", "run_name": name, "run_type": "aggregate", "repetitions": 3, "threads": 1,
             "aggregate_name": "median", "aggregate_unit": "time", "iterations": 3, "real_time": ms,
             "cpu_time": ms, "time_unit": "ms", "GFLOPS": gflops, "label": label}
    entry.update(counters)
    return entry


def hwyattn_run():
    rows = [hw_entry("P1", 1, 1.0, 80.0, P1, pct_peak=80.0), hw_entry("P1", 2, 0.5, 160.0, P1, pct_peak=80.0),
            hw_entry("P1b", 1, 0.5, 160.0, P1B, pct_bf16_peak=40.0),
            hw_entry("P1b", 2, 0.25, 320.0, P1B, pct_bf16_peak=40.0),
            hw_entry("D1", 1, 0.4, 10.0, D1, "0.300", GBps=80.0, pct_bw=100.0),
            hw_entry("D1", 2, 0.25, 16.0, D1, "0.300", GBps=128.0, pct_bw=100.0),
            hw_entry("D1q", 1, 0.2, 5.0, D1Q, "0.300", GBps=40.0, pct_bw=50.0),
            hw_entry("D1q", 2, 0.1, 10.0, D1Q, "0.300", GBps=80.0, pct_bw=50.0),
            hw_entry("D1q4_0", 1, 0.3, 3.0, D1Q4, "0.300", GBps=30.0, pct_bw=40.0),
            hw_entry("D1q4_0", 2, 0.15, 6.0, D1Q4, "0.300", GBps=60.0, pct_bw=40.0),
            hw_entry("D1cold", 1, 0.5, 8.0, D1, "0.300", "manual_time", GBps=64.0, pct_bw=80.0),
            hw_entry("D1cold", 2, 0.4, 10.0, D1, "0.300", "manual_time", GBps=80.0, pct_bw=60.0)]
    return {"context": {"date": DATE, "num_cpus": 2, "cpu_model": "Made-up CPU", "hwyattn_version": "9.9.9",
                        "simd_target": "AVX3_BF16", "random_interleaving": "true",
                        "fma_peak_gflops_1t": "100.0", "fma_peak_gflops_2t": "200.0",
                        "bf16_peak_gflops_1t": "400.0", "bf16_peak_gflops_2t": "800.0",
                        "read_bw_gbps_1t": "80.0", "read_bw_gbps_2t": "128.0"},
            "benchmarks": rows}


# The peers' results as rows.py's run_peer writes them (benchmark_entry, error_entry, its context).
def peer_entry(lib, rid, threads, ms, gflops, label, path, gbps=None, **extra):
    name = "BM_Compare/%s/%s/threads:%d" % (lib, rid, threads)
    entry = {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
             "repetitions": 3, "threads": 1, "real_time": ms, "time_unit": "ms", "label": label, "GFLOPS": gflops,
             "min_time_per_call": ms * 0.9, "max_time_per_call": ms * 1.2, "path": path, "check_rel_err": 1e-7}
    if gbps is not None:
        entry["GBps"] = gbps
    entry.update(extra)
    return entry


def peer_error(lib, rid, threads, label, message):
    name = "BM_Compare/%s/%s/threads:%d" % (lib, rid, threads)
    return {"name": name, "run_name": name, "run_type": "iteration", "label": label, "error_occurred": True,
            "error_message": message}


def peer_context(lib, date, skipped, **extra):
    context = {"library": lib, "hwyattn_run_date": date, "skipped_rows": skipped, "repetitions": "3",
               "min_time": "0.3", "random_interleaving": "true", "python_version": "3.11.2",
               "numpy_version": "2.4.6", "numpy_huge_page_advice": "off (the system default, as bench_attention's)",
               "wall_seconds": "60.0"}
    context.update(extra)
    return context


def torch_run(date=DATE):
    rows = [peer_entry("torch", "P1", 1, 4.0, 20.0, P1, TORCH_P1), peer_entry("torch", "P1", 2, 2.5, 32.0, P1, TORCH_P1),
            peer_entry("torch", "P1b", 1, 2.0, 40.0, P1B, TORCH_P1B),
            peer_entry("torch", "P1b", 2, 1.0, 80.0, P1B, TORCH_P1B),
            peer_error("torch", "D1", 1, D1, TORCH_D1_ERROR), peer_error("torch", "D1", 2, D1, TORCH_D1_ERROR)]
    return {"context": peer_context(
        "torch", date, {"D1q": TORCH_NO_INT, "D1q4_0": TORCH_NO_INT4, "D1cold": COLD},
        library_version="2.15.0+cu128", installed_from="PyPI torch==2.15.0 (made up)", cpu_capability="AVX2",
        blas="mkl", mkl="2024.2-Product Build 20240605", onednn="v3.13", openmp="201511", other_cpu_pct="3.0"),
        "benchmarks": rows}


def ort_run(date=DATE):
    f32, i8 = ORT_GQA % "float32", ORT_GQA % "int8"
    i4 = ORT_GQA % "int4"
    rows = [peer_entry("onnxruntime", "P1", 1, 2.0, 40.0, P1, ORT_ATTENTION, other_paths={ORT_MHA: "2.2 ms"}),
            peer_entry("onnxruntime", "P1", 2, 1.5, 53.3, P1, ORT_MHA, other_paths={ORT_ATTENTION: "1.6 ms"}),
            peer_entry("onnxruntime", "D1", 1, 1.2, 3.3, D1, f32, 26.7, kv_cache_dtype="float32"),
            peer_entry("onnxruntime", "D1", 2, 1.0, 4.0, D1, f32, 32.0, kv_cache_dtype="float32"),
            peer_entry("onnxruntime", "D1q", 1, 0.8, 1.3, D1Q, i8, 10.8, kv_cache_dtype="int8"),
            peer_entry("onnxruntime", "D1q", 2, 0.5, 2.0, D1Q, i8, 17.3, kv_cache_dtype="int8"),
            peer_entry("onnxruntime", "D1q4_0", 1, 0.6, 1.6, D1Q4, i4, 7.9, kv_cache_dtype="int4"),
            peer_entry("onnxruntime", "D1q4_0", 2, 0.6, 1.6, D1Q4, i4, 7.9, kv_cache_dtype="int4")]
    return {"context": peer_context(
        "onnxruntime", date, {"P1b": ORT_NO_BF16, "D1cold": COLD}, library_version="1.31.1",
        installed_from="PyPI onnxruntime==1.31.1 (made up)", onnx_version="1.23.2", onnx_opset="24",
        execution_provider="CPUExecutionProvider"),
        "benchmarks": rows}


def openvino_run(date=DATE):
    ran = {"inference_precision": "f32", "sdpa_runtime": "Subgraph jit_avx2_f32, runtime f32"}
    bf16 = OV_SDPA + ", INFERENCE_PRECISION_HINT bf16"
    rows = [peer_entry("openvino", "P1", 1, 1.3, 61.0, P1, OV_SDPA, **ran),
            peer_entry("openvino", "P1", 2, 0.8, 100.0, P1, OV_SDPA, **ran),
            peer_entry("openvino", "P1b", 1, 1.0, 80.0, P1B, bf16, **ran),
            peer_entry("openvino", "P1b", 2, 0.6, 133.3, P1B, bf16, **ran),
            peer_entry("openvino", "D1", 1, 0.8, 5.0, D1, OV_GQA, 40.0, **ran),
            peer_entry("openvino", "D1", 2, 0.75, 5.3, D1, OV_GQA, 42.7, **ran)]
    return {"context": peer_context(
        "openvino", date, {"D1q": OV_NO_INT, "D1q4_0": OV_NO_INT4, "D1cold": COLD}, library_version="2026.4.1",
        build="2026.4.1-made-up", installed_from="PyPI openvino==2026.4.1 (made up)", cpu_device="Made-up CPU",
        cpu_capabilities="FP32 INT8 BIN EXPORT_IMPORT", other_cpu_pct="25.0"),
        "benchmarks": rows}


def old_torch_run():
    """The earlier scripts' format: Debian's torch 1.13 (no installed_from)."""
    rows = [peer_entry("torch", "P1", 1, 4.0, 20.0, P1, "bmm + softmax + bmm")]
    return {"context": {"library": "torch", "library_version": "1.13.1", "hwyattn_run_date": DATE,
                        "blas": "/usr/lib/x/openblas-openmp/libopenblasp-r0.3.21.so", "repetitions": "3"},
            "benchmarks": rows}


def old_ort_run():
    """The earlier scripts' format: npm's onnxruntime-node 1.30."""
    rows = [peer_entry("onnxruntime", "P1", 1, 2.0, 40.0, P1, "ONNX Attention (opset 23) on [B, H, L, D]")]
    return {"context": {"library": "onnxruntime", "library_version": "1.30.0", "node_version": "v20.0.0",
                        "hwyattn_run_date": DATE, "repetitions": "3"}, "benchmarks": rows}


def report(files, tmp):
    """report.py on files {name: data} written into the directory tmp: (table.md, compare.svg's path or None,
    stderr), the directory named TMP in the texts."""
    for name, data in files.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            json.dump(data, f)
    out = os.path.join(tmp, "out")
    run = subprocess.run([sys.executable, REPORT, os.path.join(tmp, "latest.json"), "--out-dir", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        raise AssertionError("report.py failed: " + run.stderr)
    with open(os.path.join(out, "table.md"), encoding="utf-8") as f:
        table = f.read()
    svg = os.path.join(out, "compare.svg")

    def named(text):
        return text.replace(tmp, "TMP").replace(os.path.abspath(tmp), "TMP")
    return named(table), (svg if os.path.exists(svg) else None), named(run.stderr)


def temp_dir(prefix):
    """A new directory, relative to the current one (report.py names its sources relative)."""
    return os.path.relpath(tempfile.mkdtemp(prefix=prefix))


def run_report(test, files):
    tmp = temp_dir("hwyattn_report_")
    test.addCleanup(lambda: subprocess.call(["rm", "-rf", tmp]))
    return report(files, tmp)


def table_rows(test, table, rid):
    """The cells of the row's two lines: the main table's and the comparison's."""
    lines = [l for l in table.splitlines() if l.startswith("| %s |" % rid)]
    test.assertEqual(len(lines), 2, lines)
    return [[c.strip() for c in l.strip("|").split("|")] for l in lines]


def svg_texts(path):
    """Every <text> of an SVG (matplotlib writes text as text: bench/charts.py), tspans joined."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()).strip() for t in root.iter("{http://www.w3.org/2000/svg}text")]


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = temp_dir("hwyattn_report_")
        cls.result = report({"latest.json": hwyattn_run(), "torch.json": torch_run(), "onnxruntime.json": ort_run(),
                             "openvino.json": openvino_run()}, cls.tmp)

    @classmethod
    def tearDownClass(cls):
        subprocess.call(["rm", "-rf", cls.tmp])

    def test_three_peers_table(self):
        table, _, _ = self.result
        self.assertIn("## Against other libraries", table)
        self.assertIn("| id | shape | hwyattn 1t | PyTorch 1t | ONNX Runtime 1t | OpenVINO 1t | hwyattn 2t "
                      "| PyTorch 2t | ONNX Runtime 2t | OpenVINO 2t | hwyattn speed-up over the fastest other, 1t / 2t |",
                      table)
        # Cells: time, GFLOP/s, % of the start-up FMA peak (100 / 200); speed-up: the fastest other's time over
        # hwyattn's, at each thread count.
        expected = {
            "P1": [P1, "1.000 ms, 80.0 (80%)", "4.000 ms, 20.0 (20%)", "2.000 ms, 40.0 (40%)", "1.300 ms, 61.0 (61%)",
                   "0.500 ms, 160.0 (80%)", "2.500 ms, 32.0 (16%)", "1.500 ms, 53.3 (27%)", "0.800 ms, 100.0 (50%)",
                   "1.30x / 1.60x"],  # 1.3 / 1.0 (OpenVINO), 0.8 / 0.5 (OpenVINO)
            "P1b": [P1B, "0.500 ms, 160.0 (160%)", "2.000 ms, 40.0 (40%)", "-", "1.000 ms, 80.0 (80%)",
                    "0.250 ms, 320.0 (160%)", "1.000 ms, 80.0 (40%)", "-", "0.600 ms, 133.3 (67%)",
                    "2.00x / 2.40x"],  # 1.0 / 0.5, 0.6 / 0.25: OpenVINO; ONNX Runtime left it out
            "D1": [D1, "0.400 ms, 10.0 (10%)", "error", "1.200 ms, 3.3 (3%)", "0.800 ms, 5.0 (5%)",
                   "0.250 ms, 16.0 (8%)", "error", "1.000 ms, 4.0 (2%)", "0.750 ms, 5.3 (3%)",
                   "2.00x / 3.00x"],  # PyTorch's error does not count: 0.8 / 0.4, 0.75 / 0.25
            "D1q": [D1Q, "0.200 ms, 5.0 (5%)", "-", "0.800 ms, 1.3 (1%)", "-",
                    "0.100 ms, 10.0 (5%)", "-", "0.500 ms, 2.0 (1%)", "-", "4.00x / 5.00x"],
            "D1q4_0": [D1Q4, "0.300 ms, 3.0 (3%)", "-", "0.600 ms, 1.6 (2%)", "-",
                       "0.150 ms, 6.0 (3%)", "-", "0.600 ms, 1.6 (1%)", "-", "2.00x / 4.00x"],
            "D1cold": [D1, "0.500 ms, 8.0 (8%)", "-", "-", "-", "0.400 ms, 10.0 (5%)", "-", "-", "-", "- / -"],
        }
        for rid, cells in expected.items():
            main, compare = table_rows(self, table, rid)
            self.assertEqual(compare[1:], cells, rid)
            self.assertEqual(main[1], cells[0])  # the main table has every row, D1q4_0's underscore too
        order = [l.split("|")[1].strip() for l in table.split("## Against other libraries")[1].splitlines()
                 if l.startswith("| ") and not l.startswith("| id ")]
        self.assertEqual(order[:6], ["P1", "D1", "D1cold", "D1q", "D1q4_0", "P1b"])  # README order, then by name

    def test_three_peers_notes(self):
        table, _, _ = self.result
        self.assertIn("PyTorch 2.15.0+cu128 (PyPI; CPU capability AVX2; BLAS mkl 2024.2, oneDNN v3.13), median of "
                      "3 repetitions, `TMP/torch.json`; ONNX Runtime 1.31.1 (PyPI; CPUExecutionProvider, models "
                      "written with onnx 1.23.2, opset 24), median of 3 repetitions, `TMP/onnxruntime.json`; "
                      "OpenVINO 2026.4.1 (PyPI; CPU plugin, capabilities FP32, INT8, BIN, EXPORT_IMPORT), median of "
                      "3 repetitions, `TMP/openvino.json`.", table)
        self.assertIn("Other processes used 3% of a core during PyTorch's part of the run (bench/run_bench.py).",
                      table)
        self.assertIn("**Warning:** other processes used 25% of a core on average during OpenVINO's part of the "
                      "run (bench/run_bench.py)", table)
        self.assertNotIn("ONNX Runtime's part of the run", table)  # its file records no contention
        lines = table.splitlines()
        self.assertIn("- PyTorch: P1: %s; P1b: %s." % (TORCH_P1, TORCH_P1B), lines)
        self.assertIn("  - error: D1 1t: " + TORCH_D1_ERROR, lines)
        self.assertIn("  - error: D1 2t: " + TORCH_D1_ERROR, lines)
        self.assertIn("- ONNX Runtime: P1 1t: %s; P1 2t: %s; D1: %s; D1q: %s; D1q4_0: %s." % (
            ORT_ATTENTION, ORT_MHA, ORT_GQA % "float32", ORT_GQA % "int8", ORT_GQA % "int4"), lines)
        self.assertIn("- OpenVINO: P1: %s; D1: %s; P1b: %s." % (
            OV_SDPA + OV_RAN, OV_GQA + OV_RAN, OV_SDPA + ", INFERENCE_PRECISION_HINT bf16" + OV_RAN), lines)
        self.assertIn("- Not run by the other libraries: D1cold (%s)." % COLD, lines)
        self.assertIn("- Not run by PyTorch: D1q (%s); D1q4_0 (%s)." % (TORCH_NO_INT, TORCH_NO_INT4), lines)
        self.assertIn("- Not run by ONNX Runtime: P1b (%s)." % ORT_NO_BF16, lines)
        self.assertIn("- Not run by OpenVINO: D1q (%s); D1q4_0 (%s)." % (OV_NO_INT, OV_NO_INT4), lines)

    @unittest.skipUnless(HAVE_MATPLOTLIB, "no matplotlib: no charts")
    def test_three_peers_chart(self):
        table, svg, _ = self.result
        self.assertIsNotNone(svg)
        self.assertIn("Chart: `compare.svg`, `compare.png`.", table)
        texts = svg_texts(svg)
        self.assertIn("hwyattn 9.9.9 against PyTorch 2.15.0, ONNX Runtime 1.31.1 and OpenVINO 2026.4.1", texts)
        for rid in ("P1", "P1b", "D1", "D1q", "D1q4_0"):  # every row a peer ran, on the axes
            self.assertIn(rid, texts)
        self.assertNotIn("D1cold", texts)  # ... not this one, named in the note instead
        note = re.search(r"left out here \(why: table\.md\): ([A-Za-z0-9_, ]*)\.", " ".join(texts))
        self.assertEqual(note.group(1), "D1cold")
        for name in ("PyTorch", "ONNX Runtime", "OpenVINO"):
            self.assertIn("over %s, 1 thread" % name, texts)
            self.assertIn("over %s, 2 threads" % name, texts)
            self.assertIn("%s, 2t" % name, texts)
        self.assertIn("hwyattn, 1t", texts)
        # Bar labels: each peer's time over hwyattn's. Only OpenVINO's P1 1.3x, 1.6x and P1b 2.4x are these.
        for label in ("1.3x", "1.6x", "2.4x", "5.0x"):
            self.assertIn(label, texts)
        # The limit each row is measured against: P1 the FMA peak, P1b (precision=bf16) the bf16 dot peak, the
        # decode rows the read bandwidth.
        self.assertEqual(texts.count("FMA peak"), 1)
        self.assertEqual(texts.count("bf16 dot peak"), 1)
        self.assertEqual(texts.count("read bw"), 3)

    def test_other_runs_left_out(self):
        alone, alone_svg, _ = run_report(self, {"latest.json": hwyattn_run()})
        stale, stale_svg, _ = run_report(self, {"latest.json": hwyattn_run(), "torch.json": torch_run("2029-12-31"),
                                                "onnxruntime.json": ort_run(""), "openvino.json": openvino_run("x")})
        self.assertNotIn("Against other libraries", alone)
        self.assertEqual(stale, alone)
        self.assertIsNone(alone_svg)
        self.assertIsNone(stale_svg)
        one_stale, _, err = run_report(self, {"latest.json": hwyattn_run(), "torch.json": torch_run(),
                                              "onnxruntime.json": ort_run(), "openvino.json": openvino_run("x")})
        self.assertIn("| id | shape | hwyattn 1t | PyTorch 1t | ONNX Runtime 1t | hwyattn 2t | PyTorch 2t "
                      "| ONNX Runtime 2t |", one_stale)
        self.assertNotIn("OpenVINO", one_stale)
        self.assertIn("report.py: TMP/openvino.json is from another run (hwyattn run x, this one %s); left out"
                      % DATE, err)

    def test_earlier_result_files(self):
        table, _, _ = run_report(self, {"latest.json": hwyattn_run(), "torch.json": old_torch_run(),
                                        "onnxruntime.json": old_ort_run()})
        self.assertIn("PyTorch 1.13.1 (Debian's python3-torch; BLAS: libopenblasp-r0.3.21.so)", table)
        self.assertIn("ONNX Runtime 1.30.0 (npm's onnxruntime-node, CPU provider, Node v20.0.0)", table)
        _, p1 = table_rows(self, table, "P1")
        self.assertEqual(p1[2:5], ["1.000 ms, 80.0 (80%)", "4.000 ms, 20.0 (20%)", "2.000 ms, 40.0 (40%)"])
        self.assertEqual(p1[-1], "2.00x / -")  # 2.0 / 1.0; no 2-thread results


class RowsTest(unittest.TestCase):
    def test_labels_and_flops(self):
        p1 = rowlib.Row("P1", P1)
        self.assertEqual((p1.B, p1.Hq, p1.Hkv, p1.Lq, p1.Lk, p1.D, p1.causal), (1, 8, 8, 1024, 1024, 64, False))
        self.assertEqual(p1.flops(), 4.0 * 8 * 1024 * 1024 * 64)
        p2 = rowlib.Row("P2", "B=1 Hq=8 Hkv=8 Lq=2048 Lk=2048 D=64 causal")
        self.assertEqual(p2.flops(), 2.0 * 8 * 2048 * 2049 * 64)  # the causal formula of bench/README.md
        w = rowlib.Row("W", "B=2 Hq=3 Hkv=3 Lq=4 Lk=4 D=5 causal window_left=2")
        self.assertEqual(w.flops(), 4.0 * 2 * 3 * (1 + 2 + 2 + 2) * 5)  # keys seen: 1, 2, 2, 2
        m1 = rowlib.Row("M1", "B=4 Hq=8 Hkv=8 Lq=512 Lk=512 D=64 d_model=512")
        self.assertEqual(m1.flops(), 4.0 * 4 * 8 * 512 * 512 * 64 + 8.0 * 4 * 512 * 512 * 512)
        d1 = rowlib.Row("D1", D1)
        self.assertTrue(d1.is_decode())
        self.assertEqual(d1.kv_bytes(), 2.0 * 8 * 4096 * 128 * 4)
        for bad in ("B=1 Hq=8 Hkv=8 Lq=4 Lk=4", "B=1 Hq=8 Hkv=8 Lq=4 Lk=4 D=2 sliding",
                    "B=1 Hq=6 Hkv=4 Lq=4 Lk=4 D=2", "B=1 Hq=2 Hkv=2 Lq=3 Lk=4 D=2 causal",
                    "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=x"):
            with self.assertRaises(ValueError, msg=bad):
                rowlib.Row("bad", bad)

    def test_bf16_and_block_rows(self):
        p1b = rowlib.Row("P1b", P1B)
        self.assertEqual((p1b.B, p1b.Hq, p1b.Hkv, p1b.Lq, p1b.Lk, p1b.D), (1, 8, 8, 1024, 1024, 64))
        self.assertEqual((p1b.q, p1b.kv, p1b.precision), ("bf16", "bf16", "bf16"))
        self.assertTrue(p1b.is_bf16())
        self.assertFalse(p1b.is_decode())
        self.assertEqual(p1b.flops(), 4.0 * 8 * 1024 * 1024 * 64)  # as P1's
        m1b = rowlib.Row("M1b", "B=4 Hq=8 Hkv=8 Lq=512 Lk=512 D=64 d_model=512 weights=bf16 precision=bf16")
        self.assertEqual((m1b.weights, m1b.precision, m1b.d_model), ("bf16", "bf16", 512))
        self.assertEqual(m1b.flops(), 4.0 * 4 * 8 * 512 * 512 * 64 + 8.0 * 4 * 512 * 512 * 512)
        q4 = rowlib.Row("D1q4_0", D1Q4)  # ONNX Runtime's int4 cache stands in for ggml's Q4_0 blocks
        self.assertEqual((q4.kv, q4.Lq, q4.Lk), ("q4_0", 1, 4096))
        self.assertTrue(q4.is_decode())
        self.assertEqual(q4.kv_bytes(), 2.0 * 8 * 4096 * 128 * 18 / 32)  # 18 bytes per 32 numbers
        q8 = rowlib.Row("P1q8_0", P1 + " kv=q8_0")  # ggml's own blocks (ggml_rows.py)
        self.assertEqual((q8.kv, q8.Lq), ("q8_0", 1024))
        refused = {
            "M1q8_0": ("B=4 Hq=8 Hkv=8 Lq=512 Lk=512 D=64 d_model=512 kv=q8_0", "an MHA row over a q8_0 cache"),
            "D1q4_0i": (D1Q4 + " precision=int8", "integer products"),
            "D2h": ("B=8 Hq=8 Hkv=8 Lq=1 Lk=2048 D=64 kv=bf16", "K and V in bf16 with fp32 products"),
            "P1x": (P1 + " q=bf16 kv=f32 precision=bf16", "need q and K/V in bf16"),
            "M1x": ("B=4 Hq=8 Hkv=8 Lq=512 Lk=512 D=64 d_model=512 precision=bf16", "needs weights=bf16"),
        }
        for rid, (label, why) in refused.items():
            with self.assertRaisesRegex(ValueError, re.escape(why), msg=rid):
                rowlib.Row(rid, label)

    def test_kv_cache_rows(self):
        d1q = rowlib.Row.kv_row("D1q", D1Q)
        self.assertEqual((d1q.B, d1q.Hq, d1q.Hkv, d1q.Lq, d1q.Lk, d1q.D), (1, 32, 8, 1, 4096, 128))
        self.assertEqual((d1q.kv, d1q.pages, d1q.kv_lens, d1q.causal), ("i8", 0, None, False))
        self.assertTrue(d1q.is_decode())
        self.assertEqual(d1q.flops(), 4.0 * 32 * 4096 * 128)
        self.assertEqual(d1q.kv_bytes(), 4096 * (2.0 * 8 * 128 + 2 * 8 * 4))  # int8 K and V, two float scales
        v1 = rowlib.Row.kv_row("V1", V1)
        lens = [64, 128, 200, 333, 512, 777, 901, 1024, 1500, 1777, 2048, 2500, 3000, 3333, 4000, 4096]
        self.assertEqual(sum(lens), 26193)
        self.assertEqual((v1.B, v1.Lq, v1.Lk, v1.kv, v1.pages, v1.kv_lens), (16, 1, 4096, "bf16", 16, lens))
        self.assertEqual(v1.visible(0, 2), (0, 200))  # one query per sequence: all its keys
        self.assertEqual(v1.flops(), 4.0 * 32 * 26193 * 128)
        self.assertEqual(v1.kv_bytes(), 107286528.0)  # bench/README.md's 107 MB: 26193 keys x 2 x 8 x 128 x 2
        self.assertTrue(v1.is_decode())
        v1b = rowlib.Row.kv_row("V1b", V1 + " precision=bf16")
        self.assertTrue(v1b.is_bf16())
        chunk = rowlib.Row.kv_row("V2chunk", "seqs=1 Hq=32 Hkv=8 D=128 kv=f32 pages=16")
        self.assertEqual((chunk.B, chunk.Lq, chunk.Lk, chunk.causal), (1, 512, 2048, True))
        self.assertEqual((chunk.visible(0), chunk.visible(511)), ((0, 1537), (0, 2048)))  # at the cache's end
        self.assertEqual(chunk.flops(), 4.0 * 32 * 128 * (512 * 1536 + 512 * 513 / 2))
        self.assertFalse(chunk.is_decode())
        decodes = rowlib.Row.kv_row("V2decodes", "seqs=15 Hq=32 Hkv=8 D=128 kv=f32 pages=16")
        self.assertEqual((decodes.B, decodes.Lq, decodes.Lk, decodes.kv_lens), (15, 1, 2048, None))
        self.assertEqual(decodes.flops(), 4.0 * 32 * 128 * 15 * 2048)
        f8 = rowlib.Row.kv_row("D1f8", "seqs=1 Hq=32 Hkv=8 D=128 kv=f8e4m3(per-tensor scales) pages=0")
        self.assertEqual(f8.kv, "f8e4m3")
        self.assertEqual(f8.kv_bytes(), 4096 * 2.0 * 8 * 128)
        refused = {
            "V2": ("seqs=16 Hq=32 Hkv=8 D=128 kv=f32 pages=16", "mixed batch"),
            "D1qi": (D1Q + " precision=int8", "integer products"),
            "Z9q": (D1Q, "does not know"),
            "D1q": ("seqs=2 Hq=32 Hkv=8 D=128 kv=i8(per-token scales) pages=0", "2 sequences in the label, 1 in"),
        }
        for rid, (label, why) in refused.items():
            with self.assertRaisesRegex(ValueError, re.escape(why), msg=rid):
                rowlib.Row.kv_row(rid, label)

    def test_bf16_inputs_and_tolerance(self):
        # bf16 keeps 7 bits after the point near 1 (steps of 2^-7), ties to even.
        x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20, -3.0], np.float32)
        np.testing.assert_array_equal(rowlib.round_bf16(x), [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, -3.0])
        row = rowlib.Row("Pb", "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=4 q=bf16 kv=bf16 precision=bf16")
        inp = row.inputs()
        for name in ("q", "k", "v"):  # every operand a bf16 number: its low 16 bits zero
            self.assertFalse(np.any(inp[name].view(np.uint32) & 0xFFFF), name)
        ref = row.reference(inp)
        scale = max(float(np.max(np.abs(r))) for r in ref.values())
        # hwyattn's bound for bf16 products (1e-4 + 2^-9 max|v| / max|ref|) plus a bf16 output's rounding.
        expected = 1e-4 + 2.0 ** -8 + 2.0 ** -9 * float(np.max(np.abs(inp["v"]))) / scale
        self.assertAlmostEqual(row.tolerance(inp, ref, 2.0 ** -8), expected, places=12)
        self.assertEqual(rowlib.Row("T", "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=4").tolerance(inp, ref), 1e-4)

    def test_int8_cache_inputs(self):
        row = rowlib.Row.kv_row("D1q", D1Q)
        inp = row.inputs()
        self.assertEqual(inp["k_q"].dtype, np.int8)
        self.assertEqual(inp["k_q"].shape, (1, 8, 4096, 128))
        self.assertGreaterEqual(int(inp["k_q"].min()), -127)
        self.assertEqual(inp["k_scale"].shape, (8, 128))  # per channel: [Hkv, D]
        self.assertTrue(np.all((inp["k_scale"] >= 0.5 / 127) & (inp["k_scale"] <= 1.5 / 127)))
        np.testing.assert_array_equal(inp["v"], inp["v_q"].astype(np.float32) * inp["v_scale"][None, :, None, :])

    def test_ggml_blocks(self):
        # The bytes read back by ggml-common.h's layout: per block an fp16 d (the machine's byte order), then
        # Q8_0's 32 int8 or Q4_0's 16 bytes, element j < 16 the low nibble of byte j and j + 16 its high one.
        rng = np.random.default_rng(5)
        for kv, size in (("q8_0", 34), ("q4_0", 18)):
            raw, values = rowlib.ggml_blocks(rng, (2, 3, 64), kv)
            self.assertEqual(raw.shape, (2, 3, 2 * size))
            blocks = raw.reshape(2, 3, 2, size)
            d = blocks[..., :2].copy().view(np.float16).astype(np.float64)[..., 0]
            if kv == "q8_0":
                numbers = blocks[..., 2:].view(np.int8).astype(np.float64)
                self.assertLessEqual(int(np.abs(numbers).max()), 127)
            else:
                qs = blocks[..., 2:].astype(np.int64)
                numbers = np.concatenate([qs & 15, qs >> 4], axis=-1) - 8.0
            self.assertTrue(np.all((d >= 2.0 ** (-7 if kv == "q8_0" else -3)) &
                                   (d < 2.0 ** (-6 if kv == "q8_0" else -2))))
            np.testing.assert_array_equal(values.reshape(2, 3, 2, 32), d[..., None] * numbers)

    def test_on_q8_0_grid(self):
        # One block: max |x| 63.5, so d = 0.5; 0.3 -> 0.5, -1.2 -> -1.0, 0.2 -> 0; a zero block stays zero.
        x = np.zeros((1, 64), np.float32)
        x[0, :4] = [63.5, 0.3, -1.2, 0.2]
        y = rowlib.on_q8_0_grid(x)
        np.testing.assert_array_equal(y[0, :4], [63.5, 0.5, -1.0, 0.0])
        np.testing.assert_array_equal(y[0, 32:], 0.0)
        z = rowlib.on_q8_0_grid(np.random.default_rng(6).uniform(-1, 1, (4, 128)).astype(np.float32))
        np.testing.assert_array_equal(rowlib.on_q8_0_grid(z), z)  # on the grid already: unchanged

    def test_reference_by_hand(self):
        # Two query heads share one K/V head (GQA), D = 1 (scale 1), keys 0 and ln 3, values 4 and 8:
        # head 0 (q = 1): weights 1/4, 3/4 -> 7; head 1 (q = 2): weights 1/10, 9/10 -> 7.6.
        row = rowlib.Row("G", "B=1 Hq=2 Hkv=1 Lq=1 Lk=2 D=1")
        inp = {"q": np.array([1.0, 2.0], np.float32).reshape(1, 2, 1, 1),
               "k": np.array([0.0, math.log(3.0)], np.float32).reshape(1, 1, 2, 1),
               "v": np.array([4.0, 8.0], np.float32).reshape(1, 1, 2, 1)}
        ref = row.reference(inp)
        self.assertEqual(list(ref), [(0, 0)])
        np.testing.assert_allclose(ref[(0, 0)].reshape(-1), [7.0, 7.6], rtol=1e-6)
        # Causal: query 0 sees key 0 only, so its output is v[0].
        causal = rowlib.Row("C", "B=1 Hq=1 Hkv=1 Lq=2 Lk=2 D=1 causal")
        inp = {"q": np.ones((1, 1, 2, 1), np.float32), "k": np.array([0.0, 5.0], np.float32).reshape(1, 1, 2, 1),
               "v": np.array([3.0, -1.0], np.float32).reshape(1, 1, 2, 1)}
        ref = causal.reference(inp)
        np.testing.assert_allclose(ref[(0, 0)].reshape(-1), [3.0])
        e5 = math.exp(5.0)
        np.testing.assert_allclose(ref[(0, 1)].reshape(-1), [(3.0 - e5) / (1.0 + e5)], rtol=1e-12)

    def test_rows_from_json(self):
        data = copy.deepcopy(hwyattn_run())
        data["benchmarks"] += [
            {"name": "BM_Attention/TP1/P1/threads:2", "run_type": "aggregate", "label": P1},
            {"name": "BM_Attention/V1/threads:1", "run_type": "aggregate", "label": V1},
            {"name": "BM_Attention/V2/threads:1", "run_type": "aggregate",
             "label": "seqs=16 Hq=32 Hkv=8 D=128 kv=f32 pages=16"},
            {"name": "BM_Attention/D1qi/threads:1", "run_type": "aggregate", "label": D1Q + " precision=int8"},
            {"name": "BM_Attention/D1q8_0/threads:1", "run_type": "aggregate", "label": D1 + " kv=q8_0"},
            {"name": "BM_Attention/D2h/threads:1", "run_type": "aggregate",
             "label": "B=8 Hq=8 Hkv=8 Lq=1 Lk=2048 D=64 kv=bf16"},
            {"name": "BM_Attention/Z9/threads:1", "run_type": "aggregate", "label": "B=1 Hq=2 Hkv=2 Lq=3 Lk=3"},
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(data, f)
        self.addCleanup(os.unlink, f.name)
        rows, skipped, context = rowlib.rows_from_json(f.name)
        # In the file's order; TP1's pool rows are not shapes of their own.
        self.assertEqual([r.id for r in rows], ["P1", "P1b", "D1", "D1q", "D1q4_0", "V1", "D1q8_0"])
        self.assertEqual(sorted(skipped), ["D1cold", "D1qi", "D2h", "V2", "Z9"])
        self.assertEqual(skipped["D1cold"], COLD)
        self.assertIn("mixed batch", skipped["V2"])
        self.assertIn("integer products", skipped["D1qi"])

        self.assertIn("bf16", skipped["D2h"])
        self.assertIn("lacks D", skipped["Z9"])
        self.assertEqual(context["date"], DATE)


# ------------------------------------------------------------------------------------------ a fake peer

TINY = "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=2"
TINY_GQA = "B=1 Hq=4 Hkv=2 Lq=1 Lk=5 D=4"
TINY_CAUSAL = "B=1 Hq=1 Hkv=1 Lq=4 Lk=4 D=2 causal"
WRONG = "numpy, scale 1 (wrong)"


def numpy_attention(row, inp, scale):
    """[B, Hq, Lq, D] float32, the K/V heads repeated for GQA, causal rows masked."""
    group = row.Hq // row.Hkv
    k = np.repeat(inp["k"], group, axis=1).astype(np.float64)
    v = np.repeat(inp["v"], group, axis=1).astype(np.float64)
    s = inp["q"].astype(np.float64) @ k.transpose(0, 1, 3, 2) * scale
    if row.causal:
        s = np.where(np.tri(row.Lq, row.Lk, dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)) @ v).astype(np.float32)


class FakePeerTest(unittest.TestCase):
    """rows.run_peer with a stand-in library: candidates in numpy, calls counted."""

    def candidates_for(self, row):
        if row.id == "U1":
            raise rowlib.Unsupported("made-up reason")
        inp = row.inputs()  # the same seeded inputs as the reference's

        def candidate(path, scale=None, fails=False):
            def bind(threads):
                def call():
                    self.calls[(row.id, path)] = self.calls.get((row.id, path), 0) + 1
                    if fails:
                        raise RuntimeError("made-up failure")
                    return numpy_attention(row, inp, 1.0 / math.sqrt(row.D) if scale is None else scale)
                return (lambda: None), call
            return rowlib.Candidate(path, bind, lambda out: {(b, i): out[b, :, i, :] for b, i in row.check_points()})

        if row.id == "T1":
            return [candidate("numpy"), candidate(WRONG, scale=1.0)]
        if row.id == "G1":
            return [candidate(WRONG, scale=1.0)]
        return [candidate("numpy, raises", fails=True)]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hwyattn_fake_peer_")
        hw = {"context": dict(hwyattn_run()["context"]), "benchmarks": [
            hw_entry(rid, t, 0.001, 1.0, label) for rid, label in
            (("T1", TINY), ("G1", TINY_GQA), ("C1", TINY_CAUSAL), ("U1", TINY), ("T1cold", TINY)) for t in (1, 2)]}
        cls.latest = os.path.join(cls.tmp, "latest.json")
        with open(cls.latest, "w", encoding="utf-8") as f:
            json.dump(hw, f)
        cls.out = os.path.join(cls.tmp, "openvino.json")  # as one of the three, for report.py

    @classmethod
    def tearDownClass(cls):
        subprocess.call(["rm", "-rf", cls.tmp])

    def run_peer(self):
        self.calls = {}
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = rowlib.run_peer("openvino", ["--rows-from", self.latest, "--out", self.out, "--repetitions", "2",
                                              "--min-time", "0.002", "--seed", "3"], self.candidates_for,
                                 lambda: {"library_version": "0.0-fake"})
        self.assertEqual(rc, 0, err.getvalue())
        with open(self.out, encoding="utf-8") as f:
            return json.load(f), err.getvalue()

    def test_wrong_output_is_an_error_not_timed(self):
        data, err = self.run_peer()
        entries = {e["run_name"]: e for e in data["benchmarks"]}
        self.assertEqual(sorted(entries), ["BM_Compare/openvino/%s/threads:%d" % (r, t)
                                           for r in ("C1", "G1", "T1") for t in (1, 2)])
        for t in (1, 2):
            t1 = entries["BM_Compare/openvino/T1/threads:%d" % t]
            self.assertEqual(t1["path"], "numpy")  # the wrong candidate is not the reported one
            self.assertLess(t1["check_rel_err"], 1e-6)
            self.assertEqual((t1["repetitions"], t1["time_unit"]), (2, "ns"))  # T1's 144 FLOPs: ns
            self.assertEqual(list(t1["other_paths"]), [WRONG])
            self.assertRegex(t1["other_paths"][WRONG], r"^error: output differs from the float64 reference: "
                                                       r"max\|err\|/max\|ref\| \S+ > 0\.0001$")
            g1 = entries["BM_Compare/openvino/G1/threads:%d" % t]
            self.assertTrue(g1["error_occurred"])
            self.assertRegex(g1["error_message"], r"^numpy, scale 1 \(wrong\): output differs from the float64 "
                                                  r"reference: max\|err\|/max\|ref\| \S+ > 0\.0001$")
            c1 = entries["BM_Compare/openvino/C1/threads:%d" % t]
            self.assertEqual(c1["error_message"], "numpy, raises: RuntimeError: made-up failure")
        # A wrong candidate is called once, for the check, and never timed; the right one is timed: per thread
        # count and repetition an untimed call and at least one timed.
        self.assertEqual(self.calls[("T1", WRONG)], 1)
        self.assertEqual(self.calls[("G1", WRONG)], 1)
        self.assertEqual(self.calls[("C1", "numpy, raises")], 1)
        self.assertGreaterEqual(self.calls[("T1", "numpy")], 1 + 2 * 2 * 2)
        self.assertEqual(data["context"]["skipped_rows"], {"T1cold": COLD, "U1": "made-up reason"})
        self.assertIn("openvino: U1 left out: made-up reason", err)
        self.assertRegex(err, r"openvino: G1: numpy, scale 1 \(wrong\) \(error: output differs")
        self.assertRegex(err.splitlines()[-1], r"^openvino: 4/4 repetitions done \(rows x threads x candidates x "
                                               r"repetitions\), T1 [12]t, \d+m\d\ds, all timed$")

    def test_results_as_the_fixtures_and_reported(self):
        data, _ = self.run_peer()
        entries = {e["run_name"]: e for e in data["benchmarks"]}
        # The fixtures above have the keys run_peer writes: a timed row's, an error's, the context's.
        timed = entries["BM_Compare/openvino/T1/threads:1"]
        self.assertEqual(sorted(timed), sorted(peer_entry("openvino", "T1", 1, 1.0, 1.0, TINY, "p", other_paths={})))
        error = entries["BM_Compare/openvino/G1/threads:1"]
        self.assertEqual(sorted(error), sorted(peer_error("openvino", "G1", 1, TINY_GQA, "m")))
        common = set(peer_context("openvino", DATE, {})) - {"wall_seconds"}  # run_bench.py adds that one
        self.assertLessEqual(common, set(data["context"]))
        self.assertEqual(data["context"]["hwyattn_run_date"], DATE)
        # The peers' arrays on the pages bench_attention's get: numpy's huge-page advice off from rows.py's import.
        multiarray = getattr(getattr(np, "_core", None), "multiarray", None) or np.core.multiarray
        if hasattr(multiarray, "_get_madvise_hugepage"):
            self.assertFalse(multiarray._get_madvise_hugepage())
            self.assertEqual(data["context"]["numpy_huge_page_advice"], rowlib.NUMPY_HUGE_PAGES)
            self.assertTrue(rowlib.NUMPY_HUGE_PAGES.startswith("off"))
        # report.py shows them beside hwyattn's rows.
        with open(self.latest, encoding="utf-8") as f:
            latest = json.load(f)
        table, _, _ = run_report(self, {"latest.json": latest, "openvino.json": data})
        _, g1 = table_rows(self, table, "G1")
        self.assertEqual(g1[3], "error")
        self.assertEqual(g1[-1], "- / -")
        _, t1 = table_rows(self, table, "T1")
        self.assertRegex(t1[3], r"^\d+ ns, ")
        self.assertIn("  - error: G1 1t: numpy, scale 1 (wrong): output differs from the float64 reference", table)
        self.assertIn("- OpenVINO: T1: numpy.", table)
        self.assertIn("- Not run by the other libraries: T1cold (%s); U1 (made-up reason)." % COLD, table)


if __name__ == "__main__":
    unittest.main()
