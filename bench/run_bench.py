#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs one benchmark binary and records how busy the machine was meanwhile.

    python3 bench/run_bench.py --json OUT.json [--wait-idle SECONDS]
        [--progress LABEL [--previous LAST.json] [--progress-every SECONDS]] -- BINARY [FLAGS...]

The binary must write its Google Benchmark JSON to OUT.json (pass
--benchmark_out=OUT.json yourself). Before starting it, waits up to
--wait-idle seconds for the CPUs to be at least 90% idle over one second (the
2-thread figures need both cores). Afterwards, adds to OUT.json's "context":

    other_cpu_pct   CPU time used by other processes during the run, as % of
                    one core averaged over the run's wall time (all CPUs' busy
                    time from /proc/stat minus this benchmark's own user+system
                    time); above ~10 the 2-thread rows are disturbed
    wall_seconds    the run's wall time
    cpu_model       /proc/cpuinfo's model name, for report.py's captions

--progress LABEL (a Google Benchmark binary): first lists the rows with the
same flags plus --benchmark_list_tests (nothing is measured, the JSON is not
touched), then runs the binary as before, its console output passed through,
plus --v=2: Google Benchmark then logs each call of a row's function on
stderr ("-- LOG(2): Running <row> for <iterations>", "-- LOG(2): Ran in
<cpu>/<real>"), outside the timed loop. From those lines (class Repetitions,
not passed through) it counts the repetitions finished, and prints to stderr,
every --progress-every seconds (default 30) and at the end:

    run_bench.py: attention: 37/120 repetitions done (40 rows x 3; 2 rows
    complete), 2m10s, about 5m20s left

The count is what is done: under random interleaving a row's results (its
console lines, the JSON) arrive only after its last repetition, most of them
near the end, so rows complete says little until then. "Time left" is from
this run's own repetitions: each started row's latest repetition time for its
remaining ones, the mean over started rows for the others (their first
repetition, which also finds the iteration count, then the rest); before the
first repetition ends it says so, and the start line gives the previous run's
wall time (LAST.json, --previous) with its rows and repetitions. A binary that
rejects --v=2 gets the row count instead ("k/n rows done").
The binary's stdout goes through a pipe (line-buffered with coreutils'
stdbuf): the timed code is the same as without --progress.

