# SPDX-License-Identifier: Apache-2.0
"""hwyattn.KVCache and hwyattn.kv_attention against numpy float64: the
write's conversions and int8 quantization, and attention of a mixed batch
(decode rows, a chunked prefill, a full prefill) over paged float32,
float16 and int8 caches, with positions, windows, softcap, ALiBi and sinks."""

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


class KvTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(15)

    def build(self, dtype, page_size=16, lens=(37, 70, 1, 24), Hkv=2, D=16, Dv=12,
              channel_scales=False):
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
        scales = None
        if channel_scales:
            ks = np.max([np.abs(x).max(axis=0) for x in raw_k if len(x)], axis=0) / 127
            vs = np.max([np.abs(x).max(axis=0) for x in raw_v if len(x)], axis=0) / 127
            scales = (ks, vs)
        cache = hwyattn.KVCache(P, page_size, Hkv, D, Dv, dtype=dtype, channel_scales=scales)
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
