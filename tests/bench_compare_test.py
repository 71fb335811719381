#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_compare_test: bench/report.py's comparison section and bench/compare/rows.py, no timing.

report.py runs on small fixed JSON fixtures of made-up rows (an hwyattn run and
two competitors' results) and must put the competitors beside hwyattn in
table.md, with the speed-ups computed from the made-up times; competitor files
of another run must be left out, the report then identical to one without them
(and without a compare chart; the charts themselves: bench_charts_test.py). rows.py's label parsing, FLOP formulas and float64 reference
are checked against hand-computed values. Skipped (77) without numpy.
"""

import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REPORT = os.path.join(REPO, "bench", "report.py")

try:
    import numpy as np
except ImportError:
    print("bench_compare_test: numpy is not importable; skipped")
    sys.exit(77)
sys.path.insert(0, os.path.join(REPO, "bench", "compare"))
import rows as rowlib  # noqa: E402

DATE = "2030-01-02T03:04:05+00:00"
P1 = "B=1 Hq=8 Hkv=8 Lq=1024 Lk=1024 D=64"
D1 = "B=1 Hq=32 Hkv=8 Lq=1 Lk=4096 D=128"


def median_entry(prefix, rid, threads, ms, gflops, label, **extra):
    name = "%s/%s/threads:%d" % (prefix, rid, threads)
    entry = {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
             "repetitions": 3, "real_time": ms, "time_unit": "ms", "GFLOPS": gflops, "label": label}
    entry.update(extra)
    return entry


def hwyattn_run():
    rows = [median_entry("BM_Attention", "P1", 1, 1.0, 80.0, P1), median_entry("BM_Attention", "P1", 2, 0.5, 160.0, P1),
            median_entry("BM_Attention", "D1", 1, 0.4, 10.0, D1), median_entry("BM_Attention", "D1", 2, 0.25, 16.0, D1)]
    return {"context": {"date": DATE, "fma_peak_gflops_1t": "100.0", "fma_peak_gflops_2t": "200.0",
                        "hwyattn_version": "9.9.9", "simd_target": "AVX3"}, "benchmarks": rows}


def torch_run(date=DATE):
    name = "BM_Compare/torch/D1/threads:%d"
    rows = [median_entry("BM_Compare/torch", "P1", 1, 4.0, 20.0, P1, path="bmm + softmax + bmm"),
            median_entry("BM_Compare/torch", "P1", 2, 2.5, 32.0, P1, path="bmm + softmax + bmm")]
    rows += [{"name": name % t, "run_name": name % t, "run_type": "iteration", "label": D1,
              "error_occurred": True, "error_message": "made-up failure"} for t in (1, 2)]
    return {"context": {"library": "torch", "library_version": "1.13.1", "hwyattn_run_date": date,
                        "blas": "/usr/lib/x/openblas-openmp/libopenblasp-r0.3.21.so", "repetitions": "3",
                        "skipped_rows": {"D1cold": "made-up reason"}},
            "benchmarks": rows}


def ort_run(date=DATE):
    rows = [median_entry("BM_Compare/onnxruntime", "P1", 1, 2.0, 40.0, P1, path="ONNX Attention"),
            median_entry("BM_Compare/onnxruntime", "P1", 2, 1.5, 53.3, P1, path="MatMul + Softmax + MatMul"),
            median_entry("BM_Compare/onnxruntime", "D1", 1, 1.2, 3.3, D1, path="ONNX Attention"),
            median_entry("BM_Compare/onnxruntime", "D1", 2, 1.0, 4.0, D1, path="ONNX Attention")]
    return {"context": {"library": "onnxruntime", "library_version": "1.30.0", "node_version": "v20.0.0",
                        "hwyattn_run_date": date, "repetitions": "3"}, "benchmarks": rows}


class ReportTest(unittest.TestCase):
    def run_report(self, files):
        tmp = os.path.relpath(tempfile.mkdtemp(prefix="hwyattn_report_"))  # as report.py names its sources
        self.addCleanup(lambda: subprocess.call(["rm", "-rf", tmp]))
        for name, data in files.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                json.dump(data, f)
        out = os.path.join(tmp, "out")
        subprocess.run([sys.executable, REPORT, os.path.join(tmp, "latest.json"), "--out-dir", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with open(os.path.join(out, "table.md"), encoding="utf-8") as f:
            table = f.read()
        svg_path = os.path.join(out, "compare.svg")
        svg = None
        if os.path.exists(svg_path):
            with open(svg_path, encoding="utf-8") as f:
                svg = f.read()
        return table.replace(tmp, "TMP"), svg

    def table_row(self, table, rid):
        lines = [l for l in table.splitlines() if l.startswith("| %s |" % rid)]
        self.assertEqual(len(lines), 2, lines)  # the main table's and the comparison's
        return [c.strip() for c in lines[1].strip("|").split("|")]

    def test_competitors_beside_hwyattn(self):
        table, _ = self.run_report({"latest.json": hwyattn_run(), "torch.json": torch_run(),
                                      "onnxruntime.json": ort_run()})
        self.assertIn("## Against other libraries", table)
        self.assertIn("| id | shape | hwyattn 1t | PyTorch 1t | ONNX Runtime 1t | hwyattn 2t | PyTorch 2t "
                      "| ONNX Runtime 2t | hwyattn speed-up over the fastest other, 1t / 2t |", table)
        p1 = self.table_row(table, "P1")
        self.assertEqual(p1[1], P1)
        # Cells: time, GFLOP/s, % of the made-up start-up peak (100 / 200).
        self.assertEqual(p1[2:8], ["1.000 ms, 80.0 (80%)", "4.000 ms, 20.0 (20%)", "2.000 ms, 40.0 (40%)",
                                   "0.500 ms, 160.0 (80%)", "2.500 ms, 32.0 (16%)", "1.500 ms, 53.3 (27%)"])
        # Fastest other: 2.0 ms / 1.0 ms at 1 thread, 1.5 ms / 0.5 ms at 2.
        self.assertEqual(p1[8], "2.00x / 3.00x")
        d1 = self.table_row(table, "D1")
        self.assertEqual(d1[3], "error")
        self.assertEqual(d1[8], "3.00x / 4.00x")  # 1.2 / 0.4, 1.0 / 0.25: ONNX Runtime only
        self.assertIn("made-up failure", table)
        self.assertIn("PyTorch 1.13.1 (Debian's python3-torch; BLAS: libopenblasp-r0.3.21.so)", table)
        self.assertIn("- ONNX Runtime: P1 2t: MatMul + Softmax + MatMul; P1 1t, D1: ONNX Attention.", table)
        self.assertIn("- Not run by the other libraries: D1cold (made-up reason).", table)

    def test_other_runs_left_out(self):
        alone, alone_svg = self.run_report({"latest.json": hwyattn_run()})
        stale, stale_svg = self.run_report({"latest.json": hwyattn_run(), "torch.json": torch_run("2029-12-31"),
                                            "onnxruntime.json": ort_run("")})
        self.assertNotIn("Against other libraries", alone)
        self.assertEqual(stale, alone)
        self.assertIsNone(alone_svg)
        self.assertIsNone(stale_svg)

    def test_one_competitor(self):
        table, _ = self.run_report({"latest.json": hwyattn_run(), "onnxruntime.json": ort_run()})
        self.assertIn("| id | shape | hwyattn 1t | ONNX Runtime 1t | hwyattn 2t | ONNX Runtime 2t |", table)
        self.assertNotIn("PyTorch", table)


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
                    "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=2 kv=bf16", "B=1 Hq=2 Hkv=2 Lq=3 Lk=3 D=x"):
            with self.assertRaises(ValueError, msg=bad):
                rowlib.Row("bad", bad)

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
            {"name": "BM_Attention/D1cold/threads:1/manual_time", "run_type": "aggregate", "label": D1},
            {"name": "BM_Attention/D2h/threads:1", "run_type": "aggregate",
             "label": "B=8 Hq=8 Hkv=8 Lq=1 Lk=2048 D=64 kv=bf16"},
            {"name": "BM_Attention/Z9/threads:1", "run_type": "aggregate", "label": "B=1 Hq=2 Hkv=2 Lq=3 Lk=3"},
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(data, f)
        self.addCleanup(os.unlink, f.name)
        rows, skipped, context = rowlib.rows_from_json(f.name)
        self.assertEqual([r.id for r in rows], ["P1", "D1"])  # TP1's pool rows are not shapes of their own
        self.assertEqual(sorted(skipped), ["D1cold", "D2h", "Z9"])
        self.assertIn("timed warm only", skipped["D1cold"])
        self.assertIn("bf16", skipped["D2h"])
        self.assertIn("lacks D", skipped["Z9"])
        self.assertEqual(context["date"], DATE)


if __name__ == "__main__":
    unittest.main()
