# SPDX-License-Identifier: Apache-2.0
"""hwyattn.sdpa and the numpy <-> hwyattn_tensor plumbing."""

import ctypes

import numpy as np

from . import _capi, _quant
from ._capi import InvalidArgumentError
from ._dlpack import adapt, float32_of, ml_dtype, ml_dtype_name

_FLOAT_DTYPES = {np.dtype(np.float32): _capi.F32, np.dtype(np.float16): _capi.F16}


def _invalid(message):
    return InvalidArgumentError(message, _capi.INVALID_ARGUMENT)


def as_float_input(x, name):
    """x as a float32 or float16 ndarray the library can read (other real
    dtypes, ml_dtypes' bfloat16 and fp8 included, are converted to float32).
    Keeps views: strided inputs are passed by their strides, without a
    copy."""
    a = float32_of(np.asarray(x))
    if a.dtype not in _FLOAT_DTYPES:
        if a.dtype.kind not in "fiub":
            raise TypeError("%s: dtype %s is not a real number type" % (name, a.dtype))
        a = a.astype(np.float32)
    return a


def input_tensor(x, name, bits_dtype=None):
    """(descriptor, array) of q, k or v: float32 / float16 read in place,
    other real dtypes converted to float32; with bits_dtype='bfloat16', a
    uint16 array is read in place as bfloat16 bits; an ml_dtypes.bfloat16
    array and a DLPack producer's (a torch tensor's) memory in place,
    bfloat16 included. The array returned is the memory described (a
    uint16 view of a bfloat16 one)."""
    if bits_dtype not in (None, "bfloat16"):
        raise _invalid("input_dtype is %r; must be None or 'bfloat16' (uint16 arrays of bfloat16 "
                       "bits)" % (bits_dtype,))
    a, named = adapt(x, name)
    if named not in (None, "bfloat16"):
        raise TypeError("%s: dtype %s; fp8 is a cache dtype (k_cache, v_cache), not an input" %
                        (name, named))
    a = np.asarray(a)
    if (named or bits_dtype) == "bfloat16" and a.dtype == np.uint16:
        return tensor(a, name, _capi.BF16)
    return tensor(as_float_input(a, name), name)


def tensor(a, name, dtype_code=None):
    """(hwyattn_tensor, array) describing ndarray `a` in place. The returned
    array must stay alive while the descriptor is used (it is `a` itself, or a
    contiguous copy when `a` has strides the library cannot take: negative, or
    not a multiple of the element size)."""
    if dtype_code is None:
        dtype_code = _FLOAT_DTYPES[a.dtype]
    if a.ndim < 1 or a.ndim > 4:
        raise _invalid("%s: rank is %d (shape %s); must be 1..4" % (name, a.ndim, a.shape))
    item = a.itemsize
    if any(s < 0 or s % item for s in a.strides) or a.ctypes.data % item:
        a = np.ascontiguousarray(a)
    t = _capi.Tensor()
    t.data = a.ctypes.data
    t.dtype = dtype_code
    t.rank = a.ndim
    for i in range(a.ndim):
        t.shape[i] = a.shape[i]
        t.stride[i] = a.strides[i] // item
    return t, a


# Output dtypes by name: numpy has no bfloat16, so a bfloat16 output is a
# uint16 array of the bits (named by out_dtype="bfloat16"), an
# ml_dtypes.bfloat16 array, or a torch bfloat16 tensor.
_OUT_DTYPES = {"float32": (_capi.F32, np.float32), "float16": (_capi.F16, np.float16),
               "bfloat16": (_capi.BF16, np.uint16)}


def _out_dtype_key(out_dtype, name):
    """(out_dtype's name or None, the numpy dtype to allocate it as): a
    name ('float32', 'float16', 'bfloat16'), numpy's float32 / float16, or
    ml_dtypes.bfloat16 (then allocated as that)."""
    if out_dtype is None:
        return None, None
    if isinstance(out_dtype, str):
        return out_dtype, None
    ml = ml_dtype_name(out_dtype)
    if ml is not None:
        return ml, np.dtype(out_dtype)
    try:
        key = np.dtype(out_dtype).name
    except (TypeError, ValueError):
        key = None
    if key not in ("float32", "float16"):
        raise TypeError("%s_dtype is %r; must be 'float32', 'float16', 'bfloat16', np.float32, "
                        "np.float16 or ml_dtypes.bfloat16" % (name, out_dtype))
    return key, np.dtype(key)


