#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes one ONNX model per bench_attention row (and path) for bench/compare/ort_rows.mjs.

    /usr/bin/python3 bench/compare/make_onnx.py --rows-from bench/results/latest.json --out-dir DIR
        [--paths all|mha,attention23,matmul]

Writes DIR/<id>.<path>.onnx, each input as raw little-endian fp32 DIR/<id>.<name>.bin
(the same inputs as torch_rows.py: rows.py's Row.inputs) and DIR/manifest.json:
per row its label, FLOPs, K/V bytes, time unit, the candidate models (path,
file, inputs, output layout) and a float64 numpy reference of three query rows
for the output check. The models are written with onnx.helper (Debian's
python3-onnx); no checker, since onnx 1.12 predates opset 23. The ONNX
Runtime paths, fp32 on the CPU execution provider:

  mha          com.microsoft MultiHeadAttention: Q [B, Lq, Hq*D] (its layout),
               K and V [B, H, Lk, D]; causal rows with unidirectional=1. Rows with
               Hq == Hkv and no window only.
  attention23  ONNX opset-23 Attention: Q, K, V [B, H, L, D] as for hwyattn;
               q_num_heads != kv_num_heads (GQA) natively; is_causal=1; a window
               as a boolean attn_mask [Lq, Lk].
  matmul       MatMul(Q, K^T) * scale (+ an additive -inf mask for causal and
               windowed rows), Softmax, MatMul(P, V); GQA rows without a mask put
               the query heads of a K/V head into one matrix, as torch_rows.py does.
  mha_layer    M1: com.microsoft Attention (fused Q/K/V projection and attention,
               weights [E, 3E]) + MatMul + Add for the output projection.

--paths all (the default) writes every path that applies to a row; ort_rows.mjs
times them all and reports the fastest at each thread count, naming it (no
one path is fastest on every row: bench/README.md, "Comparing with other
libraries"). MHA rows always take mha_layer.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

ALL_PATHS = ("mha", "attention23", "matmul")


def value_info(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))


def save(model_graph, path, opset=23):
    model = helper.make_model(
        model_graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
        producer_name="hwyattn bench/compare/make_onnx.py",
    )
    model.ir_version = 10  # opset 23 needs IR 10; onnx 1.12's helper would write 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def visible_mask(row):
    """[Lq, Lk] booleans: key j visible from query i."""
    i = np.arange(row.Lq)[:, None]
    j = np.arange(row.Lk)[None, :]
    visible = (j <= i) if row.causal else np.ones((row.Lq, row.Lk), dtype=bool)
    if row.window:
        visible &= j > i - row.window
    return visible


def mha_model(row, path):
    """com.microsoft MultiHeadAttention, Q in BSNH [B, Lq, Hq*D], K/V in BNSH."""
    hd = row.Hq * row.D
    attrs = {"num_heads": row.Hq, "scale": 1.0 / math.sqrt(row.D)}
    if row.causal:
        attrs["unidirectional"] = 1
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["out"], domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], "mha_" + row.id,
        [value_info("q", (row.B, row.Lq, hd)), value_info("k", (row.B, row.Hkv, row.Lk, row.D)),
         value_info("v", (row.B, row.Hkv, row.Lk, row.D))],
        [value_info("out", (row.B, row.Lq, hd))])
    save(graph, path)
    return {"inputs": [("q", "q_bsnh"), ("k", "k"), ("v", "v")], "output_layout": "BSNH",
            "what": "com.microsoft MultiHeadAttention (Q as [B, Lq, Hq*D]%s)"
                    % (", unidirectional=1" if row.causal else "")}


