#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a Llama-architecture GGUF model with random weights, for speed runs
of llama.cpp with and without hwyattn (scripts/llama_bench.sh), with PyPI's
`gguf` package (llama.cpp's own GGUF writer).

The shape is Llama 3.2 1B's: 16 layers, hidden 2048, FFN 8192, 32 query and
8 KV heads of 64 (--head-dim 128: 16 query and 4 KV heads of 128, the same
weights), a 32000-token SentencePiece-style vocabulary (llama-bench feeds
random tokens: the vocabulary only has to load). Weights are Q4_0 (what
users run on CPUs), the norms F32; values are N(0, 0.02^2) with a seed, so
two runs write the same bytes.

Usage: llama_gguf.py <out.gguf> [--head-dim 64|128] [--layers N]
"""
import argparse

import gguf
import numpy as np

VOCAB = 32000
HIDDEN = 2048
FFN = 8192


def vocabulary():
    tokens = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    n = len(tokens)
    while len(tokens) < VOCAB:
        tokens.append(("\u2581w%d" % (len(tokens) - n)).encode())
        types.append(gguf.TokenType.NORMAL)
    scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(VOCAB - n)]
    return tokens, scores, types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--head-dim", type=int, choices=(64, 128), default=64)
    ap.add_argument("--layers", type=int, default=16)
    args = ap.parse_args()
    d = args.head_dim
    n_head, n_kv = HIDDEN // d, HIDDEN // d // 4
    rng = np.random.default_rng(1)

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name(f"random Llama 1B, head dim {d}")
    w.add_context_length(131072)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_tokenizer_model("llama")
    tokens, scores, types = vocabulary()
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def weight(name, rows, cols):  # ggml shape [cols, rows]: numpy [rows, cols]
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q4_0)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q4_0)

    def norm(name):
        w.add_tensor(name, np.ones(HIDDEN, dtype=np.float32))

    weight("token_embd.weight", VOCAB, HIDDEN)
    for i in range(args.layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight")
        weight(p + "attn_q.weight", n_head * d, HIDDEN)
        weight(p + "attn_k.weight", n_kv * d, HIDDEN)
        weight(p + "attn_v.weight", n_kv * d, HIDDEN)
        weight(p + "attn_output.weight", HIDDEN, n_head * d)
        norm(p + "ffn_norm.weight")
        weight(p + "ffn_gate.weight", FFN, HIDDEN)
        weight(p + "ffn_up.weight", FFN, HIDDEN)
        weight(p + "ffn_down.weight", HIDDEN, FFN)
    norm("output_norm.weight")
    weight("output.weight", VOCAB, HIDDEN)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
