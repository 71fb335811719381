# SPDX-License-Identifier: Apache-2.0
"""hwyattn.sdpa and the runtime functions against the float64 oracle."""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from reference import TOLERANCE, rel_err, sdpa_ref
import hwyattn
from hwyattn import _capi
from hwyattn._attention import tensor


def rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


class SdpaTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(1234)

    def check(self, got, ref, what="out"):
        err = rel_err(got, ref)
        self.assertLess(err, TOLERANCE, "%s: max|err|/max|ref| = %g" % (what, err))

    def qkv(self, B=2, Hq=3, Hkv=3, Lq=5, Lk=7, D=8, Dv=6):
        r = self.rng
        return rand(r, B, Hq, Lq, D), rand(r, B, Hkv, Lk, D), rand(r, B, Hkv, Lk, Dv)

    def test_basic_cross_attention(self):
        q, k, v = self.qkv()
        out = hwyattn.sdpa(q, k, v)
        self.assertEqual(out.shape, (2, 3, 5, 6))
        self.assertEqual(out.dtype, np.float32)
        self.check(out, sdpa_ref(q, k, v)[0])

    def test_scale(self):
        q, k, v = self.qkv()
        for scale in (1.0, 0.25, 2.0):
            self.check(hwyattn.sdpa(q, k, v, scale=scale), sdpa_ref(q, k, v, scale=scale)[0])

    def test_causal_kinds(self):
        for Lq, Lk in ((6, 6), (3, 8), (8, 3)):
            q, k, v = self.qkv(Lq=Lq, Lk=Lk)
            for causal in (True, "top_left", "bottom_right"):
                out, w, lse = hwyattn.sdpa(q, k, v, causal=causal, return_weights=True,
                                           return_lse=True)
                ro, rw, rl = sdpa_ref(q, k, v, causal=causal)
                what = "causal=%s Lq=%d Lk=%d" % (causal, Lq, Lk)
                self.check(out, ro, what)
                self.check(w, rw, what + " weights")
                self.check(lse, rl, what + " lse")
        # bottom_right with Lq > Lk blocks the first rows entirely: zeros, lse -inf.
        q, k, v = self.qkv(Lq=8, Lk=3)
        out, lse = hwyattn.sdpa(q, k, v, causal="bottom_right", return_lse=True)
        self.assertTrue(np.all(out[:, :, :5] == 0))
        self.assertTrue(np.all(np.isneginf(lse[:, :, :5])))

    def test_causal_false_and_strings(self):
        q, k, v = self.qkv()
        self.check(hwyattn.sdpa(q, k, v, causal=False), sdpa_ref(q, k, v)[0])
        self.check(hwyattn.sdpa(q, k, v, causal="none"), sdpa_ref(q, k, v)[0])
        self.check(hwyattn.sdpa(q, k, v, causal="BOTTOM_RIGHT"),
                   sdpa_ref(q, k, v, causal="bottom_right")[0])

    def test_bool_mask(self):
        q, k, v = self.qkv()
        for shape in ((5, 7), (2, 1, 5, 7), (2, 3, 5, 7), (1, 3, 1, 7)):
            mask = self.rng.random(shape) < 0.7
            out, w = hwyattn.sdpa(q, k, v, mask=mask, return_weights=True)
            ro, rw, _ = sdpa_ref(q, k, v, mask=mask)
            self.check(out, ro, "bool mask %s" % (shape,))
            self.check(w, rw, "bool mask %s weights" % (shape,))

    def test_float_mask(self):
        q, k, v = self.qkv()
        mask = self.rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
        mask[0, 0, 0, :3] = -np.inf
        self.check(hwyattn.sdpa(q, k, v, mask=mask), sdpa_ref(q, k, v, mask=mask)[0])
        # float64 masks are converted; broadcast_to views (stride 0) pass through.
        m2 = np.broadcast_to(self.rng.standard_normal((1, 1, 1, 7)), (2, 3, 5, 7))
        self.check(hwyattn.sdpa(q, k, v, mask=m2), sdpa_ref(q, k, v, mask=m2)[0])

    def test_float16_mask(self):
        # Read in place as F16 (ggml's KQ mask): the same result as the mask's
        # float16 values widened; strided (a column slice) and broadcast too.
        q, k, v = self.qkv()
        mask = self.rng.standard_normal((2, 1, 5, 9)).astype(np.float16)[..., :7]
        mask[0, 0, 1, 2:] = -np.inf
        mask[1, 0, 4, :] = -np.inf  # a fully blocked row: zeros
        out = hwyattn.sdpa(q, k, v, mask=mask)
        self.check(out, sdpa_ref(q, k, v, mask=mask.astype(np.float64))[0])
        self.assertTrue(np.all(out[1, :, 4] == 0))

    def test_mask_with_causal_and_kv_len(self):
        q, k, v = self.qkv(Lq=6, Lk=6)
        mask = self.rng.random((6, 6)) < 0.8
        kv_len = [4, 6]
        out, w = hwyattn.sdpa(q, k, v, mask=mask, causal=True, kv_len=kv_len,
                              return_weights=True)
        ro, rw, _ = sdpa_ref(q, k, v, mask=mask, causal=True, kv_len=kv_len)
        self.check(out, ro)
        self.check(w, rw, "weights")

    def test_kv_len(self):
        q, k, v = self.qkv(B=3)
        for kv_len in ([7, 3, 1], np.array([0, 7, 5], np.int64), (2, 2, 2)):
            out, w, lse = hwyattn.sdpa(q, k, v, kv_len=kv_len, return_weights=True,
                                       return_lse=True)
            ro, rw, rl = sdpa_ref(q, k, v, kv_len=kv_len)
            self.check(out, ro, "kv_len=%s" % (list(kv_len),))
            self.check(w, rw, "kv_len weights")
            self.check(lse, rl, "kv_len lse")

    def test_gqa_and_mqa(self):
        for Hq, Hkv in ((6, 2), (4, 1), (8, 4)):
            q, k, v = self.qkv(Hq=Hq, Hkv=Hkv)
            out, w = hwyattn.sdpa(q, k, v, causal="bottom_right", return_weights=True)
            ro, rw, _ = sdpa_ref(q, k, v, causal="bottom_right")
            self.check(out, ro, "GQA %d/%d" % (Hq, Hkv))
            self.check(w, rw, "GQA %d/%d weights" % (Hq, Hkv))

    def test_weights_and_lse_outputs(self):
        q, k, v = self.qkv()
        ro, rw, rl = sdpa_ref(q, k, v)
        res = hwyattn.sdpa(q, k, v, return_weights=True)
        self.assertIsInstance(res, tuple)
        self.assertEqual(len(res), 2)
        self.check(res[1], rw, "weights")
        np.testing.assert_allclose(res[1].sum(-1), 1.0, rtol=1e-5)
        res = hwyattn.sdpa(q, k, v, return_lse=True)
        self.assertEqual(len(res), 2)
        self.assertEqual(res[1].shape, (2, 3, 5))
        self.check(res[1], rl, "lse")
        out, w, lse = hwyattn.sdpa(q, k, v, return_weights=True, return_lse=True)
        self.check(out, ro)
        self.check(w, rw, "weights")
        self.check(lse, rl, "lse")

    def test_strided_views(self):
        r = self.rng
        # [B, L, H, D] memory seen as [B, H, L, D]: no copy needed.
        qm, km, vm = rand(r, 2, 5, 3, 8), rand(r, 2, 7, 3, 8), rand(r, 2, 7, 3, 4)
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (qm, km, vm))
        self.assertFalse(q.flags.c_contiguous)
        self.check(hwyattn.sdpa(q, k, v), sdpa_ref(q, k, v)[0])
        # Every-other-element slices and a batch broadcast by stride 0.
        big = rand(r, 2, 3, 10, 16)
        q2 = big[:, :, ::2, ::2]
        k2 = np.broadcast_to(rand(r, 1, 3, 7, 8), (2, 3, 7, 8))
        v2 = rand(r, 1, 3, 7, 5)  # batch 1 shared by q's two batches
        self.check(hwyattn.sdpa(q2, k2, v2), sdpa_ref(q2, k2, v2)[0])
        # Negative strides are copied first (the library takes strides >= 0).
        q3 = q[:, :, ::-1]
        self.check(hwyattn.sdpa(q3, k, v), sdpa_ref(q3, k, v)[0])

    def test_float16_and_float64_inputs(self):
        q, k, v = self.qkv()
        q16, k16, v16 = (x.astype(np.float16) for x in (q, k, v))
        out = hwyattn.sdpa(q16, k16, v16)
        self.assertEqual(out.dtype, np.float32)
        # The f16 values are exact in float64: the oracle sees the same inputs.
        self.check(out, sdpa_ref(q16, k16, v16)[0], "float16")
        # Mixed float16 K/V cache with a float32 query.
        self.check(hwyattn.sdpa(q, k16, v16), sdpa_ref(q, k16, v16)[0], "mixed")
        q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
        self.check(hwyattn.sdpa(q64, k64, v64), sdpa_ref(q, k, v)[0], "float64")

    def test_lower_ranks(self):
        r = self.rng
        q, k, v = rand(r, 5, 8), rand(r, 7, 8), rand(r, 7, 3)
        out, w, lse = hwyattn.sdpa(q, k, v, causal="bottom_right", return_weights=True,
                                   return_lse=True)
        self.assertEqual((out.shape, w.shape, lse.shape), ((5, 3), (5, 7), (5,)))
        ro, rw, rl = sdpa_ref(q, k, v, causal="bottom_right")
        self.check(out, ro[0, 0])
        self.check(w, rw[0, 0], "weights")
        self.check(lse, rl[0, 0], "lse")
        q, k, v = rand(r, 4, 5, 8), rand(r, 2, 7, 8), rand(r, 2, 7, 3)  # [H, L, D], GQA
        out = hwyattn.sdpa(q, k, v)
        self.assertEqual(out.shape, (4, 5, 3))
        self.check(out, sdpa_ref(q, k, v)[0][0])

    def test_thread_count_does_not_change_results(self):
        q, k, v = self.qkv(B=2, Hq=4, Hkv=4, Lq=64, Lk=96, D=32, Dv=32)
        before = hwyattn.get_num_threads()
        try:
            hwyattn.set_num_threads(1)
            self.assertEqual(hwyattn.get_num_threads(), 1)
            one = hwyattn.sdpa(q, k, v, causal=True)
            hwyattn.set_num_threads(2)
            two = hwyattn.sdpa(q, k, v, causal=True)
        finally:
            hwyattn.set_num_threads(before)
        np.testing.assert_array_equal(one, two)
        self.check(one, sdpa_ref(q, k, v, causal=True)[0])


