# SPDX-License-Identifier: Apache-2.0
"""ml_dtypes arrays (JAX's, ONNX's and TensorFlow's bfloat16, float8_e4m3fn
and float8_e5m2 in numpy) through hwyattn.sdpa, the KV-cache calls and
MultiheadAttention: read in place as the C dtypes HWYATTN_BF16 /
HWYATTN_FP8_E4M3 / HWYATTN_FP8_E5M2, against numpy float64 computed from the
same (rounded) values, the same bits as the uint16 / uint8 paths, and the
dtype of what comes back (an ml_dtypes.bfloat16 q gives an
ml_dtypes.bfloat16 out). Skipped when ml_dtypes is not importable (it is
optional: scripts/test.sh installs a pinned one into the test venv); one
test checks, without it, that importing and using hwyattn never needs it."""

import os
import subprocess
import sys
import unittest

import numpy as np

from reference import TOLERANCE, rel_err, sdpa_ref
from test_kv import kv_attention_ref
import hwyattn

try:
    import ml_dtypes
except ImportError:  # optional: the tests below skip
    ml_dtypes = None

# A bfloat16 output is the fp32 result rounded once: within 2^-9 relative
# of it, so within 2^-8 of max|ref| overall.
BF16_OUT = 2.0 ** -8


@unittest.skipIf(ml_dtypes is None, "ml_dtypes is not importable by %s" % sys.executable)
class MlDtypesSdpaTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(2024)

    def rand(self, *shape, dtype=None):
        x = self.rng.standard_normal(shape).astype(np.float32)
        return x.astype(dtype or ml_dtypes.bfloat16)

    def test_bfloat16_inputs_and_output(self):
        bf16 = ml_dtypes.bfloat16
        q, k, v = self.rand(2, 4, 9, 16), self.rand(2, 2, 30, 16), self.rand(2, 2, 30, 12)
        out = hwyattn.sdpa(q, k, v, causal="bottom_right")
        self.assertEqual(out.dtype, np.dtype(bf16))  # q's dtype, as JAX and ONNX
        self.assertEqual(out.shape, (2, 4, 9, 12))
        ref = sdpa_ref(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                       causal="bottom_right")[0]
        self.assertLess(rel_err(out.astype(np.float64), ref), BF16_OUT)
        # The fp32 result: against float64, and rounded once it is out's bits.
        f32 = hwyattn.sdpa(q, k, v, causal="bottom_right", out_dtype="float32")
        self.assertEqual(f32.dtype, np.float32)
        self.assertLess(rel_err(f32, ref), TOLERANCE)
        np.testing.assert_array_equal(out.view(np.uint16), f32.astype(bf16).view(np.uint16))
        # The same call on the uint16 bits (input_dtype='bfloat16').
        bits = hwyattn.sdpa(q.view(np.uint16), k.view(np.uint16), v.view(np.uint16),
                            causal="bottom_right", input_dtype="bfloat16")
        np.testing.assert_array_equal(bits, f32)
        # lse and weights stay float32.
        out2, w, lse = hwyattn.sdpa(q, k, v, causal="bottom_right", return_weights=True,
                                    return_lse=True)
        self.assertEqual((out2.dtype, w.dtype, lse.dtype), (np.dtype(bf16), np.float32,
                                                            np.float32))

    def test_strided_views_and_mixed_inputs(self):
        bf16 = ml_dtypes.bfloat16
        x = self.rand(2, 20, 4, 32)  # [B, L, H, D] memory
        qkv = x.transpose(0, 2, 1, 3)
        out = hwyattn.sdpa(qkv, qkv, qkv, causal=True)
        xf = x.astype(np.float64).transpose(0, 2, 1, 3)
        self.assertLess(rel_err(out.astype(np.float64), sdpa_ref(xf, xf, xf, causal=True)[0]),
                        BF16_OUT)
        # A float32 q with bfloat16 k, v: q's dtype, float32.
        got = hwyattn.sdpa(qkv.astype(np.float32), qkv, qkv, causal=True)
        self.assertEqual(got.dtype, np.float32)
        self.assertLess(rel_err(got, sdpa_ref(xf, xf, xf, causal=True)[0]), TOLERANCE)
        # An ml_dtypes bfloat16 mask, sinks and slopes: converted (exactly) to float32.
        mask = np.where(self.rng.random((20, 20)) < 0.3, -np.inf, 0.0).astype(bf16)
        sinks = np.array([0.5, -1.0, 0.0, 2.0], bf16)
        got = hwyattn.sdpa(qkv, qkv, qkv, mask=mask, sinks=sinks, out_dtype=np.float32)
        want = sdpa_ref(xf, xf, xf, mask=mask.astype(np.float64),
                        sinks=sinks.astype(np.float64))[0]
        self.assertLess(rel_err(got, want), TOLERANCE)

    def test_out_forms(self):
        bf16 = ml_dtypes.bfloat16
        q = self.rand(1, 2, 5, 8, dtype=np.float32)
        k = self.rand(1, 2, 6, 8, dtype=np.float32)
        v = self.rand(1, 2, 6, 8, dtype=np.float32)
        f32 = hwyattn.sdpa(q, k, v)
        want = f32.astype(bf16).view(np.uint16)
        # Asked for by name or by type, without out=: a new ml_dtypes.bfloat16 array.
        for out_dtype in ("bfloat16", bf16, np.dtype(bf16)):
            got = hwyattn.sdpa(q, k, v, out_dtype=out_dtype)
            self.assertEqual(got.dtype, np.dtype(bf16))
            np.testing.assert_array_equal(got.view(np.uint16), want)
        self.assertEqual(hwyattn.sdpa(q, k, v, out_dtype=np.float16).dtype, np.float16)
        # out= an ml_dtypes.bfloat16 array, strided: written in place, returned as given.
        buf = np.zeros((1, 5, 2, 8), bf16)  # [B, L, H, Dv] memory
        got = hwyattn.sdpa(q, k, v, out=buf.transpose(0, 2, 1, 3))
        self.assertIs(got.base, buf)
        self.assertEqual(got.dtype, np.dtype(bf16))
        np.testing.assert_array_equal(buf.transpose(0, 2, 1, 3).view(np.uint16), want)
        given = np.zeros((1, 2, 5, 8), bf16)
        self.assertIs(hwyattn.sdpa(q, k, v, out=given, out_dtype="bfloat16"), given)
        with self.assertRaisesRegex(TypeError, "out_dtype"):
            hwyattn.sdpa(q, k, v, out=np.zeros((1, 2, 5, 8), bf16), out_dtype="float16")
        with self.assertRaisesRegex(TypeError, "float8_e4m3fn"):
            hwyattn.sdpa(q, k, v, out=np.zeros((1, 2, 5, 8), ml_dtypes.float8_e4m3fn))
        with self.assertRaises(TypeError):
            hwyattn.sdpa(q, k, v, out_dtype=ml_dtypes.float8_e5m2)

    def test_unsupported_ml_dtypes(self):
        q = self.rand(1, 2, 5, 8)
        with self.assertRaisesRegex(TypeError, "fp8"):  # fp8 is a cache dtype
            hwyattn.sdpa(q.astype(ml_dtypes.float8_e4m3fn), q, q)
        with self.assertRaises(TypeError):  # ml_dtypes' int4: one per byte, not the C I4
            hwyattn.sdpa(np.zeros((1, 2, 5, 8), ml_dtypes.int4), q, q)

    def test_multihead_attention(self):
        bf16 = ml_dtypes.bfloat16
        mha = hwyattn.MultiheadAttention(32, 4, seed=3)
        x = self.rand(2, 7, 32)
        with mha:
            y = mha(x, causal=True)
            y32 = mha(x.astype(np.float32), causal=True)
        self.assertEqual(y.dtype, np.dtype(bf16))
        np.testing.assert_array_equal(y.view(np.uint16), y32.astype(bf16).view(np.uint16))

    def test_merge_states_converts(self):
        q, k = self.rand(1, 2, 4, 8), self.rand(1, 2, 12, 8)
        parts = [hwyattn.sdpa(q, k[..., i:i + 6, :], k[..., i:i + 6, :], return_lse=True,
                              out_dtype="float32") for i in (0, 6)]
        out, _ = hwyattn.merge_states([p[0].astype(ml_dtypes.bfloat16) for p in parts],
                                      [p[1] for p in parts])
        self.assertEqual(out.dtype, np.float32)
        ref = sdpa_ref(q.astype(np.float64), k.astype(np.float64), k.astype(np.float64))[0]
        self.assertLess(rel_err(out, ref), BF16_OUT)


