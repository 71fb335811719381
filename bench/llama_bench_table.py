#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The table of scripts/llama_bench.sh: llama-bench's JSON outputs
(<model>.<cpu|hwyattn>.<round>.json in one folder), each row the median
tokens/s over the rounds of the CPU backend alone and of CPU + hwyattn, and
their ratio; the machine, the versions and the command line above it."""
import argparse
import collections
import datetime
import json
import pathlib
import platform
import statistics
import subprocess


def machine():
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k in ("model name", "cpu family", "model") and k not in info:
                info[k] = v
    except OSError:
        pass
    name = info.get("model name", platform.processor() or platform.machine())
    family, model = int(info.get("cpu family", 0) or 0), int(info.get("model", 0) or 0)
    # AMD family 19h: models 00-0Fh and 20-5Fh are Zen 3, the rest Zen 4; 1Ah: Zen 5.
    zen = ""
    if "AMD" in name and family == 25:
        zen = ", Zen 3" if model < 0x10 or 0x20 <= model < 0x60 else ", Zen 4"
    elif "AMD" in name and family == 26:
        zen = ", Zen 5"
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    return f"{name} (family {family} model {model}{zen}), {cores} cores"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw")
    ap.add_argument("--cache", default="f16")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--llama-cpp", default="")
    args = ap.parse_args()
    ts = collections.defaultdict(list)  # (model, test, who) -> tokens/s per round
    models = {}
    for path in sorted(pathlib.Path(args.raw).glob("*.json")):
        model, who, _ = path.name.rsplit(".", 3)[0:3]
        for row in json.loads(path.read_text()):
            test = (f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}")
            test += f" @ d{row['n_depth']}" if row["n_depth"] else ""
            key = (model, row["n_depth"], row["n_gen"] > 0, test)
            ts[key + (who,)] += row["samples_ts"]
            models[model] = (row["model_type"], row["model_n_params"])
    keys = sorted({k[:4] for k in ts})
    print(f"# llama-bench, CPU backend alone vs CPU + hwyattn\n")
    print(f"{datetime.date.today()}, {machine()}; llama.cpp {args.llama_cpp}; "
          f"`llama-bench -fa 1 -t {args.threads} -p 512 -n 64 -ctk {args.cache} -ctv {args.cache} -r 1`, "
          "median over the alternating rounds (tokens/s).\n")
    print("| model | test | rounds | CPU t/s | CPU + hwyattn t/s | ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for k in keys:
        cpu, hwy = ts.get(k + ("cpu",)), ts.get(k + ("hwyattn",))
        if not cpu or not hwy:
            continue
        c, h = statistics.median(cpu), statistics.median(hwy)
        mtype, params = models[k[0]]
        name = k[0][:-5] if k[0].endswith(".gguf") else k[0]
        n = min(len(cpu), len(hwy))
        print(f"| {name} ({params / 1e9:.2f} B) | {k[3]} | {n} | {c:.2f} | {h:.2f} | {h / c:.2f}x |")


if __name__ == "__main__":
    main()