def bf16_bits(x):
    """float32 -> bfloat16 bits, nearest even (the test's own rounding)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


class OutAndPrecisionTest(unittest.TestCase):
    """out= (in place, any dtype, strided) and precision= of sdpa and
    kv_attention."""

    def setUp(self):
        self.rng = np.random.default_rng(77)

    def test_out_in_place_every_dtype(self):
        q = rand(self.rng, 2, 4, 70, 32)
        k = rand(self.rng, 2, 2, 90, 32)
        v = rand(self.rng, 2, 2, 90, 24)
        want = hwyattn.sdpa(q, k, v, causal="bottom_right")
        buf = np.full((2, 70, 4, 24), -7.0, np.float32)  # [B, L, H, Dv] memory
        got = hwyattn.sdpa(q, k, v, causal="bottom_right", out=buf.transpose(0, 2, 1, 3))
        self.assertIs(got.base, buf)
        np.testing.assert_array_equal(buf.transpose(0, 2, 1, 3), want)
        half = np.empty(want.shape, np.float16)
        hwyattn.sdpa(q, k, v, causal="bottom_right", out=half)
        np.testing.assert_array_equal(half, want.astype(np.float16))  # numpy rounds to nearest even
        bits = np.empty(want.shape, np.uint16)
        hwyattn.sdpa(q, k, v, causal="bottom_right", out=bits, out_dtype="bfloat16")
        np.testing.assert_array_equal(bits, bf16_bits(want))

    def test_out_errors(self):
        q = rand(self.rng, 1, 2, 3, 8)
        with self.assertRaises(hwyattn.InvalidArgumentError):
            hwyattn.sdpa(q, q, q, out=np.empty((1, 2, 3, 7), np.float32))
        with self.assertRaises(TypeError):
            hwyattn.sdpa(q, q, q, out=np.empty((1, 2, 3, 8), np.float64))
        with self.assertRaises(TypeError):  # bfloat16 bits need the name
            hwyattn.sdpa(q, q, q, out=np.empty((1, 2, 3, 8), np.uint16))
        ro = np.empty((1, 2, 3, 8), np.float32)
        ro.flags.writeable = False
        with self.assertRaises(TypeError):
            hwyattn.sdpa(q, q, q, out=ro)
        with self.assertRaises(hwyattn.InvalidArgumentError):
            hwyattn.sdpa(q, q, q, precision="int4")

    def test_bf16_precision(self):
        q = rand(self.rng, 1, 4, 50, 64)
        k = rand(self.rng, 1, 4, 200, 64)
        v = rand(self.rng, 1, 4, 200, 64)
        got = hwyattn.sdpa(q, k, v, causal=True, precision="bf16")
        rounded = [bf16_bits(x).astype(np.uint32) << 16 for x in (q, k, v)]
        qr, kr, vr = (r.view(np.float32) for r in rounded)
        want = sdpa_ref(qr, kr, vr, causal=True)[0]
        # P is rounded to bf16 too: within 2^-9 max|v| (the header's bound).
        self.assertLess(np.abs(got - want).max(), np.abs(vr).max() / 512 * 1.01 + 1e-5)
        self.assertGreater(np.abs(got - sdpa_ref(q, k, v, causal=True)[0]).max(), 1e-6)

    def test_bfloat16_inputs(self):
        q = rand(self.rng, 1, 2, 9, 16)
        k = rand(self.rng, 1, 2, 30, 16)
        v = rand(self.rng, 1, 2, 30, 16)
        bits = [bf16_bits(x) for x in (q, k, v)]
        got = hwyattn.sdpa(*bits, causal=True, input_dtype="bfloat16")
        values = [(b.astype(np.uint32) << 16).view(np.float32) for b in bits]
        self.assertLess(rel_err(got, sdpa_ref(*values, causal=True)[0]), TOLERANCE)
        with self.assertRaises(hwyattn.InvalidArgumentError):
            hwyattn.sdpa(*bits, input_dtype="float8")

    def test_kv_attention_out_and_precision(self):
        cache = hwyattn.KVCache(4, 16, 2, 32, dtype="bfloat16")
        k = rand(self.rng, 40, 2, 32)
        v = rand(self.rng, 40, 2, 32)
        cache.write(k, v, np.arange(40))
        q = rand(self.rng, 2, 4, 32)
        table = np.array([[0, 1], [2, -1]], np.int32)
        want = cache.attend(q, [0, 1, 2], [30, 10], table)
        half = np.empty(want.shape, np.float16)
        got = cache.attend(q, [0, 1, 2], [30, 10], table, out=half)
        self.assertIs(got, half)
        np.testing.assert_array_equal(half, want.astype(np.float16))
        b = cache.attend(q, [0, 1, 2], [30, 10], table, precision="bf16")
        self.assertLess(np.abs(b - want).max(), 0.01)


class SdpaErrorTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.q = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)
        self.k = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
        self.v = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)

    def assertInvalid(self, pattern, fn, *args, **kwargs):
        with self.assertRaises(hwyattn.Error) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertIsInstance(e, hwyattn.InvalidArgumentError)
        self.assertIsInstance(e, ValueError)
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.status, 1)
        self.assertRegex(str(e), pattern)
        return e

    def test_head_dim_mismatch_carries_library_message(self):
        e = self.assertInvalid(r"k: head_dim \(shape\[3\]\) is 4 but q's head_dim is 8",
                               hwyattn.sdpa, self.q, self.k[..., :4], self.v)
        # The same text as hwyattn_last_error().
        self.assertEqual(str(e), _capi.load().hwyattn_last_error().decode())

    def test_bad_shapes(self):
        self.assertInvalid(r"does not divide", hwyattn.sdpa, self.q, self.k[:, :1].repeat(3, 1),
                           self.v[:, :1].repeat(3, 1))
        self.assertInvalid(r"v: length", hwyattn.sdpa, self.q, self.k, self.v[:, :, :5])
        self.assertInvalid(r"mask", hwyattn.sdpa, self.q, self.k, self.v,
                           mask=np.ones((5, 5), bool))
        self.assertInvalid(r"rank", hwyattn.sdpa, self.q[None], self.k, self.v)

    def test_bad_options(self):
        self.assertInvalid(r"kv_len\[1\] is 7", hwyattn.sdpa, self.q, self.k, self.v,
                           kv_len=[6, 7])
        self.assertInvalid(r"kv_len: shape", hwyattn.sdpa, self.q, self.k, self.v, kv_len=[3])
        self.assertInvalid(r"causal", hwyattn.sdpa, self.q, self.k, self.v, causal="diagonal")
        self.assertInvalid(r"scale", hwyattn.sdpa, self.q, self.k, self.v, scale=float("inf"))
        with self.assertRaises(TypeError):
            hwyattn.sdpa(self.q, self.k, self.v, mask=np.array([["a"]]))

    def test_explicit_zero_scale_is_refused(self):
        # PyTorch's scale=0.0 means uniform weights; the C ABI reads 0 as
        # 1/sqrt(D). Passing it on would silently give the default-scale
        # result, so an explicit zero (either sign) is an error that says why.
        for zero in (0.0, -0.0, 0, np.float32(0.0)):
            e = self.assertInvalid(r"scale is .*0.*C ABI reads scale 0 as the default "
                                   r"1/sqrt\(head_dim\).*PyTorch.*uniform weights",
                                   hwyattn.sdpa, self.q, self.k, self.v, scale=zero)
            self.assertIn("scale=None", str(e))
        # None is the default, 1/sqrt(D), against the float64 oracle.
        out = hwyattn.sdpa(self.q, self.k, self.v, scale=None)
        ref = sdpa_ref(self.q, self.k, self.v, scale=1.0 / np.sqrt(8))[0]
        self.assertLess(rel_err(out, ref), TOLERANCE)
        # The workaround the message suggests: a tiny scale gives uniform
        # weights, i.e. each output row is the mean of its head's values.
        out = hwyattn.sdpa(self.q, self.k, self.v, scale=1e-30)
        mean = self.v.astype(np.float64).mean(axis=2, keepdims=True)  # [B, Hkv, 1, Dv]
        ref = np.broadcast_to(np.repeat(mean, 2, axis=1), out.shape)
        self.assertLess(rel_err(out, ref), TOLERANCE)

    def test_mha_explicit_zero_scale_is_refused(self):
        m = hwyattn.MultiheadAttention(16, 2, seed=3)
        x = np.random.default_rng(5).standard_normal((1, 4, 16)).astype(np.float32)
        self.assertInvalid(r"scale is 0.0.*uniform weights", m, x, scale=0.0)
        m.close()

    def test_set_num_threads_negative(self):
        self.assertInvalid(r"n: -1", hwyattn.set_num_threads, -1)


class RuntimeTest(unittest.TestCase):
    def test_versions(self):
        self.assertRegex(hwyattn.version(), r"^\d+\.\d+\.\d+$")
        # One home for the version: the package's is the loaded library's.
        self.assertEqual(hwyattn.__version__, hwyattn.version())
        self.assertEqual(hwyattn.abi_version(), 1)
        self.assertEqual(hwyattn.abi_version(), hwyattn.ABI_VERSION)
        self.assertIn(hwyattn.simd_target(), {"AVX3_BF16", "AVX3", "AVX3_ZEN4", "AVX3_DL", "AVX2", "SSE4",
                                              "SSSE3", "EMU128", "SCALAR", "NEON", "NEON_BF16", "SVE",
                                              "SVE_BF16", "SVE2", "SVE2_BF16", "SVE_256", "SVE_256_BF16",
                                              "SVE2_128", "SVE2_128_BF16", "WASM", "RVV", "PPC8", "PPC9",
                                              "PPC10"})
        self.assertTrue(os.path.exists(hwyattn.library_path()) or
                        "libhwyattn" in hwyattn.library_path())
        self.assertGreaterEqual(hwyattn.get_num_threads(), 1)

    def test_env_library_is_used(self):
        want = os.environ.get("HWYATTN_LIBRARY")
        if not want:
            self.skipTest("HWYATTN_LIBRARY is not set")
        self.assertEqual(os.path.realpath(hwyattn.library_path()), os.path.realpath(want))

    def test_struct_sizes(self):
        self.assertEqual(ctypes.sizeof(_capi.Tensor), 80)
        self.assertEqual(ctypes.sizeof(_capi.SdpaOptions), 104)
        self.assertEqual(ctypes.sizeof(_capi.MhaConfig), 72)  # 0.2: weight_dtype, reserved1
        self.assertEqual(ctypes.sizeof(_capi.MhaWeights), 64)
        # The options struct the library initialises has our struct_size.
        o = _capi.SdpaOptions()
        _capi.init_struct("hwyattn_sdpa_options", o)
        self.assertEqual(o.struct_size, ctypes.sizeof(_capi.SdpaOptions))

    def test_old_struct_sizes(self):
        """A 0.1-sized struct with guard bytes after it: the 0.1 init symbols
        (what a binary built against 0.1 calls) write only its bytes, and the
        struct still works in every entry point that takes it."""
        lib = _capi.load()
        guard = b"\xa5" * 64
        for symbol, size in (("hwyattn_sdpa_options_init", 48),
                             ("hwyattn_mha_config_init", 64)):
            buf = ctypes.create_string_buffer(b"\xcd" * size + guard)
            init = getattr(lib, symbol)
            init.restype = None
            init.argtypes = [ctypes.c_void_p]
            init(buf)
            self.assertEqual(buf.raw[size:size + 64], guard, symbol)
            self.assertEqual(int.from_bytes(buf.raw[:4], "little"), size, symbol)
            self.assertEqual(buf.raw[4:size], bytes(size - 4), symbol)
        # The sized init of a 0.2 struct leaves what follows it alone, too.
        buf = ctypes.create_string_buffer(b"\xcd" * 104 + guard)
        lib.hwyattn_sdpa_options_init_sized(ctypes.cast(buf, ctypes.POINTER(_capi.SdpaOptions)),
                                            104)
        self.assertEqual(buf.raw[104:168], guard)

        # 0.1 options (48 bytes, causal set) give the same bits as 0.2 ones.
        class Options01(ctypes.Structure):
            _fields_ = _capi.SdpaOptions._fields_[:7]
        self.assertEqual(ctypes.sizeof(Options01), 48)
        rng = np.random.default_rng(5)
        q, k, v = (rng.standard_normal((1, 2, 5, 8)).astype(np.float32) for _ in range(3))
        tensors = [tensor(a, "x")[0] for a in (q, k, v)]
        results = []
        for cls in (Options01, _capi.SdpaOptions):
            o = cls()
            o.struct_size = ctypes.sizeof(cls)
            o.causal = 1
            out = np.zeros((1, 2, 5, 8), np.float32)
            to = tensor(out, "out")[0]
            _capi.check(lib.hwyattn_sdpa(*[ctypes.byref(t) for t in tensors], ctypes.byref(to),
                                         ctypes.cast(ctypes.byref(o),
                                                     ctypes.POINTER(_capi.SdpaOptions))))
            results.append(out)
        np.testing.assert_array_equal(results[0], results[1])
        np.testing.assert_allclose(results[1], hwyattn.sdpa(q, k, v, causal=True), rtol=0,
                                   atol=0)

    def test_struct_layout_matches_c_compiler(self):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        header = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "include")
        if not cc or not os.path.exists(os.path.join(header, "hwyattn.h")):
            self.skipTest("no C compiler or no include/hwyattn.h")
        fields = {
            "hwyattn_tensor": (_capi.Tensor, ["data", "dtype", "rank", "shape", "stride"]),
            "hwyattn_sdpa_options": (_capi.SdpaOptions,
                                     [f[0] for f in _capi.SdpaOptions._fields_]),
            "hwyattn_mha_config": (_capi.MhaConfig, [f[0] for f in _capi.MhaConfig._fields_]),
            "hwyattn_mha_weights": (_capi.MhaWeights, ["w_q", "w_k", "w_v", "w_o", "b_q",
                                                       "b_k", "b_v", "b_o"]),
        }
        lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <hwyattn.h>",
                 "int main(void) {"]
        expect = []
        for cname, (cls, names) in fields.items():
            lines.append('printf("%%zu\\n", sizeof(%s));' % cname)
            expect.append(ctypes.sizeof(cls))
            for n in names:
                lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (cname, n))
                expect.append(getattr(cls, n).offset)
        lines += ["return 0;", "}"]
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            subprocess.check_call([cc, "-std=c99", "-I", header, src, "-o", exe])
            got = [int(x) for x in subprocess.check_output([exe]).split()]
        self.assertEqual(got, expect)


if __name__ == "__main__":
    unittest.main()
