#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs one benchmark binary and records how busy the machine was meanwhile.

    python3 bench/run_bench.py --json OUT.json [--wait-idle SECONDS] -- BINARY [FLAGS...]

The binary must write its Google Benchmark JSON to OUT.json (pass
--benchmark_out=OUT.json yourself). Before starting it, waits up to
--wait-idle seconds for the CPUs to be at least 90% idle over one second (the
2-thread figures need both cores). Afterwards, adds to OUT.json's "context":

    other_cpu_pct   CPU time used by other processes during the run, as % of
                    one core averaged over the run's wall time (all CPUs' busy
                    time from /proc/stat minus this benchmark's own user+system
                    time); above ~10 the 2-thread rows are disturbed
    wall_seconds    the run's wall time

report.py prints a warning under a table whose run had other_cpu_pct > 10.
Linux only for the measurement (elsewhere the binary just runs).
Python 3 standard library only.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time


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


def main(argv):
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--wait-idle", type=float, default=0.0)
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
    rc = subprocess.call(cmd)
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
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    print("run_bench.py: %s: %.0f s, other processes used %.0f%% of a core meanwhile"
          % (os.path.basename(cmd[0]), wall, other_pct), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
