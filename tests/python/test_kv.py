# SPDX-License-Identifier: Apache-2.0
"""hwyattn.KVCache, hwyattn.kv_cache_write and hwyattn.kv_attention against
numpy float64: the write's conversions, int8 and fp8 quantization, and
attention of a mixed batch (decode rows, a chunked prefill, a full prefill)
over paged float32, float16, bfloat16, int8 and fp8 caches (every scale
layout), with positions, windows, softcap, ALiBi and sinks; ggml's block
formats (q8_0 ... iq4_nl) and int4 caches against this file's own decoder
of their bytes (hwyattn.h's layout), and hwyattn.sdpa over block-format
k/v."""

import math
import unittest

import numpy as np

from reference import TOLERANCE, rel_err, sdpa_ref
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


# ggml's block formats: bytes per block of 32 elements (hwyattn.h's table).
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "iq4_nl": 18}
IQ4_NL_LEVELS = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def decode_block(name, blk):
    """The 32 values of one block (a bytes object), as hwyattn.h lays it
    out: an fp16 d (and m) in the machine's byte order, element j < 16 the
    low nibble of qs[j], j + 16 its high nibble, Q5's fifth bit j bit j of
    the little-endian 32-bit qh."""
    def half(at):
        return float(np.frombuffer(blk[at:at + 2], np.float16)[0])
    d = half(0)
    if name == "q8_0":
        return [d * (b - 256 if b > 127 else b) for b in blk[2:34]]
    qs = blk[len(blk) - 16:]
    q = [qs[j] & 15 for j in range(16)] + [qs[j] >> 4 for j in range(16)]
    if name in ("q5_0", "q5_1"):
        at = 4 if name == "q5_1" else 2
        qh = int.from_bytes(blk[at:at + 4], "little")
        q = [x | ((qh >> j) & 1) << 4 for j, x in enumerate(q)]
    if name == "q4_0":
        return [d * (x - 8) for x in q]
    if name == "q5_0":
        return [d * (x - 16) for x in q]
    if name == "iq4_nl":
        return [d * IQ4_NL_LEVELS[x] for x in q]
    m = half(2)  # q4_1, q5_1: d * q + m, rounded once to fp32
    return [float(np.float32(d * x + m)) for x in q]


def decode_pages(name, pages, dim=None):
    """float64 [..., D] of uint8 pages [..., bytes of a row]: block formats'
    values, int4's numbers in [-8, 7] (before their scales)."""
    pages = np.asarray(pages)
    rows = pages.reshape(-1, pages.shape[-1])
    out = []
    for row in rows:
        row = row.tobytes()
        if name == "int4":
            vals = []
            for b in row:
                vals += [(b & 15) - 16 * ((b >> 3) & 1), (b >> 4) - 16 * (b >> 7)]
            out.append(vals[:2 * len(row) if dim is None else dim])
        else:
            bb = BLOCK_BYTES[name]
            out.append(sum((decode_block(name, row[i:i + bb]) for i in range(0, len(row), bb)),
                           []))
    return np.array(out, np.float64).reshape(pages.shape[:-1] + (-1,))