@unittest.skipIf(ml_dtypes is None, "ml_dtypes is not importable by %s" % sys.executable)
class MlDtypesKvTest(unittest.TestCase):
    P, Hkv, S, D, Hq = 6, 2, 16, 16, 4
    lens = (20, 7)
    table = np.array([[3, 1], [5, -1]], np.int32)

    def setUp(self):
        self.rng = np.random.default_rng(99)
        n = sum(self.lens)
        self.k_new = self.rng.uniform(-1, 1, (n, self.Hkv, self.D)).astype(np.float32)
        self.v_new = self.rng.uniform(-1, 1, (n, self.Hkv, self.D)).astype(np.float32)
        self.slots = np.concatenate([self.table[s, np.arange(c) // self.S] * self.S +
                                     np.arange(c) % self.S for s, c in enumerate(self.lens)])
        self.q_start = np.array([0, 1, 3])  # a decode row, then a chunk of 2

    def q(self, dtype):
        return self.rng.uniform(-2, 2, (3, self.Hq, self.D)).astype(np.float32).astype(dtype)

    def test_bfloat16_cache(self):
        bf16 = ml_dtypes.bfloat16
        cache = hwyattn.KVCache(self.P, self.S, self.Hkv, self.D, dtype=bf16)
        self.assertEqual(cache.k.dtype, np.dtype(bf16))
        self.assertEqual(cache.dtype, "bfloat16")
        k_new, v_new = self.k_new.astype(bf16), self.v_new.astype(bf16)
        cache.write(k_new, v_new, self.slots)  # bfloat16 in, bfloat16 pages: the same values
        s = self.slots[5]
        np.testing.assert_array_equal(cache.k[s // self.S, :, s % self.S].view(np.uint16),
                                      k_new[5].view(np.uint16))
        # The same pages as the uint16 cache named 'bfloat16', from float32 input.
        bits = hwyattn.KVCache(self.P, self.S, self.Hkv, self.D, dtype="bfloat16")
        bits.write(self.k_new, self.v_new, self.slots)
        np.testing.assert_array_equal(cache.k.view(np.uint16), bits.k)
        np.testing.assert_array_equal(cache.v.view(np.uint16), bits.v)
        q = self.q(bf16)
        out = cache.attend(q, self.q_start, self.lens, self.table)
        self.assertEqual(out.dtype, np.dtype(bf16))
        want, _ = kv_attention_ref(q.astype(np.float64), cache.k.astype(np.float64),
                                   cache.v.astype(np.float64), self.q_start, self.lens,
                                   self.table)
        self.assertLess(rel_err(out.astype(np.float64), want), BF16_OUT)
        f32, lse = cache.attend(q, self.q_start, self.lens, self.table, out_dtype="float32",
                                return_lse=True)
        self.assertLess(rel_err(f32, want), TOLERANCE)
        np.testing.assert_array_equal(out.view(np.uint16), f32.astype(bf16).view(np.uint16))
        self.assertEqual(lse.dtype, np.float32)
        k, v = cache.dequantized()
        np.testing.assert_array_equal(k, cache.k.astype(np.float64))

    def test_fp8_caches(self):
        for name, scales in (("float8_e4m3fn", (0.005, 0.004)), ("float8_e5m2", None)):
            with self.subTest(name=name):
                ml = getattr(ml_dtypes, name)
                cache = hwyattn.KVCache(self.P, self.S, self.Hkv, self.D, dtype=ml, scales=scales)
                self.assertEqual(cache.k.dtype, np.dtype(ml))
                cache.write(self.k_new.astype(ml_dtypes.bfloat16), self.v_new, self.slots)
                named = hwyattn.KVCache(self.P, self.S, self.Hkv, self.D, dtype=name,
                                        scales=scales)
                named.write(self.k_new.astype(ml_dtypes.bfloat16).astype(np.float32),
                            self.v_new, self.slots)
                np.testing.assert_array_equal(cache.k.view(np.uint8), named.k)
                np.testing.assert_array_equal(cache.v.view(np.uint8), named.v)
                ks, vs = (float(np.float32(x)) for x in (scales or (1.0, 1.0)))  # as stored
                # ml_dtypes decodes the pages: an oracle independent of hwyattn's tables.
                k, v = cache.k.astype(np.float64) * ks, cache.v.astype(np.float64) * vs
                np.testing.assert_array_equal(cache.dequantized()[0], k)
                q = self.q(np.float32)
                out = cache.attend(q, self.q_start, self.lens, self.table)
                self.assertEqual(out.dtype, np.float32)  # a float32 q: float32
                want, _ = kv_attention_ref(q, k, v, self.q_start, self.lens, self.table)
                self.assertLess(rel_err(out, want), TOLERANCE)

    def test_caller_pools(self):
        # vLLM-style pools an engine holds as ml_dtypes arrays (JAX's, ONNX's).
        e4m3 = ml_dtypes.float8_e4m3fn
        shape = (self.P, self.Hkv, self.S, self.D)
        k_pool, v_pool = np.zeros(shape, e4m3), np.zeros(shape, e4m3)
        hwyattn.kv_cache_write(k_pool, v_pool, self.k_new, self.v_new, self.slots,
                               k_scale=0.005, v_scale=0.004)  # no cache_dtype needed
        k_bits, v_bits = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)
        hwyattn.kv_cache_write(k_bits, v_bits, self.k_new, self.v_new, self.slots,
                               k_scale=0.005, v_scale=0.004, cache_dtype="float8_e4m3fn")
        np.testing.assert_array_equal(k_pool.view(np.uint8), k_bits)
        np.testing.assert_array_equal(v_pool.view(np.uint8), v_bits)
        q = self.q(ml_dtypes.bfloat16)
        out = hwyattn.kv_attention(q, k_pool, v_pool, self.q_start, self.lens,
                                   block_table=self.table, k_scale=0.005, v_scale=0.004,
                                   cache_dtype=e4m3)
        self.assertEqual(out.dtype, np.dtype(ml_dtypes.bfloat16))
        ks, vs = float(np.float32(0.005)), float(np.float32(0.004))
        want, _ = kv_attention_ref(q.astype(np.float64), k_pool.astype(np.float64) * ks,
                                   v_pool.astype(np.float64) * vs, self.q_start, self.lens,
                                   self.table)
        self.assertLess(rel_err(out.astype(np.float64), want), BF16_OUT)
        # bfloat16 scales (fixed, per kv head) are converted exactly.
        scale = np.full((1, self.Hkv, 1, 1), 0.005, ml_dtypes.bfloat16)
        got = hwyattn.kv_attention(q, k_pool, v_pool, self.q_start, self.lens,
                                   block_table=self.table, k_scale=scale, v_scale=scale,
                                   out_dtype="float32")
        s = float(scale.astype(np.float64).ravel()[0])
        want, _ = kv_attention_ref(q.astype(np.float64), k_pool.astype(np.float64) * s,
                                   v_pool.astype(np.float64) * s, self.q_start, self.lens,
                                   self.table)
        self.assertLess(rel_err(got, want), TOLERANCE)
        # Per-token scales are written: an ml_dtypes array cannot hold them.
        tok = np.zeros((self.P, self.Hkv, self.S, 1), ml_dtypes.bfloat16)
        with self.assertRaisesRegex(TypeError, "per-token"):
            hwyattn.kv_cache_write(k_pool, v_pool, self.k_new, self.v_new, self.slots,
                                   k_scale=tok, v_scale=tok)
        with self.assertRaisesRegex(TypeError, "cache_dtype"):
            hwyattn.kv_attention(q, k_pool, v_pool, self.q_start, self.lens,
                                 block_table=self.table, cache_dtype="float8_e5m2")


class WithoutMlDtypesTest(unittest.TestCase):
    """ml_dtypes is optional: importing and using hwyattn never imports it."""

    def test_import_and_calls_without_ml_dtypes(self):
        code = r"""
import sys
sys.modules["ml_dtypes"] = None  # import ml_dtypes raises ImportError
import numpy as np
import hwyattn
q = np.random.default_rng(1).standard_normal((1, 2, 3, 8)).astype(np.float32)
assert hwyattn.sdpa(q, q, q).dtype == np.float32
bits = np.zeros((1, 2, 3, 8), np.uint16)
assert hwyattn.sdpa(q, q, q, out=bits, out_dtype="bfloat16") is bits and bits.any()
cache = hwyattn.KVCache(2, 4, 2, 8, dtype="float8_e5m2")
cache.write(q[0, :, :2].transpose(1, 0, 2), q[0, :, :2].transpose(1, 0, 2), [0, 1])
try:
    hwyattn.sdpa(q, q, q, out_dtype="bfloat16")
except ImportError as e:
    assert "ml_dtypes" in str(e), e
else:
    raise AssertionError("out_dtype='bfloat16' without out= and without ml_dtypes")
print("ok")
"""
        env = dict(os.environ)
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(hwyattn.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([package_parent] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertEqual(p.stdout.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
