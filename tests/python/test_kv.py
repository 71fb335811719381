# SPDX-License-Identifier: Apache-2.0
"""hwyattn.KVCache, hwyattn.kv_cache_write and hwyattn.kv_attention against
numpy float64: the write's conversions, int8 and fp8 quantization, and
attention of a mixed batch (decode rows, a chunked prefill, a full prefill)
over paged float32, float16, bfloat16, int8 and fp8 caches (every scale
layout), with positions, windows, softcap, ALiBi and sinks."""

import unittest

import numpy as np

from reference import TOLERANCE, rel_err
import hwyattn


def kv_attention_ref(q, k, v, q_start, kv_len, block_table, q_pos=None, causal=True,
                     scale=None, window_left=0, window_right=0, softcap=0.0,
                     alibi_slopes=None, sinks=None):
    """The definition, in float64, from the dequantized pages k, v
    [P, Hkv, S, D]: each sequence's keys gathered through its block table."""
    q = np.asarray(q, np.float64)
    T, Hq, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = Hq // Hkv
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    out = np.zeros((T, Hq, v.shape[-1]))
    lse = np.zeros((T, Hq))
    for s in range(len(kv_len)):
        q0, q1, n = q_start[s], q_start[s + 1], kv_len[s]
        pages = block_table[s] if block_table is not None else [s]
        keys = np.concatenate([k[p] for p in pages[:(n + S - 1) // S]] or [k[:0, :, :, :][0]], axis=1)[:, :n]
        vals = np.concatenate([v[p] for p in pages[:(n + S - 1) // S]] or [v[:0, :, :, :][0]], axis=1)[:, :n]
        first = (n - (q1 - q0)) if q_pos is None else q_pos[s]
        for i in range(q1 - q0):
            pos = first + i
            t = np.arange(n)
            allowed = np.ones(n, bool)
            if causal:
                allowed &= t <= pos
            if window_left:
                allowed &= t > pos - window_left
            if window_right:
                allowed &= t < pos + window_right
            for h in range(Hq):
                sc = scale * keys[h // G] @ q[q0 + i, h]
                if softcap:
                    sc = softcap * np.tanh(sc / softcap)
                if alibi_slopes is not None:
                    sc = sc + alibi_slopes[h] * (t - pos)
                z = -np.inf if sinks is None else float(sinks[h])
                sc = sc[allowed]
                m = max([z] + list(sc))
                if len(sc) == 0:
                    lse[q0 + i, h] = z
                    continue
                den = np.exp(sc - m).sum() + (np.exp(z - m) if np.isfinite(z) else 0.0)
                lse[q0 + i, h] = m + np.log(den)
                out[q0 + i, h] = np.exp(sc - lse[q0 + i, h]) @ vals[h // G][allowed]
    return out, lse


def fp8_values(name):
    """The 256 fp8 bit patterns' values (NaN: None), from the OCP tables'
    definition, one pattern at a time."""
    mbits, bias = (3, 7) if name == "float8_e4m3fn" else (2, 15)
    values = []
    for b in range(256):
        e, m = (b & 0x7F) >> mbits, b & ((1 << mbits) - 1)
        sign = -1.0 if b & 0x80 else 1.0
        if name == "float8_e4m3fn" and b & 0x7F == 0x7F:
            values.append(None)
        elif name == "float8_e5m2" and e == 31:
            values.append(sign * float("inf") if m == 0 else None)
        elif e == 0:
            values.append(sign * m * 2.0 ** (1 - bias - mbits))
        else:
            values.append(sign * (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    return values


def nearest_fp8(name, x):
    """The header's write rule for a finite x: the nearest finite number
    (ties to the even pattern), saturating at the largest."""
    values = fp8_values(name)
    largest = max(v for v in values if v is not None and v != float("inf"))
    sign = 0x80 if np.signbit(x) else 0
    if abs(x) >= largest:
        return values.index(largest) | sign
    best = None
    for b in range(128):
        v = values[b]
        if v is None or v == float("inf"):
            continue
        err = abs(abs(x) - v)
        if best is None or err < best[0] or (err == best[0] and b % 2 == 0):
            best = (err, b)
    return best[1] | sign


class KvTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(15)

    def build(self, dtype, page_size=16, lens=(37, 70, 1, 24), Hkv=2, D=16, Dv=12,
              channel_scales=False, scales=None):
        r = self.rng
        need = [(n + page_size - 1) // page_size for n in lens]
        P = sum(need) + 2
        perm = r.permutation(P)
        table = -np.ones((len(lens), max(need) + 1), np.int32)
        at = 0
        for s, c in enumerate(need):
            table[s, :c] = perm[at:at + c]
            at += c
        raw_k = [r.uniform(-1, 1, (n, Hkv, D)).astype(np.float32) for n in lens]
        raw_v = [r.uniform(-1, 1, (n, Hkv, Dv)).astype(np.float32) for n in lens]
        if channel_scales:
            ks = np.max([np.abs(x).max(axis=0) for x in raw_k if len(x)], axis=0) / 127
            vs = np.max([np.abs(x).max(axis=0) for x in raw_v if len(x)], axis=0) / 127
            cache = hwyattn.KVCache(P, page_size, Hkv, D, Dv, dtype=dtype, channel_scales=(ks, vs))
        else:
            cache = hwyattn.KVCache(P, page_size, Hkv, D, Dv, dtype=dtype, scales=scales)
        slots = np.concatenate([table[s, np.arange(n) // page_size] * page_size + np.arange(n) % page_size
                                for s, n in enumerate(lens)])
        cache.write(np.concatenate(raw_k), np.concatenate(raw_v), slots)
        return cache, table, raw_k, raw_v

    def test_write_float(self):
        cache = hwyattn.KVCache(3, 4, 2, 5, dtype=np.float16)
        k = self.rng.uniform(-3, 3, (4, 2, 5)).astype(np.float32)
        v = self.rng.uniform(-3, 3, (4, 2, 5)).astype(np.float32)
        cache.write(k, v, [5, -1, 0, 11])
        for t, s in ((0, 5), (2, 0), (3, 11)):
            np.testing.assert_array_equal(cache.k[s // 4, :, s % 4], k[t].astype(np.float16))
            np.testing.assert_array_equal(cache.v[s // 4, :, s % 4], v[t].astype(np.float16))
        self.assertEqual(np.count_nonzero(cache.k), 3 * 2 * 5)

    def test_write_int8_per_token(self):
        cache = hwyattn.KVCache(2, 4, 2, 7, dtype=np.int8)
        k = self.rng.uniform(-3, 3, (3, 2, 7)).astype(np.float32)
        k[1, 0] = 0.0
        cache.write(k, k[:, :, :7], [6, 1, 3])
        for t, s in ((0, 6), (1, 1), (2, 3)):
            m = np.abs(k[t]).max(axis=-1).astype(np.float32)
            scale = (m / np.float32(127)).astype(np.float32)
            np.testing.assert_array_equal(cache.k_scale[s // 4, :, s % 4, 0], scale)
            with np.errstate(invalid="ignore", divide="ignore"):
                want = np.where(scale[:, None] > 0,
                                np.clip(np.rint(k[t] / scale[:, None]), -127, 127), 0)
            np.testing.assert_array_equal(cache.k[s // 4, :, s % 4], want.astype(np.int8))

    def check(self, cache, table, q_start, kv_len, **kw):
        Hq = 4
        T = q_start[-1]
        q = self.rng.uniform(-2, 2, (T, Hq, cache.k.shape[-1])).astype(np.float32)
        out, lse = cache.attend(q, q_start, kv_len, table, return_lse=True, **kw)
        k, v = cache.dequantized()
        want, want_lse = kv_attention_ref(q, k, v, q_start, kv_len, table, **kw)
        self.assertLess(rel_err(out, want), TOLERANCE)
        finite = np.isfinite(want_lse)
        np.testing.assert_array_equal(np.isfinite(lse), finite)
        np.testing.assert_allclose(lse[finite], want_lse[finite], rtol=1e-5, atol=1e-5)
        return q, out

    def test_mixed_batch(self):
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])  # decode, chunk of 5, decode, full prefill
        for dtype in (np.float32, np.float16, np.int8):
            for page_size in (1, 16, 17):
                cache, table, _, _ = self.build(dtype, page_size, lens)
                self.check(cache, table, q_start, lens)
        cache, table, _, _ = self.build(np.int8, 16, lens, channel_scales=True)
        self.check(cache, table, q_start, lens)

    def test_bfloat16_and_fp8_caches(self):
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])
        for dtype, scales in (("bfloat16", None), ("float8_e4m3fn", None),
                              ("float8_e4m3fn", "token"), ("float8_e5m2", (0.01, 0.02)),
                              ("float8_e5m2", (np.full((1, 2, 1, 1), 0.001, np.float32),
                                               np.full((1, 2, 1, 12), 0.002, np.float32))),
                              ("int8", (0.01, np.full((1, 2, 1, 1), 0.01, np.float32)))):
            with self.subTest(dtype=dtype, scales=scales):
                cache, table, _, _ = self.build(dtype, 16, lens, scales=scales)
                self.check(cache, table, q_start, lens)
        cache, table, _, _ = self.build("float8_e5m2", 17, lens)
        self.check(cache, table, q_start, lens, window_left=5, softcap=0.75,
                   alibi_slopes=[0.1, 0.05, 0.02, 0.01], sinks=[0.5, -1.0, 0.0, -np.inf])

    def test_write_fp8_nearest_even(self):
        specials = [448.0, 464.0, 1e30, -500.0, 2.0 ** -10, 3 * 2.0 ** -10, 1.0625, 1.1875, -0.0,
                    0.0, 57344.0, 61440.0, 2.0 ** -17, 3 * 2.0 ** -17, 240.0, 3e-5]
        for name in ("float8_e4m3fn", "float8_e5m2"):
            cache = hwyattn.KVCache(2, 4, 1, len(specials), dtype=name)
            x = np.array([specials, [-s for s in specials]], np.float32).reshape(2, 1, -1)
            cache.write(x, x, [5, 2])
            for t, slot in ((0, 5), (1, 2)):
                want = [nearest_fp8(name, float(v)) for v in x[t, 0]]
                self.assertEqual(cache.k[slot // 4, 0, slot % 4].tolist(), want, name)
            nan = np.full((1, 1, len(specials)), np.nan, np.float32)
            cache.write(nan, nan, [0])
            self.assertTrue(np.isnan(cache.dequantized()[0][0, 0, 0]).all())

    def test_kv_cache_write_on_caller_pools(self):
        # vLLM's reshape_and_cache with kv_cache_dtype="fp8": the engine's
        # pools and its two float scales; then attention over them.
        P, Hkv, S, D = 6, 2, 16, 8
        k_pool = np.zeros((P, Hkv, S, D), np.uint8)
        v_pool = np.zeros((P, Hkv, S, D), np.uint8)
        lens = (20, 7)
        table = np.array([[3, 1], [5, -1]], np.int32)
        k_new = self.rng.uniform(-1, 1, (27, Hkv, D)).astype(np.float32)
        v_new = self.rng.uniform(-1, 1, (27, Hkv, D)).astype(np.float32)
        slots = np.concatenate([table[s, np.arange(n) // S] * S + np.arange(n) % S
                                for s, n in enumerate(lens)])
        hwyattn.kv_cache_write(k_pool, v_pool, k_new, v_new, slots, k_scale=0.005,
                               v_scale=0.004, cache_dtype="float8_e4m3fn")
        values = np.array([np.nan if v is None else v for v in fp8_values("float8_e4m3fn")])
        self.assertEqual(k_pool[3, 1, 2, 5], nearest_fp8("float8_e4m3fn", k_new[2, 1, 5] / 0.005))
        q = self.rng.uniform(-2, 2, (2, 4, D)).astype(np.float32)
        q_start = np.array([0, 1, 2])
        out = hwyattn.kv_attention(q, k_pool, v_pool, q_start, lens, block_table=table,
                                   k_scale=0.005, v_scale=0.004, cache_dtype="float8_e4m3fn")
        want, _ = kv_attention_ref(q, values[k_pool] * 0.005, values[v_pool] * 0.004, q_start,
                                   lens, table)
        self.assertLess(rel_err(out, want), TOLERANCE)
        # bfloat16 new tokens (uint16 bits): the same pages as their float32 values.
        k_bits = (k_new.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact bfloat16s
        k_vals = (k_bits.astype(np.uint32) << 16).view(np.float32)
        k2, v2 = np.zeros_like(k_pool), np.zeros_like(v_pool)
        hwyattn.kv_cache_write(k2, v2, k_bits, v_new, slots, k_scale=0.005, v_scale=0.004,
                               cache_dtype="float8_e4m3fn", input_dtype="bfloat16")
        k3, v3 = np.zeros_like(k_pool), np.zeros_like(v_pool)
        hwyattn.kv_cache_write(k3, v3, k_vals, v_new, slots, k_scale=0.005, v_scale=0.004,
                               cache_dtype="float8_e4m3fn")
        np.testing.assert_array_equal(k2, k3)
        with self.assertRaises(TypeError):  # fp8 pages are uint8
            hwyattn.kv_attention(q, k_pool.view(np.int8), v_pool.view(np.int8), q_start, lens,
                                 block_table=table, cache_dtype="float8_e4m3fn")
        with self.assertRaises(hwyattn.InvalidArgumentError) as e:
            hwyattn.kv_attention(q, k_pool, v_pool, q_start, lens, block_table=table,
                                 k_scale=0.0, v_scale=0.004, cache_dtype="float8_e4m3fn")
        self.assertIn("k_scale", str(e.exception))

    def test_modifiers_and_positions(self):
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])
        cache, table, _, _ = self.build(np.float32, 16, lens)
        self.check(cache, table, q_start, lens, window_left=5, softcap=0.75,
                   alibi_slopes=[0.1, 0.05, 0.02, 0.01], sinks=[0.5, -1.0, 0.0, -np.inf])
        self.check(cache, table, q_start, lens, q_pos=[10, 30, 0, 0])
        self.check(cache, table, q_start, lens, causal=False, window_right=3)

    def test_int8_error_against_unquantized(self):
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])
        cache, table, raw_k, raw_v = self.build(np.int8, 16, lens)
        exact = hwyattn.KVCache(cache.k.shape[0], 16, 2, 16, 12)
        exact.k[...] = 0
        slots = np.concatenate([table[s, np.arange(n) // 16] * 16 + np.arange(n) % 16
                                for s, n in enumerate(lens)])
        exact.write(np.concatenate(raw_k), np.concatenate(raw_v), slots)
        q, out = self.check(cache, table, q_start, lens)
        want, _ = kv_attention_ref(q, *exact.dequantized(), q_start, lens, table)
        err = rel_err(out, want)
        print("int8 per-token cache: error against the unquantized values %.3g" % err)
        self.assertLess(err, 0.05)  # the quantization's, not the kernels': reported above

    def test_errors(self):
        cache, table, _, _ = self.build(np.float32)
        q = np.zeros((2, 4, 16), np.float32)
        bad = table.copy()
        bad[0, 0] = 999
        with self.assertRaises(hwyattn.InvalidArgumentError) as e:
            cache.attend(q, [0, 1, 1, 2, 2], [37, 70, 1, 24], bad)
        self.assertIn("sequence 0", str(e.exception))
        with self.assertRaises(hwyattn.InvalidArgumentError):
            cache.write(np.zeros((2, 2, 16), np.float32), np.zeros((2, 2, 12), np.float32), [3, 3])


if __name__ == "__main__":
    unittest.main()
