# SPDX-License-Identifier: Apache-2.0
"""hwyattn.MultiheadAttention: the hwyattn_mha_* module from numpy."""

import ctypes
import math

import numpy as np

from . import _capi
from ._attention import Options, as_float_input, ml_bfloat16_of, output_tensor, tensor, _invalid

_NAMES = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def _to_numpy(x):
    """A numpy array from an array-like or a torch tensor (no torch import)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _padding_to_kv_len(pad):
    """kv_len [B] if every row of the bool key_padding_mask [B, Lk] (True =
    pad) is a suffix (False ... False True ... True), else None."""
    keep = ~pad
    lengths = keep.sum(axis=1)
    suffix = np.arange(pad.shape[1])[None, :] < lengths[:, None]
    if np.array_equal(keep, suffix):
        return lengths.astype(np.int32)
    return None


class MultiheadAttention(object):
    """A multi-head attention layer, as torch.nn.MultiheadAttention(batch_first=True):

        out = concat_h(softmax(Q_h K_h^T * scale + mask) V_h) W_o^T + b_o
        Q = query W_q^T + b_q,  K = key W_k^T + b_k,  V = value W_v^T + b_v

    with Q split into num_heads heads of head_dim and K, V into num_kv_heads
    heads (GQA when fewer). Weights use the torch nn.Linear layout
    [out_features, in_features]:

        w_q [num_heads*head_dim, embed_dim]      b_q [num_heads*head_dim]
        w_k [num_kv_heads*head_dim, kdim]        b_k [num_kv_heads*head_dim]
        w_v [num_kv_heads*head_dim, vdim]        b_v [num_kv_heads*head_dim]
        w_o [embed_dim, num_heads*head_dim]      b_o [embed_dim]

    head_dim defaults to embed_dim // num_heads, num_kv_heads to num_heads,
    kdim and vdim to embed_dim. Weights not given are initialised as PyTorch
    does (Xavier-uniform projections, zero biases) from `seed`. The library
    copies and pre-packs the weights: later changes to the arrays do not
    affect the module. Use from_torch_state() to load a PyTorch module.

    The module owns a C handle: close() frees it (also `with`, or garbage
    collection). Calls are thread-safe.
    """

    def __init__(self, embed_dim, num_heads, *, head_dim=None, num_kv_heads=None, kdim=None,
                 vdim=None, bias=True, w_q=None, w_k=None, w_v=None, w_o=None, b_q=None,
                 b_k=None, b_v=None, b_o=None, seed=0):
        self._handle = None
        E, H = int(embed_dim), int(num_heads)
        if E < 1 or H < 1:
            raise _invalid("embed_dim is %d and num_heads is %d; both must be >= 1" % (E, H))
        if head_dim is None or head_dim == 0:
            if E % H:
                raise _invalid("embed_dim %d is not a multiple of num_heads %d; pass head_dim"
                               % (E, H))
            head_dim = E // H
        Hkv = H if not num_kv_heads else int(num_kv_heads)
        if Hkv < 1 or H % Hkv:
            raise _invalid("num_kv_heads is %d; must divide num_heads %d" % (Hkv, H))
        D = int(head_dim)
        kdim = E if not kdim else int(kdim)
        vdim = E if not vdim else int(vdim)
        if D < 1 or kdim < 1 or vdim < 1:
            raise _invalid("head_dim %d, kdim %d, vdim %d: all must be >= 1" % (D, kdim, vdim))
        self.embed_dim, self.num_heads, self.head_dim = E, H, D
        self.num_kv_heads, self.kdim, self.vdim, self.bias = Hkv, kdim, vdim, bool(bias)

        shapes = {
            "w_q": (H * D, E), "w_k": (Hkv * D, kdim), "w_v": (Hkv * D, vdim), "w_o": (E, H * D),
            "b_q": (H * D,), "b_k": (Hkv * D,), "b_v": (Hkv * D,), "b_o": (E,),
        }
        given = dict(w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, b_q=b_q, b_k=b_k, b_v=b_v, b_o=b_o)
        rng = None
        arrays = {}
        for name in _NAMES:
            want = shapes[name]
            x = given[name]
            if name.startswith("b") and not self.bias:
                if x is not None:
                    raise _invalid("%s given but bias=False" % name)
                continue
            if x is None:
                if name.startswith("b"):
                    x = np.zeros(want, np.float32)
                else:
                    if rng is None:
                        rng = np.random.default_rng(seed)
                    limit = math.sqrt(6.0 / (want[0] + want[1]))
                    x = rng.uniform(-limit, limit, size=want)
            # A private copy: the caller's array must stay writeable and unchanged.
            x = np.array(_to_numpy(x), dtype=np.float32, order="C", copy=True)
            if x.shape != want:
                raise _invalid("%s: shape is %s; must be %s for embed_dim=%d, num_heads=%d, "
                               "head_dim=%d, num_kv_heads=%d, kdim=%d, vdim=%d"
                               % (name, x.shape, want, E, H, D, Hkv, kdim, vdim))
            x.setflags(write=False)
            arrays[name] = x
        for name in _NAMES:
            setattr(self, name, arrays.get(name))

        cfg = _capi.MhaConfig()
        _capi.init_struct("hwyattn_mha_config", cfg)
        cfg.embed_dim, cfg.num_heads, cfg.head_dim = E, H, D
        cfg.num_kv_heads, cfg.kdim, cfg.vdim = Hkv, kdim, vdim
        cfg.has_bias = 1 if self.bias else 0
        w = _capi.MhaWeights()
        for name, x in arrays.items():
            setattr(w, name, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        handle = ctypes.c_void_p()
        create = _capi.function("hwyattn_mha_create")
        self._destroy = _capi.function("hwyattn_mha_destroy")
        _capi.check(create(ctypes.byref(cfg), ctypes.byref(w), ctypes.byref(handle)))
        self._handle = handle

    @classmethod
    def from_torch_state(cls, state_dict, num_heads, *, num_kv_heads=None, head_dim=None):
        """Builds the module from a torch.nn.MultiheadAttention state_dict
        (numpy arrays or torch tensors): in_proj_weight [3E, E] or
        q_proj_weight / k_proj_weight / v_proj_weight (when kdim or vdim !=
        embed_dim), in_proj_bias, out_proj.weight, out_proj.bias. Keys may
        carry a common prefix ("attn.in_proj_weight"). add_bias_kv
        (bias_k / bias_v) is not supported."""
        sd = {}
        for key, value in state_dict.items():
            for base in ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight",
                         "v_proj_weight", "out_proj.weight", "out_proj.bias", "bias_k",
                         "bias_v"):
                if key == base or key.endswith("." + base):
                    sd[base] = None if value is None else _to_numpy(value)
        if sd.get("bias_k") is not None or sd.get("bias_v") is not None:
            raise _invalid("state_dict has bias_k/bias_v (add_bias_kv=True), which hwyattn "
                           "does not support")
        if sd.get("out_proj.weight") is None:
            raise _invalid("state_dict has no out_proj.weight")
        w_o = sd["out_proj.weight"]
        E = w_o.shape[0]
        if sd.get("in_proj_weight") is not None:
            p = sd["in_proj_weight"]
            rows_q = w_o.shape[1] if w_o.ndim == 2 else E
            if p.ndim != 2 or (p.shape[0] - rows_q) % 2:
                raise _invalid("in_proj_weight: shape %s; must be [3E, E]" % (p.shape,))
            rows_kv = (p.shape[0] - rows_q) // 2
            w_q, w_k, w_v = p[:rows_q], p[rows_q:rows_q + rows_kv], p[rows_q + rows_kv:]
        else:
            try:
                w_q, w_k, w_v = sd["q_proj_weight"], sd["k_proj_weight"], sd["v_proj_weight"]
            except KeyError:
                raise _invalid("state_dict has neither in_proj_weight nor "
                               "q_proj_weight/k_proj_weight/v_proj_weight") from None
        b = sd.get("in_proj_bias")
        bias = b is not None
        kw = {}
        if bias:
            nq, nk = w_q.shape[0], w_k.shape[0]
            if b.shape != (nq + 2 * nk,):
                raise _invalid("in_proj_bias: shape %s; must be [%d]" % (b.shape, nq + 2 * nk))
            kw = dict(b_q=b[:nq], b_k=b[nq:nq + nk], b_v=b[nq + nk:],
                      b_o=sd.get("out_proj.bias"))
            if kw["b_o"] is None:
                raise _invalid("state_dict has in_proj_bias but no out_proj.bias")
        if head_dim is None:
            head_dim = w_q.shape[0] // int(num_heads)
        return cls(E, num_heads, head_dim=head_dim, num_kv_heads=num_kv_heads,
                   kdim=w_k.shape[1], vdim=w_v.shape[1], bias=bias, w_q=w_q, w_k=w_k, w_v=w_v,
                   w_o=w_o, **kw)

    # ------------------------------------------------------------------

    def __call__(self, query, key=None, value=None, *, causal=False, attn_mask=None,
                 key_padding_mask=None, kv_len=None, need_weights=False,
                 average_attn_weights=False, scale=None, window_left=0, window_right=0,
                 softcap=0.0, alibi_slopes=None, sinks=None, out=None, out_dtype=None):
        """Runs the layer.

        query [B, Lq, embed_dim]; key [B, Lk, kdim] and value [B, Lk, vdim],
        or None for self-attention (value defaults to key when only key is
        given). Unbatched [L, E] inputs give unbatched outputs.

        causal: False, True / "top_left" (PyTorch is_causal) or "bottom_right".
        attn_mask: as in nn.MultiheadAttention: [Lq, Lk] or [B*num_heads, Lq,
            Lk] (or [B, num_heads|1, Lq, Lk]); bool where True means NOT
            allowed (PyTorch's convention for this module; note that
            hwyattn.sdpa's bool mask is the opposite, True = attend), or float
            added to the scores.
        key_padding_mask: bool [B, Lk], True = padding (PyTorch). Suffix
            padding becomes kv_len (fast: padded keys are skipped); any other
            pattern becomes a mask.
        kv_len: [B] valid key counts (an alternative to key_padding_mask).
        need_weights: also return the per-head attention weights
            [B, num_heads, Lq, Lk] (average_attn_weights=True averages the
            heads: [B, Lq, Lk]).
        scale: None = 1/sqrt(head_dim); an explicit 0 is refused, as in
            hwyattn.sdpa (PyTorch's 0 means uniform weights, the library's
            the default).
        window_left, window_right, softcap, alibi_slopes ([num_heads]), sinks
            ([num_heads]): the score modifiers, as in hwyattn.sdpa.
        out, out_dtype: as in hwyattn.sdpa (written in place: float32,
            float16, bfloat16 bits, an ml_dtypes.bfloat16 array or a torch
            tensor; the fp32 result rounded once). An ml_dtypes.bfloat16
            query (converted to float32, exactly) gives an
            ml_dtypes.bfloat16 out by default, as in hwyattn.sdpa.

        Returns out [B, Lq, embed_dim], or (out, weights) with need_weights.
        """
        if self._handle is None:
            raise _capi.Error("MultiheadAttention is closed", _capi.INVALID_ARGUMENT)
        if out is None and out_dtype is None:
            out_dtype = ml_bfloat16_of(query)
        q = np.asarray(as_float_input(query, "query"), dtype=np.float32)
        if key is None and value is not None:
            raise _invalid("value given without key")
        if key is not None and value is None:
            value = key
        self_attn = key is None
        tq, q = tensor(q, "query")
        if q.ndim not in (2, 3):
            raise _invalid("query: shape %s; must be [B, Lq, embed_dim] or [Lq, embed_dim]"
                           % (q.shape,))
        batched = q.ndim == 3
        B = q.shape[0] if batched else 1
        Lq = q.shape[-2]
        if self_attn:
            tk = tv = None
            Lk = Lq
        else:
            k = np.asarray(as_float_input(key, "key"), dtype=np.float32)
            v = np.asarray(as_float_input(value, "value"), dtype=np.float32)
            tk, k = tensor(k, "key")
            tv, v = tensor(v, "value")
            Lk = k.shape[-2] if k.ndim >= 2 else 1

        mask = None
        if attn_mask is not None:
            m = _to_numpy(attn_mask)
            if m.ndim == 3 and batched and m.shape[0] == B * self.num_heads:
                m = m.reshape(B, self.num_heads, m.shape[1], m.shape[2])
            if m.dtype == np.bool_:
                m = ~m  # PyTorch: True = not allowed; hwyattn: True = attend
            elif m.dtype.kind in "fiu":
                m = m.astype(np.float32)
            else:
                raise TypeError("attn_mask: dtype %s; must be bool or float" % m.dtype)
            mask = m

        lengths = None if kv_len is None else np.asarray(kv_len)
        if key_padding_mask is not None:
            pad = _to_numpy(key_padding_mask)
            if pad.dtype != np.bool_:
                if pad.dtype.kind == "f":
                    # PyTorch also accepts a float key_padding_mask (added).
                    pad_add = pad.astype(np.float32).reshape(B, 1, 1, -1)
                    mask = pad_add if mask is None else mask_add(mask, pad_add)
                    pad = None
                else:
                    pad = pad.astype(bool)
            if pad is not None:
                if pad.ndim == 1 and not batched:
                    pad = pad[None, :]
                if pad.shape != (B, Lk):
                    raise _invalid("key_padding_mask: shape %s; must be [B, Lk] = [%d, %d]"
                                   % (pad.shape, B, Lk))
                from_pad = _padding_to_kv_len(pad)
                if from_pad is not None:
                    lengths = from_pad if lengths is None else np.minimum(
                        lengths.astype(np.int64), from_pad).astype(np.int32)
                else:
                    attend = ~pad[:, None, None, :]
                    mask = attend if mask is None else mask_and(mask, attend)

        opts = Options(scale, causal, mask, lengths, batch=B, window_left=window_left,
                       window_right=window_right, softcap=softcap, alibi_slopes=alibi_slopes,
                       sinks=sinks, heads=self.num_heads)
        lead = q.shape[:-2]
        weights = opts.add_weights(lead + (self.num_heads, Lq, Lk)) if need_weights else None
        to, out = output_tensor(q.shape[:-1] + (self.embed_dim,), "out", out, out_dtype)
        forward = _capi.function("hwyattn_mha_forward")
        status = forward(self._handle, ctypes.byref(tq), None if tk is None else ctypes.byref(tk),
                         None if tv is None else ctypes.byref(tv), ctypes.byref(to), opts.ref())
        _capi.check(status)
        if not need_weights:
            return out
        if average_attn_weights:
            weights = weights.mean(axis=-3)
        return out, weights

    forward = __call__

    def close(self):
        """Frees the C module. Idempotent."""
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None and h.value:
            self._destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        extra = ""
        if self.num_kv_heads != self.num_heads:
            extra += ", num_kv_heads=%d" % self.num_kv_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            extra += ", head_dim=%d" % self.head_dim
        if self.kdim != self.embed_dim or self.vdim != self.embed_dim:
            extra += ", kdim=%d, vdim=%d" % (self.kdim, self.vdim)
        return "MultiheadAttention(embed_dim=%d, num_heads=%d%s, bias=%s%s)" % (
            self.embed_dim, self.num_heads, extra, self.bias,
            "" if self._handle is not None else ", closed")


def mask_add(mask, additive):
    """Combines a mask in hwyattn's convention (bool True = attend, or float)
    with an additive float mask."""
    if mask.dtype == np.bool_:
        mask = np.where(mask, np.float32(0), np.float32(-np.inf))
    return (mask + additive).astype(np.float32)


def mask_and(mask, attend):
    """Combines a mask in hwyattn's convention with a bool attend-mask."""
    if mask.dtype == np.bool_:
        return mask & attend
    return np.where(attend, mask, np.float32(-np.inf)).astype(np.float32)
