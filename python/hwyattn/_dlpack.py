# SPDX-License-Identifier: Apache-2.0
"""Other libraries' arrays, read and written in place: an object with
__dlpack__ (a torch tensor, a JAX or CuPy array on the CPU, ...) becomes a
numpy view of the same memory, with the library's dtype name for the types
numpy lacks (bfloat16, float8_e4m3fn, float8_e5m2: uint16 / uint8 views of
the bits); an object with __array_interface__ becomes np.asarray's view of
it. No copy either way."""

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
    """(ndarray, dtype name or None) of x: a numpy array as it is; a DLPack
    producer's memory as a numpy view (the name: 'bfloat16' or an fp8
    format when numpy has no such type); an object with
    __array_interface__ as np.asarray's view; anything else as it is."""
    if isinstance(x, np.ndarray):
        return x, None
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x, name)
    if hasattr(x, "__array_interface__"):
        return np.asarray(x), None
    return x, None
