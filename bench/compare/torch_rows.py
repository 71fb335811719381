#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times PyTorch 2.x (PyPI's torch, on the CPU) on bench_attention's rows.

    VENV/bin/python bench/compare/torch_rows.py --rows-from bench/results/latest.json --out OUT.json
        [--repetitions 5] [--min-time 0.3] [--threads 1,2] [--rows P1,D1]

scripts/bench.sh --compare installs torch from PyPI into a virtual environment
outside the tree (bench/README.md, "Comparing with other libraries") and runs
this script with it. The rows (and so any --benchmark_filter) come from
bench_attention's JSON; inputs, reference and timing: rows.py (run_peer). What
each row runs, as a torch user would write it:

  attention rows     torch.nn.functional.scaled_dot_product_attention on [B, H, L, D]
                     (its CPU flash-attention kernel: the aten kernels that ran, from
                     torch.profiler, are named with the path); causal rows
                     is_causal=True; a sliding window (W1) an explicit boolean
                     attn_mask; GQA (D1) enable_gqa=True, and for unmasked GQA a second
                     candidate with the query heads of a K/V head as one query
                     (q viewed as [B, Hkv, group*Lq, D]); bf16 rows (P1b) q, k, v in
                     torch.bfloat16.
  MHA rows           nn.MultiheadAttention(d_model, heads, batch_first=True) in eval
                     mode under inference_mode (its fast path), and a second candidate
                     as most model code writes the layer: one fused Q/K/V F.linear,
                     scaled_dot_product_attention, the output F.linear; M1b both in
                     torch.bfloat16.
  KV-cache rows      V2chunk, V2decodes (F32 cache): scaled_dot_product_attention on a
                     contiguous cache [B, Hkv, L, D] (torch has no paged attention on the
                     CPU), enable_gqa=True; the chunk's causal mask aligned to the end of
                     the cache (torch.nn.attention.bias.causal_lower_right).

