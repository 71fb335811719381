#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes tests/data/mha_torch_reference.npz: torch.nn.MultiheadAttention
inputs, weights, outputs and per-head attention weights, for
tests/python/test_torch_parity.py (which needs no torch).

    apt-get install python3-torch    # Debian 12: torch 1.13
    /usr/bin/python3 tests/data/make_mha_torch_reference.py

The committed file was made with torch 1.13.0a0 (Debian 12's python3-torch);
the version is also stored in the file under "torch_version".

Cases (all batch_first=True, need_weights=True, average_attn_weights=False,
eval mode, fixed seeds):
  a: bias, self-attention, key_padding_mask (batch 1 has 2 padded keys at the end)
  b: no bias, self-attention, causal as a float attn_mask (-inf above the diagonal)
  c: bias, kdim/vdim != embed_dim, cross-attention with Lq != Lk
Weights are drawn in float32 (torch's init); the module then runs in float64
on those exact values, so the stored outputs are a float64 reference.
Keys: "<case>.<name>", with state_dict entries as "<case>.sd.<param>".
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def case(name, seed, E, H, B, Lq, Lk, bias, kdim=None, vdim=None, cross=False,
         key_padding=None, causal=False):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, kdim=kdim, vdim=vdim)
    with torch.no_grad():
        # Non-zero biases, so they are actually tested (torch initialises them to 0).
        for pname, p in m.named_parameters():
            if "bias" in pname:
                p.copy_(torch.randn_like(p) * 0.5)
    m.eval()
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in m.state_dict().items()}
    gen = torch.Generator().manual_seed(seed + 1)
    query = torch.randn(B, Lq, E, generator=gen)
    if cross:
        key = torch.randn(B, Lk, kdim or E, generator=gen)
        value = torch.randn(B, Lk, vdim or E, generator=gen)
    else:
        key = value = query
    attn_mask = None
    if causal:
        attn_mask = torch.triu(torch.full((Lq, Lk), float("-inf")), diagonal=1)
    kpm = None if key_padding is None else torch.from_numpy(key_padding)
    m = m.double()
    with torch.no_grad():
        out, weights = m(query.double(), key.double(), value.double(), key_padding_mask=kpm,
                         need_weights=True, attn_mask=None if attn_mask is None
                         else attn_mask.double(), average_attn_weights=False)
    d = {"query": query.numpy(), "out": out.numpy(), "weights": weights.numpy(),
         "num_heads": np.array(H), "causal": np.array(causal)}
    if cross:
        d["key"], d["value"] = key.numpy(), value.numpy()
    if key_padding is not None:
        d["key_padding_mask"] = key_padding
    if attn_mask is not None:
        d["attn_mask"] = attn_mask.numpy()
    for k, v in sd.items():
        d["sd." + k] = v
    return {"%s.%s" % (name, k): v for k, v in d.items()}


def main():
    arrays = {"torch_version": np.array(torch.__version__)}
    pad = np.zeros((2, 6), bool)
    pad[1, 4:] = True
    arrays.update(case("a", 11, E=16, H=4, B=2, Lq=6, Lk=6, bias=True, key_padding=pad))
    arrays.update(case("b", 22, E=16, H=4, B=2, Lq=5, Lk=5, bias=False, causal=True))
    arrays.update(case("c", 33, E=16, H=2, B=2, Lq=5, Lk=7, bias=True, kdim=10, vdim=6,
                       cross=True))
    path = os.path.join(HERE, "mha_torch_reference.npz")
    np.savez_compressed(path, **arrays)
    print("wrote %s (%d bytes, torch %s)" % (path, os.path.getsize(path), torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
