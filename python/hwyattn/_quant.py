# SPDX-License-Identifier: Apache-2.0
"""The packed dtypes in numpy: ggml's block formats, named as llama.cpp's
-ctk / -ctv cache types ('q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1',
'iq4_nl'), and 'int4' (signed, two per byte).

numpy has no such types, so their arrays are uint8 arrays of the bytes
whose LAST dimension counts the bytes of a row, the other dimensions being
the logical ones (the shapes gguf-py's quantize() gives): a row of D
elements takes D // 32 * block_bytes bytes (q8_0 34 bytes per 32 elements,
q4_0 and iq4_nl 18, q4_1 20, q5_0 22, q5_1 24; D a multiple of 32), or
(D + 1) // 2 bytes for int4 (element 2i in the low nibble of byte i, 2i + 1
in the high one). A q8_0 pool [num_pages, Hkv, page_size, 128] is a uint8
array [num_pages, Hkv, page_size, 136]. The bytes of a row must be
contiguous; the other strides (numpy's, in bytes) may be any whole number
of blocks (int4: any), so [pages, page, Hkv, bytes] memory is read in place
as its transpose(0, 2, 1, 3)."""

import numpy as np

from . import _capi
from ._capi import InvalidArgumentError

BLOCK = 32  # elements per block of every block format
# name: (the library's code, bytes per block)
BLOCK_FORMATS = {"q8_0": (_capi.Q8_0, 34), "q4_0": (_capi.Q4_0, 18), "q4_1": (_capi.Q4_1, 20),
                 "q5_0": (_capi.Q5_0, 22), "q5_1": (_capi.Q5_1, 24),
                 "iq4_nl": (_capi.IQ4_NL, 18)}
INT4 = "int4"
PACKED = tuple(BLOCK_FORMATS) + (INT4,)
# IQ4_NL's 16 levels (hwyattn.h, ggml's kvalues_iq4nl).
IQ4_NL_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
                          113], np.float64)


def _invalid(message):
    return InvalidArgumentError(message, _capi.INVALID_ARGUMENT)


def code(name):
    """The library's dtype code of a packed dtype."""
    return _capi.I4 if name == INT4 else BLOCK_FORMATS[name][0]


def row_bytes(name, dim):
    """The bytes of a row of `dim` elements: dim // 32 * block bytes for a
    block format (dim a multiple of 32, else InvalidArgumentError), (dim + 1)
    // 2 for int4."""
    dim = int(dim)
    if dim < 1:
        raise _invalid("dim is %d; must be >= 1" % dim)
    if name == INT4:
        return (dim + 1) // 2
    if dim % BLOCK:
        raise _invalid("%s: a row of %d elements is not whole blocks of 32 (D must be a multiple "
                       "of 32)" % (name, dim))
    return dim // BLOCK * BLOCK_FORMATS[name][1]


