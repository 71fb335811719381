# SPDX-License-Identifier: Apache-2.0
"""A naive float64 numpy oracle for attention, independent of the library,
and the shared set-up of the Python tests (finding the hwyattn package)."""

import os
import sys

import numpy as np

# Let the tests run from a source checkout without installing the package.
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import hwyattn  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(_REPO, "python"))
    import hwyattn  # noqa: F401

TOLERANCE = 1e-5


def rel_err(got, ref):
    """max |got - ref| / max |ref| (0/0 = 0), ignoring nothing: NaN fails."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        raise AssertionError("shape %s != reference %s" % (got.shape, ref.shape))
    finite = np.isfinite(ref)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite],
                                                                          ref[~finite]):
        return np.inf
    scale = np.max(np.abs(ref[finite])) if finite.any() else 0.0
    err = np.max(np.abs(got[finite] - ref[finite])) if finite.any() else 0.0
    if scale == 0.0:
        return err
    return err / scale


def to4(x):
    """Right-aligns x to rank 4, as the C ABI does."""
    x = np.asarray(x)
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def sdpa_ref(q, k, v, scale=None, causal=False, mask=None, kv_len=None):
    """(out [B,Hq,Lq,Dv], weights [B,Hq,Lq,Lk], lse [B,Hq,Lq]) in float64.

    mask: bool (True = attend) or float additive, broadcastable to
    [B,Hq,Lq,Lk]. causal: False/True/"top_left"/"bottom_right". A row with
    every key blocked gives out 0, weights 0, lse -inf."""
    q, k, v = (to4(np.asarray(x, np.float64)) for x in (q, k, v))
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    group = Hq // Hkv
    k = np.broadcast_to(k, (B,) + k.shape[1:])
    v = np.broadcast_to(v, (B,) + v.shape[1:])
    kh = np.repeat(k, group, axis=1)  # head h uses kv head h // group
    vh = np.repeat(v, group, axis=1)
    if scale is None or scale == 0:
        scale = 1.0 / np.sqrt(D)
    s = np.einsum("bhqd,bhkd->bhqk", q, kh) * scale
    allowed = np.ones((B, Hq, Lq, Lk), bool)
    if causal is True or causal == "top_left":
        allowed &= np.arange(Lk)[None, :] <= np.arange(Lq)[:, None]
    elif causal == "bottom_right":
        allowed &= np.arange(Lk)[None, :] <= np.arange(Lq)[:, None] + (Lk - Lq)
    if mask is not None:
        m = to4(np.asarray(mask))
        if m.dtype == np.bool_:
            allowed &= np.broadcast_to(m, allowed.shape)
        else:
            s = s + np.broadcast_to(m.astype(np.float64), s.shape)
    if kv_len is not None:
        lens = np.asarray(kv_len).reshape(B)
        allowed &= (np.arange(Lk)[None, :] < lens[:, None])[:, None, None, :]
    s = np.where(allowed, s, -np.inf)
    mx = np.max(s, axis=-1, keepdims=True)
    dead = ~np.isfinite(mx)
    mx = np.where(dead, 0.0, mx)
    e = np.exp(s - mx)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.where(dead, 0.0, e / np.where(tot == 0, 1.0, tot))
    out = np.einsum("bhqk,bhkd->bhqd", w, vh)
    with np.errstate(divide="ignore"):
        lse = np.where(dead[..., 0], -np.inf, (mx + np.log(np.where(tot == 0, 1, tot)))[..., 0])
    return out, w, lse


def mha_ref(query, key, value, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None,
            num_heads=1, num_kv_heads=None, head_dim=None, causal=False, mask=None,
            kv_len=None, scale=None):
    """Projections + per-head attention + output projection, in float64.
    query [B,Lq,E], key [B,Lk,kdim], value [B,Lk,vdim]; mask in sdpa_ref's
    convention. Returns (out [B,Lq,E], weights [B,H,Lq,Lk])."""
    f = lambda x: None if x is None else np.asarray(x, np.float64)  # noqa: E731
    query, key, value = f(query), f(key), f(value)
    w_q, w_k, w_v, w_o = f(w_q), f(w_k), f(w_v), f(w_o)
    H = num_heads
    Hkv = num_kv_heads or H
    D = head_dim or w_q.shape[0] // H
    B, Lq, _ = query.shape
    Lk = key.shape[1]
    Q = query @ w_q.T + (0 if b_q is None else f(b_q))
    K = key @ w_k.T + (0 if b_k is None else f(b_k))
    V = value @ w_v.T + (0 if b_v is None else f(b_v))
    Q = Q.reshape(B, Lq, H, D).transpose(0, 2, 1, 3)
    K = K.reshape(B, Lk, Hkv, D).transpose(0, 2, 1, 3)
    V = V.reshape(B, Lk, Hkv, D).transpose(0, 2, 1, 3)
    o, w, _ = sdpa_ref(Q, K, V, scale=scale, causal=causal, mask=mask, kv_len=kv_len)
    o = o.transpose(0, 2, 1, 3).reshape(B, Lq, H * D)
    out = o @ w_o.T + (0 if b_o is None else f(b_o))
    return out, w