def ml_bfloat16_of(x):
    """x's dtype when x is an ml_dtypes.bfloat16 numpy array, else None: the
    default out_dtype of a call whose q is one (JAX's and ONNX's attention
    return q's dtype)."""
    if isinstance(x, np.ndarray) and ml_dtype_name(x.dtype) == "bfloat16":
        return x.dtype
    return None


def output_tensor(shape, name, out=None, out_dtype=None):
    """(descriptor, result) of an output: `out` (written in place: its
    shape must be `shape`, its strides non-negative multiples of its
    element size; float32, float16, uint16 bits with out_dtype='bfloat16',
    an ml_dtypes.bfloat16 array, or a DLPack producer such as a torch
    tensor, whose dtype names itself), returned as given; or without one a
    new array of out_dtype: float32 (None), float16, or bfloat16 (the name
    or ml_dtypes.bfloat16) as an ml_dtypes.bfloat16 array (ImportError
    without ml_dtypes)."""
    given = out
    key, alloc = _out_dtype_key(out_dtype, name)
    out, named = adapt(out, name)
    if named is not None:
        if named != "bfloat16":
            raise TypeError("%s: dtype %s; outputs are float32, float16 or bfloat16" %
                            (name, named))
        if key not in (None, named):
            raise TypeError("%s: a %s tensor, but %s_dtype is %r" % (name, named, name, out_dtype))
        key = named
    if out is None:
        if key in (None, "float32"):
            out = np.empty(shape, dtype=np.float32)
            t, _ = tensor(out, name, _capi.F32)
            return t, out
        if key not in _OUT_DTYPES:
            raise TypeError("%s_dtype is %r; must be 'float32', 'float16' or 'bfloat16'" %
                            (name, out_dtype))
        code, storage = _OUT_DTYPES[key]
        if key == "bfloat16":
            result = np.empty(shape, dtype=alloc if alloc is not None else ml_dtype(key))
            out = result.view(np.uint16)
        else:
            result = out = np.empty(shape, dtype=storage)
        t, _ = tensor(out, name, code)
        return t, result
    if not isinstance(out, np.ndarray) or not out.flags.writeable:
        raise TypeError("%s: must be a writeable numpy array, a DLPack tensor (torch) or an "
                        "object with __array_interface__ (written in place)" % name)
    if key is None:
        key = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16"}.get(out.dtype)
    if key not in _OUT_DTYPES:
        raise TypeError("%s: dtype %s; float32 or float16, or uint16 with %s_dtype='bfloat16'" %
                        (name, out.dtype, name))
    code, storage = _OUT_DTYPES[key]
    if out.dtype != np.dtype(storage):
        raise TypeError("%s: dtype %s, but %s is stored as %s" %
                        (name, out.dtype, key, np.dtype(storage).name))
    if tuple(out.shape) != tuple(shape):
        raise _invalid("%s: shape %s; must be %s" % (name, out.shape, tuple(shape)))
    if any(s < 0 or s % out.itemsize for s in out.strides) or out.ctypes.data % out.itemsize:
        raise _invalid("%s: strides %s; must be non-negative multiples of the element size "
                       "(written in place, no copy)" % (name, out.strides))
    t, _ = tensor(out, name, code)
    return t, given


def precision_code(precision):
    """None / 'f32' / 'float32', 'bf16' / 'bfloat16' or 'int8' (or the C values)."""
    if precision is None:
        return _capi.PRECISION_F32
    if isinstance(precision, str):
        key = precision.lower()
        if key in ("f32", "float32", "fp32"):
            return _capi.PRECISION_F32
        if key in ("bf16", "bfloat16"):
            return _capi.PRECISION_BF16
        if key == "int8":
            return _capi.PRECISION_INT8
    elif isinstance(precision, (int, np.integer)) and int(precision) in (0, 1, 2):
        return int(precision)
    raise _invalid("precision is %r; must be 'f32', 'bf16' (products rounded to bfloat16, "
                   "fp32 sums) or 'int8' (integer Q K^T on a quantized K)" % (precision,))


def causal_code(causal):
    """False/None, True, "top_left", "bottom_right" (or the C values 0/1/2)."""
    if causal is None or causal is False:
        return _capi.CAUSAL_NONE
    if causal is True:
        return _capi.CAUSAL_TOP_LEFT
    if isinstance(causal, str):
        key = causal.lower().replace("-", "_")
        codes = {"none": _capi.CAUSAL_NONE, "top_left": _capi.CAUSAL_TOP_LEFT,
                 "bottom_right": _capi.CAUSAL_BOTTOM_RIGHT}
        if key in codes:
            return codes[key]
    elif isinstance(causal, (int, np.integer)) and int(causal) in (0, 1, 2):
        return int(causal)
    raise _invalid("causal is %r; must be False, True, 'top_left' or 'bottom_right'" % (causal,))