When a row has two candidates, both are timed and the faster at each thread
count is reported (rows.py). Rows torch cannot express are left out with the
reason (context "skipped_rows").
Threads: torch.set_num_threads(n) before each repetition. Output: BM_Compare/torch/<id>/threads:<n>.
"""

import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowlib  # noqa: E402

BF16_OUTPUT = 2.0 ** -8  # a bf16 output's rounding, relative (Row.tolerance)


def kernels_of(call):
    """The aten attention kernels one call runs (torch.profiler), e.g. '_scaled_dot_product_flash_attention_for_cpu'."""
    saved = os.dup(2)  # the profiler's own start/stop lines on stderr are noise here
    try:
        from torch.profiler import ProfilerActivity, profile
        with open(os.devnull, "w", encoding="utf-8") as null:
            os.dup2(null.fileno(), 2)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                call()
        names = [e.key for e in prof.key_averages()]
    except Exception:  # noqa: BLE001 (only a description)
        return ""
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    picked = [n for n in names if re.search(r"scaled_dot_product|multi_head_attention|repeat_interleave|"
                                            r"^aten::(bmm|baddbmm|_softmax|addmm|linear)$", n)]
    return ", ".join(sorted(set(n.replace("aten::", "") for n in picked)))


def attention_candidate(row):
    if row.d_model:
        return mha_candidate(row)
    if row.kv_lens:
        raise rowlib.Unsupported("sequences of %d different lengths in one call: torch has no variable-length or "
                                 "paged attention on the CPU (padding to the longest would multiply the work)"
                                 % row.B)
    if row.kv not in ("f32", "bf16"):
        raise rowlib.Unsupported("K and V in %s: torch's attention takes fp32/bf16/fp16 tensors only (dequantizing "
                                 "the cache first would time a conversion, not a quantized decode)" % row.kv)
    if row.kv == "bf16" and not row.is_bf16():
        raise rowlib.Unsupported("a bf16 cache with fp32 products: torch's attention needs q, k and v in one dtype")
    inp = row.inputs()
    dtype = torch.bfloat16 if row.is_bf16() else torch.float32
    q, k, v = (torch.from_numpy(inp[n]).to(dtype) for n in ("q", "k", "v"))
    kwargs = {}
    what = []
    if row.Hq != row.Hkv:
        kwargs["enable_gqa"] = True
        what.append("enable_gqa=True")
    if row.window:
        i = torch.arange(row.Lq).unsqueeze(1)
        j = torch.arange(row.Lk).unsqueeze(0)
        kwargs["attn_mask"] = (j <= i) & (j > i - row.window)
        what.append("boolean attn_mask [Lq, Lk] (causal window %d)" % row.window)
    elif row.causal and row.causal_offset:
        from torch.nn.attention.bias import causal_lower_right
        kwargs["attn_mask"] = causal_lower_right(row.Lq, row.Lk)
        what.append("attn_mask=causal_lower_right(%d, %d)" % (row.Lq, row.Lk))
    elif row.causal:
        kwargs["is_causal"] = True
        what.append("is_causal=True")
    if row.is_kv_row():
        what.append("contiguous cache, no pages")
    if row.is_bf16():
        what.append("bf16")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rounding = BF16_OUTPUT if row.is_bf16() else 0.0

    def rows_of(out):
        return {(b, i): out[b, :, i, :].float().numpy() for b, i in row.check_points()}

    def call():
        return sdpa(q, k, v, **kwargs)

    path = "F.scaled_dot_product_attention" + (" (%s)" % ", ".join(what) if what else "")
    candidates = finish(row, path, call, rows_of, rounding)
    if row.Hq != row.Hkv and "attn_mask" not in kwargs and not row.causal:
        # Unmasked GQA: the query heads of a K/V head as the rows of one matrix, K and V read in place.
        group = row.Hq // row.Hkv
        grouped = (row.B, row.Hkv, group * row.Lq, row.D)
        out_shape = (row.B, row.Hq, row.Lq, row.D)

        def call_grouped():
            return sdpa(q.view(grouped), k, v).view(out_shape)

        candidates += finish(row, "F.scaled_dot_product_attention, the %d query heads of a K/V head as one "
                                  "%d-row query (q viewed as [B, Hkv, %d, D])%s" % (
                                      group, group * row.Lq, group * row.Lq, ", bf16" if row.is_bf16() else ""),
                             call_grouped, rows_of, rounding)
    return candidates


def mha_candidate(row):
    inp = row.inputs()
    e = row.d_model
    dtype = torch.bfloat16 if row.is_bf16() else torch.float32
    module = torch.nn.MultiheadAttention(e, row.Hq, bias=True, batch_first=True).eval()
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.from_numpy(inp["in_proj_weight"]))
        module.in_proj_bias.copy_(torch.from_numpy(inp["in_proj_bias"]))
        module.out_proj.weight.copy_(torch.from_numpy(inp["out_proj_weight"]))
        module.out_proj.bias.copy_(torch.from_numpy(inp["out_proj_bias"]))
    module = module.to(dtype)
    for p in module.parameters():
        p.requires_grad_(False)
    x = torch.from_numpy(inp["x"]).to(dtype)

    def call():
        return module(x, x, x, need_weights=False)[0]

    bf16 = ", module and x in bf16" if row.is_bf16() else ""
    rounding = BF16_OUTPUT if row.is_bf16() else 0.0

    def rows_of(out):
        return {(b, i): out[b, i, :].float().numpy() for b, i in row.check_points()}

    candidates = finish(row, "nn.MultiheadAttention(batch_first=True).eval() under inference_mode%s" % bf16,
                        call, rows_of, rounding)
    # The layer as most model code writes it: one Q/K/V Linear, scaled_dot_product_attention, the output Linear.
    w_in, b_in = module.in_proj_weight, module.in_proj_bias
    w_out, b_out = module.out_proj.weight, module.out_proj.bias
    heads, d = row.Hq, row.D
    linear, sdpa = torch.nn.functional.linear, torch.nn.functional.scaled_dot_product_attention

    def call_sdpa():
        qkv = linear(x, w_in, b_in).view(row.B, row.Lq, 3, heads, d).permute(2, 0, 3, 1, 4)
        o = sdpa(qkv[0], qkv[1], qkv[2])
        return linear(o.transpose(1, 2).reshape(row.B, row.Lq, e), w_out, b_out)

    candidates += finish(row, "F.linear (fused Q/K/V weights) + F.scaled_dot_product_attention + F.linear%s" % bf16,
                         call_sdpa, rows_of, rounding)
    return candidates


def finish(row, path, call, rows_of, output_rounding):
    with torch.inference_mode():
        kernels = kernels_of(call)
    if kernels:
        path += ": " + kernels

    def bind(threads):
        def setup():
            torch.set_num_threads(threads)

        def timed():
            with torch.inference_mode():
                return call()
        return setup, timed

    return [rowlib.Candidate(path, bind, rows_of, output_rounding)]


def config_line(pattern):
    m = re.search(pattern, torch.__config__.show())
    return m.group(1).strip() if m else "?"


def context():
    return {
        "library_version": torch.__version__,
        "installed_from": "PyPI torch==%s (its Linux wheel, the CUDA build, run on the CPU) in "
                          "the virtual environment venv-compare of the cache directory" % torch.__version__.split("+")[0],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": config_line(r"BLAS_INFO=(\w+)"),
        "mkl": config_line(r"Math Kernel Library Version ([^\n]*?) for"),
        "onednn": config_line(r"MKL-DNN (v[0-9.]+)"),
        "openmp": config_line(r"OpenMP (\d+)"),
    }


def main(argv):
    torch.set_grad_enabled(False)
    return rowlib.run_peer("torch", argv, attention_candidate, context, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
