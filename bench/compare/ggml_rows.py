#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times ggml's CPU flash attention (ggml_flash_attn_ext) on bench_attention's rows.

    python3 bench/compare/ggml_rows.py --ggml-lib DIR --rows-from bench/results/latest.json --out OUT.json
        [--repetitions 5] [--min-time 0.3] [--threads 1,2] [--rows P1,D1]

DIR holds libggml-base.so and libggml-cpu.so of a ggml built from source
(scripts/bench.sh --compare builds the pinned ggml of ../shared/third_party
into the cache, with ggml's defaults: GGML_NATIVE, OpenMP); the script calls
them through ctypes, as a C program would. Inputs, reference and timing:
rows.py (run_peer). What each row runs, as a ggml user would write it:

  attention rows     one graph of ggml_flash_attn_ext(q, k, v, mask, 1/sqrt(D), 0, 0)
                     with GGML_PREC_F32, computed with ggml_graph_compute on a plan
                     made once per thread count (its work buffer allocated once);
                     q [D, Lq, Hq, B] F32, k and v [D, Lk, Hkv, B] in F32 (fp32 rows),
                     BF16 (bf16 rows, ggml's CPU then multiplies in bf16) or ggml's
                     Q8_0 / Q4_0 blocks (D1q8_0, D1q4_0, P1q8_0: ggml's CPU quantizes q
                     to q8_0 and takes integer dot products; rows.py gives it a query
                     already on that grid, so that the fp32 check applies); GQA by
                     ggml's own head broadcast; causal and sliding-window rows an F16
                     mask [Lk, Lq] of 0 and -inf (how llama.cpp passes them).
  KV-cache rows      V2chunk, V2decodes (F32 cache): the same on a contiguous cache
                     (ggml's CPU has no paged attention); the chunk's mask aligned to the
                     end of the cache.

Rows ggml cannot express are left out with the reason (context "skipped_rows"):
MHA rows (ggml has no layer op), caches of other types (int8, fp8) or of different
lengths in one call.
Output: BM_Compare/ggml/<id>/threads:<n>.
"""

import ctypes
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

# ggml.h's enum values.
GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_BF16 = 0, 1, 2, 8, 30
GGML_PREC_F32 = 10


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class CPlan(ctypes.Structure):  # ggml-cpu.h's struct ggml_cplan
    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", ctypes.c_void_p), ("n_threads", ctypes.c_int),
                ("threadpool", ctypes.c_void_p), ("abort_callback", ctypes.c_void_p),
                ("abort_callback_data", ctypes.c_void_p), ("use_ref", ctypes.c_bool)]


class Ggml:
    """The ggml functions the rows call, from DIR's shared libraries."""

    def __init__(self, libdir):
        self.dir = libdir
        base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
        p, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float

        def fn(lib, name, restype, *argtypes):
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, list(argtypes)
            return f

        self.init = fn(base, "ggml_init", p, InitParams)
        self.free = fn(base, "ggml_free", None, p)
        self.tensor_overhead = fn(base, "ggml_tensor_overhead", ctypes.c_size_t)
        self.graph_overhead = fn(base, "ggml_graph_overhead", ctypes.c_size_t)
        self.new_tensor_4d = fn(base, "ggml_new_tensor_4d", p, p, ctypes.c_int, i64, i64, i64, i64)
        self.get_data = fn(base, "ggml_get_data", p, p)
        self.nbytes = fn(base, "ggml_nbytes", ctypes.c_size_t, p)
        self.flash_attn_ext = fn(base, "ggml_flash_attn_ext", p, p, p, p, p, p, f32, f32, f32)
        self.set_prec = fn(base, "ggml_flash_attn_ext_set_prec", None, p, ctypes.c_int)
        self.new_graph = fn(base, "ggml_new_graph", p, p)
        self.build_forward_expand = fn(base, "ggml_build_forward_expand", None, p, p)
        self.cpu_init = fn(cpu, "ggml_cpu_init", None)
        self.graph_plan = fn(cpu, "ggml_graph_plan", CPlan, p, ctypes.c_int, p)
        self.graph_compute = fn(cpu, "ggml_graph_compute", ctypes.c_int, p, ctypes.POINTER(CPlan))
        self.cpu_init()

    def fill(self, tensor, array):
        """Copies array (its bytes, C order) into the tensor's data, checking the sizes agree."""
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes(tensor):
            raise ValueError("%d bytes for a tensor of %d" % (array.nbytes, self.nbytes(tensor)))
        ctypes.memmove(self.get_data(tensor), array.ctypes.data, array.nbytes)


GGML = None  # Ggml, set by main()


def attention_candidate(row):
    g = GGML
    if row.d_model:
        raise rowlib.Unsupported("an MHA layer: ggml has no layer op (a model graph's projections around "
                                 "ggml_flash_attn_ext); its attention is timed in the attention rows")
    if row.kv_lens:
        raise rowlib.Unsupported("sequences of %d different lengths in one call: ggml_flash_attn_ext takes one "
                                 "length per call (padding to the longest would multiply the work)" % row.B)
    blocks = {"q8_0": GGML_TYPE_Q8_0, "q4_0": GGML_TYPE_Q4_0}
    if row.is_bf16() and row.kv == "bf16":
        kv_type, what = GGML_TYPE_BF16, "K/V BF16"
    elif not row.is_bf16() and row.kv == "f32":
        kv_type, what = GGML_TYPE_F32, "K/V F32"
    elif not row.is_bf16() and row.kv in blocks:
        kv_type, what = blocks[row.kv], "K/V %s blocks, q quantized to q8_0 by ggml" % row.kv.upper()
        row.ggml_blocks = True  # rows.py's inputs: Q4_0 blocks too, not ONNX Runtime's int4 cache
    else:
        raise rowlib.Unsupported("K and V in %s: ggml has no such cache type" % row.kv)
    inp = row.inputs()
    B, Hq, Hkv, Lq, Lk, D = row.B, row.Hq, row.Hkv, row.Lq, row.Lk, row.D
    masked = row.causal or row.window
    kv_bytes = inp["k_blocks"].nbytes if "k_blocks" in inp else (4 if kv_type == GGML_TYPE_F32 else 2) * inp["k"].size
    data = 4 * B * Hq * Lq * D * 2 + 2 * kv_bytes
    data += 2 * Lq * Lk if masked else 0
    mem = data + 16 * g.tensor_overhead() + g.graph_overhead() + (1 << 20)
    ctx = g.init(InitParams(mem, None, False))
    if not ctx:
        raise RuntimeError("ggml_init of %d bytes failed" % mem)
    q = g.new_tensor_4d(ctx, GGML_TYPE_F32, D, Lq, Hq, B)
    k = g.new_tensor_4d(ctx, kv_type, D, Lk, Hkv, B)
    v = g.new_tensor_4d(ctx, kv_type, D, Lk, Hkv, B)
    g.fill(q, inp["q"].astype(np.float32))  # [B, Hq, Lq, D]: ggml's [D, Lq, Hq, B]
    for tensor, name in ((k, "k"), (v, "v")):
        if name + "_blocks" in inp:
            g.fill(tensor, inp[name + "_blocks"])
        elif kv_type == GGML_TYPE_BF16:
            g.fill(tensor, rowlib.bf16_bits(inp[name]))
        else:
            g.fill(tensor, inp[name].astype(np.float32))
    mask = None
    if masked:
        mask = g.new_tensor_4d(ctx, GGML_TYPE_F16, Lk, Lq, 1, 1)
        g.fill(mask, np.where(row.visible_mask(), 0.0, -np.inf).astype(np.float16))
        what += ", F16 mask [Lk, Lq] (%s)" % ("window %d" % row.window if row.window else "causal")
    out = g.flash_attn_ext(ctx, q, k, v, mask, 1.0 / math.sqrt(D), 0.0, 0.0)
    g.set_prec(out, GGML_PREC_F32)
    graph = g.new_graph(ctx)
    g.build_forward_expand(graph, out)
    result = np.ctypeslib.as_array(ctypes.cast(g.get_data(out), ctypes.POINTER(ctypes.c_float)),
                                   shape=(B, Lq, Hq, D))  # ggml's [D, Hq, Lq, B]
    keep = [ctx]  # the context lives as long as the calls (never freed: one per row, the run is short)

    def bind(threads):
        plan = g.graph_plan(graph, threads, None)
        work = np.empty(max(plan.work_size, 1), dtype=np.uint8)
        plan.work_data = work.ctypes.data
        keep.append(work)

        def setup():
            pass

        def call():
            status = g.graph_compute(graph, ctypes.byref(plan))
            if status != 0:
                raise RuntimeError("ggml_graph_compute returned %d" % status)
            return result
        return setup, call

    def rows_of(output):
        return {(b, i): output[b, i].copy() for b, i in row.check_points()}

    path = "ggml_flash_attn_ext (%s, GGML_PREC_F32) on ggml's CPU backend" % what
    return [rowlib.Candidate(path, bind, rows_of)]


def context():
    """ggml's version (its libraries' file names) and commit (the build directory's name, ggml-<commit>-...)."""
    names = os.listdir(GGML.dir)
    versions = [m.group(1) for m in (re.match(r"libggml-base\.so\.(\d+\.\d+\.\d+)$", n) for n in names) if m]
    commit = re.search(r"ggml-([0-9a-f]{7,40})", GGML.dir)
    return {
        "library_version": "%s (commit %s)" % (versions[0] if versions else "?", commit.group(1) if commit else "?"),
        "installed_from": "built from source with ggml's defaults (GGML_NATIVE, OpenMP), called through ctypes",
    }


def main(argv):
    global GGML
    if "--ggml-lib" not in argv:
        print("ggml_rows.py: --ggml-lib DIR is required", file=sys.stderr)
        return 2
    at = argv.index("--ggml-lib")
    GGML = Ggml(argv[at + 1])
    return rowlib.run_peer("ggml", argv[:at] + argv[at + 2:], attention_candidate, context, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