def mask_tensor(mask, name="mask"):
    """(hwyattn_tensor, array) for a bool (True = attend) or additive float
    mask: float16 is read in place as F16 (ggml's KQ mask), other numbers as
    float32."""
    m = float32_of(np.asarray(mask))
    if m.dtype == np.bool_:
        return tensor(m, name, _capi.BOOL)
    if m.dtype == np.float16:
        return tensor(m, name, _capi.F16)
    if m.dtype.kind in "fiu":
        if m.dtype != np.float32:
            m = m.astype(np.float32)
        return tensor(m, name, _capi.F32)
    raise TypeError("%s: dtype %s; must be bool (True = attend) or float (additive)"
                    % (name, m.dtype))


def kv_len_array(kv_len, batch, name="kv_len"):
    """kv_len as a contiguous int32 array of exactly `batch` entries (the
    library reads `batch` of them, so the length is checked here)."""
    a = np.asarray(kv_len)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1 or a.shape[0] != batch:
        raise _invalid("%s: shape %s; must be [B] = [%d]" % (name, a.shape, batch))
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "b" or not np.all(np.equal(np.mod(a, 1), 0)):
            raise _invalid("%s: must hold integers, got dtype %s" % (name, a.dtype))
    a64 = a.astype(np.int64)
    if np.any(a64 < np.iinfo(np.int32).min) or np.any(a64 > np.iinfo(np.int32).max):
        raise _invalid("%s: values %s do not fit in int32" % (name, a64.tolist()))
    return np.ascontiguousarray(a64, dtype=np.int32)


def _window(w, name):
    w = int(w or 0)
    if w < 0 or w >= 2**63:
        raise _invalid("%s is %d; must be >= 0 (0 = unbounded)" % (name, w))
    return w


def _to_float_vector(values, name):
    a = float32_of(np.asarray(values))
    if a.dtype.kind not in "fiu" or a.ndim != 1:
        raise _invalid("%s: must be a 1-d real array of one value per query head, got %s %s"
                       % (name, a.dtype, a.shape))
    return a


class Options(object):
    """Builds an hwyattn_sdpa_options and keeps every array it points to alive."""

    def __init__(self, scale=None, causal=False, mask=None, kv_len=None, batch=1,
                 window_left=0, window_right=0, softcap=0.0, alibi_slopes=None, sinks=None,
                 heads=None, precision=None):
        self.c = _capi.SdpaOptions()
        _capi.init_struct("hwyattn_sdpa_options", self.c)
        self.c.precision = precision_code(precision)
        # None is the default 1/sqrt(head_dim), which the C ABI spells 0. An
        # explicit 0 is refused rather than passed on: PyTorch's scale=0.0
        # means uniform weights, which the library would silently replace
        # with the default.
        if scale is not None:
            s = float(scale)
            if not np.isfinite(s):
                raise _invalid("scale is %r; must be finite (None = 1/sqrt(head_dim))" % (scale,))
            if s == 0.0:
                raise _invalid(
                    "scale is %r; an explicit 0 is not supported: the C ABI reads scale 0 as the "
                    "default 1/sqrt(head_dim), while PyTorch's scale=0.0 means uniform weights. "
                    "Pass scale=None for the default, or a tiny nonzero scale (e.g. 1e-30) for "
                    "uniform weights" % (scale,))
            self.c.scale = s
        self.c.causal = causal_code(causal)
        self._keep = []
        if mask is not None:
            t, arr = mask_tensor(mask)
            self._keep += [t, arr]
            self.c.mask = ctypes.pointer(t)
        if kv_len is not None:
            arr = kv_len_array(kv_len, batch)
            self._keep.append(arr)
            self.c.kv_len = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        # The score modifiers: the library checks their values and says which
        # one is wrong; here only their types and the per-head lengths.
        self.c.window_left = _window(window_left, "window_left")
        self.c.window_right = _window(window_right, "window_right")
        self.c.softcap = float(softcap or 0.0)
        for name, values in (("alibi_slopes", alibi_slopes), ("sinks", sinks)):
            if values is None:
                continue
            arr = np.ascontiguousarray(_to_float_vector(values, name), dtype=np.float32)
            if heads is not None and arr.shape != (heads,):
                raise _invalid("%s: shape %s; must be [Hq] = [%d]" % (name, arr.shape, heads))
            self._keep.append(arr)
            setattr(self.c, name, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))

    def add_weights(self, shape):
        t, out = output_tensor(shape, "weights")
        self._keep.append(t)
        self.c.weights = ctypes.pointer(t)
        return out

    def add_lse(self, shape):
        t, out = output_tensor(shape, "lse")
        self._keep.append(t)
        self.c.lse = ctypes.pointer(t)
        return out

    def ref(self):
        return ctypes.byref(self.c)