def attention23_model(row, path):
    """ONNX opset-23 Attention on [B, H, L, D]."""
    attrs = {"scale": 1.0 / math.sqrt(row.D)}
    inputs = ["q", "k", "v"]
    initializers = []
    if row.window:
        # The whole mask (causal and window) as one boolean attn_mask, is_causal left 0.
        initializers.append(numpy_helper.from_array(visible_mask(row), "mask"))
        inputs.append("mask")
    elif row.causal:
        attrs["is_causal"] = 1
    node = helper.make_node("Attention", inputs, ["out"], **attrs)
    graph = helper.make_graph(
        [node], "attention23_" + row.id,
        [value_info("q", (row.B, row.Hq, row.Lq, row.D)), value_info("k", (row.B, row.Hkv, row.Lk, row.D)),
         value_info("v", (row.B, row.Hkv, row.Lk, row.D))],
        [value_info("out", (row.B, row.Hq, row.Lq, row.D))], initializer=initializers)
    save(graph, path)
    what = "ONNX Attention (opset 23) on [B, H, L, D]"
    extras = []
    if row.Hq != row.Hkv:
        extras.append("GQA: q_num_heads %d, kv_num_heads %d" % (row.Hq, row.Hkv))
    if row.window:
        extras.append("causal window as a boolean attn_mask")
    elif row.causal:
        extras.append("is_causal=1")
    return {"inputs": [("q", "q"), ("k", "k"), ("v", "v")], "output_layout": "BNSH",
            "what": what + (" (%s)" % ", ".join(extras) if extras else "")}


