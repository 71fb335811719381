# SPDX-License-Identifier: Apache-2.0
"""hwyattn.KVCache and hwyattn.kv_attention: the paged KV-cache interface
(hwyattn_kv_cache_write, hwyattn_kv_attention) over numpy arrays."""

import ctypes

import numpy as np

from . import _capi, _quant
from ._attention import Options, input_tensor, ml_bfloat16_of, output_tensor, tensor
from ._capi import InvalidArgumentError
from ._dlpack import adapt, ml_dtype_name

# Cache dtypes by name: (the library's code, the numpy storage dtype). numpy
# has no bfloat16 or fp8: their pages are uint16 / uint8 arrays of the bits,
# named by a cache_dtype / dtype argument (PyTorch's names), or arrays of
# ml_dtypes' types of those names (JAX's, ONNX's), which name themselves. Nor has it
# ggml's block formats (llama.cpp's -ctk names) or int4: their pages are
# uint8 arrays whose last dimension counts the bytes of a row (see _quant).
_CACHE_DTYPES = {"float32": (_capi.F32, np.float32), "float16": (_capi.F16, np.float16),
                 "bfloat16": (_capi.BF16, np.uint16), "int8": (_capi.I8, np.int8),
                 "float8_e4m3fn": (_capi.F8E4M3, np.uint8),
                 "float8_e5m2": (_capi.F8E5M2, np.uint8)}
_CACHE_DTYPES.update((name, (_quant.code(name), np.uint8)) for name in _quant.PACKED)
# What an array's own numpy dtype means without a name.
_IMPLICIT = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
             np.dtype(np.int8): "int8"}
# The dtypes with scale tensors.
_QUANTIZED = ("int8", "int4", "float8_e4m3fn", "float8_e5m2")


def _cache_dtype_name(dtype):
    """The cache dtype's name from a name, a numpy dtype or ml_dtypes'
    bfloat16 / float8_e4m3fn / float8_e5m2."""
    if isinstance(dtype, str) and dtype in _CACHE_DTYPES:
        return dtype
    ml = ml_dtype_name(dtype)
    if ml is not None:
        return ml
    try:
        name = _IMPLICIT.get(np.dtype(dtype))
    except TypeError:
        name = None
    if name is None:
        raise TypeError("cache dtype %r; must be one of %s, or ml_dtypes.bfloat16 / "
                        "float8_e4m3fn / float8_e5m2 (by name, bfloat16 and fp8 pages are uint16 "
                        "/ uint8 arrays of their bits; the block formats' and int4's uint8 "
                        "arrays of their bytes)" % (dtype, ", ".join(sorted(_CACHE_DTYPES))))
    return name


def cache_row_size(dtype, dim):
    """The last dimension of a page array holding rows of `dim` elements of
    cache dtype `dtype`: `dim` for float32, float16, bfloat16, int8 and fp8
    (elements of the array's dtype), the bytes of a row for the packed
    dtypes (uint8 arrays): dim // 32 * 34 for 'q8_0', * 18 for 'q4_0' and
    'iq4_nl', * 20 for 'q4_1', * 22 for 'q5_0', * 24 for 'q5_1' (dim a
    multiple of 32, else InvalidArgumentError), (dim + 1) // 2 for 'int4'.
    E.g. np.zeros((pages, Hkv, page_size, cache_row_size('q8_0', 128)),
    np.uint8) is a q8_0 pool of head_dim 128."""
    name = _cache_dtype_name(dtype)
    if name in _quant.PACKED:
        return _quant.row_bytes(name, dim)
    return int(dim)


def _pages_code(a, name, cache_dtype):
    """The library's dtype code for pages `a`: cache_dtype names it (its
    storage must match), or a's own float32 / float16 / int8."""
    if cache_dtype is None:
        if a.dtype not in _IMPLICIT:
            raise TypeError("%s: array dtype %s; float32, float16 or int8 pages, or pass "
                            "cache_dtype='bfloat16' (uint16), 'float8_e4m3fn', 'float8_e5m2', "
                            "'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl' or 'int4' (uint8)"
                            % (name, a.dtype))
        return _CACHE_DTYPES[_IMPLICIT[a.dtype]][0]
    code, storage = _CACHE_DTYPES[_cache_dtype_name(cache_dtype)]
    if a.dtype != np.dtype(storage):
        raise TypeError("%s: array dtype %s; cache_dtype %s is stored as %s" %
                        (name, a.dtype, cache_dtype, np.dtype(storage).name))
    return code


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