def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref of a float32 row: per block d = amax /
    127, the fp32 d rounded to fp16, x * (1 / d) rounded half away from 0."""
    out = b""
    for blk in np.asarray(x, np.float32).reshape(-1, 32):
        d = np.float32(np.max(np.abs(blk)) / np.float32(127))
        inv = np.float32(1) / d if d else np.float32(0)
        out += np.float16(d).tobytes()
        for v in blk:
            x0 = float(np.float32(v * inv))
            out += (int(math.copysign(math.floor(abs(x0) + 0.5), x0)) & 255).to_bytes(1, "little")
    return out


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

    def check_values(self, cache, table, q_start, kv_len, k, v, **kw):
        """attend() against the reference over the values k, v [P, Hkv, S, D]."""
        q = self.rng.uniform(-2, 2, (q_start[-1], 4, k.shape[-1])).astype(np.float32)
        out, lse = cache.attend(q, q_start, kv_len, table, return_lse=True, **kw)
        want, want_lse = kv_attention_ref(q, k, v, q_start, kv_len, table, **kw)
        self.assertLess(rel_err(out, want), TOLERANCE)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)

    def test_block_format_caches(self):
        # Every block format, paged, a mixed batch; the pages are uint8
        # [P, Hkv, S, D // 32 * block bytes], decoded here from the bytes.
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])
        for name, bb in BLOCK_BYTES.items():
            with self.subTest(dtype=name):
                self.assertEqual(hwyattn.cache_row_size(name, 64), 2 * bb)
                cache, table, raw_k, raw_v = self.build(name, 16, lens, D=64, Dv=32)
                self.assertEqual(cache.k.dtype, np.uint8)
                self.assertEqual(cache.k.shape[1:], (2, 16, 2 * bb))
                self.assertEqual(cache.v.shape[1:], (2, 16, bb))
                k, v = decode_pages(name, cache.k), decode_pages(name, cache.v)
                np.testing.assert_array_equal(cache.dequantized()[0], k)
                np.testing.assert_array_equal(cache.dequantized()[1], v)
                # The values are the inputs quantized: within a step of each
                # block's largest magnitude (q8_0: 1/127; 5 bits: 1/15, or 1/31
                # with an offset, plus the fp16 rounding of d and m; 4 bits: 1/7).
                slots = np.concatenate([table[s, np.arange(n) // 16] * 16 + np.arange(n) % 16
                                        for s, n in enumerate(lens)])
                x = np.concatenate(raw_k)
                got = k.transpose(0, 2, 1, 3).reshape(-1, 2, 64)[slots]
                step = {"q8_0": 1 / 127.0, "q5_0": 1 / 15.0, "q5_1": 1 / 28.0}.get(name, 1 / 7.0)
                amax = np.abs(x.reshape(-1, 2, 2, 32)).max(axis=-1, keepdims=True)
                err = np.abs(got - x).reshape(-1, 2, 2, 32)
                self.assertTrue(np.all(err <= amax * step * 1.01), (name, (err / amax).max()))
                self.check_values(cache, table, q_start, lens, k, v)
        cache, table, _, _ = self.build("q4_1", 17, lens, D=32, Dv=64)
        self.check_values(cache, table, q_start, lens, *(decode_pages("q4_1", x) for x in
                                                          (cache.k, cache.v)),
                          window_left=5, softcap=0.75, alibi_slopes=[0.1, 0.05, 0.02, 0.01],
                          sinks=[0.5, -1.0, 0.0, -np.inf])

    def test_q8_0_write_is_ggml_reference(self):
        cache = hwyattn.KVCache(3, 4, 2, 64, 32, dtype="q8_0")
        k = self.rng.uniform(-3, 3, (3, 2, 64)).astype(np.float32)
        v = self.rng.uniform(-3, 3, (3, 2, 32)).astype(np.float32)
        k[1, 0, :32] = 0.0  # an all-zero block: d = 0, numbers 0
        cache.write(k, v, [5, 0, 11])
        for t, slot in ((0, 5), (1, 0), (2, 11)):
            for h in range(2):
                self.assertEqual(cache.k[slot // 4, h, slot % 4].tobytes(), quantize_q8_0(k[t, h]))
                self.assertEqual(cache.v[slot // 4, h, slot % 4].tobytes(), quantize_q8_0(v[t, h]))
        self.assertEqual(np.count_nonzero(cache.k[0, :, 1:4]), 0)

    def test_block_pages_on_caller_pools(self):
        # llama.cpp-style pools the caller owns, in [pages, page, Hkv, bytes]
        # memory (FlashAttention's order), read and written in place through
        # the transposed view; the free functions check the bytes against D.
        P, S, Hkv, D, Dv = 5, 8, 2, 64, 96
        k_mem = np.zeros((P, S, Hkv, hwyattn.cache_row_size("q5_1", D)), np.uint8)
        v_mem = np.zeros((P, S, Hkv, hwyattn.cache_row_size("q5_1", Dv)), np.uint8)
        k_pool, v_pool = k_mem.transpose(0, 2, 1, 3), v_mem.transpose(0, 2, 1, 3)
        lens = (11, 3)
        table = np.array([[4, 0], [2, -1]], np.int32)
        slots = np.concatenate([table[s, np.arange(n) // S] * S + np.arange(n) % S
                                for s, n in enumerate(lens)])
        k_new = self.rng.uniform(-1, 1, (14, Hkv, D)).astype(np.float32)
        v_new = self.rng.uniform(-1, 1, (14, Hkv, Dv)).astype(np.float32)
        hwyattn.kv_cache_write(k_pool, v_pool, k_new, v_new, slots, cache_dtype="q5_1")
        self.assertGreater(np.count_nonzero(k_mem[4]), 0)
        q = self.rng.uniform(-2, 2, (2, 4, D)).astype(np.float32)
        out = hwyattn.kv_attention(q, k_pool, v_pool, [0, 1, 2], lens, block_table=table,
                                   cache_dtype="q5_1")
        want, _ = kv_attention_ref(q, decode_pages("q5_1", k_pool), decode_pages("q5_1", v_pool),
                                   [0, 1, 2], lens, table)
        self.assertLess(rel_err(out, want), TOLERANCE)

    def test_block_format_sizes_are_checked(self):
        q = np.zeros((1, 4, 64), np.float32)
        k = np.zeros((2, 2, 4, 68), np.uint8)
        v = np.zeros((2, 2, 4, 34), np.uint8)
        kn = np.zeros((1, 2, 64), np.float32)
        vn = np.zeros((1, 2, 32), np.float32)
        hwyattn.kv_attention(q, k, v, [0, 1], [1], cache_dtype="q8_0")  # the right sizes
        cases = [
            # pages of the wrong byte size (D = 64 needs 68 bytes of q8_0)
            (lambda: hwyattn.kv_attention(q, k[..., :64], v, [0, 1], [1], cache_dtype="q8_0"),
             "k_cache: the last dimension is 64 bytes, but a row of D = 64 elements of q8_0 is "
             "64 // 32 blocks of 34 bytes = 68 bytes"),
            (lambda: hwyattn.kv_cache_write(k, v[..., :33], kn, vn, [0], cache_dtype="q8_0"),
             "v_cache: the last dimension is 33 bytes"),
            (lambda: hwyattn.kv_attention(q, k, v[..., :33], [0, 1], [1], cache_dtype="q8_0"),
             "not a whole number of q8_0 blocks"),
            (lambda: hwyattn.kv_cache_write(k, v, kn, vn, [0], cache_dtype="q4_0"),
             "a row of D = 64 elements of q4_0 is 64 // 32 blocks of 18 bytes = 36 bytes"),
            # D not a multiple of 32
            (lambda: hwyattn.KVCache(2, 4, 2, 48, dtype="q8_0"), "multiple of 32"),
            (lambda: hwyattn.cache_row_size("iq4_nl", 40), "multiple of 32"),
            # strides that are not whole blocks (a row's bytes split)
            (lambda: hwyattn.kv_attention(q, np.zeros((2, 2, 4, 69), np.uint8)[..., :68], v,
                                          [0, 1], [1], cache_dtype="q8_0"),
             "is not a non-negative whole number of 34-byte blocks"),
            (lambda: hwyattn.KVCache(2, 4, 2, 64, dtype="q8_0", scales="token"),
             "scales are for int8, int4 and fp8 caches only"),
            (lambda: hwyattn.sdpa(q[None], k[:1], v[:1], kv_dtype="int4"), "kv_dtype is 'int4'"),
            (lambda: hwyattn.sdpa(q[None], k[:1, :, :, :34], v[:1], kv_dtype="q8_0"),
             "k: the last dimension is 34 bytes, but a row of D = 64 elements of q8_0"),
        ]
        for call, want in cases:
            with self.assertRaises(ValueError) as e:
                call()
            self.assertIsInstance(e.exception, hwyattn.InvalidArgumentError)
            self.assertIn(want, str(e.exception))
        with self.assertRaises(TypeError):  # block pages are uint8
            hwyattn.kv_attention(q, k.view(np.int8), v.view(np.int8), [0, 1], [1],
                                 cache_dtype="q8_0")

    def test_sdpa_over_block_format_kv(self):
        # k, v as gguf-py quantizes them: uint8 [B, Hkv, Lk, bytes], here the
        # bytes of a cache's page; q4_0 k with float32 v too.
        cache = hwyattn.KVCache(2, 40, 2, 64, 32, dtype="iq4_nl")
        kx = self.rng.uniform(-1, 1, (40, 2, 64)).astype(np.float32)
        vx = self.rng.uniform(-1, 1, (40, 2, 32)).astype(np.float32)
        cache.write(kx, vx, np.arange(40) + 40)
        k, v = cache.k[1:2], cache.v[1:2]  # [1, Hkv, 40, bytes]
        q = self.rng.uniform(-1, 1, (2, 4, 7, 64)).astype(np.float32)
        out, lse = hwyattn.sdpa(q, k, v, causal="bottom_right", kv_dtype="iq4_nl",
                                return_lse=True)
        want, _, want_lse = sdpa_ref(q, decode_pages("iq4_nl", k), decode_pages("iq4_nl", v),
                                     causal="bottom_right")
        self.assertLess(rel_err(out, want), TOLERANCE)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
        k4 = np.zeros((1, 2, 40, 36), np.uint8)
        c4 = hwyattn.KVCache(1, 40, 2, 64, dtype="q4_0")
        c4.write(kx, kx, np.arange(40))
        k4[...] = c4.k
        out = hwyattn.sdpa(q, k4, vx.transpose(1, 0, 2)[None], kv_dtype=("q4_0", None))
        want, _, _ = sdpa_ref(q, decode_pages("q4_0", k4), vx.transpose(1, 0, 2)[None])
        self.assertLess(rel_err(out, want), TOLERANCE)

    def test_sdpa_int8_products_over_q8_0(self):
        # precision='int8': the query quantized per block of 32 as ggml's
        # q8_0 (d = max|x| / 127, q = round(x / d)), then exact integer sums:
        # numpy on that query and the dequantized cache agrees to fp32
        # rounding, for a decode (integer kernel) and a prefill (fp32 on the
        # same query) alike; float k: int8 is f32.
        cache = hwyattn.KVCache(1, 48, 2, 64, 64, dtype="q8_0")
        kx = self.rng.uniform(-1, 1, (48, 2, 64)).astype(np.float32)
        cache.write(kx, kx, np.arange(48))
        k, v = cache.k, cache.v
        kd, vd = decode_pages("q8_0", k), decode_pages("q8_0", v)
        for lq in (1, 9):
            q = self.rng.uniform(-2, 2, (1, 4, lq, 64)).astype(np.float32)
            blocks = q.reshape(1, 4, lq, 2, 32)
            d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)
            inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
            # roundf: half away from zero
            x = (blocks * inv).astype(np.float32)
            qi = np.sign(x) * np.floor(np.abs(x) + 0.5)
            rule_q = (d.astype(np.float64) * qi).reshape(q.shape)
            out, lse = hwyattn.sdpa(q, k, v, kv_dtype="q8_0", precision="int8", return_lse=True)
            want, _, want_lse = sdpa_ref(rule_q, kd, vd)
            self.assertLess(rel_err(out, want), TOLERANCE)
            np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
            exact, _, exact_lse = sdpa_ref(q, kd, vd)
            self.assertGreater(np.abs(lse - exact_lse).max(), 1e-6)  # quantized
            f32 = hwyattn.sdpa(q, kd.astype(np.float32), vd.astype(np.float32))
            np.testing.assert_array_equal(
                hwyattn.sdpa(q, kd.astype(np.float32), vd.astype(np.float32), precision="int8"),
                f32)
        with self.assertRaises(hwyattn.InvalidArgumentError):
            hwyattn.sdpa(q, kd.astype(np.float32), vd.astype(np.float32), precision="int4")

    # int4 caches (HWYATTN_I4): uint8 pages [P, Hkv, S, (D + 1) // 2], two
    # numbers a byte, with int8's scale layouts.

    def test_int4_per_token_write_and_attention(self):
        lens = (37, 70, 1, 24)
        q_start = np.array([0, 1, 6, 7, 31])
        cache, table, raw_k, raw_v = self.build("int4", 16, lens, D=16, Dv=12)
        self.assertEqual(cache.k.shape[1:], (2, 16, 8))
        self.assertEqual(cache.v.shape[1:], (2, 16, 6))
        self.assertEqual(cache.k_scale.shape[1:], (2, 16, 1))
        slots = np.concatenate([table[s, np.arange(n) // 16] * 16 + np.arange(n) % 16
                                for s, n in enumerate(lens)])
        x = np.concatenate(raw_k)
        nk = decode_pages("int4", cache.k)
        for t, slot in enumerate(slots):
            p, o = slot // 16, slot % 16
            scale = (np.abs(x[t]).max(axis=-1) / np.float32(7)).astype(np.float32)
            np.testing.assert_array_equal(cache.k_scale[p, :, o, 0], scale)
            want = np.clip(np.rint(x[t] / scale[:, None]), -8, 7)
            np.testing.assert_array_equal(nk[p, :, o], want)
        k = nk * cache.k_scale
        v = decode_pages("int4", cache.v) * cache.v_scale
        np.testing.assert_array_equal(cache.dequantized()[0], k)
        self.check_values(cache, table, q_start, lens, k, v)

    def test_int4_channel_k_token_v_odd_dims(self):
        # KIVI: per-channel K scales (fixed), per-token V scales (written);
        # odd D and Dv: a row's last high nibble is padding.
        P, S, Hkv, D, Dv = 9, 16, 2, 17, 9
        lens = (37, 70, 1)
        q_start = np.array([0, 1, 6, 7])
        table = np.array([[6, 1, 3, -1, -1], [0, 4, 5, 7, 8], [2, -1, -1, -1, -1]], np.int32)
        ks = np.linspace(0.05, 0.2, Hkv * D).astype(np.float32).reshape(1, Hkv, 1, D)
        vs = np.zeros((P, Hkv, S, 1), np.float32)
        cache = hwyattn.KVCache(P, S, Hkv, D, Dv, dtype="int4", scales=(ks, vs))
        self.assertEqual(cache.k.shape, (P, Hkv, S, 9))
        self.assertEqual(cache.v.shape, (P, Hkv, S, 5))
        slots = np.concatenate([table[s, np.arange(n) // S] * S + np.arange(n) % S
                                for s, n in enumerate(lens)])
        k_new = self.rng.uniform(-1, 1, (len(slots), Hkv, D)).astype(np.float32)
        v_new = self.rng.uniform(-1, 1, (len(slots), Hkv, Dv)).astype(np.float32)
        cache.write(k_new, v_new, slots)
        nk = decode_pages("int4", cache.k, D)
        for t, slot in enumerate(slots):
            want = np.clip(np.rint(k_new[t] / ks[0, :, 0]), -8, 7)
            np.testing.assert_array_equal(nk[slot // S, :, slot % S], want)
        self.assertEqual(np.count_nonzero(cache.k[..., -1] >> 4), 0)  # the padding nibbles
        k = nk * ks
        v = decode_pages("int4", cache.v, Dv) * cache.v_scale
        self.assertEqual(np.count_nonzero(cache.v_scale), len(slots) * Hkv)
        self.check_values(cache, table, q_start, lens, k, v)

    def test_int4_sizes_are_checked(self):
        q = np.zeros((1, 4, 16), np.float32)
        q18 = np.zeros((1, 4, 18), np.float32)
        k = np.zeros((2, 2, 4, 8), np.uint8)
        s = np.ones((2, 2, 4, 1), np.float32)
        for call, want in (
                (lambda: hwyattn.kv_attention(q18, k, k, [0, 1], [1], k_scale=s,
                                              v_scale=s, cache_dtype="int4"),
                 "k_cache: the last dimension is 8 bytes, but a row of D = 18 elements of int4 "
                 "is (18 + 1) // 2 = 9 bytes"),
                (lambda: hwyattn.kv_cache_write(k, k[..., :7], q[:, :2], q[:, :2], [0],
                                                k_scale=s, v_scale=s, cache_dtype="int4"),
                 "v_cache: the last dimension is 7 bytes, but a row of D = 16 elements of int4 "
                 "is (16 + 1) // 2 = 8 bytes")):
            with self.assertRaises(hwyattn.InvalidArgumentError) as e:
                call()
            self.assertIn(want, str(e.exception))
        self.assertEqual(hwyattn.cache_row_size("int4", 17), 9)

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
