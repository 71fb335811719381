#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_progress_test: bench/run_bench.py's --progress lines, with a stand-in benchmark binary.

The stand-in (written here, a Python script) behaves as a Google Benchmark binary: with
--benchmark_list_tests it prints its three row names (and fails if it was given --benchmark_out,
which the listing must not touch); otherwise it prints a console line per row, as
--benchmark_report_aggregates_only does (mean, median, stddev, cv), and writes its JSON with the
flags it got. run_bench.py --progress must pass the console through, print "k/3" with each row's
name as the rows arrive, run the binary with exactly the flags it was given, and still record its
context (wall_seconds). Python 3 standard library only.
"""

import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_BENCH = os.path.join(os.path.dirname(HERE), "bench", "run_bench.py")

FAKE = r'''#!%s
import json, sys, time
ROWS = ["BM_Fake/P1/threads:1/min_time:0.100/real_time", "BM_Fake/P1/threads:2/min_time:0.100/real_time",
        "BM_Fake/D1cold/threads:1/min_time:0.100/manual_time"]
args = sys.argv[1:]
if "--benchmark_list_tests=true" in args:
    if any(a.startswith("--benchmark_out") for a in args):
        sys.exit("the listing was given --benchmark_out")
    print("\n".join(ROWS))
    sys.exit(0)
print("Running %%s" %% sys.argv[0])
print("-" * 40, flush=True)
for name in ROWS:
    time.sleep(0.2)
    for agg in ("mean", "median", "stddev", "cv"):
        print("%%-60s %%10.3f ms %%10.3f ms %%8d" %% (name + "_" + agg, 1.5, 1.5, 100), flush=True)
out = [a.split("=", 1)[1] for a in args if a.startswith("--benchmark_out=")][0]
with open(out, "w") as f:
    json.dump({"context": {"argv": args}, "benchmarks": []}, f)
''' % sys.executable


class ProgressTest(unittest.TestCase):
    def test_a_line_per_row(self):
        tmp = tempfile.mkdtemp(prefix="hwyattn_progress_")
        self.addCleanup(lambda: subprocess.call(["rm", "-rf", tmp]))
        fake = os.path.join(tmp, "bench_fake")
        with open(fake, "w", encoding="utf-8") as f:
            f.write(FAKE)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        out = os.path.join(tmp, "fake.json")
        previous = os.path.join(tmp, "previous.json")
        with open(previous, "w", encoding="utf-8") as f:
            json.dump({"context": {"wall_seconds": "125.0"}}, f)
        flags = ["--benchmark_repetitions=3", "--benchmark_out=" + out, "--benchmark_out_format=json",
                 "--benchmark_filter=P1|D1"]
        run = subprocess.run([sys.executable, RUN_BENCH, "--json", out, "--progress", "fake", "--previous", previous,
                              "--", fake] + flags, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        progress = [l for l in run.stderr.splitlines() if l.startswith("run_bench.py: fake: ")]
        self.assertEqual(progress[0], "run_bench.py: fake: 3 rows; the last run took 2m05s")
        rows = [l.rsplit(",", 1)[0] for l in progress[1:]]
        self.assertEqual(rows, ["run_bench.py: fake: 1/3 BM_Fake/P1/threads:1",
                                "run_bench.py: fake: 2/3 BM_Fake/P1/threads:2",
                                "run_bench.py: fake: 3/3 BM_Fake/D1cold/threads:1"])
        for line in progress[1:]:
            self.assertRegex(line, r", \d+m\d\ds$")
        # The console passes through, each row's four aggregate lines.
        self.assertEqual(sum(1 for l in run.stdout.splitlines() if l.startswith("BM_Fake/")), 12)
        with open(out, encoding="utf-8") as f:
            context = json.load(f)["context"]
        self.assertEqual(context["argv"], flags)  # the measured run got exactly its flags
        self.assertIn("wall_seconds", context)


if __name__ == "__main__":
    unittest.main()
