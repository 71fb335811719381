#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times OpenVINO (PyPI's openvino, CPU plugin) on bench_attention's rows.

    VENV/bin/python bench/compare/openvino_rows.py --rows-from bench/results/latest.json --out OUT.json
        [--repetitions 5] [--min-time 0.3] [--threads 1,2] [--rows P1,D1]

scripts/bench.sh --compare installs openvino from PyPI into a virtual
environment outside the tree (bench/README.md, "Comparing with other
libraries"). The rows come from bench_attention's JSON; inputs, reference and
timing: rows.py (run_peer). Each row is a small model built with openvino's
Python graph API (opset13) around ScaledDotProductAttention, compiled for the
CPU plugin with INFERENCE_NUM_THREADS n, NUM_STREAMS 1, PERFORMANCE_HINT
LATENCY and INFERENCE_PRECISION_HINT f32 (bf16 for the rows with bf16
products, P1b and M1b: what the plugin then runs is recorded, "inference_precision"
and the SDPA node's runtime precision; on a CPU without AVX512_BF16 or AMX it
runs f32):

  attention rows   scaled_dot_product_attention(q, k, v) on [B, H, L, D] parameters;
                   causal=True for causal rows, a sliding window or a causal mask
                   aligned to the end of the cache as a boolean attention_mask
                   constant; unmasked GQA (D1) with the query heads of a K/V head as
                   one query of group*Lq rows (K and V read in place); masked GQA
                   (V2chunk) with the K/V heads broadcast (Unsqueeze + Broadcast +
                   Reshape, the pattern of OpenVINO's LLM exports).
  MHA rows         MatMul (fused Q/K/V weights, transpose_b) + Add, Reshape/Transpose
                   to [B, H, L, D], SDPA, Transpose/Reshape, MatMul + Add.
  KV-cache rows    V2chunk, V2decodes (F32 cache): the same SDPA on a contiguous cache
                   (no pages).

The inputs are bound once (ov.Tensor sharing the numpy arrays); a timed call is
InferRequest.infer() alone. Output: BM_Compare/openvino/<id>/threads:<n>.
"""

import math
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

CORE = ov.Core()
PAGED = ("a paged decode batch of sequences of different lengths (V1): the Python API has PagedAttention only as openvino.op._PagedAttentionExtension, "
         "an experimental class (\"no backward compatibility is guaranteed\") whose 20-odd inputs change between "
         "releases, and the CPU plugin chooses the cache's element type and block layout itself "
         "(KV_CACHE_PRECISION, by default u8, quantized by the plugin): driving it means reimplementing "
         "openvino.genai's scheduler, which is not timed here")


def rt_value(rt, key):
    try:
        return str(rt[key].astype(str))
    except Exception:  # noqa: BLE001
        try:
            return str(rt[key])
        except Exception:  # noqa: BLE001
            return "?"


def attention_model(row, inp):
    q = ops.parameter(list(inp["q"].shape), ov.Type.f32, name="q")
    k = ops.parameter(list(inp["k"].shape), ov.Type.f32, name="k")
    v = ops.parameter(list(inp["v"].shape), ov.Type.f32, name="v")
    group = row.Hq // row.Hkv
    scale = ops.constant(np.float32(1.0 / math.sqrt(row.D)))
    masked = row.window or (row.causal and row.causal_offset)
    what = []
    qq, kk, vv = q, k, v
    if group > 1 and not (masked or row.causal):
        qq = ops.reshape(q, ops.constant(np.array([row.B, row.Hkv, group * row.Lq, row.D], np.int64)), False)
        what.append("the %d query heads of a K/V head as one %d-row query" % (group, group * row.Lq))
    elif group > 1:
        def expand(x):
            shape = [row.B, row.Hkv, group, row.Lk, row.D]
            x = ops.broadcast(ops.unsqueeze(x, ops.constant(np.array([2], np.int64))),
                              ops.constant(np.array(shape, np.int64)))
            return ops.reshape(x, ops.constant(np.array([row.B, row.Hq, row.Lk, row.D], np.int64)), False)
        kk, vv = expand(k), expand(v)
        what.append("K/V heads broadcast %dx (Unsqueeze + Broadcast + Reshape)" % group)
    if masked:
        mask = ops.constant(row.visible_mask())
        out = ops.scaled_dot_product_attention(qq, kk, vv, mask, scale, causal=False)
        what.append("a boolean attention_mask [Lq, Lk]")
    else:
        out = ops.scaled_dot_product_attention(qq, kk, vv, None, scale, causal=bool(row.causal))
        if row.causal:
            what.append("causal=True")
    if qq is not q:
        out = ops.reshape(out, ops.constant(np.array([row.B, row.Hq, row.Lq, row.D], np.int64)), False)
    if row.is_kv_row():
        what.append("contiguous cache, no pages")
    model = ov.Model([out], [q, k, v], "sdpa_" + row.id)
    feeds = [inp["q"], inp["k"], inp["v"]]
    rows_of = (lambda o: {(b, i): o[b, :, i, :] for b, i in row.check_points()})
    return model, feeds, rows_of, "ScaledDotProductAttention (opset13)%s" % (
        " (%s)" % ", ".join(what) if what else "")


def mha_model(row, inp):
    e, h, d = row.d_model, row.Hq, row.D
    x = ops.parameter(list(inp["x"].shape), ov.Type.f32, name="x")
    qkv = ops.add(ops.matmul(x, ops.constant(inp["in_proj_weight"]), False, True), ops.constant(inp["in_proj_bias"]))
    qkv = ops.reshape(qkv, ops.constant(np.array([row.B, row.Lq, 3, h, d], np.int64)), False)
    qkv = ops.transpose(qkv, ops.constant(np.array([2, 0, 3, 1, 4], np.int64)))  # [3, B, H, L, D]
    parts = ops.split(qkv, ops.constant(np.int64(0)), 3)
    squeeze = [ops.squeeze(parts.output(n), ops.constant(np.array([0], np.int64))) for n in range(3)]
    attn = ops.scaled_dot_product_attention(squeeze[0], squeeze[1], squeeze[2], None,
                                            ops.constant(np.float32(1.0 / math.sqrt(d))), causal=False)
    attn = ops.reshape(ops.transpose(attn, ops.constant(np.array([0, 2, 1, 3], np.int64))),
                       ops.constant(np.array([row.B, row.Lq, e], np.int64)), False)
    out = ops.add(ops.matmul(attn, ops.constant(inp["out_proj_weight"]), False, True),
                  ops.constant(inp["out_proj_bias"]))
    model = ov.Model([out], [x], "mha_" + row.id)
    rows_of = (lambda o: {(b, i): o[b, i, :] for b, i in row.check_points()})
    return model, [inp["x"]], rows_of, ("MatMul (fused Q/K/V weights) + Add, Reshape/Transpose, "
                                        "ScaledDotProductAttention (opset13), MatMul + Add")


def candidates_for(row):
    if row.kv_lens:
        raise rowlib.Unsupported(PAGED)
    if row.kv not in ("f32",) and not (row.kv == "bf16" and row.is_bf16()):
        raise rowlib.Unsupported(
            "K and V in %s: ScaledDotProductAttention takes float inputs; the CPU plugin's own compressed KV cache "
            "(KV_CACHE_PRECISION u8/u4) belongs to stateful LLM models, which quantize their cache themselves "
            "(so the row's cache cannot be given to it)" % row.kv)
    inp = row.inputs()
    model, feeds, rows_of, path = mha_model(row, inp) if row.d_model else attention_model(row, inp)
    precision = "bf16" if row.is_bf16() else "f32"
    info = {}

    def bind(threads):
        compiled = CORE.compile_model(model, "CPU", {
            "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": precision})
        if not info:
            hint = compiled.get_property("INFERENCE_PRECISION_HINT")
            info["inference_precision"] = hint.to_string() if hasattr(hint, "to_string") else str(hint)
            for op in compiled.get_runtime_model().get_ops():
                rt = op.get_rt_info()
                if "ScaledDotProductAttention" in rt_value(rt, "originalLayersNames"):
                    # What the plugin made of the SDPA node: e.g. 'Subgraph jit_avx2_f32, runtime f32'.
                    info["sdpa_runtime"] = "%s %s, runtime %s" % (
                        rt_value(rt, "layerType"), rt_value(rt, "primitiveType"), rt_value(rt, "runtimePrecision"))
        request = compiled.create_infer_request()
        for n, a in enumerate(feeds):
            request.set_input_tensor(n, ov.Tensor(a, shared_memory=True))

        def call():
            request.infer()
            return request.get_output_tensor(0).data
        return (lambda: None), call

    if row.is_bf16():
        path += ", INFERENCE_PRECISION_HINT bf16"
    cand = rowlib.Candidate(path, bind, lambda o: rows_of(np.array(o, dtype=np.float64)),
                            2.0 ** -8 if row.is_bf16() else 0.0, info)
    return [cand]


def context():
    from importlib import metadata
    version = metadata.version("openvino")
    return {
        "library_version": version,
        "build": ov.get_version(),
        "installed_from": "PyPI openvino==%s in the virtual environment venv-compare of the cache directory"
                          % version,
        "cpu_device": CORE.get_property("CPU", "FULL_DEVICE_NAME"),
        "cpu_capabilities": " ".join(CORE.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
    }


def main(argv):
    return rowlib.run_peer("openvino", argv, candidates_for, context, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
