# SPDX-License-Identifier: Apache-2.0
"""The benchmark rows as the other libraries' scripts see them, their reference, and the timing harness.

The rows' shapes have one home, bench/bench_attention.cc (bench/README.md
describes them); bench_attention writes each row's shape as its label
("B=1 Hq=8 Hkv=8 Lq=1024 Lk=1024 D=64 causal window_left=256 d_model=512",
"... q=bf16 kv=bf16 precision=bf16", "seqs=1 Hq=32 Hkv=8 D=128 kv=i8(per-token
scales) pages=0"), and the scripts read the rows, and so the row filter, from
its JSON. This module parses those labels, counts FLOPs by bench/README.md's
formulas, makes each row's inputs, computes a float64 numpy reference for a few
query rows to check each library's output once, and times the libraries'
calls (run_peer: the same interleaving, check and JSON for every library).

The KV-cache rows' labels name the number of sequences but not their lengths:
KV_SEQUENCES below repeats bench_attention.cc's KvRows() table (the label's
seqs, Hq, Hkv and D are checked against it).

Standard library + numpy.
"""

import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time

import numpy as np


def _small_pages():
    """numpy (1.22 and later, on Linux) advises huge pages (madvise MADV_HUGEPAGE) for every array of 4 MiB or
    more, which a host whose transparent huge pages are set to `madvise` then backs with 2 MiB pages; bench_attention
    allocates with aligned_alloc, which gets the system's default. The peers share the numpy arrays (torch tensors
    on them, ONNX Runtime's IOBinding, OpenVINO's shared tensors), so without this they would read their K/V through
    fewer TLB walks than hwyattn reads the same rows (D2 on one Zen 4 core: 5-7% of the time of either). Off here,
    before any input is made: every library reads memory paged the same way. Returns the setting the context
    records."""
    for owner in ("_core", "core"):
        multiarray = getattr(getattr(np, owner, None), "multiarray", None)
        if multiarray is not None and hasattr(multiarray, "_set_madvise_hugepage"):
            multiarray._set_madvise_hugepage(False)
            return "off (the system default, as bench_attention's)"
    return "numpy does not advise them"


NUMPY_HUGE_PAGES = _small_pages()

NAME_RE = re.compile(r"^BM_Attention/(?P<id>[A-Za-z0-9_]+)/threads:(?P<threads>\d+)")
LABEL_KEYS = ("B", "Hq", "Hkv", "Lq", "Lk", "D")
KV_LABEL_KEYS = ("seqs", "Hq", "Hkv", "D", "kv", "pages")

# bench_attention.cc's KvRows(): per row, the sequences' (kv_len, q_len). Query i of a sequence
# sees keys [0, kv_len - q_len + i] (causal by position).
V1_LENS = [64, 128, 200, 333, 512, 777, 901, 1024, 1500, 1777, 2048, 2500, 3000, 3333, 4000, 4096]
KV_SEQUENCES = {
    "D1q": ([4096], [1]), "D1f8": ([4096], [1]), "D1qb": ([4096], [1]), "D1qi": ([4096], [1]),
    "D1f8b": ([4096], [1]), "D2q": ([2048] * 8, [1] * 8), "V1": (V1_LENS, [1] * 16), "V1b": (V1_LENS, [1] * 16),
    "V2": ([2048] * 16, [512] + [1] * 15), "V2chunk": ([2048], [512]), "V2decodes": ([2048] * 15, [1] * 15),
}
# KV-cache rows whose memory traffic bench_attention reports (GB/s): its "decode" flag.
KV_DECODE = {"D1q", "D1f8", "D1qb", "D1qi", "D1f8b", "D2q", "V1", "V1b"}
# Bytes per K or V element of each cache type (the block formats: 34 and 18 bytes per 32).
KV_ELEMENT_BYTES = {"f32": 4.0, "bf16": 2.0, "i8": 1.0, "f8e4m3": 1.0, "q8_0": 34.0 / 32, "q4_0": 18.0 / 32}

TOLERANCE = 1e-4  # fp32 rows: max|err| / max|ref|


class Unsupported(Exception):
    """A library cannot express a row; the message says why (the report lists it)."""


