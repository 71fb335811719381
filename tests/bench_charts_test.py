#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_charts_test: every chart of bench/report.py and docs/scaling_model.py, drawn from a recorded run.

report.py runs on tests/data/bench_results/ (a small recorded run: attention rows, PyTorch and ONNX
Runtime on some of them, two matmul rows). Each chart must be written as SVG and PNG of a non-trivial
size, and its SVG (text kept as text) must name the rows of the results files, read here from the
benchmark names, not from report.py: attention.svg every attention row, compare.svg every row a
competitor ran and none other on its axes, matmul.svg every matmul row. Without matplotlib
report.py must still write table.md and say that it skipped the charts. Skipped (77) without numpy
or matplotlib.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "bench_results")

try:
    import matplotlib  # noqa: F401
    import numpy  # noqa: F401
except ImportError as e:
    print("bench_charts_test: %s; skipped" % e)
    sys.exit(77)

SVG_NS = "{http://www.w3.org/2000/svg}"


def row_ids(path, pattern):
    """The row ids in a results file's benchmark names, and the ids of the entries without an error."""
    with open(os.path.join(DATA, path), encoding="utf-8") as f:
        data = json.load(f)
    ids, ok = set(), set()
    for b in data["benchmarks"]:
        m = re.match(pattern, b["run_name"])
        if m:
            ids.add(m.group(1))
            if not b.get("error_occurred"):
                ok.add(m.group(1))
    return ids, ok


def note_ids(texts, pattern):
    """The ids listed in a footnote (its lines are separate text elements): pattern's group 1."""
    m = re.search(pattern, " ".join(texts))
    return set(re.findall(r"[A-Za-z0-9]+", m.group(1))) if m else set()


def svg_texts(path):
    """The text of every <text> element of an SVG, one string per element (tspans joined)."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()).strip() for t in root.iter(SVG_NS + "text")]


class ChartsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hwyattn_charts_")
        cls.out = os.path.join(cls.tmp, "out")
        cls.report = subprocess.run(
            [sys.executable, os.path.join(REPO, "bench", "report.py"), os.path.join(DATA, "latest.json"),
             "--out-dir", cls.out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assert_written(self, base):
        """base.svg and base.png exist and are real pictures; returns the SVG's texts."""
        svg, png = os.path.join(self.out, base + ".svg"), os.path.join(self.out, base + ".png")
        self.assertGreater(os.path.getsize(svg), 10000, svg)
        self.assertGreater(os.path.getsize(png), 20000, png)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        texts = svg_texts(svg)
        self.assertGreater(len(texts), 10, "text drawn as paths? %s" % svg)
        return texts

    def test_attention_names_every_row(self):
        ids, _ = row_ids("latest.json", r"BM_Attention/([A-Za-z0-9]+)/threads:")
        self.assertEqual(len(ids), 8)
        texts = self.assert_written("attention")
        not_drawn = note_ids(texts, r"Not drawn: ([A-Za-z0-9, ]*)")
        for rid in ids:
            if rid in not_drawn:
                self.assertNotIn(rid, texts)  # named in the note, not on an axis
            else:
                self.assertIn(rid, texts)  # its own label on an axis
        self.assertEqual(not_drawn, {"V2decodes"})  # memory-bound without a bytes counter
        # The tiny call as a latency: its recorded time per call (ns) is written at its bar.
        with open(os.path.join(DATA, "latest.json"), encoding="utf-8") as f:
            t1 = [b for b in json.load(f)["benchmarks"] if b["run_name"].startswith("BM_Attention/T1/threads:1/")]
        self.assertEqual(t1[0]["time_unit"], "ns")
        self.assertIn("%.0f ns" % t1[0]["real_time"], texts)

    def test_compare_only_rows_a_competitor_ran(self):
        hw, _ = row_ids("latest.json", r"BM_Attention/([A-Za-z0-9]+)/threads:")
        ran = set()
        for lib in ("torch", "onnxruntime"):
            ran |= row_ids(lib + ".json", r"BM_Compare/[a-z]+/([A-Za-z0-9]+)/threads:")[1]
        self.assertEqual(ran, {"P1", "W1", "D1", "T1"})
        texts = self.assert_written("compare")
        for rid in ran:
            self.assertIn(rid, texts)
        left_out = note_ids(texts, r"left out here \(why: table\.md\): ([A-Za-z0-9, ]*)")
        self.assertEqual(left_out, hw - ran)  # named as left out ...
        for rid in hw - ran:
            self.assertNotIn(rid, texts)  # ... and not on the axes
        for name in ("PyTorch", "ONNX Runtime"):
            self.assertTrue(any(t.startswith("over " + name) for t in texts), name)
        with open(os.path.join(self.out, "table.md"), encoding="utf-8") as f:
            self.assertIn("Chart: `compare.svg`, `compare.png`.", f.read())

    def test_matmul_names_every_row(self):
        ids, _ = row_ids("matmul.json", r"BM_Matmul/[a-z]+/([A-Za-z0-9_]+)/threads:")
        texts = self.assert_written("matmul")
        for rid in ids:
            self.assertIn(rid, texts)
        self.assertTrue(any(t.startswith("oneDNN") for t in texts))

    def test_without_matplotlib_the_tables_stay(self):
        fake = os.path.join(self.tmp, "no_matplotlib")
        os.makedirs(os.path.join(fake, "matplotlib"), exist_ok=True)
        with open(os.path.join(fake, "matplotlib", "__init__.py"), "w", encoding="utf-8") as f:
            f.write("raise ImportError('no matplotlib here (test)')\n")
        out = os.path.join(self.tmp, "plain")
        run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "report.py"),
                              os.path.join(DATA, "latest.json"), "--out-dir", out],
                             env=dict(os.environ, PYTHONPATH=fake), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, check=True)
        self.assertIn("no charts", run.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["table.md"])
        with open(os.path.join(out, "table.md"), encoding="utf-8") as f:
            table = f.read()
        self.assertIn("| P1 |", table)
        self.assertNotIn("Chart:", table)

    def test_scaling_figure(self):
        base = os.path.join(self.tmp, "scaling")
        subprocess.run([sys.executable, os.path.join(REPO, "docs", "scaling_model.py"), "--out", base],
                       stdout=subprocess.PIPE, check=True)
        self.assertGreater(os.path.getsize(base + ".png"), 20000)
        texts = svg_texts(base + ".svg")
        for label in ("N = 2 machines", "N = 16 machines", "100 Gb/s, 5 us", "25 Gb/s, 20 us"):
            self.assertIn(label, texts)


if __name__ == "__main__":
    unittest.main()
