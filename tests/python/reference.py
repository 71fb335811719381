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


def sdpa_ref(q, k, v, scale=None, causal=False, mask=None, kv_len=None, window_left=0,
             window_right=0, softcap=0.0, alibi_slopes=None, sinks=None):
    """(out [B,Hq,Lq,Dv], weights [B,Hq,Lq,Lk], lse [B,Hq,Lq]) in float64.

    mask: bool (True = attend) or float additive (-inf blocks), broadcastable
    to [B,Hq,Lq,Lk]. causal: False/True/"top_left"/"bottom_right". A row with
    every key blocked gives out 0, weights 0, lse -inf (or its sink).

    The score modifiers follow hwyattn.h (and tests/reference.h, the C++
    oracle's normative rules):
      positions   query row i is at p = i + (Lk - Lq) under "bottom_right",
                  else p = i; key j is at j (kv_len moves no position).
      window_left W > 0 keeps keys j > p - W; window_right W > 0 keys
                  j < p + W (0 = unbounded).
      softcap c > 0: s = c * tanh(s / c) on the scaled scores, then
      alibi_slopes [Hq]: s += slope[h] * (j - p), then the additive mask.
      sinks [Hq]: a logit per query head in the denominator only (not
                  scaled, capped, biased or masked; -inf = off):
                  lse = log(exp(sink) + sum_j exp(s_j)), weights =
                  exp(s - lse), a fully blocked row has lse = sink."""
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
    pos_q = np.arange(Lq) + (Lk - Lq if causal == "bottom_right" else 0)
    dist = np.arange(Lk)[None, :] - pos_q[:, None]  # [Lq, Lk]: j - p
    allowed = np.ones((B, Hq, Lq, Lk), bool)
    if causal is True or causal == "top_left":
        allowed &= np.arange(Lk)[None, :] <= np.arange(Lq)[:, None]
    elif causal == "bottom_right":
        allowed &= dist <= 0
    if window_left < 0 or window_right < 0:
        raise ValueError("negative window")
    if window_left > 0:
        allowed &= -dist < window_left  # j > p - W
    if window_right > 0:
        allowed &= dist < window_right  # j < p + W
    if softcap < 0 or not np.isfinite(softcap):
        raise ValueError("softcap must be 0 (off) or positive and finite")
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    if alibi_slopes is not None:
        slopes = np.asarray(alibi_slopes, np.float64).reshape(Hq)
        if not np.isfinite(slopes).all():
            raise ValueError("an ALiBi slope is not finite")
        s = s + slopes[None, :, None, None] * dist[None, None, :, :]
    if mask is not None:
        m = to4(np.asarray(mask))
        if m.dtype == np.bool_:
            allowed &= np.broadcast_to(m, allowed.shape)
        else:
            s = s + np.broadcast_to(m.astype(np.float64), s.shape)
    if kv_len is not None:
        lens = np.asarray(kv_len).reshape(B)
        allowed &= (np.arange(Lk)[None, :] < lens[:, None])[:, None, None, :]
    if sinks is None:
        z = np.full(Hq, -np.inf)
    else:
        z = np.asarray(sinks, np.float64).reshape(Hq)
        if np.isnan(z).any() or (z == np.inf).any():
            raise ValueError("a sink is NaN or +inf")
    z = np.broadcast_to(z[None, :, None, None], (B, Hq, Lq, 1))
    s = np.where(allowed, s, -np.inf)
    # Shift by the largest logit, the sink's included; a row with no key and
    # no sink has no finite one.
    mx = np.maximum(np.max(s, axis=-1, keepdims=True), z)
    dead = ~np.isfinite(mx)
    mx = np.where(dead, 0.0, mx)
    e = np.exp(s - mx)
    tot = e.sum(axis=-1, keepdims=True) + np.exp(z - mx)
    w = np.where(dead, 0.0, e / np.where(tot == 0, 1.0, tot))
    out = np.einsum("bhqk,bhkd->bhqd", w, vh)
    with np.errstate(divide="ignore"):
        lse = np.where(dead[..., 0], -np.inf, (mx + np.log(np.where(tot == 0, 1, tot)))[..., 0])
    return out, w, lse


def mha_ref(query, key, value, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None,
            num_heads=1, num_kv_heads=None, head_dim=None, causal=False, mask=None,
            kv_len=None, scale=None, **modifiers):
    """Projections + per-head attention + output projection, in float64.
    query [B,Lq,E], key [B,Lk,kdim], value [B,Lk,vdim]; mask in sdpa_ref's
    convention; modifiers: sdpa_ref's window_left, window_right, softcap,
    alibi_slopes and sinks (per query head). Returns (out [B,Lq,E],
    weights [B,H,Lq,Lk])."""
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
    o, w, _ = sdpa_ref(Q, K, V, scale=scale, causal=causal, mask=mask, kv_len=kv_len,
                       **modifiers)
    o = o.transpose(0, 2, 1, 3).reshape(B, Lq, H * D)
    out = o @ w_o.T + (0 if b_o is None else f(b_o))
    return out, w