def _pages(k, v, cache_dtype):
    """(k, v, cache_dtype) as numpy arrays of the pages, in place: DLPack
    producers (torch tensors) and ml_dtypes arrays as views of the bits,
    their bfloat16 / fp8 dtypes naming cache_dtype."""
    k, k_named = adapt(k, "k_cache")
    v, v_named = adapt(v, "v_cache")
    named = k_named or v_named
    if named is not None:
        if k_named != v_named:
            raise TypeError("k_cache and v_cache: dtypes %s and %s; they must be the same" %
                            (k_named or np.asarray(k).dtype, v_named or np.asarray(v).dtype))
        if cache_dtype is not None and _cache_dtype_name(cache_dtype) != named:
            raise TypeError("cache_dtype is %r, but the pages are %s" % (cache_dtype, named))
        cache_dtype = named
    return np.asarray(k), np.asarray(v), cache_dtype


def _scale_input(s, name):
    """(scales as an ndarray, whether they were converted): float32 arrays
    (and DLPack float32 tensors) as they are, in place; ml_dtypes and DLPack
    bfloat16 / fp8 scales converted to float32 (exactly)."""
    arr, named = adapt(s, name)
    if named is None:
        return arr, False
    bits = np.asarray(arr)
    if named == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32), True
    return _fp8_table(named)[bits].astype(np.float32), True


def _page_tensor(a, name, cache_dtype, dim):
    """(hwyattn_tensor, array) of pages `a`; a packed dtype's uint8 pages
    hold rows of `dim` elements (None: what the bytes hold)."""
    if cache_dtype is not None and _cache_dtype_name(cache_dtype) in _quant.PACKED:
        return _quant.tensor(a, name, _cache_dtype_name(cache_dtype), dim)
    return tensor(a, name, _pages_code(a, name, cache_dtype))


def _cache_struct(k, v, k_scale, v_scale, block_table, keep, cache_dtype=None, dims=(None, None)):
    """An hwyattn_kv_cache over the arrays (kept alive in `keep`); dims: D
    and Dv when known (the packed dtypes' pages count bytes)."""
    c = _capi.KvCache()
    _capi.init_struct("hwyattn_kv_cache", c)
    k, v, cache_dtype = _pages(k, v, cache_dtype)
    c.k, ka = _page_tensor(k, "k_cache", cache_dtype, dims[0])
    c.v, va = _page_tensor(v, "v_cache", cache_dtype, dims[1])
    keep += [ka, va]
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if s is None:
            continue
        arr = np.asarray(_scale_input(s, name)[0])
        if arr.ndim == 0:
            arr = arr.reshape(1)
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


