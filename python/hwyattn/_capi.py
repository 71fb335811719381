# SPDX-License-Identifier: Apache-2.0
"""The ctypes layer: finding libhwyattn, the structs of hwyattn.h, errors.

Everything here mirrors include/hwyattn.h exactly. If the header changes a
struct or an enum, HWYATTN_ABI_VERSION changes with it, and load() refuses a
library whose hwyattn_abi_version() is not ABI_VERSION below.
"""

import ctypes
import ctypes.util
import glob
import os
import threading

# The HWYATTN_ABI_VERSION this module was written against.
ABI_VERSION = 1

# hwyattn_status
OK = 0
INVALID_ARGUMENT = 1
UNSUPPORTED = 2
OUT_OF_MEMORY = 3
INTERNAL_ERROR = 4

# hwyattn_dtype
F32 = 0
F16 = 1
BF16 = 2
BOOL = 3
I8 = 4
F8E4M3 = 5
F8E5M2 = 6
# ggml's block formats (llama.cpp's -ctk / -ctv cache types) and int4
Q8_0 = 7
Q4_0 = 8
Q4_1 = 9
Q5_0 = 10
Q5_1 = 11
IQ4_NL = 12
I4 = 13

# hwyattn_causal
CAUSAL_NONE = 0
CAUSAL_TOP_LEFT = 1
CAUSAL_BOTTOM_RIGHT = 2
PRECISION_F32 = 0
PRECISION_BF16 = 1
PRECISION_INT8 = 2

# C enums are int-sized on every ABI hwyattn targets.
_enum = ctypes.c_int


class Tensor(ctypes.Structure):
    """hwyattn_tensor."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", _enum),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * 4),
        ("stride", ctypes.c_int64 * 4),
    ]


class SdpaOptions(ctypes.Structure):
    """hwyattn_sdpa_options."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("scale", ctypes.c_float),
        ("causal", _enum),
        ("mask", ctypes.POINTER(Tensor)),
        ("kv_len", ctypes.POINTER(ctypes.c_int32)),
        ("weights", ctypes.POINTER(Tensor)),
        ("lse", ctypes.POINTER(Tensor)),
        # 0.2
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.POINTER(ctypes.c_float)),
        ("sinks", ctypes.POINTER(ctypes.c_float)),
        ("parallel", ctypes.c_void_p),
        ("precision", _enum),
        ("reserved0", ctypes.c_int32),
    ]


class MhaConfig(ctypes.Structure):
    """hwyattn_mha_config."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("embed_dim", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("kdim", ctypes.c_int64),
        ("vdim", ctypes.c_int64),
        ("has_bias", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        # 0.2
        ("weight_dtype", _enum),
        ("reserved1", ctypes.c_int32),
    ]


_float_p = ctypes.POINTER(ctypes.c_float)


class KvCache(ctypes.Structure):
    """hwyattn_kv_cache."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved0", ctypes.c_int32),
        ("k", Tensor),
        ("v", Tensor),
        ("k_scale", ctypes.POINTER(Tensor)),
        ("v_scale", ctypes.POINTER(Tensor)),
        ("block_table", ctypes.POINTER(ctypes.c_int32)),
        ("block_table_stride", ctypes.c_int64),
    ]


