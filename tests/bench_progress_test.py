#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_progress_test: bench/run_bench.py's --progress lines (scripts/bench.sh's progress).

RepetitionsTest feeds run_bench.Repetitions hand-made Google Benchmark --v=2 lines ("-- LOG(2): Running
<row> for <n>", "-- LOG(2): Ran in ...") with hand-picked times, and checks the repetitions it counts
(a row's first repetition is a series of calls of growing n, each later one a single call of the final
n; the rows' repetitions shuffled) and its estimate of the time left, both worked out by hand below.

ProgressTest runs run_bench.py --progress on a stand-in benchmark binary (written here, a Python
script) that behaves as Google Benchmark 1.7 does with --benchmark_enable_random_interleaving: with
--benchmark_list_tests it prints its three row names (and fails if given --benchmark_out, which the
listing must not touch); otherwise it runs each row's repetitions in a shuffled order, logging each call
on stderr when given --v=2, and prints a row's console lines (mean, median, stddev, cv) only after its
last repetition. run_bench.py must count the 9 repetitions, keep the log lines out of the output and pass
everything else through, run the binary with its flags plus --v=2, and record its context
(wall_seconds). A binary that rejects --v=2 gets the row count instead. Python 3 standard library only.
"""

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_BENCH = os.path.join(os.path.dirname(HERE), "bench", "run_bench.py")
sys.path.insert(0, os.path.dirname(RUN_BENCH))
import run_bench  # noqa: E402

A, B, C = ("BM_Fake/%s/threads:1/min_time:0.100/real_time" % r for r in ("A", "B", "C"))


def running(row, n):
    return "-- LOG(2): Running %s for %d\n" % (row, n)


RAN = "-- LOG(2): Ran in 0.01/0.01\n"


class RepetitionsTest(unittest.TestCase):
    def feed(self, reps, events):
        for t, line in events:
            reps.feed(line, t)

    def test_estimation_calls_are_one_repetition(self):
        reps = run_bench.Repetitions([A, B, C], 3)
        self.assertEqual(reps.total, 9)
        self.assertIsNone(reps.left_seconds())
        self.assertEqual(reps.line("fake", 5), "fake: 0/9 repetitions done (3 rows x 3; 0 rows complete), 0m05s, "
                                               "time left: known after the first repetition")
        self.assertFalse(reps.feed("measuring the FMA peak...\n", 0.0))  # not a log line: shown
        self.assertTrue(reps.feed(RAN, 0.0))  # a stray "Ran in" before any call: ignored
        self.feed(reps, [
            (0.0, running(A, 1)), (1.0, RAN),     # A's first repetition: n = 1 too short,
            (1.0, running(A, 10)), (3.0, RAN),    # n = 10 long enough: A 1 done (3 s, its last call 2 s)
            (3.0, running(B, 4)), (4.0, RAN),     # B's first repetition: n = 4 long enough at once,
            (4.0, running(B, 4)), (5.0, RAN),     # the same n again: B 1 done (1 s), its second (1 s)
            (5.0, running(A, 10)), (7.5, RAN),    # B 2 done; A's second repetition, not yet closed
        ])
        self.assertEqual(reps.done(), 3)
        self.assertEqual(reps.rows_complete(), 0)
        # Left: A 2 more x 2 s; B 1 more x 1 s; C not started: the mean first repetition (3 + 1) / 2 = 2,
        # then 2 x the mean later one (2 + 1) / 2 = 1.5: 4 + 1 + 5 = 10 s.
        self.assertAlmostEqual(reps.left_seconds(), 10.0)
        reps.finish(8.0)  # the binary exited: A's second repetition ended with its "Ran in" (2.5 s)
        self.assertEqual(reps.done(), 4)
        # A 1 x 2.5; B 1 x 1; C 2 + 2 x (2.5 + 1) / 2 = 5.5: 9 s.
        self.assertAlmostEqual(reps.left_seconds(), 9.0)
        self.assertEqual(reps.line("fake", 65), "fake: 4/9 repetitions done (3 rows x 3; 0 rows complete), 1m05s, "
                                                "about 0m09s left")

    def test_shuffled_rows_to_the_end(self):
        reps = run_bench.Repetitions([A, B, C], 2)
        self.feed(reps, [
            (0, running(C, 5)), (1, RAN), (1, running(C, 50)), (2, RAN),  # C: estimation, one repetition
            (2, running(A, 3)), (3, RAN),                                 # C 1; A's first: n = 3 at once
            (3, running(C, 50)), (4, RAN),                                # A 1; C's second
            (4, running(B, 1)), (5, RAN), (5, running(B, 2)), (6, RAN),   # C 2 complete; B: estimation
            (6, running(B, 2)), (7, RAN),                                 # B 1; B's second
            (7, running(A, 3)), (8, RAN),                                 # B 2 complete; A's second
        ])
        self.assertEqual((reps.done(), reps.rows_complete()), (5, 2))
        self.assertAlmostEqual(reps.left_seconds(), 1.0)  # A: 1 more x 1 s
        reps.finish(8.5)
        self.assertEqual((reps.done(), reps.rows_complete()), (6, 3))
        self.assertEqual(reps.left_seconds(), 0.0)
        self.assertTrue(reps.line("fake", 9).endswith("6/6 repetitions done (3 rows x 2; 3 rows complete), 0m09s, "
                                                      "all done"))


FAKE = r'''#!%s
import json, os, random, sys, time
ROWS = ["BM_Fake/P1/threads:1/min_time:0.100/real_time", "BM_Fake/P1/threads:2/min_time:0.100/real_time",
        "BM_Fake/D1cold/threads:1/min_time:0.100/manual_time"]
ESTIMATION = {ROWS[0]: [1, 10, 80], ROWS[1]: [1, 12], ROWS[2]: [30]}  # a row's first repetition's calls
args = sys.argv[1:]
verbose = "--v=2" in args
if verbose and os.environ.get("FAKE_NO_V"):
    sys.exit("unrecognized command-line flag: --v=2")  # as Google Benchmark before --v existed
if "--benchmark_list_tests=true" in args:
    if any(a.startswith("--benchmark_out") for a in args):
        sys.exit("the listing was given --benchmark_out")
    print("\n".join(ROWS))
    sys.exit(0)
reps = int([a.split("=", 1)[1] for a in args if a.startswith("--benchmark_repetitions=")][0])
print("measuring the FMA peak...", file=sys.stderr, flush=True)
print("Running %%s" %% sys.argv[0])
print("-" * 40, flush=True)
order = [r for r in ROWS for _ in range(reps)]
random.Random(5).shuffle(order)
done = {r: 0 for r in ROWS}
for row in order:
    for n in (ESTIMATION[row] if done[row] == 0 else ESTIMATION[row][-1:]):
        if verbose:
            print("-- LOG(2): Running %%s for %%d" %% (row, n), file=sys.stderr, flush=True)
        time.sleep(0.03)
        if verbose:
            print("-- LOG(2): Ran in 0.03/0.03", file=sys.stderr, flush=True)
    done[row] += 1
    if done[row] == reps:  # Google Benchmark reports a row after its last repetition
        for agg in ("mean", "median", "stddev", "cv"):
            print("%%-60s %%10.3f ms %%10.3f ms %%8d" %% (row + "_" + agg, 1.5, 1.5, reps), flush=True)
out = [a.split("=", 1)[1] for a in args if a.startswith("--benchmark_out=")][0]
with open(out, "w") as f:
    json.dump({"context": {"argv": args}, "benchmarks": []}, f)
''' % sys.executable


class ProgressTest(unittest.TestCase):
    def run_fake(self, env=None):
        tmp = tempfile.mkdtemp(prefix="hwyattn_progress_")
        self.addCleanup(lambda: subprocess.call(["rm", "-rf", tmp]))
        fake = os.path.join(tmp, "bench_fake")
        with open(fake, "w", encoding="utf-8") as f:
            f.write(FAKE)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        out = os.path.join(tmp, "fake.json")
        previous = os.path.join(tmp, "previous.json")
        with open(previous, "w", encoding="utf-8") as f:  # a run of 3 rows x 5 repetitions, 125 s
            json.dump({"context": {"wall_seconds": "125.0"}, "benchmarks": [
                {"name": "BM_Fake/%s_%s" % (r, a), "run_name": "BM_Fake/%s" % r, "repetitions": 5}
                for r in ("P1/threads:1", "P1/threads:2", "D1cold/threads:1") for a in ("mean", "median")]}, f)
        flags = ["--benchmark_repetitions=3", "--benchmark_out=" + out, "--benchmark_out_format=json",
                 "--benchmark_filter=P1|D1"]
        run = subprocess.run([sys.executable, RUN_BENCH, "--json", out, "--progress", "fake", "--previous", previous,
                              "--progress-every", "0.05", "--", fake] + flags, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
        self.assertEqual(run.returncode, 0, run.stderr)
        progress = [l for l in run.stderr.splitlines() if l.startswith("run_bench.py: fake: ")]
        with open(out, encoding="utf-8") as f:
            context = json.load(f)["context"]
        self.assertIn("wall_seconds", context)
        # The console passes through, each row's four aggregate lines.
        self.assertEqual(sum(1 for l in run.stdout.splitlines() if l.startswith("BM_Fake/")), 12)
        self.assertIn("measuring the FMA peak...", run.stderr.splitlines())  # the binary's own stderr
        return run, progress, context["argv"], flags

    def test_repetitions_done(self):
        run, progress, argv, flags = self.run_fake()
        self.assertEqual(argv, flags + ["--v=2"])  # the measured run: its flags, plus the call log
        self.assertNotIn("-- LOG(", run.stderr)  # counted, not shown
        self.assertEqual(progress[0], "run_bench.py: fake: 3 rows x 3 repetitions; the last run (3 rows x 5) "
                                      "took 2m05s")
        line = re.compile(r"^run_bench\.py: fake: (\d)/9 repetitions done \(3 rows x 3; (\d) rows complete\), "
                          r"\d+m\d\ds, (about \d+m\d\ds left|time left: known after the first repetition|all done)$")
        counts = []
        for l in progress[1:]:
            m = line.match(l)
            self.assertIsNotNone(m, l)
            counts.append(int(m.group(1)))
        self.assertEqual(counts, sorted(counts))
        self.assertGreater(len(counts), 2)  # lines while it ran (every 0.05 s; the calls take 0.5 s)
        self.assertTrue(progress[-1].startswith("run_bench.py: fake: 9/9 repetitions done (3 rows x 3; 3 rows "
                                                "complete)"), progress[-1])
        self.assertTrue(progress[-1].endswith(", all done"), progress[-1])

    def test_without_the_call_log(self):
        run, progress, argv, flags = self.run_fake({"FAKE_NO_V": "1"})
        self.assertEqual(argv, flags)
        self.assertEqual(progress[0], "run_bench.py: fake: 3 rows x 3 repetitions; the last run (3 rows x 5) "
                                      "took 2m05s")
        self.assertRegex(progress[-1], r"^run_bench\.py: fake: 3/3 rows done, \d+m\d\ds; the last run")


if __name__ == "__main__":
    unittest.main()