def kv_cache_write(k_cache, v_cache, k_new, v_new, slots, *, k_scale=None, v_scale=None,
                   cache_dtype=None, input_dtype=None):
    """Writes token t of k_new [T, Hkv, D] / v_new [T, Hkv, Dv] into slot
    slots[t] (negative: skipped) of pages the caller owns (vLLM's
    reshape_and_cache): k_cache, v_cache [num_pages, Hkv, page_size, D] /
    [.., Dv] arrays, written in place (any strides), converted to the
    cache's dtype (rounded to nearest even; int8, int4 and fp8 quantized
    with k_scale / v_scale as in kv_attention: per-token scales are computed
    and written, the other layouts read; the block formats quantized as
    ggml's reference quantizers do, the same bytes). cache_dtype as in
    kv_attention: the pages of a block format or of int4 are uint8 arrays
    [num_pages, Hkv, page_size, cache_row_size(cache_dtype, D)], checked
    against k_new's D and v_new's Dv (InvalidArgumentError, a ValueError,
    naming the sizes). input_dtype='bfloat16' reads uint16 k_new / v_new as
    bfloat16 bits; ml_dtypes.bfloat16 k_new / v_new and ml_dtypes
    bfloat16 / float8_e4m3fn / float8_e5m2 pages (JAX's, ONNX's arrays)
    name their dtype themselves.
    """
    keep = []
    for name, a in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not (isinstance(a, np.ndarray) or hasattr(a, "__dlpack__") or
                hasattr(a, "__array_interface__")):
            raise TypeError("%s: must be a writeable numpy array or a DLPack tensor (torch): the "
                            "pages are written in place" % name)
    k_cache, v_cache, cache_dtype = _pages(k_cache, v_cache, cache_dtype)
    keep += [k_cache, v_cache]
    for name, a in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not a.flags.writeable:
            raise TypeError("%s: must be writeable (the pages are written in place)" % name)
    token_shape = tuple(np.shape(k_cache)[:3]) + (1,)
    k_scale, k_converted = _scale_input(k_scale, "k_scale")
    v_scale, v_converted = _scale_input(v_scale, "v_scale")
    for name, s, converted in (("k_scale", k_scale, k_converted),
                               ("v_scale", v_scale, v_converted)):
        if np.ndim(s) == 4 and tuple(np.shape(s)) == token_shape and (converted or not (
                isinstance(s, np.ndarray) and s.dtype == np.float32 and s.flags.writeable)):
            raise TypeError("%s: per-token scales are written: they must be a writeable float32 "
                            "array" % name)
    tk, k_new = input_tensor(k_new, "k_new", input_dtype)
    tv, v_new = input_tensor(v_new, "v_new", input_dtype)
    cache = _cache_struct(k_cache, v_cache, k_scale, v_scale, None, keep, cache_dtype,
                          (k_new.shape[-1], v_new.shape[-1]))
    t = k_new.shape[0] if k_new.ndim == 3 else 1
    sl = _int_array(slots, "slots", np.int64, t)
    status = _capi.function("hwyattn_kv_cache_write")(
        ctypes.byref(cache), ctypes.byref(tk), ctypes.byref(tv),
        sl.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), None)
    _capi.check(status)


def kv_attention(q, k_cache, v_cache, q_start, kv_len, *, block_table=None, q_pos=None,
                 k_scale=None, v_scale=None, cache_dtype=None, scale=None, causal=True,
                 window_left=0, window_right=0, softcap=0.0, alibi_slopes=None, sinks=None,
                 return_lse=False, precision=None, out=None, out_dtype=None, input_dtype=None,
                 value_dim=None):
    """Attention of packed varlen queries over a (paged) KV cache.

    q: [T, Hq, D] float32/float16, the query tokens of all sequences one
        after the other; sequence s owns rows q_start[s]:q_start[s+1].
    k_cache, v_cache: [num_pages, Hkv, page_size, D] and [.., Dv] arrays
        (float32, float16 or int8; any strides, so FlashAttention's
        [pages, page, Hkv, D] memory is k.transpose(0, 2, 1, 3)); bfloat16
        and fp8 pages are uint16 / uint8 arrays of the bits, named by
        cache_dtype ('bfloat16', 'float8_e4m3fn' or 'float8_e5m2'), or
        arrays of ml_dtypes' bfloat16 / float8_e4m3fn / float8_e5m2, which
        need no cache_dtype.
        ggml's block formats (llama.cpp's -ctk / -ctv names 'q8_0', 'q4_0',
        'q4_1', 'q5_0', 'q5_1', 'iq4_nl'; D and Dv multiples of 32, no
        scales: they are in the blocks) and 'int4' (two per byte, with
        scales as int8) are uint8 arrays of the bytes whose last dimension
        is the bytes of a row: [num_pages, Hkv, page_size, D // 32 * 34]
        for q8_0 (18 bytes per 32 elements for q4_0 and iq4_nl, 20 q4_1,
        22 q5_0, 24 q5_1), [.., (D + 1) // 2] for int4; see
        hwyattn.cache_row_size. K's rows are checked against q's D
        (InvalidArgumentError, a ValueError, naming the sizes). The other
        strides must be whole blocks (in place, never copied).
    q_start: [num_seqs + 1] ints (cu_seqlens_q); kv_len: [num_seqs] ints,
        the keys of each sequence in the cache, this step's included.
    block_table: [num_seqs, max_pages] ints, the pages of each sequence in
        order; None = sequence s is page s.
    q_pos: [num_seqs] ints, position of each sequence's first query; None =
        kv_len - q_len (the new tokens are the last ones of the cache).
    k_scale, v_scale: int8 (required) and fp8 (optional: None is scale 1)
        caches only, float32: per token [num_pages, Hkv, page_size, 1], per
        channel [1, Hkv, 1, D], per kv head [1, Hkv, 1, 1] or per tensor
        (vLLM's k_scale: a scalar or [1]).
    causal: True (default: key position <= query position) or False; the
        modifiers as in hwyattn.sdpa, with these positions.
    precision, out, out_dtype, input_dtype (for q): as in hwyattn.sdpa (an
        ml_dtypes.bfloat16 q gives an ml_dtypes.bfloat16 out by default).
    value_dim: the packed dtypes only: Dv, checked against v_cache's bytes
        (default: what the bytes hold, 2 * the bytes of a row for int4; so
        needed only for int4 with an odd Dv).
    Returns out [T, Hq, Dv] (float32, or the out= array, or as out_dtype or
    an ml_dtypes.bfloat16 q say), and lse [T, Hq] (float32) with return_lse.
    """
    keep = []
    if out is None and out_dtype is None:
        out_dtype = ml_bfloat16_of(q)
    tq, q = input_tensor(q, "q", input_dtype)
    if q.ndim != 3:
        raise _invalid("q: shape %s; must be [T, Hq, D]" % (q.shape,))
    cache = _cache_struct(k_cache, v_cache, k_scale, v_scale, block_table, keep, cache_dtype,
                          (q.shape[-1], value_dim))
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
                   sinks=sinks, heads=q.shape[1], precision=precision)
    lse = opts.add_lse(q.shape[:2]) if return_lse else None
    dv = cache.v.shape[cache.v.rank - 1]
    to, out = output_tensor(q.shape[:2] + (dv,), "out", out, out_dtype)
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


