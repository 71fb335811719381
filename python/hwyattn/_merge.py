# SPDX-License-Identifier: Apache-2.0
"""hwyattn.merge_states: merging attention results over shards of the keys."""

import ctypes

import numpy as np

from . import _capi
from ._attention import output_tensor, tensor
from ._capi import InvalidArgumentError
from ._dlpack import float32_of


def _invalid(message):
    return InvalidArgumentError(message, _capi.INVALID_ARGUMENT)


def _as_f32(x, name):
    """x as a float32 ndarray (other real dtypes, ml_dtypes' included,
    converted; float32 views are passed by their strides, without a copy)."""
    a = float32_of(np.asarray(x))
    if a.dtype != np.float32:
        if a.dtype.kind not in "fiub":
            raise TypeError("%s: dtype %s is not a real number type" % (name, a.dtype))
        a = a.astype(np.float32)
    return a


def merge_states(outs, lses, sinks=None):
    """Merges attention results computed over disjoint shards of the keys.

    outs: a sequence of n >= 1 partial outputs, each [B, H, L, Dv] (lower
        ranks right-aligned, as everywhere: [L, Dv] is one batch, one head),
        all of one shape; float32 (other real dtypes are converted).
    lses: the n matching log-sum-exps, each [B, H, L] (natural log), as
        hwyattn.sdpa(..., return_lse=True) returns them; -inf for a row the
        shard had no visible key for (it then contributes nothing).
    sinks: optional [H] per-head sink logits (gpt-oss attention sinks), added
        to every row's denominator once, here: compute the shards without
        them. -inf is a sink that is off; NaN or +inf is an error.

    Per row: L = log(sum_i exp(lse_i) [+ exp(sinks[h])]),
    out = sum_i exp(lse_i - L) * outs[i]. Returns (out, lse): out float32 of
    outs[0]'s shape, lse float32 [B, H, L] (= L; -inf for a row with no
    contribution, whose out is zeros; the sink with a sink). The weights are
    computed in double and the partials folded in index order: the result is
    the same bits on every call and for any thread count. Splitting an
    hwyattn.sdpa call's keys into shards (masks and kv_len cut to match) and
    merging gives the unsplit result within 2e-6 relative (or a few float32
    ulps of the largest |lse|). Any non-negative strides are passed through
    without a copy. Raises hwyattn.InvalidArgumentError (a ValueError) with
    the library's explanation, e.g. "outs[1]: value_dim (shape[3]) is 8 but
    outs[0] has 16".
    """
    if isinstance(outs, np.ndarray) or isinstance(lses, np.ndarray):
        raise TypeError("outs and lses are sequences of arrays (one per shard), "
                        "not single arrays")
    outs = [_as_f32(o, "outs[%d]" % i) for i, o in enumerate(outs)]
    lses = [_as_f32(l, "lses[%d]" % i) for i, l in enumerate(lses)]
    if not outs:
        raise _invalid("outs is empty; merge_states needs at least one partial state")
    if len(lses) != len(outs):
        raise _invalid("lses has %d arrays but outs has %d; one lse per partial output"
                       % (len(lses), len(outs)))
    n = len(outs)
    descs = []   # (hwyattn_tensor, array) pairs: both must stay alive during the call
    for i in range(n):
        descs.append(tensor(outs[i], "outs[%d]" % i, _capi.F32))
        descs.append(tensor(lses[i], "lses[%d]" % i, _capi.F32))
    Ptr = ctypes.POINTER(_capi.Tensor)
    out_ptrs = (Ptr * n)(*[ctypes.pointer(descs[2 * i][0]) for i in range(n)])
    lse_ptrs = (Ptr * n)(*[ctypes.pointer(descs[2 * i + 1][0]) for i in range(n)])
    shape = outs[0].shape
    lead = shape[:-1]
    heads = shape[-3] if len(shape) >= 3 else 1
    sinks_ptr = None
    if sinks is not None:
        s = np.ascontiguousarray(np.asarray(sinks, dtype=np.float32).reshape(-1))
        if s.shape[0] != heads:
            raise _invalid("sinks: %d values; must be one per head, [H] = [%d]"
                           % (s.shape[0], heads))
        sinks_ptr = s.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    to, out = output_tensor(shape, "out")
    tl, lse = output_tensor(lead if lead else (1,), "lse")
    status = _capi.function("hwyattn_merge_states")(
        n, out_ptrs, lse_ptrs, sinks_ptr, ctypes.byref(to), ctypes.byref(tl))
    _capi.check(status)
    del descs
    return out, lse
