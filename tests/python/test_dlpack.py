# SPDX-License-Identifier: Apache-2.0
"""Arrays of other libraries in place: DLPack producers (a hand-built one
here for bfloat16 and fp8, which numpy cannot export; torch when installed)
and __array_interface__ objects, against the same calls on numpy arrays of
the bits (themselves checked against float64 references in test_sdpa.py
and test_kv.py): the same results bit for bit, outputs written into the
producer's memory, every capsule's deleter called once."""

import ctypes
import gc
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import hwyattn  # noqa: E402
from hwyattn import _dlpack  # noqa: E402

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

DELETED = []
LIVE = {}  # address -> (the struct, its shape and strides, the memory): until the deleter


@_dlpack.DELETER
def _deleter(managed):
    address = ctypes.addressof(managed.contents)
    DELETED.append(address)
    del LIVE[address]


class Producer(object):
    """A CPU tensor exported through DLPack: numpy storage `a` (kept
    alive) described as (code, bits); device_type 1 is the CPU."""

    def __init__(self, a, code, bits, device_type=1):
        self.a, self.code, self.bits, self.device_type = a, code, bits, device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        a = self.a
        m = _dlpack.DLManagedTensor()
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        strides = (ctypes.c_int64 * a.ndim)(*[s // a.itemsize for s in a.strides])
        LIVE[ctypes.addressof(m)] = (m, shape, strides, a)  # freed by the consumer's deleter call
        t = m.dl_tensor
        t.data = a.ctypes.data
        t.device.device_type = self.device_type
        t.ndim = a.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = self.code, self.bits, 1
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        m.deleter = _deleter
        return _new_capsule(ctypes.addressof(m), b"dltensor", None)


class Interface(object):
    """An object with only __array_interface__ (written in place)."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


def bf16_bits(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


class DlpackTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.q = bf16_bits(rng.standard_normal((2, 4, 5, 32)))
        self.k = bf16_bits(rng.standard_normal((2, 2, 9, 32)))
        self.v = bf16_bits(rng.standard_normal((2, 2, 9, 32)))
        del DELETED[:]

    def test_bfloat16_inputs_and_output(self):
        want = hwyattn.sdpa(self.q, self.k, self.v, causal=True, input_dtype="bfloat16",
                            out=np.zeros((2, 4, 5, 32), np.uint16), out_dtype="bfloat16")
        out = np.zeros((2, 4, 5, 32), np.uint16)
        po = Producer(out, 4, 16)
        got = hwyattn.sdpa(Producer(self.q, 4, 16), Producer(self.k, 4, 16),
                           Producer(self.v, 4, 16), causal=True, out=po)
        self.assertIs(got, po)
        np.testing.assert_array_equal(out, want)  # written into the producer's memory
        self.assertTrue(np.any(out != 0))
        gc.collect()
        self.assertEqual(len(DELETED), 4)
        self.assertEqual(LIVE, {})

    def test_float32_through_numpy_dlpack(self):
        q = np.random.default_rng(1).standard_normal((1, 2, 3, 16)).astype(np.float32)

        class Wrap(object):  # only numpy's own __dlpack__
            def __init__(self, a):
                self.a = a

            def __dlpack__(self, stream=None):
                return self.a.__dlpack__()

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

        np.testing.assert_array_equal(hwyattn.sdpa(Wrap(q), Wrap(q), Wrap(q)),
                                      hwyattn.sdpa(q, q, q))

    def test_strided_producer(self):
        base = np.zeros((2, 5, 4, 32), np.uint16)
        base[...] = self.q.transpose(0, 2, 1, 3)
        view = base.transpose(0, 2, 1, 3)  # [B, H, L, D] over [B, L, H, D] memory
        want = hwyattn.sdpa(self.q, self.k, self.v, input_dtype="bfloat16")
        got = hwyattn.sdpa(Producer(view, 4, 16), Producer(self.k, 4, 16), Producer(self.v, 4, 16))
        np.testing.assert_array_equal(got, want)

    def test_fp8_cache_and_write(self):
        rng = np.random.default_rng(3)
        pages, hkv, page, d = 3, 2, 4, 16
        k_new = rng.standard_normal((10, hkv, d)).astype(np.float32)
        v_new = rng.standard_normal((10, hkv, d)).astype(np.float32)
        slots = np.arange(10)
        kc = np.zeros((pages, hkv, page, d), np.uint8)
        vc = np.zeros_like(kc)
        hwyattn.kv_cache_write(Producer(kc, 10, 8), Producer(vc, 10, 8), k_new, v_new, slots)
        kw, vw = np.zeros_like(kc), np.zeros_like(vc)
        hwyattn.kv_cache_write(kw, vw, k_new, v_new, slots, cache_dtype="float8_e4m3fn")
        np.testing.assert_array_equal(kc, kw)
        np.testing.assert_array_equal(vc, vw)
        self.assertTrue(np.any(kc != 0))
        q = rng.standard_normal((1, 4, d)).astype(np.float32)
        args = (np.array([0, 1]), np.array([10]))
        bt = np.array([[0, 1, 2]])
        want = hwyattn.kv_attention(q, kw, vw, *args, block_table=bt, cache_dtype="float8_e4m3fn")
        got = hwyattn.kv_attention(q, Producer(kc, 10, 8), Producer(vc, 10, 8), *args,
                                   block_table=bt)
        np.testing.assert_array_equal(got, want)
        e5 = Producer(kc, 12, 8)
        with self.assertRaisesRegex(TypeError, "k_cache and v_cache"):
            hwyattn.kv_attention(q, e5, Producer(vc, 10, 8), *args, block_table=bt)
        with self.assertRaisesRegex(TypeError, "cache_dtype"):
            hwyattn.kv_attention(q, Producer(kc, 10, 8), Producer(vc, 10, 8), *args,
                                 block_table=bt, cache_dtype="float8_e5m2")
        with self.assertRaisesRegex(TypeError, "q: dtype float8_e4m3fn"):
            hwyattn.kv_attention(Producer(kc[0], 10, 8), kw, vw, *args, block_table=bt,
                                 cache_dtype="float8_e4m3fn")

    def test_array_interface_output(self):
        out = np.zeros((2, 4, 5, 32), np.float32)
        want = hwyattn.sdpa(self.q, self.k, self.v, input_dtype="bfloat16")
        hwyattn.sdpa(self.q, self.k, self.v, input_dtype="bfloat16", out=Interface(out))
        np.testing.assert_array_equal(out, want)

    def test_refused(self):
        with self.assertRaisesRegex(hwyattn.InvalidArgumentError, "q: a DLPack tensor on device"):
            hwyattn.sdpa(Producer(self.q, 4, 16, device_type=2), self.k, self.v)
        with self.assertRaisesRegex(TypeError, "k: DLPack dtype \\(code 5, bits 64"):
            hwyattn.sdpa(self.q, Producer(np.zeros((2, 2, 9, 32), np.complex64), 5, 64),
                         self.v, input_dtype="bfloat16")
        out = np.zeros((2, 4, 5, 32), np.uint16)
        with self.assertRaisesRegex(TypeError, "out: a bfloat16 tensor, but out_dtype"):
            hwyattn.sdpa(self.q, self.k, self.v, input_dtype="bfloat16", out=Producer(out, 4, 16),
                         out_dtype="float16")
        gc.collect()
        self.assertEqual(len(DELETED), 2)  # the refused dtype's capsule too
        self.assertFalse(np.any(out))


@unittest.skipUnless(__import__("importlib").util.find_spec("torch"), "torch is not installed")
class TorchTest(unittest.TestCase):
    def test_bfloat16_tensors(self):
        import torch
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 4, 6, 32, generator=g).to(torch.bfloat16) for _ in range(3))
        out = torch.empty(1, 4, 6, 32, dtype=torch.bfloat16)
        got = hwyattn.sdpa(q, k, v, causal=True, out=out)
        self.assertIs(got, out)
        bits = [x.view(torch.int16).numpy().view(np.uint16) for x in (q, k, v)]
        want = hwyattn.sdpa(*bits, causal=True, input_dtype="bfloat16",
                            out=np.zeros((1, 4, 6, 32), np.uint16), out_dtype="bfloat16")
        np.testing.assert_array_equal(out.view(torch.int16).numpy().view(np.uint16), want)


if __name__ == "__main__":
    unittest.main()
