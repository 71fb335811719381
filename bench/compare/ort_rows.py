#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times ONNX Runtime (PyPI's onnxruntime, CPU execution provider) on bench_attention's rows.

    VENV/bin/python bench/compare/ort_rows.py --rows-from bench/results/latest.json --out OUT.json
        [--repetitions 5] [--min-time 0.3] [--threads 1,2] [--rows P1,D1]

scripts/bench.sh --compare installs onnxruntime and onnx (which writes the
models, in memory) from PyPI into a virtual environment outside the tree
(bench/README.md, "Comparing with other libraries"). The rows come from
bench_attention's JSON; inputs, reference and timing: rows.py (run_peer). Every
operator that can express a row is a candidate; each is checked, all are timed
and the fastest at each thread count is reported and named (the others' medians
in "other_paths"):

  attention   ONNX Attention (opset 24) on [B, H, L, D]: GQA natively (q_num_heads !=
              kv_num_heads), is_causal=1, a sliding window or a causal mask aligned to
              the end of the cache as a boolean attn_mask.
  mha         com.microsoft MultiHeadAttention: Q [B, Lq, Hq*D], K and V [B, H, Lk, D];
              unidirectional=1 for causal rows, a window as an additive attention_bias.
              Rows with Hq == Hkv.
  gqa         com.microsoft GroupQueryAttention. Prefill rows (Lq == Lk): Q, K, V as
              [B, L, H*D], causal=0/1, local_window_size for a sliding window (W1).
              Decode and KV-cache rows: its own KV cache, past_key / past_value
              [B, Hkv, L, D] bound to the same buffers as present_key / present_value
              (buffer sharing, IOBinding), each call appending the cache's last token
              again (the same values: the cache is unchanged); sequences of different
              lengths (V1) through seqlens_k over a cache padded to the longest.
              Cache types: f32; V1's bf16 cache as f16 (its CPU kernel has no bf16: q
              and the output f16 too); D1q, D2q int8 with PER_CHANNEL scales
              (k_quant_type / v_quant_type; hwyattn's int8 cache has per-token scales,
              which the op does not offer); D1q4_0 int4 (kv_cache_bit_width=4,
              PER_CHANNEL scales, two values per byte; ggml's Q4_0 blocks have a scale
              per 32 values).
  layer       MHA rows (M1): com.microsoft Attention (fused Q/K/V projection, weights
              [E, 3E]) + MatMul + Add; or MatMul (fused Q/K/V weights) + MultiHeadAttention
              (its bias input) + MatMul + Add.

Sessions: one per (candidate, thread count), intra_op_num_threads n, inter_op_num_threads 1,
sequential execution, all graph optimizations; inputs and outputs bound once (IOBinding),
so a timed call is run_with_iobinding alone. Output: BM_Compare/onnxruntime/<id>/threads:<n>.
"""

import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

OPSET = 24  # the ONNX Attention operator's newest version that ORT 1.31 runs
ort.set_default_logger_severity(4)  # failures are reported in the results; no console lines
F16_ROUNDING = 2.0 ** -9  # q and the output in fp16 (V1): their rounding, relative (Row.tolerance)
NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
              np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
              np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def tensor_info(name, array):
    return helper.make_tensor_value_info(name, NP_TO_ONNX[array.dtype], list(array.shape))


class Graph:
    """A one-model candidate: nodes, named numpy inputs (bound once) and outputs (preallocated)."""

    def __init__(self, path, nodes, inputs, outputs, shared=(), rows_of=None, output_rounding=0.0, extra=None):
        self.path, self.nodes, self.inputs, self.outputs = path, nodes, inputs, outputs
        self.shared = dict(shared)  # output name -> input name whose buffer it reuses (a KV cache)
        self.rows_of, self.output_rounding, self.extra = rows_of, output_rounding, extra

    def model_bytes(self):
        graph = helper.make_graph(
            self.nodes, "hwyattn_compare",
            [tensor_info(n, a) for n, a in self.inputs.items()],
            [tensor_info(n, self.inputs[self.shared[n]] if n in self.shared else a) for n, a in self.outputs.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                        helper.make_opsetid("com.microsoft", 1)],
                                  producer_name="hwyattn bench/compare/ort_rows.py")
        model.ir_version = 10
        return model.SerializeToString()

    def candidate(self):
        model = self.model_bytes()
        values = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in self.inputs.items()}
        outs = {n: values[self.shared[n]] if n in self.shared else ort.OrtValue.ortvalue_from_numpy(a)
                for n, a in self.outputs.items()}
        first = next(iter(self.outputs))

        def bind(threads):
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            binding = session.io_binding()
            for n, v in values.items():
                binding.bind_ortvalue_input(n, v)
            for n, v in outs.items():
                binding.bind_ortvalue_output(n, v)

            def call():
                session.run_with_iobinding(binding)
                return outs[first]
            return (lambda: None), call

        return rowlib.Candidate(self.path, bind, lambda v: self.rows_of(v.numpy()), self.output_rounding, self.extra)


def bnsh_rows(row):
    """Output [B, Hq, Lq, D] -> Row.reference's rows."""
    return lambda out: {(b, i): out[b, :, i, :] for b, i in row.check_points()}


