# SPDX-License-Identifier: Apache-2.0
"""hwyattn.KVCache and hwyattn.kv_attention: the paged KV-cache interface
(hwyattn_kv_cache_write, hwyattn_kv_attention) over numpy arrays."""

import ctypes

import numpy as np

from . import _capi
from ._attention import Options, as_float_input, output_tensor, tensor
from ._capi import InvalidArgumentError

_CACHE_DTYPES = {np.dtype(np.float32): _capi.F32, np.dtype(np.float16): _capi.F16,
                 np.dtype(np.int8): _capi.I8}


def _invalid(message):
    return InvalidArgumentError(message, _capi.INVALID_ARGUMENT)


def _int_array(values, name, dtype, length=None):
    a = np.asarray(values)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.dtype.kind not in "iu":
        raise _invalid("%s: must hold integers, got dtype %s" % (name, a.dtype))
    if length is not None and (a.ndim != 1 or a.shape[0] != length):
        raise _invalid("%s: shape %s; must be [%d]" % (name, a.shape, length))
    info = np.iinfo(dtype)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise _invalid("%s: values do not fit in %s" % (name, np.dtype(dtype).name))
    return np.ascontiguousarray(a, dtype=dtype)


def _cache_struct(k, v, k_scale, v_scale, block_table, keep):
    """An hwyattn_kv_cache over the arrays (kept alive in `keep`)."""
    c = _capi.KvCache()
    _capi.init_struct("hwyattn_kv_cache", c)
    k = np.asarray(k)
    v = np.asarray(v)
    for name, a in (("k", k), ("v", v)):
        if a.dtype not in _CACHE_DTYPES:
            raise TypeError("%s: cache dtype %s; must be float32, float16 or int8" % (name, a.dtype))
    c.k, ka = tensor(k, "k", _CACHE_DTYPES[k.dtype])
    c.v, va = tensor(v, "v", _CACHE_DTYPES[v.dtype])
    keep += [ka, va]
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if s is None:
            continue
        arr = np.asarray(s)
        if arr.dtype != np.float32:
            arr = arr.astype(np.float32)
        t, arr = tensor(arr, name, _capi.F32)
        keep += [t, arr]
        setattr(c, name, ctypes.pointer(t))
    if block_table is not None:
        bt = _int_array(block_table, "block_table", np.int32)
        if bt.ndim != 2:
            raise _invalid("block_table: shape %s; must be [num_seqs, max_pages]" % (bt.shape,))
        keep.append(bt)
        c.block_table = bt.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        c.block_table_stride = bt.shape[1]
    return c


def kv_attention(q, k_cache, v_cache, q_start, kv_len, *, block_table=None, q_pos=None,
                 k_scale=None, v_scale=None, scale=None, causal=True, window_left=0,
                 window_right=0, softcap=0.0, alibi_slopes=None, sinks=None, return_lse=False):
    """Attention of packed varlen queries over a (paged) KV cache.

    q: [T, Hq, D] float32/float16, the query tokens of all sequences one
        after the other; sequence s owns rows q_start[s]:q_start[s+1].
    k_cache, v_cache: [num_pages, Hkv, page_size, D] and [.., Dv] arrays
        (float32, float16 or int8; any strides, so FlashAttention's
        [pages, page, Hkv, D] memory is k.transpose(0, 2, 1, 3)).
    q_start: [num_seqs + 1] ints (cu_seqlens_q); kv_len: [num_seqs] ints,
        the keys of each sequence in the cache, this step's included.
    block_table: [num_seqs, max_pages] ints, the pages of each sequence in
        order; None = sequence s is page s.
    q_pos: [num_seqs] ints, position of each sequence's first query; None =
        kv_len - q_len (the new tokens are the last ones of the cache).
    k_scale, v_scale: int8 caches only, float32: per token
        [num_pages, Hkv, page_size, 1] or per channel [1, Hkv, 1, D].
    causal: True (default: key position <= query position) or False; the
        modifiers as in hwyattn.sdpa, with these positions.
    Returns out [T, Hq, Dv] float32, and lse [T, Hq] with return_lse.
    """
    keep = []
    q = as_float_input(q, "q")
    tq, q = tensor(q, "q")
    if q.ndim != 3:
        raise _invalid("q: shape %s; must be [T, Hq, D]" % (q.shape,))
    cache = _cache_struct(k_cache, v_cache, k_scale, v_scale, block_table, keep)
    qs = _int_array(q_start, "q_start", np.int32)
    n = qs.shape[0] - 1
    if qs.ndim != 1 or n < 1:
        raise _invalid("q_start: shape %s; must be [num_seqs + 1] with num_seqs >= 1" % (qs.shape,))
    kl = _int_array(kv_len, "kv_len", np.int32, n)
    batch = _capi.KvBatch()
    _capi.init_struct("hwyattn_kv_batch", batch)
    batch.num_seqs = n
    batch.q_start = qs.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    batch.kv_len = kl.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    keep += [qs, kl]
    if q_pos is not None:
        qp = _int_array(q_pos, "q_pos", np.int32, n)
        keep.append(qp)
        batch.q_pos = qp.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    opts = Options(scale, "bottom_right" if causal else False, window_left=window_left,
                   window_right=window_right, softcap=softcap, alibi_slopes=alibi_slopes,
                   sinks=sinks, heads=q.shape[1])
    lse = opts.add_lse(q.shape[:2]) if return_lse else None
    dv = np.asarray(v_cache).shape[-1]
    to, out = output_tensor(q.shape[:2] + (dv,), "out")
    status = _capi.function("hwyattn_kv_attention")(ctypes.byref(tq), ctypes.byref(cache),
                                                    ctypes.byref(batch), ctypes.byref(to),
                                                    opts.ref())
    _capi.check(status)
    return (out, lse) if return_lse else out