report.py prints a warning under a table whose run had other_cpu_pct > 10.
Linux only for the measurement (elsewhere the binary just runs).
Python 3 standard library only.
"""

import argparse
import json
import os
import queue
import re
import resource
import shutil
import subprocess
import sys
import threading
import time

PROGRESS_EVERY = 30.0
# A console line of Google Benchmark: the row's name, then an aggregate's suffix or spaces.
CONSOLE_RE = re.compile(r"^(\S+?)(?:_(?:mean|median|stddev|cv))?\s")
# Google Benchmark's --v=2 lines, one pair per call of a row's function (benchmark_runner.cc).
LOG_RE = re.compile(r"^-- LOG\(\d+\): (?:Running (\S+) for (\d+)|Ran in )")
# Google Benchmark flags that make the rows list and listing differ from the measured run.
RUN_ONLY_FLAGS = ("--benchmark_out", "--benchmark_repetitions")


class Repetitions:
    """Counts the repetitions a Google Benchmark binary (1.7) has finished, from its --v=2 lines.

    Each call of a row's function logs "-- LOG(2): Running <row> for <n>" (n iterations) and, once
    done, "-- LOG(2): Ran in <cpu>/<real>". A row's first repetition is a series of calls of growing n
    until one lasts min_time (the iteration count's estimation); each later repetition is one call of
    that same n. Under random interleaving the repetitions of all rows run in a shuffled order, but a
    repetition's calls are never split. So a call ends a repetition unless the next call is of the same
    row with more iterations; the last call ends one when the binary exits (finish()).

    feed(line, now) takes every stderr line with its time (seconds, any origin); done() the repetitions
    finished, rows_complete() the rows with all of theirs, left_seconds() the estimate of the time
    left, or None before the first repetition has ended."""

    def __init__(self, rows, repetitions):
        self.rows = list(rows)
        self.repetitions = max(int(repetitions), 1)
        self.total = len(self.rows) * self.repetitions
        self.finished = {}  # row -> repetitions finished
        self.first = {}  # row -> wall seconds of its first repetition (the estimation calls included)
        self.call = {}  # row -> wall seconds of its latest repetition's last call (what a later one takes)
        self.current = None  # [row, n, start of its repetition, start of this call, end of this call]

    def feed(self, line, now):
        """True for a --v=2 line (counted, not to be shown), False for any other."""
        m = LOG_RE.match(line)
        if not m:
            return False
        if m.group(1) is None:  # "Ran in": the current call is over
            if self.current is not None:
                self.current[4] = now
            return True
        row, n = m.group(1), int(m.group(2))
        cur = self.current
        if cur is not None and cur[0] == row and n > cur[1]:
            self.current = [row, n, cur[2], now, None]  # the estimation goes on: the same repetition
        else:
            self._close(now)
            self.current = [row, n, now, now, None]
        return True

    def finish(self, now):
        """The binary has exited: its last call ended a repetition."""
        self._close(now)

    def _close(self, now):
        cur, self.current = self.current, None
        if cur is None:
            return
        row, _, rep_start, call_start, call_end = cur
        end = call_end if call_end is not None else now
        if row not in self.finished:
            self.first[row] = end - rep_start
        self.finished[row] = self.finished.get(row, 0) + 1
        self.call[row] = end - call_start

    def done(self):
        return min(sum(self.finished.values()), self.total)

    def rows_complete(self):
        return sum(1 for r in self.rows if self.finished.get(r, 0) >= self.repetitions)

    def left_seconds(self):
        """Seconds left by this run's repetitions so far: a started row's latest repetition time for each
        it has left; a row not started the mean first repetition of the started ones, then the mean later
        one. None before a repetition has ended."""
        if not self.finished:
            return None
        first = sum(self.first.values()) / len(self.first)
        later = sum(self.call.values()) / len(self.call)
        left = 0.0
        for row in self.rows:
            n = self.finished.get(row, 0)
            if n:
                left += max(self.repetitions - n, 0) * self.call[row]
            else:
                left += first + (self.repetitions - 1) * later
        return left

    def line(self, label, elapsed):
        """'attention: 37/120 repetitions done (40 rows x 3; 2 rows complete), 2m10s, about 5m20s left'."""
        left = self.left_seconds()
        if self.done() >= self.total:
            tail = "all done"
        elif left is None:
            tail = "time left: known after the first repetition"
        else:
            tail = "about %s left" % clock(left)
        return "%s: %d/%d repetitions done (%d rows x %d; %d rows complete), %s, %s" % (
            label, self.done(), self.total, len(self.rows), self.repetitions, self.rows_complete(),
            clock(elapsed), tail)


def cpu_jiffies():
    """(busy, total) jiffies of all CPUs, or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def idle_fraction(seconds=1.0):
    a = cpu_jiffies()
    time.sleep(seconds)
    b = cpu_jiffies()
    if a is None or b is None or b[1] == a[1]:
        return 1.0
    return 1.0 - (b[0] - a[0]) / (b[1] - a[1])


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def clock(seconds):
    return "%dm%02ds" % divmod(int(round(seconds)), 60)


def flag_value(cmd, flag, default=None):
    """The value of the last --flag=value in cmd (Google Benchmark takes the last)."""
    value = default
    for a in cmd[1:]:
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


def list_rows(cmd):
    """The benchmark names the binary would run with these flags (--benchmark_list_tests), or None."""
    flags = [a for a in cmd[1:] if not a.startswith(RUN_ONLY_FLAGS)]
    try:
        out = subprocess.run([cmd[0]] + flags + ["--benchmark_list_tests=true"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def previous_run(path):
    """'; the last run (90 rows x 5) took 23m10s' from a previous run's JSON, or ''."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        wall = float(data["context"]["wall_seconds"])
    except (OSError, TypeError, ValueError, KeyError):
        return ""
    names = {b.get("run_name") for b in data.get("benchmarks", []) if b.get("run_name")}
    reps = {b.get("repetitions") for b in data.get("benchmarks", []) if b.get("repetitions")}
    what = " (%d rows x %s)" % (len(names), "/".join(str(r) for r in sorted(reps))) if names and reps else ""
    return "; the last run%s took %s" % (what, clock(wall))


def run_with_progress(cmd, label, previous, every=PROGRESS_EVERY):
    """Runs cmd, passing its output through and printing the repetitions done to stderr (Repetitions)."""
    verbose = cmd + ["--v=2"]
    rows = list_rows(verbose)
    if rows is None:  # a binary without Google Benchmark's --v: count the rows as their results arrive
        verbose, rows = cmd, list_rows(cmd)
    if not rows:
        print("run_bench.py: %s: could not list the rows; no progress lines" % label, file=sys.stderr)
        return subprocess.call(cmd)
    reps = Repetitions(rows, flag_value(cmd, "--benchmark_repetitions", "1"))
    counting = verbose is not cmd
    last = previous_run(previous) if previous else ""
    print("run_bench.py: %s: %d rows x %d repetitions%s" % (label, len(rows), reps.repetitions, last),
          file=sys.stderr, flush=True)
    wanted, complete = set(rows), set()
    line_buffered = ["stdbuf", "-oL", "-eL"] if shutil.which("stdbuf") else []
    t0 = time.monotonic()
    proc = subprocess.Popen(line_buffered + verbose, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    lines = queue.Queue()

    def pump(stream, kind):
        for text in stream:
            lines.put((kind, text, time.monotonic()))
        lines.put((kind, None, time.monotonic()))

    for stream, kind in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, kind), daemon=True).start()

    def report(now):
        if counting:
            text = reps.line(label, now - t0)
        else:
            text = "%s: %d/%d rows done, %s%s" % (label, len(complete), len(rows), clock(now - t0), last)
        print("run_bench.py: " + text, file=sys.stderr, flush=True)

    open_streams, next_line = 2, t0 + every
    while open_streams:
        try:
            kind, text, when = lines.get(timeout=max(next_line - time.monotonic(), 0.01))
        except queue.Empty:
            kind, text = None, None
        if time.monotonic() >= next_line:
            report(time.monotonic())
            next_line = time.monotonic() + every
        if kind is None:
            continue
        if text is None:
            open_streams -= 1
        elif kind == "err":
            if not (counting and reps.feed(text, when - t0)):
                sys.stderr.write(text)
                sys.stderr.flush()
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
            m = CONSOLE_RE.match(text)
            if m and m.group(1) in wanted:
                complete.add(m.group(1))
    rc = proc.wait()
    reps.finish(time.monotonic() - t0)
    report(time.monotonic())
    return rc


def main(argv):
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--wait-idle", type=float, default=0.0)
    ap.add_argument("--progress", metavar="LABEL",
                    help="the repetitions done and the time left on stderr (a Google Benchmark binary)")
    ap.add_argument("--previous", help="the previous run's JSON, whose wall time the progress lines give")
    ap.add_argument("--progress-every", type=float, default=PROGRESS_EVERY, metavar="SECONDS",
                    help="seconds between progress lines (default %.0f)" % PROGRESS_EVERY)
    args = ap.parse_args(argv[:split])
    cmd = argv[split + 1:]

    waited = 0.0
    while waited < args.wait_idle:
        if idle_fraction() >= 0.9:
            break
        waited += 1.0
    if args.wait_idle > 0 and waited >= args.wait_idle:
        print("run_bench.py: the CPUs stayed busy for %.0f s; running anyway" % waited, file=sys.stderr)

    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    before = cpu_jiffies()
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = (run_with_progress(cmd, args.progress, args.previous, args.progress_every) if args.progress
          else subprocess.call(cmd))
    wall = time.monotonic() - t0
    after = cpu_jiffies()
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        return rc
    if before is None or after is None or not os.path.exists(args.json):
        return 0
    ours = (usage_after.ru_utime - usage_before.ru_utime) + (usage_after.ru_stime - usage_before.ru_stime)
    busy = (after[0] - before[0]) / float(hz)
    other_pct = max(0.0, busy - ours) / wall * 100.0 if wall > 0 else 0.0
    with open(args.json, encoding="utf-8") as f:
        data = json.load(f)
    data.setdefault("context", {})["other_cpu_pct"] = "%.1f" % other_pct
    data["context"]["wall_seconds"] = "%.1f" % wall
    if cpu_model():
        data["context"]["cpu_model"] = cpu_model()
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    print("run_bench.py: %s: %.0f s, other processes used %.0f%% of a core meanwhile"
          % (os.path.basename(cmd[0]), wall, other_pct), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