def bsnh_rows(row):
    """Output [B, Lq, Hq*D] -> Row.reference's rows."""
    return lambda out: {(b, i): out[b, i, :].reshape(row.Hq, row.D) for b, i in row.check_points()}


def attention_graph(row, inp):
    attrs = {"scale": 1.0 / math.sqrt(row.D)}
    inputs = {"q": inp["q"], "k": inp["k"], "v": inp["v"]}
    names = ["q", "k", "v"]
    what = []
    if row.Hq != row.Hkv:
        what.append("GQA: q_num_heads %d, kv_num_heads %d" % (row.Hq, row.Hkv))
    if row.window or (row.causal and row.causal_offset):
        inputs["mask"] = row.visible_mask()
        names.append("mask")
        what.append("a boolean attn_mask [Lq, Lk]")
    elif row.causal:
        attrs["is_causal"] = 1
        what.append("is_causal=1")
    node = helper.make_node("Attention", names, ["out"], **attrs)
    return Graph("ONNX Attention (opset %d) on [B, H, L, D]%s" % (OPSET, " (%s)" % ", ".join(what) if what else ""),
                 [node], inputs, {"out": np.zeros((row.B, row.Hq, row.Lq, row.D), np.float32)},
                 rows_of=bnsh_rows(row))


def bsnh(x):
    """[B, H, L, D] -> [B, L, H*D]."""
    b, h, n, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, n, h * d)


def mha_graph(row, inp):
    attrs = {"num_heads": row.Hq, "scale": 1.0 / math.sqrt(row.D)}
    inputs = {"q": bsnh(inp["q"]), "k": inp["k"], "v": inp["v"]}
    names = ["q", "k", "v"]
    what = "Q as [B, Lq, Hq*D], K and V [B, H, Lk, D]"
    if row.window or (row.causal and row.causal_offset):
        inputs["bias"] = np.where(row.visible_mask(), 0.0, -np.inf).astype(np.float32)[None, None]
        names += ["", "", "bias"]
        what += ", the mask as an additive attention_bias"
    elif row.causal:
        attrs["unidirectional"] = 1
        what += ", unidirectional=1"
    node = helper.make_node("MultiHeadAttention", names, ["out"], domain="com.microsoft", **attrs)
    return Graph("com.microsoft MultiHeadAttention (%s)" % what, [node], inputs,
                 {"out": np.zeros((row.B, row.Lq, row.Hq * row.D), np.float32)}, rows_of=bsnh_rows(row))