def _page_aligned_zeros(shape, dtype):
    """np.zeros starting on a 4 KiB boundary, as hwyattn.h advises for a KV
    pool (numpy, like malloc, puts large arrays 16 bytes past one)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.zeros(nbytes + 4096, np.uint8)
    start = -raw.ctypes.data % 4096
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class KVCache(object):
    """A paged KV cache held in numpy arrays (vLLM's layout).

        cache = hwyattn.KVCache(num_pages=64, page_size=16, kv_heads=2, head_dim=64)
        cache.write(k_new, v_new, slots)          # [T, Hkv, D], [T, Hkv, Dv], [T]
        out = cache.attend(q, q_start, kv_len, block_table)

    k, v: [num_pages, Hkv, page_size, D] / [.., Dv] arrays of `dtype`
    (float32, float16 or int8). int8 caches keep per-token scales
    (k_scale, v_scale: [num_pages, Hkv, page_size, 1] float32, computed by
    write as max|x| / 127), or per-channel scales when channel_scales=(ks,
    vs) is given ([Hkv, D] and [Hkv, Dv], fixed by the caller). Slot s is
    offset s % page_size of page s // page_size.
    """

    def __init__(self, num_pages, page_size, kv_heads, head_dim, value_dim=None,
                 dtype=np.float32, channel_scales=None):
        value_dim = head_dim if value_dim is None else value_dim
        dtype = np.dtype(dtype)
        if dtype not in _CACHE_DTYPES:
            raise TypeError("dtype %s; must be float32, float16 or int8" % dtype)
        self.page_size = int(page_size)
        self.k = _page_aligned_zeros((num_pages, kv_heads, page_size, head_dim), dtype)
        self.v = _page_aligned_zeros((num_pages, kv_heads, page_size, value_dim), dtype)
        self.k_scale = self.v_scale = None
        if dtype == np.int8:
            if channel_scales is None:
                self.k_scale = np.zeros((num_pages, kv_heads, page_size, 1), np.float32)
                self.v_scale = np.zeros((num_pages, kv_heads, page_size, 1), np.float32)
            else:
                ks, vs = (np.asarray(s, np.float32) for s in channel_scales)
                self.k_scale = np.ascontiguousarray(ks.reshape(1, kv_heads, 1, head_dim))
                self.v_scale = np.ascontiguousarray(vs.reshape(1, kv_heads, 1, value_dim))
        elif channel_scales is not None:
            raise _invalid("channel_scales are for int8 caches only")

    def write(self, k_new, v_new, slots):
        """Writes token t of k_new [T, Hkv, D] / v_new [T, Hkv, Dv] to slot
        slots[t] (negative: skipped), converting to the cache's dtype."""
        keep = []
        cache = _cache_struct(self.k, self.v, self.k_scale, self.v_scale, None, keep)
        k_new = as_float_input(k_new, "k_new")
        v_new = as_float_input(v_new, "v_new")
        tk, k_new = tensor(k_new, "k_new")
        tv, v_new = tensor(v_new, "v_new")
        t = k_new.shape[0] if k_new.ndim == 3 else 1
        sl = _int_array(slots, "slots", np.int64, t)
        status = _capi.function("hwyattn_kv_cache_write")(
            ctypes.byref(cache), ctypes.byref(tk), ctypes.byref(tv),
            sl.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), None)
        _capi.check(status)

    def dequantized(self):
        """(k, v) as float64 arrays (int8 caches times their scales)."""
        k = self.k.astype(np.float64)
        v = self.v.astype(np.float64)
        if self.k_scale is not None:
            k = k * self.k_scale
            v = v * self.v_scale
        return k, v

    def attend(self, q, q_start, kv_len, block_table=None, **kwargs):
        """hwyattn.kv_attention over this cache (see there for the arguments)."""
        return kv_attention(q, self.k, self.v, q_start, kv_len, block_table=block_table,
                            k_scale=self.k_scale, v_scale=self.v_scale, **kwargs)