def _batch(shape):
    return shape[0] if len(shape) == 4 else 1


def _kv_dtype_names(kv_dtype):
    """(k's, v's) block format names of sdpa's kv_dtype (None: a float array)."""
    names = (kv_dtype, kv_dtype) if kv_dtype is None or isinstance(kv_dtype, str) else kv_dtype
    try:
        k_name, v_name = names
    except (TypeError, ValueError):
        k_name = v_name = ""
    for n in (k_name, v_name):
        if n is not None and n not in _quant.BLOCK_FORMATS:
            raise _invalid("kv_dtype is %r; must be None, one of %s, or a pair of them (k's, "
                           "v's; None for a float array). int4 is a KV-cache dtype only" %
                           (kv_dtype, ", ".join("'%s'" % b for b in _quant.BLOCK_FORMATS)))
    return k_name, v_name


def _kv_input(x, name, block, bits_dtype, dim):
    """(descriptor, array) of k or v: a float input, or with a block format
    name the uint8 array of its bytes (last dimension: the bytes of a row of
    `dim` elements, None = what they hold)."""
    if block is None:
        return input_tensor(x, name, bits_dtype)
    a, named = adapt(x, name)
    if named is not None:
        raise TypeError("%s: dtype %s; %s data is a uint8 array of its bytes" %
                        (name, named, block))
    return _quant.tensor(np.asarray(a), name, block, dim)