def _fp8_table(name):
    """float64 values of the 256 bit patterns of an OCP fp8 format, from
    their fields (NaN where the format has NaNs)."""
    mbits, bias = (3, 7) if name == "float8_e4m3fn" else (2, 15)
    b = np.arange(256)
    e, m = (b & 0x7F) >> mbits, b & ((1 << mbits) - 1)
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                   np.ldexp(1.0 + m / float(1 << mbits), e - bias))
    if name == "float8_e4m3fn":
        mag = np.where((b & 0x7F) == 0x7F, np.nan, mag)
    else:
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    return np.where(b & 0x80, -mag, mag)


class KVCache(object):
    """A paged KV cache held in numpy arrays (vLLM's layout).

        cache = hwyattn.KVCache(num_pages=64, page_size=16, kv_heads=2, head_dim=64)
        cache.write(k_new, v_new, slots)          # [T, Hkv, D], [T, Hkv, Dv], [T]
        out = cache.attend(q, q_start, kv_len, block_table)

    k, v: [num_pages, Hkv, page_size, D] / [.., Dv] arrays of `dtype`:
    float32, float16, int8, or by name 'bfloat16' (uint16 pages of the
    bits), 'float8_e4m3fn' or 'float8_e5m2' (uint8 pages of the bits), or
    ml_dtypes.bfloat16 / float8_e4m3fn / float8_e5m2 (pages of that type:
    the same bits, as JAX and ONNX hold them).
    The packed dtypes, by llama.cpp's -ctk / -ctv names: ggml's block
    formats 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl' (head_dim and
    value_dim multiples of 32; no scales, they are in the blocks) and
    'int4' (signed, two per byte, scales as int8): k and v are then uint8
    arrays of the bytes, [num_pages, Hkv, page_size, bytes of a row]
    (hwyattn.cache_row_size: D // 32 * 34 for q8_0, (D + 1) // 2 for int4),
    in ggml's block layout (hwyattn.h), which dequantized() decodes.
    scales, for int8, int4 and fp8 caches: 'token' (k_scale, v_scale
    [num_pages, Hkv, page_size, 1] float32, computed by write as max|x| /
    the format's largest number: 127, 7, 448, 57344; int8's and int4's
    default), a pair (k_scale, v_scale) of fixed float32 arrays of any
    layout of hwyattn.kv_attention (per channel, kv head or tensor, e.g.
    vLLM's two floats), or None (fp8 only: scale 1). channel_scales=(ks, vs)
    is scales=(ks, vs) given as [Hkv, D] and [Hkv, Dv]. KIVI's int4,
    per-channel K with per-token V, is scales=(ks [1, Hkv, 1, D],
    np.zeros((num_pages, Hkv, page_size, 1), np.float32)): a per-token
    array is written by write. Slot s is offset s % page_size of page
    s // page_size.
    """

    def __init__(self, num_pages, page_size, kv_heads, head_dim, value_dim=None,
                 dtype=np.float32, channel_scales=None, scales=None):
        value_dim = head_dim if value_dim is None else value_dim
        self.dtype = _cache_dtype_name(dtype)
        storage = _CACHE_DTYPES[self.dtype][1]
        if ml_dtype_name(dtype) is not None:
            storage = np.dtype(dtype)  # ml_dtypes pages: the same bits, JAX's type
        self.page_size = int(page_size)
        self.head_dim, self.value_dim = int(head_dim), int(value_dim)
        k_row, v_row = (cache_row_size(self.dtype, d) for d in (head_dim, value_dim))
        self.k = _page_aligned_zeros((num_pages, kv_heads, page_size, k_row), storage)
        self.v = _page_aligned_zeros((num_pages, kv_heads, page_size, v_row), storage)
        self.k_scale = self.v_scale = None
        if channel_scales is not None:
            if scales is not None:
                raise _invalid("give scales or channel_scales, not both")
            ks, vs = (np.asarray(s, np.float32) for s in channel_scales)
            scales = (ks.reshape(1, kv_heads, 1, head_dim), vs.reshape(1, kv_heads, 1, value_dim))
        if self.dtype not in _QUANTIZED:
            if scales is not None:
                raise _invalid("scales are for int8, int4 and fp8 caches only (the block formats "
                               "carry theirs in the blocks)")
            return
        if scales is None and self.dtype in ("int8", "int4"):
            scales = "token"
        if isinstance(scales, str):
            if scales != "token":
                raise _invalid("scales is %r; must be 'token', a pair of arrays or None" % scales)
            self.k_scale = np.zeros((num_pages, kv_heads, page_size, 1), np.float32)
            self.v_scale = np.zeros((num_pages, kv_heads, page_size, 1), np.float32)
        elif scales is not None:
            self.k_scale, self.v_scale = (np.array(s, np.float32, ndmin=1) for s in scales)

    def write(self, k_new, v_new, slots):
        """Writes token t of k_new [T, Hkv, D] / v_new [T, Hkv, Dv] to slot
        slots[t] (negative: skipped), converting to the cache's dtype
        (hwyattn.kv_cache_write)."""
        kv_cache_write(self.k, self.v, k_new, v_new, slots, k_scale=self.k_scale,
                       v_scale=self.v_scale, cache_dtype=self.dtype)

    def dequantized(self):
        """(k, v) as float64 arrays [num_pages, Hkv, page_size, D] / [.., Dv]:
        the values the pages stand for (bfloat16 and fp8 decoded, the block
        formats' blocks decoded, int8, int4 and fp8 times their scales)."""
        kb, vb = (adapt(x, "pages")[0] for x in (self.k, self.v))  # ml_dtypes: the bits
        if self.dtype == "bfloat16":
            k, v = ((x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                    for x in (kb, vb))
        elif self.dtype in _quant.PACKED:
            k = _quant.decode(self.dtype, self.k, self.head_dim)
            v = _quant.decode(self.dtype, self.v, self.value_dim)
        elif self.dtype.startswith("float8"):
            table = _fp8_table(self.dtype)
            k, v = table[kb], table[vb]
        else:
            k, v = self.k.astype(np.float64), self.v.astype(np.float64)
        if self.k_scale is not None:
            k = k * self.k_scale.reshape((1,) * (4 - self.k_scale.ndim) + self.k_scale.shape)
            v = v * self.v_scale.reshape((1,) * (4 - self.v_scale.ndim) + self.v_scale.shape)
        return k, v

    def attend(self, q, q_start, kv_len, block_table=None, **kwargs):
        """hwyattn.kv_attention over this cache (see there for the arguments)."""
        kwargs.setdefault("value_dim", self.value_dim)
        return kv_attention(q, self.k, self.v, q_start, kv_len, block_table=block_table,
                            k_scale=self.k_scale, v_scale=self.v_scale, cache_dtype=self.dtype,
                            **kwargs)