def gqa_prefill_graph(row, inp):
    """GroupQueryAttention without a past: Q, K, V of the same length."""
    attrs = {"num_heads": row.Hq, "kv_num_heads": row.Hkv, "scale": 1.0 / math.sqrt(row.D),
             "causal": 1 if row.causal else 0}
    what = "causal=%d" % attrs["causal"]
    if row.window:
        attrs["local_window_size"] = row.window
        what += ", local_window_size=%d" % row.window
    inputs = {"q": bsnh(inp["q"]), "k": bsnh(inp["k"]), "v": bsnh(inp["v"]),
              "seqlens_k": np.full((row.B,), row.Lk - 1, np.int32), "total": np.array(row.Lk, np.int32)}
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "seqlens_k", "total"], ["out"],
                            domain="com.microsoft", **attrs)
    return Graph("com.microsoft GroupQueryAttention (Q, K, V as [B, L, H*D], %s)" % what, [node], inputs,
                 {"out": np.zeros((row.B, row.Lq, row.Hq * row.D), np.float32)}, rows_of=bsnh_rows(row))


def pack_int4(x):
    """int4 values in [-8, 7] -> ORT's packing: value + 8, two per byte, the even element in the low nibble."""
    u = (x.astype(np.int16) + 8).astype(np.uint8)
    return np.ascontiguousarray(u[..., 0::2] | (u[..., 1::2] << 4))


def gqa_cache_graph(row, inp):
    """GroupQueryAttention over its own KV cache (past and present in the same buffers)."""
    attrs = {"num_heads": row.Hq, "kv_num_heads": row.Hkv, "scale": 1.0 / math.sqrt(row.D), "causal": 1}
    lens = [row.seq_len(b) for b in range(row.B)]
    # The step's new tokens: the last Lq of each sequence (already in the cache: the call rewrites them).
    idx = np.array([[n - row.Lq + i for i in range(row.Lq)] for n in lens])
    new_k = np.stack([inp["k"][b][:, idx[b]] for b in range(row.B)])
    new_v = np.stack([inp["v"][b][:, idx[b]] for b in range(row.B)])
    q = inp["q"]
    past_k, past_v = inp["k"], inp["v"]
    names = ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total"]
    extra_inputs = {}
    rounding = 0.0
    dtype = "float32"
    if row.kv == "bf16":
        # No bf16 kernel on the CPU: the f16 op (q, new K/V, cache and output in fp16).
        q, new_k, new_v = q.astype(np.float16), new_k.astype(np.float16), new_v.astype(np.float16)
        past_k, past_v = inp["k"].astype(np.float16), inp["v"].astype(np.float16)
        rounding = F16_ROUNDING
        dtype = "float16 (the op has no bf16 kernel on the CPU; the bf16 values converted)"
    elif row.kv in ("i8", "q4_0"):
        attrs.update(k_quant_type="PER_CHANNEL", v_quant_type="PER_CHANNEL",
                     kv_cache_bit_width=8 if row.kv == "i8" else 4)
        if row.kv == "i8":
            past_k, past_v = inp["k_q"], inp["v_q"]
            dtype = "int8, PER_CHANNEL scales [1, Hkv, 1, D]"
        else:
            past_k, past_v = pack_int4(inp["k_q"]), pack_int4(inp["v_q"])
            dtype = "int4, PER_CHANNEL scales [1, Hkv, 1, D] (kv_cache_bit_width=4, two per byte)"
        names += ["", "", "", "", "", "k_scale", "v_scale"]
        extra_inputs = {"k_scale": inp["k_scale"][None, :, None, :], "v_scale": inp["v_scale"][None, :, None, :]}
    elif row.kv != "f32":
        raise rowlib.Unsupported("K and V in %s: GroupQueryAttention's CPU kernel takes f32, f16, int8 and int4 "
                                 "caches (its float8e4m3fn cache is CUDA-only)" % row.kv)
    inputs = {"q": bsnh(q), "k": bsnh(new_k), "v": bsnh(new_v),
              "past_key": np.ascontiguousarray(past_k), "past_value": np.ascontiguousarray(past_v),
              "seqlens_k": np.array([n - 1 for n in lens], np.int32), "total": np.array(max(lens), np.int32)}
    inputs.update(extra_inputs)
    node = helper.make_node("GroupQueryAttention", names, ["out", "present_key", "present_value"],
                            domain="com.microsoft", **attrs)
    out = np.zeros((row.B, row.Lq, row.Hq * row.D), q.dtype)
    what = "its KV cache as past/present (shared buffers), cache %s" % dtype.split(" (")[0]
    if row.kv_lens:
        what += ", sequences by seqlens_k over a cache padded to %d" % row.Lk
    if row.pages:
        what += ", contiguous (no pages)"
    return Graph("com.microsoft GroupQueryAttention (%s)" % what, [node], inputs,
                 {"out": out, "present_key": None, "present_value": None},
                 shared={"present_key": "past_key", "present_value": "past_value"},
                 rows_of=lambda o: {k: v.astype(np.float64) for k, v in bsnh_rows(row)(o).items()},
                 output_rounding=rounding, extra={"kv_cache_dtype": dtype})