class KvBatch(ctypes.Structure):
    """hwyattn_kv_batch."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_seqs", ctypes.c_int32),
        ("q_start", ctypes.POINTER(ctypes.c_int32)),
        ("kv_len", ctypes.POINTER(ctypes.c_int32)),
        ("q_pos", ctypes.POINTER(ctypes.c_int32)),
    ]


class MhaWeights(ctypes.Structure):
    """hwyattn_mha_weights."""

    _fields_ = [(name, _float_p) for name in
                ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")]


class Error(RuntimeError):
    """A call into hwyattn failed. `status` is the hwyattn_status code and the
    message carries hwyattn_last_error(), which names the argument and value."""

    def __init__(self, message, status=INTERNAL_ERROR):
        super().__init__(message)
        self.status = status


class InvalidArgumentError(Error, ValueError):
    """HWYATTN_INVALID_ARGUMENT: a bad shape, stride, dtype or value."""


class UnsupportedError(Error):
    """HWYATTN_UNSUPPORTED: a valid request this build of the library cannot do."""


class OutOfMemoryError(Error, MemoryError):
    """HWYATTN_OUT_OF_MEMORY."""


_ERROR_CLASSES = {
    INVALID_ARGUMENT: InvalidArgumentError,
    UNSUPPORTED: UnsupportedError,
    OUT_OF_MEMORY: OutOfMemoryError,
}


def make_error(status, detail):
    """The exception for a status, with `detail` as the message."""
    cls = _ERROR_CLASSES.get(status, Error)
    return cls(detail, status)


# --------------------------------------------------------------------------
# Finding and loading the shared library
# --------------------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """(description, path) pairs in the documented search order."""
    env = os.environ.get("HWYATTN_LIBRARY")
    if env:
        # An explicit choice: never fall back silently to another library.
        return [("HWYATTN_LIBRARY", env)]
    found = []
    # 1. The package's own: the libhwyattn.so.1 that `pip install ./python`
    #    builds and ships in the wheel, or a copy placed here by hand. Before
    #    any build tree or system library, so an installed package runs the
    #    library it was built with.
    for pattern in ("libhwyattn.so", "libhwyattn.so.*", "libhwyattn.dylib", "hwyattn.dll"):
        for p in sorted(glob.glob(os.path.join(_PACKAGE_DIR, pattern))):
            found.append(("package directory", p))
    # 2. A build tree: walk up from the package looking for build*/libhwyattn.so,
    #    newest first (a developer's checkout with several build directories).
    build_libs = []
    d = _PACKAGE_DIR
    for _ in range(4):
        parent = os.path.dirname(d)
        for p in glob.glob(os.path.join(parent, "build*", "libhwyattn.so")):
            if os.path.isfile(p):
                build_libs.append(p)
        if build_libs or parent == d:
            break
        d = parent
    build_libs.sort(key=os.path.getmtime, reverse=True)
    found += [("build tree", p) for p in build_libs]
    # 3. The system loader (an installed library, LD_LIBRARY_PATH, ...).
    name = ctypes.util.find_library("hwyattn")
    if name:
        found.append(("system", name))
    found.append(("system", "libhwyattn.so.1"))
    return found


_lock = threading.Lock()
_lib = None
_lib_path = None


def _declare(lib):
    c = ctypes
    P = c.POINTER
    sigs = {
        "hwyattn_abi_version": (c.c_uint32, []),
        "hwyattn_version": (c.c_char_p, []),
        "hwyattn_status_string": (c.c_char_p, [_enum]),
        "hwyattn_last_error": (c.c_char_p, []),
        "hwyattn_simd_target": (c.c_char_p, []),
        "hwyattn_set_num_threads": (_enum, [c.c_int]),
        "hwyattn_get_num_threads": (c.c_int, []),
        "hwyattn_tensor_contiguous": (_enum, [P(Tensor), c.c_void_p, _enum, c.c_int32,
                                             P(c.c_int64)]),
        "hwyattn_sdpa_options_init_sized": (None, [P(SdpaOptions), c.c_size_t]),
        "hwyattn_sdpa": (_enum, [P(Tensor), P(Tensor), P(Tensor), P(Tensor), P(SdpaOptions)]),
        "hwyattn_merge_states": (_enum, [c.c_int32, P(P(Tensor)), P(P(Tensor)), P(c.c_float),
                                         P(Tensor), P(Tensor)]),
        # The KV-cache interface (bound if the library has it).
        "hwyattn_kv_cache_init_sized": (None, [P(KvCache), c.c_size_t]),
        "hwyattn_kv_batch_init_sized": (None, [P(KvBatch), c.c_size_t]),
        "hwyattn_kv_attention": (_enum, [P(Tensor), P(KvCache), P(KvBatch), P(Tensor),
                                         P(SdpaOptions)]),
        "hwyattn_kv_cache_write": (_enum, [P(KvCache), P(Tensor), P(Tensor), P(c.c_int64),
                                           P(SdpaOptions)]),
        # The multi-head attention module (bound if the library has it).
        "hwyattn_mha_config_init_sized": (None, [P(MhaConfig), c.c_size_t]),
        "hwyattn_mha_create": (_enum, [P(MhaConfig), P(MhaWeights), P(c.c_void_p)]),
        "hwyattn_mha_destroy": (None, [c.c_void_p]),
        "hwyattn_mha_forward": (_enum, [c.c_void_p, P(Tensor), P(Tensor), P(Tensor), P(Tensor),
                                        P(SdpaOptions)]),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            continue  # checked where it is used: see function()
        f.restype = restype
        f.argtypes = argtypes


def load():
    """The loaded library (a ctypes.CDLL), loading it on first use.

    Search order: $HWYATTN_LIBRARY (alone: if set, nothing else is tried);
    libhwyattn.so* in this package's directory (the one `pip install
    ./python` builds and installs there); a build*/libhwyattn.so found by
    walking up from the package (newest first: a source checkout, e.g.
    PYTHONPATH=python or an editable install); the system loader. Raises
    ImportError if none loads or if its ABI version is not the one this
    package was written for.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for where, path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s): %s" % (path, where, e))
                continue
            try:
                abi = lib.hwyattn_abi_version
            except AttributeError:
                tried.append("%s (%s): no hwyattn_abi_version; not libhwyattn" % (path, where))
                continue
            abi.restype = ctypes.c_uint32
            abi.argtypes = []
            got = abi()
            if got != ABI_VERSION:
                raise ImportError(
                    "hwyattn: %s has ABI version %d but this Python package needs %d; "
                    "install matching versions" % (path, got, ABI_VERSION))
            _declare(lib)
            _lib, _lib_path = lib, getattr(lib, "_name", path)
            return _lib
        raise ImportError(
            "hwyattn: cannot find libhwyattn. Set HWYATTN_LIBRARY to the path of "
            "libhwyattn.so, or install the library where the system loader finds it. Tried:\n  "
            + "\n  ".join(tried))


def library_path():
    """The path (or loader name) of the library in use."""
    load()
    return _lib_path


def function(name):
    """A bound C function; Error(UNSUPPORTED) if this library lacks it."""
    lib = load()
    try:
        return getattr(lib, name)
    except AttributeError:
        raise UnsupportedError(
            "%s is not exported by %s (a library older than this Python package?)"
            % (name, _lib_path), UNSUPPORTED) from None


def check(status):
    """Raises the matching Error unless status is HWYATTN_OK."""
    if status != OK:
        lib = load()
        detail = lib.hwyattn_last_error().decode("utf-8", "replace")
        if not detail:
            detail = lib.hwyattn_status_string(status).decode("utf-8", "replace")
        raise make_error(status, detail)


def init_struct(name, struct):
    """Initialises an extensible struct through the library's sized init
    (e.g. init_struct("hwyattn_sdpa_options", o)): zeroes exactly
    ctypes.sizeof(struct) bytes and sets struct_size."""
    function(name + "_init_sized")(ctypes.byref(struct), ctypes.sizeof(struct))
