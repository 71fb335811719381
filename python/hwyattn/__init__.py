# SPDX-License-Identifier: Apache-2.0
"""hwyattn: portable SIMD CPU attention (Google Highway kernels) from numpy.

A thin ctypes binding of the C library's hwyattn.h; no compiled extension.

    import numpy as np, hwyattn
    q = np.random.rand(1, 8, 128, 64).astype(np.float32)   # [B, H, L, D]
    out = hwyattn.sdpa(q, q, q, causal=True)
    # split-KV: shards of the keys, each with its lse, merged exactly
    k = v = np.random.rand(1, 8, 1024, 64).astype(np.float32)
    (o1, l1), (o2, l2) = (hwyattn.sdpa(q, k[..., :512, :], v[..., :512, :], return_lse=True),
                          hwyattn.sdpa(q, k[..., 512:, :], v[..., 512:, :], return_lse=True))
    out, lse = hwyattn.merge_states([o1, o2], [l1, l2])

    mha = hwyattn.MultiheadAttention.from_torch_state(torch_module.state_dict(), num_heads=8)
    y, w = mha(x, need_weights=True)                          # x: [B, L, E]

The shared library is found through $HWYATTN_LIBRARY (a path to
libhwyattn.so), then the package's own copy (built and installed by `pip
install ./python`), then a build*/ directory above it (a source checkout),
then the system loader. See library_path().

bfloat16 and fp8: numpy arrays of ml_dtypes' bfloat16, float8_e4m3fn and
float8_e5m2 (JAX's, ONNX's) are read in place, and an ml_dtypes.bfloat16 q
gives an ml_dtypes.bfloat16 result; ml_dtypes itself is optional (never
imported unless a bfloat16 result is asked for by name).
"""

from ._capi import (Error, InvalidArgumentError, OutOfMemoryError, UnsupportedError,
                    ABI_VERSION, library_path)
from . import _capi
from ._attention import sdpa
from ._merge import merge_states
from ._mha import MultiheadAttention
from ._kv import KVCache, cache_row_size, kv_attention, kv_cache_write

__all__ = [
    "sdpa", "merge_states", "MultiheadAttention", "KVCache", "kv_attention", "kv_cache_write",
    "cache_row_size", "Error", "InvalidArgumentError", "UnsupportedError",
    "OutOfMemoryError", "version", "abi_version", "simd_target", "set_num_threads",
    "get_num_threads", "library_path", "ABI_VERSION",
]


def version():
    """The C library's version, e.g. "0.4.0"."""
    return _capi.function("hwyattn_version")().decode()


def __getattr__(name):
    # hwyattn.__version__ is the loaded library's version (hwyattn_version()),
    # looked up on first use, so that importing the package loads nothing.
    if name == "__version__":
        return version()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def abi_version():
    """The C library's HWYATTN_ABI_VERSION (this package requires ABI_VERSION)."""
    return int(_capi.function("hwyattn_abi_version")())


def simd_target():
    """The SIMD target the kernels run on: "AVX3", "AVX2", "SSE4", "NEON", ...
    ($HWYATTN_TARGET, read at the first call, caps it)."""
    return _capi.function("hwyattn_simd_target")().decode()


def set_num_threads(n):
    """Threads later calls may use: 1 = the calling thread only, 0 = all cores.
    Process-wide. Results do not depend on it."""
    _capi.check(_capi.function("hwyattn_set_num_threads")(int(n)))


def get_num_threads():
    """Threads later calls may use (0 resolved to the core count)."""
    return int(_capi.function("hwyattn_get_num_threads")())
