# SPDX-License-Identifier: Apache-2.0
"""The benchmark rows as the competitor scripts see them, and their reference.

The rows' shapes have one home, bench/bench_attention.cc (bench/README.md
describes them); bench_attention writes each row's shape as its label
("B=1 Hq=8 Hkv=8 Lq=1024 Lk=1024 D=64 causal window_left=256 d_model=512"),
and the competitor scripts read the rows, and so the row filter, from its
JSON. This module parses those labels, counts FLOPs by bench/README.md's
formulas, makes each row's inputs and computes a float64 numpy reference for
a few query rows, to check each competitor's output once.

Standard library + numpy (Debian's python3-numpy).
"""

import json
import math
import re
import statistics

import numpy as np

NAME_RE = re.compile(r"^BM_Attention/(?P<id>[A-Za-z0-9]+)/threads:(?P<threads>\d+)")
LABEL_KEYS = ("B", "Hq", "Hkv", "Lq", "Lk", "D")


class Row:
    """One attention row: id, B, Hq, Hkv, Lq, Lk, D, causal, window, d_model, label."""

    def __init__(self, rid, label):
        self.id = rid
        self.label = label
        fields = {}
        flags = set()
        for token in label.split():
            if "=" in token:
                key, value = token.split("=", 1)
                fields[key] = int(value) if value.lstrip("-").isdigit() else value
            else:
                flags.add(token)
        if fields.get("kv", "f32") != "f32":
            raise ValueError("K and V in %s: the comparison runs fp32 rows only" % fields["kv"])
        fields.pop("kv", None)
        bad = [k for k, v in fields.items() if not isinstance(v, int)]
        if bad:
            raise ValueError("row %s: label %r: %s not integers" % (rid, label, ", ".join(bad)))
        missing = [k for k in LABEL_KEYS if k not in fields]
        if missing:
            raise ValueError("row %s: label %r lacks %s" % (rid, label, ", ".join(missing)))
        self.B, self.Hq, self.Hkv = fields["B"], fields["Hq"], fields["Hkv"]
        self.Lq, self.Lk, self.D = fields["Lq"], fields["Lk"], fields["D"]
        self.causal = "causal" in flags
        self.window = fields.get("window_left", 0)
        self.d_model = fields.get("d_model", 0)
        unknown = flags - {"causal"}
        unknown |= set(fields) - set(LABEL_KEYS) - {"window_left", "d_model"}
        if unknown:
            raise ValueError("row %s: label %r has unknown fields %s" % (rid, label, sorted(unknown)))
        if self.Hq % self.Hkv:
            raise ValueError("row %s: Hq %d is not a multiple of Hkv %d" % (rid, self.Hq, self.Hkv))
        if self.causal and self.Lq != self.Lk:
            raise ValueError("row %s: causal rows need Lq == Lk" % rid)
        if self.d_model and (self.Hq != self.Hkv or self.Lq != self.Lk or self.Hq * self.D != self.d_model):
            raise ValueError("row %s: an MHA row needs Hq == Hkv, Lq == Lk and Hq * D == d_model" % rid)

    def first_key(self, i):
        """Query i's first visible key under the window (0 without one)."""
        return max(0, i - self.window + 1) if self.window > 0 else 0

    def visible(self, i):
        """Keys [first, end) that query i sees."""
        end = i + 1 if self.causal else self.Lk
        return self.first_key(i), end

    def flops(self):
        """bench/README.md's FLOP formulas (causal and windowed rows: the visible keys only)."""
        if self.causal:
            keys = sum(self.visible(i)[1] - self.visible(i)[0] for i in range(self.Lq))
            return 4.0 * self.B * self.Hq * keys * self.D
        attention = 4.0 * self.B * self.Hq * self.Lq * self.Lk * self.D
        return attention + 8.0 * self.B * self.Lq * float(self.d_model) ** 2

    def kv_bytes(self):
        return 2.0 * self.B * self.Hkv * self.Lk * self.D * 4

    def is_decode(self):
        return self.Lq == 1 and not self.d_model

    def time_unit(self):
        """The unit bench_attention reports the row in: ns for tiny rows, ms otherwise."""
        return "ns" if self.flops() < 1e4 else "ms"

    def inputs(self, seed=1234):
        """fp32 inputs, uniform in [-1, 1): q, k, v in [B, H, L, D]; for an MHA row x [B, L, E] and the
        layer's weights (nn.Linear's scale) in nn.MultiheadAttention's layout."""
        rng = np.random.default_rng(seed)

        def uniform(shape, bound=1.0):
            return rng.uniform(-bound, bound, size=shape).astype(np.float32)

        if self.d_model:
            e = self.d_model
            bound = 1.0 / math.sqrt(e)
            return {
                "x": uniform((self.B, self.Lq, e)),
                "in_proj_weight": uniform((3 * e, e), bound),  # rows: Wq, Wk, Wv, each [E][E]
                "in_proj_bias": uniform((3 * e,), bound),
                "out_proj_weight": uniform((e, e), bound),
                "out_proj_bias": uniform((e,), bound),
            }
        return {
            "q": uniform((self.B, self.Hq, self.Lq, self.D)),
            "k": uniform((self.B, self.Hkv, self.Lk, self.D)),
            "v": uniform((self.B, self.Hkv, self.Lk, self.D)),
        }

    def check_points(self):
        """(batch, query) pairs whose output rows are checked: first, middle, last."""
        picks = [(0, 0), (self.B // 2, self.Lq // 2), (self.B - 1, self.Lq - 1)]
        return sorted(set(picks))

    def reference(self, inp):
        """{(b, i): float64 output row}: [Hq, D] for attention rows, [E] for MHA rows."""
        out = {}
        for b, i in self.check_points():
            if self.d_model:
                out[(b, i)] = self._mha_reference(inp, b, i)
            else:
                q = inp["q"][b, :, i, :].astype(np.float64)
                k = inp["k"][b].astype(np.float64)
                v = inp["v"][b].astype(np.float64)
                out[(b, i)] = self._attend(q, k, v, i)
        return out

    def _attend(self, q, k, v, i):
        """q [Hq, D] for query i, k and v [Hkv, Lk, D]: [Hq, D]."""
        group = self.Hq // self.Hkv
        first, end = self.visible(i)
        result = np.zeros((self.Hq, v.shape[-1]))
        for h in range(self.Hq):
            s = k[h // group, first:end] @ q[h] / math.sqrt(self.D)
            p = np.exp(s - s.max())
            result[h] = (p / p.sum()) @ v[h // group, first:end]
        return result

    def _mha_reference(self, inp, b, i):
        e, h, d = self.d_model, self.Hq, self.D
        x = inp["x"][b].astype(np.float64)
        w = inp["in_proj_weight"].astype(np.float64)
        bias = inp["in_proj_bias"].astype(np.float64)
        q = (x[i] @ w[:e].T + bias[:e]).reshape(h, d)
        k = (x @ w[e:2 * e].T + bias[e:2 * e]).reshape(self.Lk, h, d).transpose(1, 0, 2)
        v = (x @ w[2 * e:].T + bias[2 * e:]).reshape(self.Lk, h, d).transpose(1, 0, 2)
        attn = self._attend(q, k, v, i).reshape(e)
        return attn @ inp["out_proj_weight"].astype(np.float64).T + inp["out_proj_bias"].astype(np.float64)


def rows_from_json(path):
    """(rows, skipped, context) of a bench_attention JSON: the rows (in the order of the file) from their
    labels, and {id: reason} of those the comparison leaves out: cold rows (their K/V are flushed from the
    caches before each call, which the competitors' scripts do not do) and rows whose label is not a plain
    fp32 attention shape (D2h's bf16 K/V)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows, skipped = {}, {}
    for b in data.get("benchmarks", []):
        m = NAME_RE.match(b.get("run_name") or b.get("name", ""))
        rid = m.group("id") if m else None
        if not m or rid in rows or rid in skipped or not b.get("label"):
            continue
        if rid.endswith("cold"):
            skipped[rid] = "K/V flushed from the caches before each call; the other libraries are timed warm only"
            continue
        try:
            rows[rid] = Row(rid, b["label"])
        except ValueError as e:
            skipped[rid] = str(e)
    return list(rows.values()), skipped, data.get("context", {})


def benchmark_entry(library, row, threads, times, extra=None):
    """A Google-Benchmark-like median aggregate for report.py: BM_Compare/<library>/<id>/threads:<n>.

    times: seconds per call of each repetition."""
    median = statistics.median(times)
    unit = row.time_unit()
    scale = {"ns": 1e9, "ms": 1e3}[unit]
    name = "BM_Compare/%s/%s/threads:%d" % (library, row.id, threads)
    entry = {
        "name": name + "_median",
        "run_name": name,
        "run_type": "aggregate",
        "aggregate_name": "median",
        "repetitions": len(times),
        "threads": 1,
        "real_time": median * scale,
        "time_unit": unit,
        "label": row.label,
        "GFLOPS": row.flops() / median / 1e9,
        "min_time_per_call": min(times) * scale,
        "max_time_per_call": max(times) * scale,
    }
    if row.is_decode():
        entry["GBps"] = row.kv_bytes() / median / 1e9
    if extra:
        entry.update(extra)
    return entry


def check_error(row, got, ref):
    """max|got - ref| / max|ref| over the checked rows."""
    err = max(float(np.max(np.abs(np.asarray(got[key], dtype=np.float64) - ref[key]))) for key in ref)
    scale = max(float(np.max(np.abs(ref[key]))) for key in ref)
    return err / scale if scale else err