def layer_graphs(row, inp):
    e = row.d_model
    w_qkv = np.ascontiguousarray(inp["in_proj_weight"].T)  # [E, 3E]: y = x W
    w_out = np.ascontiguousarray(inp["out_proj_weight"].T)
    common = {"x": inp["x"], "w_out": w_out, "b_out": inp["out_proj_bias"]}
    out = {"out": np.zeros((row.B, row.Lq, e), np.float32)}
    rows_of = (lambda o: {(b, i): o[b, i, :] for b, i in row.check_points()})
    fused = Graph(
        "com.microsoft Attention (fused Q/K/V projection, weights [E, 3E]) + MatMul + Add",
        [helper.make_node("Attention", ["x", "w_qkv", "b_qkv"], ["attn"], domain="com.microsoft", num_heads=row.Hq),
         helper.make_node("MatMul", ["attn", "w_out"], ["proj"]),
         helper.make_node("Add", ["proj", "b_out"], ["out"])],
        dict(common, w_qkv=w_qkv, b_qkv=inp["in_proj_bias"]), out, rows_of=rows_of)
    split = helper.make_tensor("split", TensorProto.INT64, [3], [e, e, e])
    mha = Graph(
        "MatMul (fused Q/K/V weights) + com.microsoft MultiHeadAttention (bias input) + MatMul + Add",
        [helper.make_node("MatMul", ["x", "w_qkv"], ["qkv"]),
         helper.make_node("Constant", [], ["split"], value=split),
         helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2),
         helper.make_node("MultiHeadAttention", ["q", "k", "v", "b_qkv"], ["attn"], domain="com.microsoft",
                          num_heads=row.Hq),
         helper.make_node("MatMul", ["attn", "w_out"], ["proj"]),
         helper.make_node("Add", ["proj", "b_out"], ["out"])],
        dict(common, w_qkv=w_qkv, b_qkv=inp["in_proj_bias"]), out, rows_of=rows_of)
    return [fused, mha]


def candidates_for(row):
    if row.is_bf16():
        raise rowlib.Unsupported("bf16 products: ONNX Runtime's CPU attention kernels (Attention, MultiHeadAttention, "
                                 "GroupQueryAttention) have no bfloat16 type")
    inp = row.inputs()
    if row.d_model:
        graphs = layer_graphs(row, inp)
    elif row.is_kv_row() or row.kv != "f32":
        graphs = [gqa_cache_graph(row, inp)]
    else:
        graphs = [attention_graph(row, inp)]
        if row.Hq == row.Hkv:
            graphs.append(mha_graph(row, inp))
        if row.Lq == 1:
            graphs.append(gqa_cache_graph(row, inp))
        elif row.Lq == row.Lk:
            graphs.append(gqa_prefill_graph(row, inp))
    return [g.candidate() for g in graphs]


def context():
    return {
        "library_version": ort.__version__,
        "installed_from": "PyPI onnxruntime==%s, onnx==%s (writes the models) in the virtual environment "
                          "venv-compare of the cache directory" % (ort.__version__, onnx.__version__),
        "onnx_version": onnx.__version__,
        "onnx_opset": str(OPSET),
        "execution_provider": "CPUExecutionProvider",
    }


def main(argv):
    return rowlib.run_peer("onnxruntime", argv, candidates_for, context, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