def round_bf16(x):
    """fp32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return bits.view(np.float32)


def bf16_bits(x):
    """The bfloat16 bits (uint16) of values already rounded to bf16."""
    return (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


class Row:
    """One attention row.

    id, label, B, Hq, Hkv, Lq, Lk, D, causal, window, d_model (MHA rows), and the operands' types:
    q ("f32" or "bf16"), kv ("f32", "bf16", "i8", "f8e4m3", "q8_0", "q4_0"), weights (MHA rows), precision
    ("f32", "bf16", "int8": the products hwyattn runs). KV-cache rows (kv_rows()) also have kv_lens (each
    sequence's keys; B sequences of Lq queries each at their end, causal by position) and pages."""

    def __init__(self, rid, label):
        self.id = rid
        self.label = label
        fields, flags = parse_label(rid, label)
        self.q = fields.pop("q", "f32")
        self.kv = fields.pop("kv", "f32")
        self.weights = fields.pop("weights", "f32")
        self.precision = fields.pop("precision", "f32")
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
        self.kv_lens = None
        self.pages = 0
        self.causal_offset = 0  # query i sees keys up to i + causal_offset
        unknown = flags - {"causal"}
        unknown |= set(fields) - set(LABEL_KEYS) - {"window_left", "d_model"}
        if unknown:
            raise ValueError("row %s: label %r has unknown fields %s" % (rid, label, sorted(unknown)))
        if self.causal and self.Lq != self.Lk:
            raise ValueError("row %s: causal rows need Lq == Lk" % rid)
        if self.d_model and (self.Hq != self.Hkv or self.Lq != self.Lk or self.Hq * self.D != self.d_model):
            raise ValueError("row %s: an MHA row needs Hq == Hkv, Lq == Lk and Hq * D == d_model" % rid)
        self._check_types()

    @classmethod
    def kv_row(cls, rid, label):
        """A KV-cache row (hwyattn_kv_attention): label 'seqs=.. Hq=.. Hkv=.. D=.. kv=.. pages=..', the
        sequences' lengths from KV_SEQUENCES."""
        fields, flags = parse_label(rid, label)
        missing = [k for k in KV_LABEL_KEYS if k not in fields]
        if missing or flags or set(fields) - set(KV_LABEL_KEYS) - {"precision"}:
            raise ValueError("row %s: label %r is not a KV-cache row's" % (rid, label))
        if rid not in KV_SEQUENCES:
            raise ValueError("row %s: a KV-cache row whose sequence lengths bench/compare/rows.py does not know "
                             "(KV_SEQUENCES)" % rid)
        kv_lens, q_lens = KV_SEQUENCES[rid]
        if fields["seqs"] != len(kv_lens):
            raise ValueError("row %s: %d sequences in the label, %d in KV_SEQUENCES" % (rid, fields["seqs"],
                                                                                        len(kv_lens)))
        if len(set(q_lens)) != 1:
            raise ValueError("a prefill chunk and decodes in one call (query lengths %s): no other library "
                             "has one call for a mixed batch" % ", ".join(str(n) for n in sorted(set(q_lens))))
        row = cls.__new__(cls)
        row.id, row.label = rid, label
        row.q, row.weights = "f32", "f32"
        row.kv = re.sub(r"\(.*\)$", "", str(fields["kv"]))
        row.precision = fields.get("precision", "f32")
        row.B, row.Hq, row.Hkv, row.D = len(kv_lens), fields["Hq"], fields["Hkv"], fields["D"]
        row.Lq, row.Lk = q_lens[0], max(kv_lens)
        row.kv_lens = None if len(set(kv_lens)) == 1 else list(kv_lens)
        row.pages = fields["pages"]
        row.window, row.d_model = 0, 0
        # Causal by position: with one query per sequence it sees every key (no mask).
        row.causal = row.Lq > 1
        row.causal_offset = row.Lk - row.Lq
        row._check_types()
        return row

    def _check_types(self):
        rid = self.id
        if self.Hq % self.Hkv:
            raise ValueError("row %s: Hq %d is not a multiple of Hkv %d" % (rid, self.Hq, self.Hkv))
        if self.kv not in KV_ELEMENT_BYTES:
            raise ValueError("row %s: K and V in %s, a type rows.py does not know" % (rid, self.kv))
        if self.precision == "int8":
            raise ValueError("integer products (precision=int8): hwyattn's quantized-query Q K^T, which no other "
                             "library offers on the CPU; the other libraries' quantized decode is under D1q")
        if self.precision not in ("f32", "bf16") or self.q not in ("f32", "bf16") or \
                self.weights not in ("f32", "bf16"):
            raise ValueError("row %s: label %r: unknown operand types" % (rid, self.label))
        if self.is_kv_row():
            return
        if self.precision == "bf16":
            if self.d_model and self.weights != "bf16":
                raise ValueError("row %s: an MHA row with bf16 products needs weights=bf16" % rid)
            if not self.d_model and (self.q, self.kv) != ("bf16", "bf16"):
                raise ValueError("row %s: bf16 products need q and K/V in bf16" % rid)
        elif self.kv == "bf16":
            raise ValueError("K and V in bf16 with fp32 products: no other library reads a bf16 cache into "
                             "fp32 products in place (a cast to fp32 first would time a conversion)")
        elif self.kv in ("q8_0", "q4_0") and self.d_model:
            raise ValueError("row %s: an MHA row over a %s cache" % (rid, self.kv))
        elif self.kv not in ("f32", "q4_0", "q8_0"):
            raise ValueError("row %s: K and V in %s outside a KV-cache row" % (rid, self.kv))

    # q4_0 rows' inputs as ggml's Q4_0 blocks (set by a library that reads them, ggml) rather than the
    # per-channel int4 cache ONNX Runtime takes.
    ggml_blocks = False

    def is_kv_row(self):
        return self.id in KV_SEQUENCES

    def is_bf16(self):
        """bf16 products (P1b, M1b, V1b, ...): the inputs are bf16 values, the check's tolerance wider."""
        return self.precision == "bf16"

    def seq_len(self, b):
        """Sequence b's number of keys."""
        return self.kv_lens[b] if self.kv_lens else self.Lk

    def first_key(self, i):
        """Query i's first visible key under the window (0 without one)."""
        return max(0, i - self.window + 1) if self.window > 0 else 0

    def visible(self, i, b=0):
        """Keys [first, end) that query i of sequence b sees."""
        if self.kv_lens:
            return 0, self.kv_lens[b] - self.Lq + i + 1
        end = i + 1 + self.causal_offset if self.causal else self.Lk
        return self.first_key(i), end

    def visible_mask(self):
        """[Lq, Lk] booleans, key j visible from query i (causal and window; one
        sequence of Lk keys): the mask a peer is given where its op has no such rule."""
        i = np.arange(self.Lq)[:, None]
        j = np.arange(self.Lk)[None, :]
        visible = (j <= i + self.causal_offset) if self.causal else np.ones((self.Lq, self.Lk), dtype=bool)
        if self.window:
            visible &= j > i - self.window
        return visible

    def flops(self):
        """bench/README.md's FLOP formulas (causal and windowed rows: the visible keys only)."""
        if self.kv_lens:
            keys = sum(self.visible(i, b)[1] - self.visible(i, b)[0] for b in range(self.B) for i in range(self.Lq))
            return 4.0 * self.Hq * keys * self.D
        if self.causal:
            keys = sum(self.visible(i)[1] - self.visible(i)[0] for i in range(self.Lq))
            return 4.0 * self.B * self.Hq * keys * self.D
        attention = 4.0 * self.B * self.Hq * self.Lq * self.Lk * self.D
        return attention + 8.0 * self.B * self.Lq * float(self.d_model) ** 2

    def kv_bytes(self):
        """K and V bytes per call, as bench_attention counts them (int8: with the per-token scales)."""
        keys = float(sum(self.kv_lens)) if self.kv_lens else float(self.B * self.Lk)
        per_key = 2.0 * self.Hkv * self.D * KV_ELEMENT_BYTES[self.kv]
        if self.kv == "i8":
            per_key += 2.0 * self.Hkv * 4
        return keys * per_key

    def is_decode(self):
        """Rows whose K/V GB/s bench_attention reports."""
        if self.is_kv_row():
            return self.id in KV_DECODE
        return self.Lq == 1 and not self.d_model

    def time_unit(self):
        """The unit bench_attention reports the row in: ns for tiny rows, ms otherwise."""
        return "ns" if self.flops() < 1e4 else "ms"

    def inputs(self, seed=1234):
        """Inputs, uniform in [-1, 1): q, k, v float32 in [B, H, L, D] (bf16 rows: values rounded to bf16; an
        int8 cache: k_q, v_q int8 uniform in [-127, 127] with per-channel scales k_scale, v_scale [Hkv, D]
        uniform in [0.5, 1.5] / 127, and k, v their products in float32; a 4-bit cache (q4_0 rows, for
        ONNX Runtime's int4 cache): the same with integers in [-8, 7] and scales in [0.5, 1.5] / 7); ggml's
        blocks (q8_0 rows, and q4_0 rows where ggml_blocks is set): k_blocks, v_blocks (ggml_blocks()) and k, v
        their values, q on q8_0's grid (on_q8_0_grid); for an MHA row x [B, L, E] and the
        layer's weights (nn.Linear's scale) in nn.MultiheadAttention's layout."""
        rng = np.random.default_rng(seed)

        def uniform(shape, bound=1.0):
            return rng.uniform(-bound, bound, size=shape).astype(np.float32)

        if self.d_model:
            e = self.d_model
            bound = 1.0 / math.sqrt(e)
            inp = {
                "x": uniform((self.B, self.Lq, e)),
                "in_proj_weight": uniform((3 * e, e), bound),  # rows: Wq, Wk, Wv, each [E][E]
                "in_proj_bias": uniform((3 * e,), bound),
                "out_proj_weight": uniform((e, e), bound),
                "out_proj_bias": uniform((e,), bound),
            }
            if self.is_bf16():
                inp = {k: round_bf16(v) for k, v in inp.items()}
            return inp
        inp = {
            "q": uniform((self.B, self.Hq, self.Lq, self.D)),
            "k": uniform((self.B, self.Hkv, self.Lk, self.D)),
            "v": uniform((self.B, self.Hkv, self.Lk, self.D)),
        }
        if self.q == "bf16":
            inp["q"] = round_bf16(inp["q"])
        if self.kv == "q8_0" or (self.kv == "q4_0" and self.ggml_blocks):
            for name in ("k", "v"):
                inp[name + "_blocks"], inp[name] = ggml_blocks(rng, inp[name].shape, self.kv)
            inp["q"] = on_q8_0_grid(inp["q"])
        elif self.kv == "bf16":
            inp["k"], inp["v"] = round_bf16(inp["k"]), round_bf16(inp["v"])
        elif self.kv in ("i8", "q4_0"):
            top = 127 if self.kv == "i8" else 7  # int4: [-8, 7]
            for name in ("k", "v"):
                quant = rng.integers(-top - (self.kv == "q4_0"), top + 1, size=inp[name].shape, dtype=np.int8)
                scale = (rng.uniform(0.5, 1.5, size=(self.Hkv, self.D)) / top).astype(np.float32)
                inp[name + "_q"], inp[name + "_scale"] = quant, scale
                inp[name] = (quant.astype(np.float32) * scale[None, :, None, :]).astype(np.float32)
        return inp

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
                if "k_q" in inp:
                    k = inp["k_q"][b].astype(np.float64) * inp["k_scale"][:, None, :].astype(np.float64)
                    v = inp["v_q"][b].astype(np.float64) * inp["v_scale"][:, None, :].astype(np.float64)
                else:
                    k = inp["k"][b].astype(np.float64)
                    v = inp["v"][b].astype(np.float64)
                out[(b, i)] = self._attend(q, k, v, i, b)
        return out

    def tolerance(self, inp, ref, output_rounding=0.0):
        """The largest max|err| / max|ref| the check accepts. fp32 rows: 1e-4. bf16 products: hwyattn's own
        bound for them (include/hwyattn.h: 1e-4 max|ref| + 2^-9 max|v|, P rounded to bf16 before P V; an MHA
        row's v is the value projection, times the largest Euclidean norm of a row of W_o), plus the rounding of the
        library's output (output_rounding: 2^-8 for a bf16 output, 2^-11 for fp16, relative to max|ref|)."""
        scale = max(float(np.max(np.abs(r))) for r in ref.values())
        tol = TOLERANCE + output_rounding
        if self.is_bf16() and scale:
            if getattr(self, "_v_max", None) is not None:
                v_max = self._v_max
            elif self.d_model:
                e = self.d_model
                x = inp["x"].astype(np.float64)
                w_v = inp["in_proj_weight"][2 * e:].astype(np.float64)
                v_max = float(np.max(np.abs(x @ w_v.T + inp["in_proj_bias"][2 * e:])))
                # P's roundings spread over the output projection as independent errors: the largest
                # Euclidean norm of a row of W_o (hwyattn's worst-case row sum of |W_o| is 20x looser here).
                v_max *= float(np.max(np.linalg.norm(inp["out_proj_weight"].astype(np.float64), axis=1)))
            else:
                v_max = float(np.max(np.abs(inp["v"])))
            self._v_max = v_max
            tol += 2.0 ** -9 * v_max / scale
        return tol

    def _attend(self, q, k, v, i, b=0):
        """q [Hq, D] for query i, k and v [Hkv, Lk, D]: [Hq, D]."""
        group = self.Hq // self.Hkv
        first, end = self.visible(i, b)
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


def ggml_blocks(rng, shape, kv):
    """(bytes [..., D / 32 * block bytes] uint8, values float32 [..., D]) of random ggml blocks as bench_attention
    makes D1q8_0's: per 32 elements an fp16 d = (1 + m / 1024) 2^-7 (Q8_0) or 2^-3 (Q4_0), m uniform in [0, 1024),
    then the numbers, int8 uniform in [-127, 127] (Q8_0: value d q) or nibbles uniform in [0, 15] (Q4_0: value
    d (n - 8), element j < 16 the low nibble of byte j, j + 16 its high nibble). Values are exact in fp32."""
    blocks = shape[:-1] + (shape[-1] // 32,)
    m = rng.integers(0, 1024, size=blocks)
    d = ((1.0 + m / 1024.0) * 2.0 ** (-7 if kv == "q8_0" else -3)).astype(np.float16)
    if kv == "q8_0":
        n = rng.integers(-127, 128, size=blocks + (32,)).astype(np.int8)
        numbers, body = n.astype(np.float32), n.view(np.uint8)
    else:
        n = rng.integers(0, 16, size=blocks + (32,)).astype(np.uint8)
        numbers, body = n.astype(np.float32) - 8.0, n[..., :16] | (n[..., 16:] << 4)
    values = (d.astype(np.float32)[..., None] * numbers).reshape(shape)
    raw = np.concatenate([d[..., None].view(np.uint8), body], axis=-1)  # the machine's byte order, as ggml's
    return np.ascontiguousarray(raw.reshape(shape[:-1] + (-1,))), values


def on_q8_0_grid(x):
    """x with each block of 32 (last axis) on q8_0's grid, as ggml's quantize_row_q8_0 leaves it: d = max|x| / 127
    rounded to fp16, values d round(x / d). ggml's CPU quantizes q so for a Q8_0 or Q4_0 K; a query already on
    that grid passes through it unchanged, so its integer products are exact and the fp32 check applies."""
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // 32, 32)).astype(np.float32)
    d = (np.max(np.abs(blocks), axis=-1, keepdims=True) / np.float32(127)).astype(np.float16).astype(np.float32)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    return (d * np.round(blocks * inv)).astype(np.float32).reshape(x.shape)


def parse_label(rid, label):
    """({key: int or str}, {flag}) of a bench_attention label."""
    fields = {}
    flags = set()
    for token in re.findall(r"\S+\([^)]*\)|\S+", label):
        if "=" in token:
            key, value = token.split("=", 1)
            fields[key] = int(value) if value.lstrip("-").isdigit() else value
        else:
            flags.add(token)
    return fields, flags


def rows_from_json(path):
    """(rows, skipped, context) of a bench_attention JSON: the rows (in the order of the file) from their
    labels, and {id: reason} of those no other library runs: cold rows (their K/V are flushed from the
    caches before each call, which the other libraries' scripts do not do) and rows whose label is not a
    shape they can take (D2h's bf16 K/V with fp32 products, a mixed batch, ...). Each library's script
    leaves out more rows, with its own reasons (Unsupported)."""
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
            if b["label"].startswith("seqs="):
                rows[rid] = Row.kv_row(rid, b["label"])
            else:
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


def error_entry(library, row, threads, message):
    name = "BM_Compare/%s/%s/threads:%d" % (library, row.id, threads)
    return {"name": name, "run_name": name, "run_type": "iteration", "label": row.label, "error_occurred": True,
            "error_message": message}


def check_error(row, got, ref):
    """max|got - ref| / max|ref| over the checked rows."""
    err = max(float(np.max(np.abs(np.asarray(got[key], dtype=np.float64).reshape(ref[key].shape) - ref[key])))
              for key in ref)
    scale = max(float(np.max(np.abs(ref[key]))) for key in ref)
    return err / scale if scale else err


# ------------------------------------------------------------------------------------------ timing

class Candidate:
    """One way a library runs a row. path: what it runs (shown in the report). bind(threads) -> (setup,
    call): setup() before each repetition (untimed; e.g. torch.set_num_threads), call() one timed call that
    returns the output; rows_of(output) -> {(b, i): output row} as Row.reference's; output_rounding as for
    Row.tolerance; extra: more JSON fields for the row's entry."""

    def __init__(self, path, bind, rows_of, output_rounding=0.0, extra=None):
        self.path, self.bind, self.rows_of = path, bind, rows_of
        self.output_rounding = output_rounding
        self.extra = extra if extra is not None else {}


def time_repetition(call, min_time):
    """One repetition: an untimed call (the inputs warm, as for hwyattn's rows), then calls until min_time
    seconds have passed; the mean time per call."""
    call()
    calls = 0
    start = time.perf_counter()
    while True:
        call()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def clock(seconds):
    seconds = int(round(seconds))
    return "%dm%02ds" % (seconds // 60, seconds % 60)


class Progress:
    """Lines on stderr: 'torch: 12/90 repetitions done (rows x threads x candidates x repetitions), P1 2t,
    0m41s, about 2m10s left', at most one every `every` seconds, and the last."""

    def __init__(self, library, total, every=10.0):
        self.library, self.total, self.every = library, total, every
        self.done = 0
        self.start = time.monotonic()
        self.last = -1e9

    def step(self, what, left_seconds):
        self.done += 1
        now = time.monotonic()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            print("%s: %d/%d repetitions done (rows x threads x candidates x repetitions), %s, %s, %s"
                  % (self.library, self.done, self.total, what, clock(now - self.start),
                     "about %s left" % clock(left_seconds) if self.done < self.total else "all timed"),
                  file=sys.stderr, flush=True)


def run_peer(library, argv, candidates_for, context_extra, doc=None):
    """The main() of a library's script: rows from bench_attention's JSON, candidates_for(row) -> [Candidate]
    (or raises Unsupported), each candidate's output checked once against the float64 reference (a
    candidate whose output is off, or that fails, is an error and is not timed), every (row, candidate,
    threads) timed --repetitions times in one seeded random order, and per (row, threads) the fastest
    candidate's median written as BM_Compare/<library>/<id>/threads:<n> (the others' medians in
    'other_paths'). context_extra(): {key: value} for the JSON's context (versions)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows-from", required=True, help="bench_attention's JSON (the rows and their shapes)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per repetition")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows", default="", help="comma-separated ids: only these rows (default: all)")
    args = ap.parse_args(argv)
    rows, skipped, hw_context = rows_from_json(args.rows_from)
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = [r for r in rows if r.id in wanted]
        skipped = {k: v for k, v in skipped.items() if k in wanted}
    for rid, reason in skipped.items():
        print("%s: %s left out: %s" % (library, rid, reason), file=sys.stderr)
    if not rows:
        print("%s: no rows to run in %s" % (library, args.rows_from), file=sys.stderr)
        return 1
    threads = [int(t) for t in args.threads.split(",")]

    jobs = []  # [row, candidate, threads, setup, call, times]
    row_candidates = {}
    errors = {}  # (row id, path) -> message
    for row in rows:
        try:
            candidates = candidates_for(row)
        except Unsupported as e:
            skipped[row.id] = str(e)
            print("%s: %s left out: %s" % (library, row.id, e), file=sys.stderr)
            continue
        inp_ref = None
        row_candidates[row.id] = candidates
        for cand in candidates:
            key = (row.id, cand.path)
            bound = []
            try:
                if inp_ref is None:
                    inp = row.inputs()
                    inp_ref = (inp, row.reference(inp))
                inp, ref = inp_ref
                tol = row.tolerance(inp, ref, cand.output_rounding)
                for t in threads:
                    bound.append((t,) + tuple(cand.bind(t)))
                setup, call = bound[-1][1], bound[-1][2]
                setup()
                err = check_error(row, cand.rows_of(call()), ref)
                cand.check = err
                if not err <= tol:
                    errors[key] = "output differs from the float64 reference: max|err|/max|ref| %.3g > %.3g" % (
                        err, tol)
            except Exception as e:  # noqa: BLE001 (a library's failure is reported, not fatal)
                errors[key] = ("%s: %s" % (type(e).__name__, e)).split("\n")[0][:300]
            status = ("error: " + errors[key]) if key in errors else "checked: %.2g" % cand.check
            print("%s: %s: %s (%s)" % (library, row.id, cand.path, status), file=sys.stderr, flush=True)
            if key not in errors:
                jobs += [[row, cand, t, setup, call, []] for t, setup, call in bound]

    order = jobs * args.repetitions
    random.Random(args.seed).shuffle(order)
    progress = Progress(library, len(order))
    durations = {}  # id(job) -> wall seconds of its last repetition
    for n, job in enumerate(order):
        row, cand, t, setup, call, times = job
        start = time.monotonic()
        setup()
        times.append(time_repetition(call, args.min_time))
        durations[id(job)] = time.monotonic() - start
        known = list(durations.values())
        mean = sum(known) / len(known)
        left = sum(durations.get(id(j), mean) for j in order[n + 1:])
        progress.step("%s %dt" % (row.id, t), left)

    benchmarks = []
    for row in rows:
        if row.id not in row_candidates:
            continue
        for t in threads:
            timed = sorted(((statistics.median(j[5]), j) for j in jobs if j[0] is row and j[2] == t),
                           key=lambda x: x[0])
            cands = row_candidates[row.id]
            if not timed:
                benchmarks.append(error_entry(library, row, t, "; ".join(
                    "%s: %s" % (c.path, errors.get((row.id, c.path), "?")) for c in cands)))
                continue
            best = timed[0][1]
            extra = {"path": best[1].path, "check_rel_err": best[1].check}
            extra.update(best[1].extra)
            if len(cands) > 1:
                scale = {"ns": 1e9, "ms": 1e3}[row.time_unit()]
                others = {}
                for c in cands:
                    if c is best[1]:
                        continue
                    m = [x[0] for x in timed if x[1][1] is c]
                    others[c.path] = ("%.4g %s" % (m[0] * scale, row.time_unit()) if m else
                                      "error: %s" % errors.get((row.id, c.path), "?"))
                extra["other_paths"] = others
            benchmarks.append(benchmark_entry(library, row, t, best[5], extra))
    context = {
        "library": library,
        # report.py shows these results only beside the hwyattn run they were measured with.
        "hwyattn_run_date": hw_context.get("date", ""),
        "skipped_rows": skipped,
        "repetitions": str(args.repetitions),
        "min_time": str(args.min_time),
        "random_interleaving": "true",
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "numpy_huge_page_advice": NUMPY_HUGE_PAGES,
    }
    context.update(context_extra())
    # A whole file or none: written beside it, then renamed over it; but an
    # --out that exists and is no regular file (/dev/null, a pipe) is written
    # in place (renaming over /dev/null would replace the device).
    in_place = os.path.exists(args.out) and not os.path.isfile(args.out)
    tmp = args.out if in_place else args.out + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"context": context, "benchmarks": benchmarks}, f, indent=2)
        f.write("\n")
    if not in_place:
        os.replace(tmp, args.out)
    return 0  # errors are in the JSON (report.py shows them)
