# SPDX-License-Identifier: Apache-2.0
"""hwyattn.merge_states against numpy float64, and split-and-merge of
hwyattn.sdpa results against the unsplit call."""

import unittest

import numpy as np

from reference import rel_err, sdpa_ref
import hwyattn


def merge_ref(outs, lses, sinks=None):
    """The definition in float64: L = log(sum_i exp(lse_i) + exp(sink)),
    out = sum_i exp(lse_i - L) out_i over the partials whose lse is not -inf."""
    outs = [np.asarray(o, np.float64) for o in outs]
    lses = np.stack([np.asarray(l, np.float64) for l in lses])  # [n, B, H, L]
    terms = lses
    if sinks is not None:  # along the head axis: the second-to-last of [.., H, L]
        z = np.asarray(sinks, np.float64).reshape(-1)
        lead = lses.shape[1:]
        sink = np.broadcast_to(z[:, None], lead) if len(lead) >= 2 else np.full(lead, z[0])
        terms = np.concatenate([lses, sink[None]])
    top = terms.max(axis=0)
    finite = np.isfinite(top)
    safe = np.where(finite, top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(finite, safe + np.log(np.exp(terms - safe).sum(axis=0)), -np.inf)
        out = np.zeros_like(outs[0])
        for o, l in zip(outs, lses):
            w = np.where(np.isneginf(l), 0.0, np.exp(l - np.where(finite, total, 0.0)))
            out = out + np.where(np.isneginf(l)[..., None], 0.0, w[..., None] * o)
    return out, total


def ulp(x):
    return float(np.spacing(np.float32(abs(x))))


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(321)

    def partials(self, n, shape, lo=-4.0, hi=4.0, blocked=0.2):
        r = self.rng
        outs = [r.uniform(-1, 1, shape).astype(np.float32) for _ in range(n)]
        lses = []
        for _ in range(n):
            l = r.uniform(lo, hi, shape[:-1]).astype(np.float32)
            l[r.random(l.shape) < blocked] = -np.inf
            lses.append(l)
        return outs, lses

    def check(self, got, want, tol, what):
        err = rel_err(got, want)
        self.assertLess(err, tol, "%s: max|err|/max|ref| = %g" % (what, err))

    def test_against_float64(self):
        for n, shape in ((1, (2, 3, 4, 8)), (2, (3, 5, 16)), (3, (7, 33)), (5, (2, 2, 9, 1)),
                         (4, (1, 4, 6, 130))):
            outs, lses = self.partials(n, shape)
            out, lse = hwyattn.merge_states(outs, lses)
            self.assertEqual(out.shape, shape)
            self.assertEqual(out.dtype, np.float32)
            self.assertEqual(lse.shape, shape[:-1])
            ro, rl = merge_ref(outs, lses)
            self.check(out, ro, 1e-6, "out n=%d %s" % (n, shape))
            self.check(lse, rl, 1e-6, "lse n=%d %s" % (n, shape))

    def test_sinks(self):
        shape = (2, 3, 5, 12)
        outs, lses = self.partials(3, shape)
        sinks = np.array([0.5, -np.inf, 3.0], np.float32)
        out, lse = hwyattn.merge_states(outs, lses, sinks=sinks)
        ro, rl = merge_ref(outs, lses, sinks)
        self.check(out, ro, 1e-6, "out with sinks")
        self.check(lse, rl, 1e-6, "lse with sinks")
        # A row every partial missed: zeros, lse = the sink (-inf when off).
        for l in lses:
            l[1, :, 2] = -np.inf
        out, lse = hwyattn.merge_states(outs, lses, sinks=sinks)
        self.assertTrue(np.all(out[1, :, 2] == 0))
        np.testing.assert_array_equal(lse[1, :, 2], sinks)

    def test_all_blocked_and_single(self):
        outs = [np.full((2, 4), np.nan, np.float32)] * 2
        lses = [np.full((2,), -np.inf, np.float32)] * 2
        out, lse = hwyattn.merge_states(outs, lses)
        self.assertTrue(np.all(out == 0))
        self.assertTrue(np.all(np.isneginf(lse)))
        o, l = self.partials(1, (3, 2, 5, 7), blocked=0.0)
        out, lse = hwyattn.merge_states(o, l)
        np.testing.assert_array_equal(out, o[0])  # n = 1 is a copy
        np.testing.assert_array_equal(lse, l[0])

    def test_strided_views_and_dtypes(self):
        # kv_attention-style [T, H, Dv] and [T, H] memory, seen as [H, T, Dv]
        # and [H, T]; float64 inputs are converted.
        T, H, Dv = 6, 3, 10
        mem = [self.rng.uniform(-1, 1, (T, H, Dv)) for _ in range(2)]
        lmem = [self.rng.uniform(-2, 2, (T, H)).astype(np.float32) for _ in range(2)]
        outs = [m.astype(np.float32).transpose(1, 0, 2) for m in mem]
        lses = [l.T for l in lmem]
        sinks = np.array([-1.0, 0.0, 1.0])
        out, lse = hwyattn.merge_states(outs, lses, sinks)
        ro, rl = merge_ref(outs, lses, sinks)
        self.check(out, ro, 1e-6, "strided out")
        self.check(lse, rl, 1e-6, "strided lse")
        out64, _ = hwyattn.merge_states([m.transpose(1, 0, 2) for m in mem], lses, sinks)
        np.testing.assert_array_equal(out64, out)

    def test_split_and_merge_matches_unsplit_sdpa(self):
        r = self.rng
        for causal in (False, "top_left", "bottom_right"):
            B, Hq, Hkv, Lq, Lk, D, Dv = 2, 4, 2, 9, 50, 16, 12
            q = r.standard_normal((B, Hq, Lq, D)).astype(np.float32)
            k = r.standard_normal((B, Hkv, Lk, D)).astype(np.float32)
            v = r.standard_normal((B, Hkv, Lk, Dv)).astype(np.float32)
            mask = r.random((B, 1, Lq, Lk)) < 0.8
            kv_len = np.array([37, 50])
            whole, whole_lse = hwyattn.sdpa(q, k, v, causal=causal, mask=mask, kv_len=kv_len,
                                            return_lse=True)
            # The whole problem's causal rule as a bool mask over all keys.
            i = np.arange(Lq)[:, None]
            j = np.arange(Lk)[None, :]
            allowed = np.ones((Lq, Lk), bool)
            if causal == "top_left":
                allowed = j <= i
            elif causal == "bottom_right":
                allowed = j <= i + Lk - Lq
            full = mask & allowed
            outs, lses = [], []
            cuts = [0, 7, 20, 21, 44, Lk]
            for a, b in zip(cuts[:-1], cuts[1:]):
                shard_len = np.clip(kv_len - a, 0, b - a)
                o, l = hwyattn.sdpa(q, k[:, :, a:b], v[:, :, a:b], mask=full[..., a:b],
                                    kv_len=shard_len, return_lse=True)
                outs.append(o)
                lses.append(l)
            self.assertTrue(np.isneginf(lses[-1][0]).all())  # batch 0 sees no key >= 37
            out, lse = hwyattn.merge_states(outs, lses)
            finite = np.isfinite(whole_lse)
            tol = max(2e-6, 4 * ulp(np.abs(whole_lse[finite]).max()))
            self.check(out, whole, tol, "split and merge, causal=%s" % causal)
            self.check(lse, whole_lse, tol, "split and merge lse, causal=%s" % causal)
            # And the float64 oracle's unsplit problem with sinks.
            sinks = np.array([0.0, 1.0, -np.inf, 2.0], np.float32)
            out_s, lse_s = hwyattn.merge_states(outs, lses, sinks)
            ro, _, rl = sdpa_ref(q, k, v, causal=causal, mask=mask, kv_len=kv_len, sinks=sinks)
            self.check(out_s, ro, 1e-5, "merge with sinks vs oracle, causal=%s" % causal)
            self.check(lse_s, rl, 1e-5, "lse with sinks vs oracle, causal=%s" % causal)

    def test_errors(self):
        outs, lses = self.partials(2, (2, 3, 4, 8))
        with self.assertRaises(hwyattn.InvalidArgumentError) as cm:
            hwyattn.merge_states([outs[0], outs[1][..., :5]], lses)
        self.assertIn("outs[1]: value_dim (shape[3]) is 5 but outs[0] has 8", str(cm.exception))
        with self.assertRaises(hwyattn.InvalidArgumentError) as cm:
            hwyattn.merge_states(outs, [lses[0], lses[1][:, :, :3]])
        self.assertIn("lses[1]: length (shape[2]) is 3 but outs[0] has 4", str(cm.exception))
        with self.assertRaises(hwyattn.InvalidArgumentError) as cm:
            hwyattn.merge_states(outs, lses, sinks=[0.0, np.nan, 1.0])
        self.assertIn("sinks[1] is nan", str(cm.exception))
        with self.assertRaises(hwyattn.InvalidArgumentError):
            hwyattn.merge_states(outs, lses, sinks=[0.0, np.inf, 1.0])
        with self.assertRaises(ValueError):
            hwyattn.merge_states(outs, lses, sinks=[0.0, 1.0])  # not [H]
        with self.assertRaises(ValueError):
            hwyattn.merge_states(outs, lses[:1])
        with self.assertRaises(ValueError):
            hwyattn.merge_states([], [])
        with self.assertRaises(TypeError):
            hwyattn.merge_states(outs[0], lses[0])


if __name__ == "__main__":
    unittest.main()
