# SPDX-License-Identifier: Apache-2.0
"""The score modifiers (windows, softcap, ALiBi, sinks) of hwyattn.sdpa and
hwyattn.MultiheadAttention against numpy float64 (reference.py). PyTorch has
no softcap or sinks, so these are checked against numpy only."""

import unittest

import numpy as np

from reference import TOLERANCE, mha_ref, rel_err, sdpa_ref
import hwyattn


class ModifiersTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(2024)

    def rand(self, *shape, amp=1.0):
        return (amp * self.rng.standard_normal(shape)).astype(np.float32)

    def check_all(self, q, k, v, **kw):
        out, w, lse = hwyattn.sdpa(q, k, v, return_weights=True, return_lse=True, **kw)
        ro, rw, rl = sdpa_ref(q, k, v, **kw)
        self.assertLess(rel_err(out, ro), TOLERANCE, "out %s" % (kw,))
        self.assertLess(rel_err(w, rw), TOLERANCE, "weights %s" % (kw,))
        finite = np.isfinite(rl)
        np.testing.assert_array_equal(np.isfinite(lse), finite)
        np.testing.assert_allclose(lse[finite], rl[finite], rtol=1e-5, atol=1e-5)
        # A blocked key's weight is exactly zero.
        self.assertTrue(np.all(w[rw == 0] == 0), "weights of blocked keys %s" % (kw,))
        return out, w, lse

    def test_each_modifier_and_all_together(self):
        H = 4
        slopes = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
        sinks = np.array([0.0, 1.5, -2.0, -np.inf], np.float32)
        cases = [dict(window_left=3), dict(window_right=2), dict(window_left=5, window_right=3),
                 dict(softcap=1.5), dict(alibi_slopes=slopes), dict(sinks=sinks),
                 dict(window_left=4, softcap=2.0, alibi_slopes=slopes, sinks=sinks)]
        for causal in (False, True, "bottom_right"):
            for Lq, Lk in ((7, 7), (3, 9), (1, 40), (60, 200)):
                q = self.rand(2, H, Lq, 16, amp=2.0)
                k, v = self.rand(2, 2, Lk, 16), self.rand(2, 2, Lk, 8)  # GQA 2:1
                for kw in cases:
                    self.check_all(q, k, v, causal=causal, kv_len=[Lk, max(1, Lk // 2)], **kw)

    def test_sinks_fully_blocked_row(self):
        q, k, v = self.rand(1, 2, 2, 4), self.rand(1, 2, 3, 4), self.rand(1, 2, 3, 4)
        sinks = np.array([0.25, -3.0], np.float32)
        out, w, lse = self.check_all(q, k, v, kv_len=[0], sinks=sinks)
        np.testing.assert_array_equal(out, 0)
        np.testing.assert_array_equal(lse[0], np.repeat(sinks[:, None], 2, axis=1))

    def test_sink_of_ln2_hand_values(self):
        # Two keys with equal scores (q = 0) and a sink of ln 2: the
        # denominator is 1 + 1 + 2 = 4, so the weights are 1/4 each and
        # lse = ln 4; out = (v0 + v1) / 4.
        q = np.zeros((1, 1, 1, 2), np.float32)
        k = self.rand(1, 1, 2, 2)
        v = np.array([[[[1.0, 2.0], [3.0, 6.0]]]], np.float32)
        out, w, lse = hwyattn.sdpa(q, k, v, sinks=np.array([np.log(2.0)], np.float32),
                                   return_weights=True, return_lse=True)
        np.testing.assert_allclose(w[0, 0, 0], [0.25, 0.25], rtol=1e-6)
        np.testing.assert_allclose(lse[0, 0, 0], np.log(4.0), rtol=1e-6)
        np.testing.assert_allclose(out[0, 0, 0], [1.0, 2.0], rtol=1e-6)

    def test_softcap_hand_value(self):
        # One key: the output is its value whatever the cap; lse is the capped
        # score: q.k = 4 (scale 1), softcap 2 -> 2 tanh(2).
        q = np.array([[[[2.0, 0.0]]]], np.float32)
        k = np.array([[[[2.0, 5.0]]]], np.float32)
        v = np.array([[[[7.0]]]], np.float32)
        out, lse = hwyattn.sdpa(q, k, v, scale=1.0, softcap=2.0, return_lse=True)
        np.testing.assert_allclose(lse[0, 0, 0], 2.0 * np.tanh(2.0), rtol=1e-6)
        np.testing.assert_allclose(out[0, 0, 0, 0], 7.0, rtol=1e-6)

    def test_bad_values_are_rejected(self):
        q = self.rand(1, 2, 3, 4)
        for kw, needle in ((dict(window_left=-1), "window_left"),
                           (dict(softcap=float("nan")), "softcap"),
                           (dict(softcap=-1.0), "softcap"),
                           (dict(alibi_slopes=[0.1, float("nan")]), "alibi_slopes[1]"),
                           (dict(sinks=[float("inf"), 0.0]), "sinks[0]"),
                           (dict(sinks=[0.0, 0.0, 0.0]), "sinks")):
            with self.assertRaises(hwyattn.InvalidArgumentError) as cm:
                hwyattn.sdpa(q, q, q, **kw)
            self.assertIn(needle, str(cm.exception))

    def test_module_modifiers(self):
        E, H, Hkv, D = 16, 4, 2, 4
        w = {name: self.rand(*shape, amp=0.3) for name, shape in
             (("w_q", (H * D, E)), ("w_k", (Hkv * D, E)), ("w_v", (Hkv * D, E)),
              ("w_o", (E, H * D)))}
        slopes = np.array([0.3, 0.2, 0.1, 0.05], np.float32)
        sinks = np.array([0.5, -1.0, 0.0, 2.0], np.float32)
        x = self.rand(2, 9, E)
        with hwyattn.MultiheadAttention(E, H, num_kv_heads=Hkv, bias=False, **w) as mha:
            for kw in (dict(window_left=3), dict(softcap=0.5, alibi_slopes=slopes),
                       dict(sinks=sinks, window_left=2, window_right=2)):
                out, weights = mha(x, need_weights=True, causal=True, **kw)
                ro, rw = mha_ref(x, x, x, num_heads=H, num_kv_heads=Hkv, causal=True, **w, **kw)
                self.assertLess(rel_err(out, ro), TOLERANCE, str(kw))
                self.assertLess(rel_err(weights, rw), TOLERANCE, str(kw))


if __name__ == "__main__":
    unittest.main()
