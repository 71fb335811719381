# SPDX-License-Identifier: Apache-2.0
"""Other libraries' arrays, read and written in place: an object with
__dlpack__ (a torch tensor, a JAX or CuPy array on the CPU, ...) becomes a
numpy view of the same memory, with the library's dtype name for the types
numpy lacks (bfloat16, float8_e4m3fn, float8_e5m2: uint16 / uint8 views of
the bits); so does a numpy array of ml_dtypes' types of those names (what
JAX, ONNX and TensorFlow give numpy); an object with __array_interface__
becomes np.asarray's view of it. No copy either way. ml_dtypes is never
imported here: its arrays are recognised by their dtype's type (module
ml_dtypes, name bfloat16 / float8_e4m3fn / float8_e5m2)."""

import ctypes

import numpy as np

from . import _capi
from ._capi import InvalidArgumentError

_K_DL_CPU = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """DLPack's (legacy, unversioned) DLManagedTensor, the struct a
    "dltensor" capsule holds."""


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]

# DLPack (type code, bits) -> (numpy storage dtype, the library's name of a
# dtype numpy lacks, or None).
DTYPES = {
    (0, 8): (np.int8, None), (0, 16): (np.int16, None), (0, 32): (np.int32, None),
    (0, 64): (np.int64, None), (1, 8): (np.uint8, None), (1, 16): (np.uint16, None),
    (1, 32): (np.uint32, None), (1, 64): (np.uint64, None), (2, 16): (np.float16, None),
    (2, 32): (np.float32, None), (2, 64): (np.float64, None), (6, 8): (np.bool_, None),
    (4, 16): (np.uint16, "bfloat16"),         # kDLBfloat
    (10, 8): (np.uint8, "float8_e4m3fn"),     # kDLFloat8_e4m3fn
    (12, 8): (np.uint8, "float8_e5m2"),       # kDLFloat8_e5m2
}

# ml_dtypes' types the library reads: name -> the numpy storage of the bits.
ML_DTYPES = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}


def ml_dtype_name(dtype):
    """'bfloat16', 'float8_e4m3fn' or 'float8_e5m2' when `dtype` (a numpy
    dtype, or a type such as ml_dtypes.bfloat16) is ml_dtypes' type of that
    name; None for anything else (strings included: 'bfloat16' is this
    package's name for uint16 bits). Does not import ml_dtypes."""
    if dtype is None or isinstance(dtype, str):
        return None
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        return None
    t = dt.type
    name = getattr(t, "__name__", "")
    if (getattr(t, "__module__", "").split(".")[0] == "ml_dtypes" and name in ML_DTYPES and
            dt.itemsize == np.dtype(ML_DTYPES[name]).itemsize):
        return name
    return None


def ml_dtype(name):
    """numpy's dtype of ml_dtypes' type `name` (imported here, on demand);
    ImportError saying what needs it when ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("hwyattn: a %s array is returned as an ml_dtypes.%s array, and "
                          "ml_dtypes is not installed (pip install ml_dtypes), or pass out= a "
                          "uint16 array for the bits" % (name, name)) from None
    return np.dtype(getattr(ml_dtypes, name))


def float32_of(a):
    """An ml_dtypes array's values as float32 (exact for all three), other
    arrays as they are."""
    if isinstance(a, np.ndarray) and ml_dtype_name(a.dtype) is not None:
        return a.astype(np.float32)
    return a


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
_USED = ctypes.c_char_p(b"used_dltensor")  # alive as long as the module: capsules keep the pointer


class _Owner(object):
    """The base of a view of a DLPack tensor: calls the producer's deleter
    when the last view is gone."""

    def __init__(self, managed, interface):
        self._managed = managed
        self.__array_interface__ = interface

    def __del__(self):
        m = self._managed
        if m and m.contents.deleter:
            m.contents.deleter(m)
        self._managed = None


def _invalid(message):
    return InvalidArgumentError(message, _capi.INVALID_ARGUMENT)


def _from_dlpack(x, name):
    device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (_K_DL_CPU, 0)
    if int(device[0]) != _K_DL_CPU:
        raise _invalid("%s: a DLPack tensor on device type %d; hwyattn reads CPU memory (type 1) "
                       "only" % (name, int(device[0])))
    capsule = x.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError("%s: __dlpack__ did not return a \"dltensor\" capsule" % name)
    managed = ctypes.cast(_capsule_pointer(capsule, b"dltensor"),
                          ctypes.POINTER(DLManagedTensor))
    # Consumed: the capsule no longer deletes it, the view's owner does.
    _capsule_set_name(capsule, _USED)
    t = managed.contents.dl_tensor
    key = (t.dtype.code, t.dtype.bits)
    if key not in DTYPES or t.dtype.lanes != 1:
        if managed.contents.deleter:
            managed.contents.deleter(managed)
        raise TypeError("%s: DLPack dtype (code %d, bits %d, lanes %d) is not one hwyattn reads; "
                        "float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, integers or bool"
                        % (name, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    storage, dtype_name = DTYPES[key]
    item = np.dtype(storage).itemsize
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * item for i in range(t.ndim))
    interface = {"version": 3, "shape": shape, "strides": strides,
                 "typestr": np.dtype(storage).str,
                 "data": ((t.data or 0) + t.byte_offset, False)}
    return np.asarray(_Owner(managed, interface)), dtype_name


def adapt(x, name):
    """(ndarray, dtype name or None) of x: a numpy array as it is, except
    an ml_dtypes bfloat16 / float8_e4m3fn / float8_e5m2 one: a uint16 /
    uint8 view of its bits and that name; a DLPack producer's memory as a
    numpy view (the name: 'bfloat16' or an fp8 format when numpy has no
    such type); an object with __array_interface__ as np.asarray's view;
    anything else as it is."""
    if isinstance(x, np.ndarray):
        named = ml_dtype_name(x.dtype)
        if named is not None:
            return x.view(ML_DTYPES[named]), named
        return x, None
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x, name)
    if hasattr(x, "__array_interface__"):
        return np.asarray(x), None
    return x, None