def _row_text(name, dim):
    if name == INT4:
        return "(%d + 1) // 2 = %d bytes" % (dim, (dim + 1) // 2)
    bb = BLOCK_FORMATS[name][1]
    return "%d // 32 blocks of %d bytes = %d bytes" % (dim, bb, dim // BLOCK * bb)


def tensor(a, arg, name, dim=None):
    """(hwyattn_tensor, a) describing uint8 array `a` of packed dtype `name`
    in place: its last dimension is the bytes of a row of `dim` elements
    (None: as many as the bytes hold, 2 * bytes for int4). A shape or
    strides that do not fit raise InvalidArgumentError (a ValueError); the
    array is never copied (pages are written in place)."""
    if a.dtype != np.uint8:
        raise TypeError("%s: array dtype %s; %s data is a uint8 array of its bytes (the last "
                        "dimension counting the bytes of a row)" % (arg, a.dtype, name))
    if a.ndim < 1 or a.ndim > 4:
        raise _invalid("%s: rank is %d (shape %s); must be 1..4" % (arg, a.ndim, a.shape))
    nbytes = a.shape[-1]
    if name == INT4:
        per_byte, unit = 2, 1
        if dim is None:
            dim = 2 * nbytes
    else:
        per_byte, unit = None, BLOCK_FORMATS[name][1]
        if dim is None:
            if nbytes % unit:
                raise _invalid("%s: the last dimension is %d bytes, not a whole number of %s "
                               "blocks (%d bytes per 32 elements)" % (arg, nbytes, name, unit))
            dim = nbytes // unit * BLOCK
        elif dim % BLOCK:
            raise _invalid("%s: D = %d is not a multiple of 32 (%s stores blocks of 32 elements)"
                           % (arg, dim, name))
    if dim < 1 or row_bytes(name, dim) != nbytes:
        raise _invalid("%s: the last dimension is %d bytes, but a row of D = %d elements of %s is "
                       "%s (shape %s)" % (arg, nbytes, dim, name, _row_text(name, dim), a.shape))
    strides = []
    for i in range(a.ndim):
        s = a.strides[i]
        if i == a.ndim - 1:
            if s != 1 and nbytes > 1:
                raise _invalid("%s: the bytes of a row must be contiguous (last stride 1 byte), "
                               "got strides %s" % (arg, a.strides))
            strides.append(1)
        elif a.shape[i] == 1:
            strides.append(0)  # any stride: one index
        elif s < 0 or s % unit:
            raise _invalid("%s: stride %d bytes of dimension %d is not a non-negative whole "
                           "number of %s (strides %s)" %
                           (arg, s, i, "bytes" if per_byte else "%d-byte blocks" % unit,
                            a.strides))
        else:
            strides.append(s * per_byte if per_byte else s // unit * BLOCK)
    t = _capi.Tensor()
    t.data = a.ctypes.data
    t.dtype = code(name)
    t.rank = a.ndim
    for i in range(a.ndim):
        t.shape[i] = a.shape[i] if i < a.ndim - 1 else dim
        t.stride[i] = strides[i]
    return t, a


def _f16(b):
    """float64 of the fp16 in the first two bytes of each row of b (the
    machine's byte order)."""
    return np.ascontiguousarray(b[..., 0:2]).view(np.float16)[..., 0].astype(np.float64)


def decode(name, a, dim=None):
    """float64 [..., dim] of uint8 array `a` of packed dtype `name` (its last
    dimension the bytes of a row): the block formats' values d * q (d * q + m
    rounded once to float32 for q4_1 and q5_1, as the kernels load them);
    int4's numbers in [-8, 7], before their scales."""
    a = np.asarray(a)
    lead = a.shape[:-1]
    if name == INT4:
        if dim is None:
            dim = 2 * a.shape[-1]
        lo = (a & 15).astype(np.int16)
        hi = (a >> 4).astype(np.int16)
        x = np.stack([lo, hi], axis=-1).reshape(lead + (2 * a.shape[-1],))[..., :dim]
        return np.where(x >= 8, x - 16, x).astype(np.float64)
    bb = BLOCK_FORMATS[name][1]
    b = np.ascontiguousarray(a).reshape(lead + (a.shape[-1] // bb, bb))
    d = _f16(b)[..., None]
    if name == "q8_0":
        x = d * b[..., 2:].view(np.int8)
    else:
        qs = b[..., bb - 16:].astype(np.int64)
        q = np.concatenate([qs & 15, qs >> 4], axis=-1)  # element j < 16: low nibble of qs[j]
        if name in ("q5_0", "q5_1"):
            h = b[..., bb - 20:bb - 16].astype(np.int64)
            qh = h[..., 0] | h[..., 1] << 8 | h[..., 2] << 16 | h[..., 3] << 24  # little-endian
            q = q | ((qh[..., None] >> np.arange(BLOCK)) & 1) << 4
        if name == "q4_0":
            x = d * (q - 8)
        elif name == "q5_0":
            x = d * (q - 16)
        elif name == "iq4_nl":
            x = d * IQ4_NL_LEVELS[q]
        else:
            x = (d * q + _f16(b[..., 2:4])[..., None]).astype(np.float32).astype(np.float64)
    x = x.reshape(lead + (-1,))
    if dim is not None and dim != x.shape[-1]:
        raise _invalid("%s: %d bytes hold %d elements, not %d" % (name, a.shape[-1], x.shape[-1],
                                                                  dim))
    return x
