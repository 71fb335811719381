#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs one benchmark binary and records how busy the machine was meanwhile.

    python3 bench/run_bench.py --json OUT.json [--wait-idle SECONDS]
        [--progress LABEL [--previous LAST.json]] -- BINARY [FLAGS...]

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

--progress LABEL (a Google Benchmark binary): first counts the rows with the
same flags plus --benchmark_list_tests (nothing is measured, the JSON is not
touched), then runs the binary as before, its console output passed through,
and prints to stderr a line per row as its results arrive ("LABEL: 12/56
BM_Attention/P1/threads:1, 2m05s"), and every HEARTBEAT seconds without one
the count so far. With interleaved repetitions a row's results arrive after
its last repetition, so most rows finish near the end: the line also gives
LAST.json's wall time (the previous run's) when there is one. The binary's
stdout goes through a pipe (line-buffered with coreutils' stdbuf): the timed
code and its flags are the same as without --progress.

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

HEARTBEAT = 60.0
# A console line of Google Benchmark: the row's name, then an aggregate's suffix or spaces.
CONSOLE_RE = re.compile(r"^(\S+?)(?:_(?:mean|median|stddev|cv))?\s")


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


def short_name(name):
    """BM_Attention/P1/threads:1/min_time:0.400/real_time -> BM_Attention/P1/threads:1."""
    return re.sub(r"/(min_time:[^/]*|real_time|manual_time|process_time)", "", name)


def list_rows(cmd):
    """The benchmark names the binary would run with these flags (--benchmark_list_tests), or None."""
    flags = [a for a in cmd[1:] if not a.startswith(("--benchmark_out", "--benchmark_repetitions"))]
    try:
        out = subprocess.run([cmd[0]] + flags + ["--benchmark_list_tests=true"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def run_with_progress(cmd, label, previous):
    """Runs cmd, passing its stdout through and printing a line per finished row to stderr."""
    rows = list_rows(cmd)
    if not rows:
        print("run_bench.py: %s: could not list the rows; no progress lines" % label, file=sys.stderr)
        return subprocess.call(cmd)
    last = ""
    try:
        with open(previous, encoding="utf-8") as f:
            wall = float(json.load(f)["context"]["wall_seconds"])
        last = "; the last run took %s" % clock(wall)
    except (OSError, TypeError, ValueError, KeyError):
        pass
    print("run_bench.py: %s: %d rows%s" % (label, len(rows), last), file=sys.stderr)
    wanted, done = set(rows), set()
    line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
    t0 = time.monotonic()
    proc = subprocess.Popen(line_buffered + cmd, stdout=subprocess.PIPE, text=True, errors="replace")
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=HEARTBEAT)
        except queue.Empty:
            print("run_bench.py: %s: %d/%d rows done, %s elapsed%s" % (
                label, len(done), len(rows), clock(time.monotonic() - t0), last), file=sys.stderr)
            continue
        if line is None:
            break
        sys.stdout.write(line)
        sys.stdout.flush()
        m = CONSOLE_RE.match(line)
        if m and m.group(1) in wanted and m.group(1) not in done:
            done.add(m.group(1))
            print("run_bench.py: %s: %d/%d %s, %s" % (label, len(done), len(rows), short_name(m.group(1)),
                                                     clock(time.monotonic() - t0)), file=sys.stderr)
    return proc.wait()


def main(argv):
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--wait-idle", type=float, default=0.0)
    ap.add_argument("--progress", metavar="LABEL", help="a line per finished row to stderr (Google Benchmark)")
    ap.add_argument("--previous", help="the previous run's JSON, whose wall time the progress lines give")
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
    rc = run_with_progress(cmd, args.progress, args.previous) if args.progress else subprocess.call(cmd)
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
