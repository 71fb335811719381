# SPDX-License-Identifier: Apache-2.0
"""The numpy oracle's score modifiers (reference.sdpa_ref: windows, softcap,
ALiBi, sinks) against values worked out by hand, the same rules and several
of the same cases as tests/reference_test.cc. Head dim 1 and scale 1 unless a
case says otherwise, so a score is the plain product q * k."""

import math
import unittest

import numpy as np

from reference import sdpa_ref

LN2, LN3, LN4 = math.log(2), math.log(3), math.log(4)
INF = float("inf")


def tiny(B=1, Hq=1, Hkv=1, Lq=1, Lk=1, q=None, k=None, v=None):
    """q [B,Hq,Lq,1], k [B,Hkv,Lk,1], v [B,Hkv,Lk,1]; zeros unless given."""
    def arr(x, shape):
        return np.zeros(shape) if x is None else np.asarray(x, np.float64).reshape(shape)
    return arr(q, (B, Hq, Lq, 1)), arr(k, (B, Hkv, Lk, 1)), arr(v, (B, Hkv, Lk, 1))


class ReferenceModifierTest(unittest.TestCase):
    def expect_row(self, res, b, h, i, weights, out, lse):
        """One row of (out, weights, lse) with Dv = 1; a weight of 0 must be exactly 0."""
        o, w, l = res
        where = "row b=%d h=%d i=%d" % (b, h, i)
        for j, want in enumerate(weights):
            got = w[b, h, i, j]
            if want == 0:
                self.assertEqual(got, 0.0, "%s weight %d" % (where, j))
            else:
                self.assertAlmostEqual(got, want, places=12, msg="%s weight %d" % (where, j))
        self.assertAlmostEqual(o[b, h, i, 0], out, places=12, msg=where + " out")
        if math.isinf(lse):
            self.assertEqual(l[b, h, i], lse, where + " lse")
        else:
            self.assertAlmostEqual(l[b, h, i], lse, places=12, msg=where + " lse")

    # ---- windows: all scores 0, so weights are uniform over the kept keys
    # (1/n each, lse = ln n, out = the mean of their values 1, 2, 4, 8).

    def test_window_left_causal_top_left(self):
        q, k, v = tiny(Lq=4, Lk=4, v=[1, 2, 4, 8])
        # p = i; j <= i and j > i - 2: {i - 1, i}.
        r = sdpa_ref(q, k, v, scale=1, causal="top_left", window_left=2)
        self.expect_row(r, 0, 0, 0, [1, 0, 0, 0], 1, 0)
        self.expect_row(r, 0, 0, 1, [.5, .5, 0, 0], 1.5, LN2)
        self.expect_row(r, 0, 0, 2, [0, .5, .5, 0], 3, LN2)
        self.expect_row(r, 0, 0, 3, [0, 0, .5, .5], 6, LN2)

    def test_window_left_causal_bottom_right(self):
        q, k, v = tiny(Lq=2, Lk=4, v=[1, 2, 4, 8])
        # p = i + 2. Row 0: j <= 2, j > 0: {1, 2}; row 1: {2, 3}.
        r = sdpa_ref(q, k, v, scale=1, causal="bottom_right", window_left=2)
        self.expect_row(r, 0, 0, 0, [0, .5, .5, 0], 3, LN2)
        self.expect_row(r, 0, 0, 1, [0, 0, .5, .5], 6, LN2)
        # Lq = 4 > Lk = 2: p = i - 2; rows 0, 1 see nothing; window_left 1
        # leaves row 3 (p = 1) only key 1.
        q, k, v = tiny(Lq=4, Lk=2, v=[1, 2])
        r = sdpa_ref(q, k, v, scale=1, causal="bottom_right", window_left=1)
        self.expect_row(r, 0, 0, 0, [0, 0], 0, -INF)
        self.expect_row(r, 0, 0, 1, [0, 0], 0, -INF)
        self.expect_row(r, 0, 0, 2, [1, 0], 1, 0)
        self.expect_row(r, 0, 0, 3, [0, 1], 2, 0)

    def test_window_right_without_causal(self):
        q, k, v = tiny(Lq=3, Lk=4, v=[1, 2, 4, 8])
        # p = i; j < i + 2.
        r = sdpa_ref(q, k, v, scale=1, window_right=2)
        self.expect_row(r, 0, 0, 0, [.5, .5, 0, 0], 1.5, LN2)
        self.expect_row(r, 0, 0, 1, [1 / 3, 1 / 3, 1 / 3, 0], 7 / 3, LN3)
        self.expect_row(r, 0, 0, 2, [.25] * 4, 15 / 4, LN4)
        # Both sides: {i - 1, i, i + 1}.
        r = sdpa_ref(q, k, v, scale=1, window_left=2, window_right=2)
        self.expect_row(r, 0, 0, 2, [0, 1 / 3, 1 / 3, 1 / 3], 14 / 3, LN3)

    def test_window_with_kv_len(self):
        q, k, v = tiny(B=2, Lq=2, Lk=4, v=[1, 2, 4, 8, 10, 20, 40, 80])
        r = sdpa_ref(q, k, v, scale=1, causal="bottom_right", window_left=2, kv_len=[4, 2])
        self.expect_row(r, 0, 0, 0, [0, .5, .5, 0], 3, LN2)
        self.expect_row(r, 0, 0, 1, [0, 0, .5, .5], 6, LN2)
        # Batch 1 (keys 0, 1; positions unchanged): row 0 p = 2: {1, 2} and
        # j < 2: {1}; row 1 p = 3: {2, 3} and j < 2: nothing.
        self.expect_row(r, 1, 0, 0, [0, 1, 0, 0], 20, 0)
        self.expect_row(r, 1, 0, 1, [0, 0, 0, 0], 0, -INF)

    def test_row_emptied_by_window_with_and_without_sink(self):
        # window_left = window_right = 1: only j = p = i; row 2 has no key 2.
        q, k, v = tiny(Lq=3, Lk=2, v=[1, 2])
        r = sdpa_ref(q, k, v, scale=1, window_left=1, window_right=1)
        self.expect_row(r, 0, 0, 0, [1, 0], 1, 0)
        self.expect_row(r, 0, 0, 1, [0, 1], 2, 0)
        self.expect_row(r, 0, 0, 2, [0, 0], 0, -INF)
        # Sink ln 3: den = 3 + e^0 = 4; the empty row keeps zeros, lse = ln 3.
        r = sdpa_ref(q, k, v, scale=1, window_left=1, window_right=1, sinks=[LN3])
        self.expect_row(r, 0, 0, 0, [.25, 0], .25, LN4)
        self.expect_row(r, 0, 0, 1, [0, .25], .5, LN4)
        self.expect_row(r, 0, 0, 2, [0, 0], 0, LN3)

    # ---- softcap

    def test_softcap_on_the_scaled_score(self):
        # q = 4, k = 1, scale 0.5: s = 2; softcap 1: tanh(2) = 0.96402758...
        # One key: lse is the score itself.
        q, k, v = tiny(q=[4], k=[1], v=[5])
        r = sdpa_ref(q, k, v, scale=0.5, softcap=1.0)
        self.expect_row(r, 0, 0, 0, [1], 5, 0.9640275800758169)
        r = sdpa_ref(q, k, v, scale=0.5, softcap=30.0)
        self.expect_row(r, 0, 0, 0, [1], 5, 30 * math.tanh(2 / 30))

    def test_softcap_before_the_additive_mask(self):
        # Scaled 2, 0, 2 -> capped t, 0, t (t = tanh 2) -> + mask (0, 3, -inf):
        # t, 3, blocked. den = e^t + e^3.
        q, k, v = tiny(Lk=3, q=[4], k=[1, 0, 1], v=[1, 2, 4])
        mask = np.array([0.0, 3.0, -np.inf], np.float32)
        r = sdpa_ref(q, k, v, scale=0.5, softcap=1.0, mask=mask)
        t = math.tanh(2)
        den = math.exp(t) + math.exp(3)
        self.expect_row(r, 0, 0, 0, [math.exp(t) / den, math.exp(3) / den, 0],
                        (math.exp(t) + 2 * math.exp(3)) / den, math.log(den))

    # ---- ALiBi

    def test_alibi_slope_per_query_head_with_gqa(self):
        # Scores 0; s = slope[h] * (j - i). Two query heads, one k/v head.
        q, k, v = tiny(Hq=2, Hkv=1, Lq=2, Lk=3, v=[1, 2, 4])
        r = sdpa_ref(q, k, v, scale=1, alibi_slopes=[1.0, 0.5])
        e, rt = math.e, math.exp(0.5)
        d0 = 1 + e + e * e  # head 0 row 0: biases 0, 1, 2
        w0 = [1 / d0, e / d0, e * e / d0]
        self.expect_row(r, 0, 0, 0, w0, (1 + 2 * e + 4 * e * e) / d0, math.log(d0))
        # Row 1: biases -1, 0, 1: same weights, lse lower by 1.
        self.expect_row(r, 0, 0, 1, w0, (1 + 2 * e + 4 * e * e) / d0, math.log(d0) - 1)
        d1 = 1 + rt + e  # head 1 row 0: biases 0, 0.5, 1
        self.expect_row(r, 0, 1, 0, [1 / d1, rt / d1, e / d1], (1 + 2 * rt + 4 * e) / d1,
                        math.log(d1))
        self.expect_row(r, 0, 1, 1, [1 / d1, rt / d1, e / d1], (1 + 2 * rt + 4 * e) / d1,
                        math.log(d1) - 0.5)

    def test_alibi_uses_the_query_position(self):
        # bottom-right, Lq = 1, Lk = 3: p = 2, biases -2, -1, 0.
        q, k, v = tiny(Lk=3, v=[1, 2, 4])
        r = sdpa_ref(q, k, v, scale=1, causal="bottom_right", alibi_slopes=[1.0])
        a, b = math.exp(-2), math.exp(-1)
        den = a + b + 1
        self.expect_row(r, 0, 0, 0, [a / den, b / den, 1 / den], (a + 2 * b + 4) / den,
                        math.log(den))

    # ---- sinks

    def test_sink_quarter_weights(self):
        # Two scores of 0, sink ln 2: den = 2 + 1 + 1 = 4.
        q, k, v = tiny(Lk=2, v=[1, 3])
        r = sdpa_ref(q, k, v, scale=1, sinks=[LN2])
        self.expect_row(r, 0, 0, 0, [.25, .25], 1.0, LN4)

    def test_sink_per_head_and_minus_inf_is_off(self):
        q, k, v = tiny(Hq=2, Hkv=1, Lk=2, v=[1, 3])
        r = sdpa_ref(q, k, v, scale=1, sinks=[LN2, -INF])
        self.expect_row(r, 0, 0, 0, [.25, .25], 1.0, LN4)
        self.expect_row(r, 0, 1, 0, [.5, .5], 2.0, LN2)
        off = sdpa_ref(q, k, v, scale=1, sinks=[-INF, -INF])
        plain = sdpa_ref(q, k, v, scale=1)
        for a, b in zip(off, plain):
            np.testing.assert_array_equal(a, b)

    def test_sink_with_fully_masked_row(self):
        q, k, v = tiny(Lq=2, Lk=2, v=[1, 3])
        mask = np.array([[True, True], [False, False]])
        r = sdpa_ref(q, k, v, scale=1, mask=mask, sinks=[0.5])
        den = math.exp(0.5) + 2
        self.expect_row(r, 0, 0, 0, [1 / den, 1 / den], 4 / den, math.log(den))
        self.expect_row(r, 0, 0, 1, [0, 0], 0, 0.5)
        self.assertEqual(r[2][0, 0, 1], 0.5)
        # The same with an additive -inf mask.
        r = sdpa_ref(q, k, v, scale=1, mask=np.where(mask, 0.0, -np.inf), sinks=[0.5])
        self.expect_row(r, 0, 0, 1, [0, 0], 0, 0.5)

    def test_sink_not_scaled_or_capped_and_large_logits(self):
        # One key, s = tanh(2) (q 4, k 1, scale 0.5, softcap 1); sink 2 as given.
        q, k, v = tiny(q=[4], k=[1], v=[3])
        r = sdpa_ref(q, k, v, scale=0.5, softcap=1.0, alibi_slopes=[1.0], sinks=[2.0])
        s = math.tanh(2)
        den = math.exp(2) + math.exp(s)
        self.expect_row(r, 0, 0, 0, [math.exp(s) / den], 3 * math.exp(s) / den, math.log(den))
        # A sink of 1000 with scores 0: lse 1000, weights underflow to 0.
        q, k, v = tiny(Lk=2, v=[1, 3])
        o, w, l = sdpa_ref(q, k, v, scale=1, sinks=[1000.0])
        self.assertEqual(l[0, 0, 0], 1000.0)
        self.assertTrue(np.all(w == 0) and np.all(o == 0))

    # ---- together

    def test_combined(self):
        # GQA, bottom-right (p = i + 2), window_left 2, softcap 2, slopes
        # (1, 0.5), sinks (0, off). q: head 0 = 1, head 1 = 0; k = 0..3.
        q, k, v = tiny(Hq=2, Hkv=1, Lq=2, Lk=4, q=[1, 1, 0, 0], k=[0, 1, 2, 3], v=[1, 2, 4, 8])
        r = sdpa_ref(q, k, v, scale=1, causal="bottom_right", window_left=2, softcap=2.0,
                     alibi_slopes=[1.0, 0.5], sinks=[0.0, -INF])
        ex, th = math.exp, math.tanh
        # Head 0 row 0, keys 1, 2: 2 tanh(1/2) - 1, 2 tanh(1) + 0; sink e^0.
        s1, s2 = 2 * th(0.5) - 1, 2 * th(1.0)
        den = 1 + ex(s1) + ex(s2)
        self.expect_row(r, 0, 0, 0, [0, ex(s1) / den, ex(s2) / den, 0],
                        (2 * ex(s1) + 4 * ex(s2)) / den, math.log(den))
        # Head 0 row 1, keys 2, 3: 2 tanh(1) - 1, 2 tanh(3/2).
        s2, s3 = 2 * th(1.0) - 1, 2 * th(1.5)
        den = 1 + ex(s2) + ex(s3)
        self.expect_row(r, 0, 0, 1, [0, 0, ex(s2) / den, ex(s3) / den],
                        (4 * ex(s2) + 8 * ex(s3)) / den, math.log(den))
        # Head 1: scores 0, biases -0.5, 0, no sink.
        a = ex(-0.5)
        den = a + 1
        self.expect_row(r, 0, 1, 0, [0, a / den, 1 / den, 0], (2 * a + 4) / den, math.log(den))
        self.expect_row(r, 0, 1, 1, [0, 0, a / den, 1 / den], (4 * a + 8) / den, math.log(den))

    def test_values_without_meaning_are_refused(self):
        q, k, v = tiny(Lk=2)
        for kw in (dict(window_left=-1), dict(window_right=-1), dict(softcap=-1.0),
                   dict(softcap=float("nan")), dict(softcap=INF), dict(sinks=[float("nan")]),
                   dict(sinks=[INF]), dict(alibi_slopes=[float("nan")]),
                   dict(alibi_slopes=[-INF])):
            with self.assertRaises(ValueError, msg=str(kw)):
                sdpa_ref(q, k, v, **kw)


if __name__ == "__main__":
    unittest.main()