def matmul_model(row, path):
    """MatMul + Mul + (Add mask) + Softmax + MatMul."""
    group = row.Hq // row.Hkv
    masked = row.causal or row.window
    nodes, initializers = [], [numpy_helper.from_array(np.array(1.0 / math.sqrt(row.D), np.float32), "scale")]
    q_in = "q"
    if group > 1:
        if masked:
            raise ValueError("matmul path: masked GQA rows are not supported")
        initializers.append(numpy_helper.from_array(
            np.array([row.B, row.Hkv, group * row.Lq, row.D], np.int64), "grouped_shape"))
        initializers.append(numpy_helper.from_array(
            np.array([row.B, row.Hq, row.Lq, row.D], np.int64), "out_shape"))
        nodes.append(helper.make_node("Reshape", ["q", "grouped_shape"], ["qg"]))
        q_in = "qg"
    nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
    nodes.append(helper.make_node("MatMul", [q_in, "kt"], ["s0"]))
    nodes.append(helper.make_node("Mul", ["s0", "scale"], ["s1"]))
    s = "s1"
    if masked:
        mask = np.where(visible_mask(row), 0.0, -np.inf).astype(np.float32)
        initializers.append(numpy_helper.from_array(mask, "mask"))
        nodes.append(helper.make_node("Add", ["s1", "mask"], ["s2"]))
        s = "s2"
    nodes.append(helper.make_node("Softmax", [s], ["p"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["p", "v"], ["og" if group > 1 else "out"]))
    if group > 1:
        nodes.append(helper.make_node("Reshape", ["og", "out_shape"], ["out"]))
    graph = helper.make_graph(
        nodes, "matmul_" + row.id,
        [value_info("q", (row.B, row.Hq, row.Lq, row.D)), value_info("k", (row.B, row.Hkv, row.Lk, row.D)),
         value_info("v", (row.B, row.Hkv, row.Lk, row.D))],
        [value_info("out", (row.B, row.Hq, row.Lq, row.D))], initializer=initializers)
    save(graph, path)
    what = "MatMul + Softmax + MatMul"
    if masked:
        what += " (an additive -inf mask; the full square computed)"
    if group > 1:
        what += " (the %d query heads of a K/V head as one matrix)" % group
    return {"inputs": [("q", "q"), ("k", "k"), ("v", "v")], "output_layout": "BNSH", "what": what}


def mha_layer_model(row, path):
    """M1: com.microsoft Attention (fused QKV projection) + output projection."""
    e = row.d_model
    # nn.MultiheadAttention's in_proj_weight [3E, E] (y = x W^T) -> Attention's weights [E, 3E] (y = x W).
    inits = []
    nodes = [
        helper.make_node("Attention", ["x", "w_qkv", "b_qkv"], ["attn"], domain="com.microsoft",
                         num_heads=row.Hq),
        helper.make_node("MatMul", ["attn", "w_out"], ["proj"]),
        helper.make_node("Add", ["proj", "b_out"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "mha_layer_" + row.id,
        [value_info("x", (row.B, row.Lq, e)), value_info("w_qkv", (e, 3 * e)), value_info("b_qkv", (3 * e,)),
         value_info("w_out", (e, e)), value_info("b_out", (e,))],
        [value_info("out", (row.B, row.Lq, e))], initializer=inits)
    save(graph, path)
    return {"inputs": [("x", "x"), ("w_qkv", "w_qkv"), ("b_qkv", "in_proj_bias"), ("w_out", "w_out"),
                       ("b_out", "out_proj_bias")],
            "output_layout": "BSE",
            "what": "com.microsoft Attention (fused Q/K/V projection, weights [E, 3E]) + MatMul + Add"}


def applicable(row, path):
    if row.d_model:
        return path == "mha_layer"
    if path == "mha":
        return row.Hq == row.Hkv and not row.window
    if path == "matmul":
        return row.Hq == row.Hkv or not (row.causal or row.window)
    return path == "attention23"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows-from", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--paths", default="all")
    args = ap.parse_args(argv)
    rows, skipped, hw_context = rowlib.rows_from_json(args.rows_from)
    for rid, reason in skipped.items():
        print("make_onnx.py: %s left out: %s" % (rid, reason), file=sys.stderr)
    if not rows:
        print("make_onnx.py: no BM_Attention rows with labels in %s" % args.rows_from, file=sys.stderr)
        return 1
    if args.paths == "all":
        wanted = ALL_PATHS
    else:
        wanted = tuple(args.paths.split(","))
        bad = [p for p in wanted if p not in ALL_PATHS]
        if bad:
            print("make_onnx.py: unknown path(s) %s (known: %s)" % (bad, ", ".join(ALL_PATHS)), file=sys.stderr)
            return 2
    os.makedirs(args.out_dir, exist_ok=True)
    makers = {"mha": mha_model, "attention23": attention23_model, "matmul": matmul_model,
              "mha_layer": mha_layer_model}
    manifest = {"onnx_version": onnx.__version__, "hwyattn_run_date": hw_context.get("date", ""),
                "skipped_rows": skipped, "rows": []}
    for row in rows:
        inp = row.inputs()
        if row.d_model:
            inp["w_qkv"] = np.ascontiguousarray(inp["in_proj_weight"].T)
            inp["w_out"] = np.ascontiguousarray(inp["out_proj_weight"].T)
        else:
            inp["q_bsnh"] = np.ascontiguousarray(inp["q"].transpose(0, 2, 1, 3)).reshape(
                row.B, row.Lq, row.Hq * row.D)
        paths = ("mha_layer",) if row.d_model else tuple(p for p in wanted if applicable(row, p))
        if not paths:
            paths = ("attention23",)
        models = []
        written = set()
        for path in paths:
            file = os.path.join(args.out_dir, "%s.%s.onnx" % (row.id, path))
            desc = makers[path](row, file)
            feeds = []
            for name, key in desc["inputs"]:
                bin_file = os.path.join(args.out_dir, "%s.%s.bin" % (row.id, key))
                if key not in written:
                    np.ascontiguousarray(inp[key], dtype="<f4").tofile(bin_file)
                    written.add(key)
                feeds.append({"name": name, "file": os.path.basename(bin_file), "dims": list(inp[key].shape)})
            models.append({"path": path, "what": desc["what"], "file": os.path.basename(file), "feeds": feeds,
                           "output_layout": desc["output_layout"]})
        ref = row.reference(inp)
        manifest["rows"].append({
            "id": row.id, "label": row.label, "flops": row.flops(), "kv_bytes": row.kv_bytes(),
            "decode": row.is_decode(), "time_unit": row.time_unit(),
            "B": row.B, "Hq": row.Hq, "Lq": row.Lq, "D": row.D, "d_model": row.d_model,
            "models": models,
            "check": [{"b": b, "i": i, "expected": [float(x) for x in ref[(b, i)].reshape(-1)]}
                      for (b, i) in sorted(ref)],
        })
    with open(os.path.join(args.out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