def sdpa(q, k, v, *, scale=None, causal=False, mask=None, kv_len=None,
         window_left=0, window_right=0, softcap=0.0, alibi_slopes=None, sinks=None,
         return_weights=False, return_lse=False, precision=None, out=None, out_dtype=None,
         input_dtype=None, kv_dtype=None):
    """Scaled dot-product attention: softmax(q k^T * scale + mask) v.

    q: [B, Hq, Lq, D], k: [B, Hkv, Lk, D], v: [B, Hkv, Lk, Dv] (float32,
    float16 or ml_dtypes.bfloat16, read in place; other real dtypes are
    converted to float32). Lower ranks are
    right-aligned (a [Lq, D] q is one batch with one head); k and v may have
    batch 1 to share them across q's batch. Hq must be a multiple of Hkv
    (GQA: query head h reads key/value head h // (Hq // Hkv)). Any
    non-negative strides are passed through without a copy (np.transpose
    views, broadcast_to), so [B, L, H, D] memory can be given as
    x.transpose(0, 2, 1, 3).

    scale: None = 1/sqrt(D); 1 = plain dot products. An explicit 0 is
        refused (InvalidArgumentError): PyTorch's scale=0.0 means uniform
        weights, but the C library reads 0 as the default 1/sqrt(D); pass a
        tiny nonzero scale for uniform weights.
    causal: False, True / "top_left" (query i sees keys j <= i, PyTorch's
        is_causal), or "bottom_right" (j <= i + Lk - Lq, the KV-cache one).
    mask: broadcastable to [B, Hq, Lq, Lk]; bool (True = attend) or float
        (added to the scaled scores; -inf blocks; float16 is read in place,
        other floats as float32).
    kv_len: [B] ints; keys at positions >= kv_len[b] are padding.
    window_left, window_right: sliding-window sizes (0 = unbounded): a query
        at position p sees keys p - window_left < j < p + window_right.
        Positions: query i is at i + Lk - Lq under causal="bottom_right",
        else at i; key j at j. Mistral/Gemma's sliding_window = W is
        window_left=W; FlashAttention's window_size=(L, R) is
        window_left=L+1, window_right=R+1.
    softcap: 0 = off; c > 0 turns every scaled score s into c*tanh(s/c),
        before the mask and ALiBi (Gemma 2).
    alibi_slopes: [Hq] floats: adds slope[h] * (j - p) to the scores.
    sinks: [Hq] floats: a per-head logit that joins the softmax denominator
        and has no value (gpt-oss); lse includes it, weights sum to < 1.
    return_weights: also return the probabilities [B, Hq, Lq, Lk] (float32).
    return_lse: also return the log-sum-exp of the scaled, masked scores,
        [B, Hq, Lq] (-inf for a row with every key blocked).
    precision: None / 'f32' (fp32 products), 'bf16': products of
        operands rounded to bfloat16 with fp32 sums (AVX512_BF16's
        vdpbf16ps where the CPU has it), or 'int8': on a quantized k (a
        block format, int8, int4) Q K^T in integers against the query
        quantized per block of 32 as ggml's q8_0 (hwyattn.h); fp32 on a
        float k.
    out: an array to write the result into, in place (any non-negative
        strides): float32, float16, ml_dtypes.bfloat16, or uint16 bits with
        out_dtype='bfloat16'; the fp32 result is rounded once to its dtype.
        It is returned.
    out_dtype: without out=, the dtype of the new result: 'float32' (np.float32),
        'float16' (np.float16), or 'bfloat16' (ml_dtypes.bfloat16): an
        ml_dtypes.bfloat16 array (ImportError without ml_dtypes). Default:
        float32, except for an ml_dtypes.bfloat16 q: then ml_dtypes.bfloat16,
        as JAX's and ONNX's attention return q's dtype (out_dtype='float32'
        keeps the fp32 result).
    input_dtype: 'bfloat16' reads uint16 q, k, v arrays as bfloat16 bits
        (in place), e.g. a torch bf16 tensor's
        .view(torch.int16).numpy().view(np.uint16). Not needed for
        ml_dtypes.bfloat16 arrays (JAX's, ONNX's) or torch tensors: their
        dtype names itself.
    kv_dtype: k and v in one of ggml's block formats, read in place (as
        llama.cpp's quantized KV cache): 'q8_0', 'q4_0', 'q4_1', 'q5_0',
        'q5_1' or 'iq4_nl' for both, or a pair (k's, v's) with None for a
        float one. Such a k or v is a uint8 array of the bytes whose last
        dimension is the bytes of a row, [B, Hkv, Lk, D // 32 * 34] for
        q8_0 (18 bytes per 32 elements for q4_0 and iq4_nl, 20 q4_1, 22
        q5_0, 24 q5_1; D and Dv multiples of 32; k's rows are checked
        against q's D), as gguf-py's quantize() returns it; the other
        strides must be whole blocks.

    A query row whose keys are all blocked gets zeros (PyTorch gives NaN).
    Returns out [B, Hq, Lq, Dv] (float32, or as out= / out_dtype / an
    ml_dtypes.bfloat16 q say; q's rank), or the tuple
    (out, weights?, lse?) in that order when either is requested.
    Raises hwyattn.Error (InvalidArgumentError, a ValueError, for bad
    shapes) with the library's explanation.
    """
    k_block, v_block = _kv_dtype_names(kv_dtype)
    if out is None and out_dtype is None:
        out_dtype = ml_bfloat16_of(q)
    tq, q = input_tensor(q, "q", input_dtype)
    tk, k = _kv_input(k, "k", k_block, input_dtype, q.shape[-1])
    tv, v = _kv_input(v, "v", v_block, input_dtype, None)
    lead = q.shape[:-1]  # [B, Hq, Lq] right-aligned
    lk = k.shape[-2] if k.ndim >= 2 else 1
    out_shape = lead + (tv.shape[tv.rank - 1],)  # Dv: elements, also of a block format's bytes
    opts = Options(scale, causal, mask, kv_len, batch=_batch(q.shape), window_left=window_left,
                   window_right=window_right, softcap=softcap, alibi_slopes=alibi_slopes,
                   sinks=sinks, heads=q.shape[-3] if q.ndim >= 3 else 1, precision=precision)
    weights = opts.add_weights(lead + (lk,)) if return_weights else None
    lse = opts.add_lse(lead if lead else (1,)) if return_lse else None
    to, out = output_tensor(out_shape, "out", out, out_dtype)
    status = _capi.function("hwyattn_sdpa")(ctypes.byref(tq), ctypes.byref(tk), ctypes.byref(tv),
                                            ctypes.byref(to), opts.ref())
    _capi.check(status)
    if not (return_weights or return_lse):
        return out
    result = (out,)
    if return_weights:
        result += (weights,)
    if return_lse:
        result += (lse,)
    return result
