# SPDX-License-Identifier: Apache-2.0
"""hwyattn.MultiheadAttention against the float64 oracle: projections,
per-head attention and the output projection."""

import gc
import unittest

import numpy as np

from reference import TOLERANCE, mha_ref, rel_err
import hwyattn


def make_weights(rng, E, H, D=None, Hkv=None, kdim=None, vdim=None, bias=True):
    D = D or E // H
    Hkv = Hkv or H
    kdim, vdim = kdim or E, vdim or E
    n = lambda *s: (rng.standard_normal(s) * 0.4).astype(np.float32)  # noqa: E731
    w = dict(w_q=n(H * D, E), w_k=n(Hkv * D, kdim), w_v=n(Hkv * D, vdim), w_o=n(E, H * D))
    if bias:
        w.update(b_q=n(H * D), b_k=n(Hkv * D), b_v=n(Hkv * D), b_o=n(E))
    return w


class MhaTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(99)

    def x(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def check(self, got, ref, what="out"):
        err = rel_err(got, ref)
        self.assertLess(err, TOLERANCE, "%s: max|err|/max|ref| = %g" % (what, err))

    def run_case(self, E=16, H=4, D=None, Hkv=None, kdim=None, vdim=None, bias=True, B=2,
                 Lq=5, Lk=None, cross=False, **call):
        w = make_weights(self.rng, E, H, D, Hkv, kdim, vdim, bias)
        mha = hwyattn.MultiheadAttention(E, H, head_dim=D, num_kv_heads=Hkv, kdim=kdim,
                                         vdim=vdim, bias=bias, **w)
        with mha:
            query = self.x(B, Lq, E)
            if cross:
                Lk = Lk or Lq
                key, value = self.x(B, Lk, kdim or E), self.x(B, Lk, vdim or E)
            else:
                key = value = None
            ref_mask = call.pop("ref_mask", None)
            ref_kv_len = call.pop("ref_kv_len", None)
            out, weights = mha(query, key, value, need_weights=True, **call)
            ro, rw = mha_ref(query, query if key is None else key,
                             query if value is None else value, num_heads=H, num_kv_heads=Hkv,
                             head_dim=D, causal=call.get("causal", False), mask=ref_mask,
                             kv_len=ref_kv_len if ref_kv_len is not None else call.get("kv_len"),
                             **w)
            self.assertEqual(out.shape, (B, Lq, E))
            self.assertEqual(weights.shape, (B, H, Lq, ro.shape[1] if key is None
                                             else key.shape[1]))
            self.check(out, ro)
            self.check(weights, rw, "weights")
            # Without need_weights: the same output, alone.
            again = mha(query, key, value, **call)
            self.assertIsInstance(again, np.ndarray)
            self.check(again, ro, "out without weights")
        return mha

    def test_self_attention(self):
        self.run_case()

    def test_half_outputs(self):
        # out= in float16 and bfloat16 bits (strided): the float32 result
        # rounded once (numpy's float16 cast and a hand rounding for bf16).
        E, H = 16, 4
        mha = hwyattn.MultiheadAttention(E, H, **make_weights(self.rng, E, H))
        with mha:
            x = self.x(2, 5, E)
            want = mha(x, causal=True)
            half = np.zeros((2, 5, 2 * E), np.float16)[..., ::2]
            self.assertIs(mha(x, causal=True, out=half), half)
            np.testing.assert_array_equal(half, want.astype(np.float16))
            bits = np.zeros((2, 5, E), np.uint16)
            mha(x, causal=True, out=bits, out_dtype="bfloat16")
            u = want.view(np.uint32).astype(np.uint64)
            np.testing.assert_array_equal(bits, ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(
                np.uint16))
            with self.assertRaises(hwyattn.InvalidArgumentError):
                mha(x, out=np.zeros((2, 5, E + 1), np.float32))

    def test_cross_attention_kdim_vdim(self):
        self.run_case(E=16, H=4, kdim=10, vdim=6, cross=True, Lq=5, Lk=7)

    def test_no_bias(self):
        self.run_case(bias=False)
        self.run_case(bias=False, cross=True, kdim=12, Lk=3)

    def test_gqa(self):
        self.run_case(E=16, H=4, Hkv=2)
        self.run_case(E=16, H=4, Hkv=1, cross=True, Lk=9)

    def test_head_dim_not_embed_over_heads(self):
        self.run_case(E=12, H=3, D=8)
        self.run_case(E=10, H=4, D=6, Hkv=2, kdim=7, vdim=5, cross=True, Lk=4)

    def test_causal(self):
        self.run_case(causal=True)
        self.run_case(causal="bottom_right", cross=True, Lq=3, Lk=6)

    def test_key_padding_mask_suffix_and_general(self):
        B, Lk = 3, 6
        suffix = np.zeros((B, Lk), bool)
        suffix[0, 4:] = True
        suffix[2, 1:] = True
        self.run_case(B=B, cross=True, Lk=Lk, key_padding_mask=suffix,
                      ref_mask=~suffix[:, None, None, :])
        general = np.zeros((B, Lk), bool)
        general[0, [0, 3]] = True
        general[1, 2] = True
        self.run_case(B=B, cross=True, Lk=Lk, key_padding_mask=general,
                      ref_mask=~general[:, None, None, :])
        # Combined with causal and an explicit kv_len.
        self.run_case(B=B, Lq=Lk, key_padding_mask=general, causal=True, kv_len=[6, 4, 5],
                      ref_mask=~general[:, None, None, :])

    def test_kv_len(self):
        self.run_case(B=2, cross=True, Lk=6, kv_len=[6, 2])

    def test_attn_mask_torch_convention(self):
        B, H, Lq, Lk = 2, 4, 5, 6
        blocked = self.rng.random((Lq, Lk)) < 0.3
        blocked[:, 0] = False  # every row keeps a key
        self.run_case(B=B, H=H, cross=True, Lk=Lk, attn_mask=blocked, ref_mask=~blocked)
        add = self.x(B * H, Lq, Lk)
        self.run_case(B=B, H=H, cross=True, Lk=Lk, attn_mask=add,
                      ref_mask=add.reshape(B, H, Lq, Lk))
        # A float mask together with a non-suffix key_padding_mask.
        pad = np.zeros((B, Lk), bool)
        pad[1, 2] = True
        ref = np.where(~pad[:, None, None, :], add.reshape(B, H, Lq, Lk), -np.inf)
        self.run_case(B=B, H=H, cross=True, Lk=Lk, attn_mask=add, key_padding_mask=pad,
                      ref_mask=ref)

    def test_unbatched_and_averaged_weights(self):
        E, H = 16, 4
        w = make_weights(self.rng, E, H)
        with hwyattn.MultiheadAttention(E, H, **w) as mha:
            x = self.x(5, E)
            out, weights = mha(x, need_weights=True)
            ro, rw = mha_ref(x[None], x[None], x[None], num_heads=H, **w)
            self.assertEqual(out.shape, (5, E))
            self.assertEqual(weights.shape, (H, 5, 5))
            self.check(out, ro[0])
            self.check(weights, rw[0], "weights")
            xb = x[None]
            _, avg = mha(xb, need_weights=True, average_attn_weights=True)
            self.assertEqual(avg.shape, (1, 5, 5))
            self.check(avg, rw.mean(axis=1), "averaged weights")

    def test_value_defaults_to_key(self):
        E, H = 16, 4
        w = make_weights(self.rng, E, H)
        with hwyattn.MultiheadAttention(E, H, **w) as mha:
            q, kv = self.x(2, 3, E), self.x(2, 7, E)
            self.check(mha(q, kv), mha_ref(q, kv, kv, num_heads=H, **w)[0])

    def test_strided_query(self):
        E, H = 16, 4
        w = make_weights(self.rng, E, H)
        with hwyattn.MultiheadAttention(E, H, **w) as mha:
            q = self.x(5, 2, E).transpose(1, 0, 2)  # [L, B, E] memory (batch_first=False)
            self.check(mha(q), mha_ref(q, q, q, num_heads=H, **w)[0])

    def test_from_torch_state(self):
        E, H, B, L = 16, 4, 2, 5
        w = make_weights(self.rng, E, H)
        sd = {"in_proj_weight": np.concatenate([w["w_q"], w["w_k"], w["w_v"]]),
              "in_proj_bias": np.concatenate([w["b_q"], w["b_k"], w["b_v"]]),
              "out_proj.weight": w["w_o"], "out_proj.bias": w["b_o"]}
        x = self.x(B, L, E)
        ro = mha_ref(x, x, x, num_heads=H, **w)[0]
        with hwyattn.MultiheadAttention.from_torch_state(sd, num_heads=H) as mha:
            self.assertEqual((mha.embed_dim, mha.num_heads, mha.head_dim, mha.bias),
                             (E, H, 4, True))
            self.check(mha(x), ro)
        prefixed = {"layer.self_attn." + k: v for k, v in sd.items()}
        with hwyattn.MultiheadAttention.from_torch_state(prefixed, num_heads=H) as mha:
            self.check(mha(x), ro)
        # kdim/vdim != embed_dim: separate projection weights, no bias.
        w2 = make_weights(self.rng, E, H, kdim=6, vdim=9, bias=False)
        sd2 = {"q_proj_weight": w2["w_q"], "k_proj_weight": w2["w_k"],
               "v_proj_weight": w2["w_v"], "out_proj.weight": w2["w_o"]}
        k, v = self.x(B, 7, 6), self.x(B, 7, 9)
        with hwyattn.MultiheadAttention.from_torch_state(sd2, num_heads=H) as mha:
            self.assertEqual((mha.kdim, mha.vdim, mha.bias), (6, 9, False))
            self.check(mha(x, k, v), mha_ref(x, k, v, num_heads=H, **w2)[0])

    def test_default_weights_are_seeded(self):
        a = hwyattn.MultiheadAttention(16, 4, seed=3)
        b = hwyattn.MultiheadAttention(16, 4, seed=3)
        x = self.x(1, 4, 16)
        np.testing.assert_array_equal(a(x), b(x))
        self.assertTrue(np.all(a.b_q == 0))
        self.check(a(x), mha_ref(x, x, x, num_heads=4, w_q=a.w_q, w_k=a.w_k, w_v=a.w_v,
                                 w_o=a.w_o, b_q=a.b_q, b_k=a.b_k, b_v=a.b_v, b_o=a.b_o)[0])
        a.close()
        b.close()

    def test_weights_are_copied(self):
        E, H = 16, 4
        w = make_weights(self.rng, E, H)
        x = self.x(1, 4, E)
        mha = hwyattn.MultiheadAttention(E, H, **w)
        before = mha(x)
        w["w_q"][:] = 0  # the module (and the library) keep their own copies
        np.testing.assert_array_equal(mha(x), before)
        mha.close()

    def test_close_and_lifetime(self):
        mha = hwyattn.MultiheadAttention(16, 4)
        mha.close()
        mha.close()  # idempotent
        self.assertIn("closed", repr(mha))
        with self.assertRaises(hwyattn.Error):
            mha(self.x(1, 3, 16))
        for _ in range(50):  # handles freed by garbage collection
            hwyattn.MultiheadAttention(16, 4)
        gc.collect()


class MhaErrorTest(unittest.TestCase):
    def assertInvalid(self, pattern, fn, *args, **kwargs):
        with self.assertRaises(hwyattn.InvalidArgumentError) as cm:
            fn(*args, **kwargs)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIsInstance(cm.exception, hwyattn.Error)
        self.assertEqual(cm.exception.status, 1)
        self.assertRegex(str(cm.exception), pattern)

    def test_bad_config_and_weights(self):
        M = hwyattn.MultiheadAttention
        self.assertInvalid(r"not a multiple of num_heads", M, 10, 4)
        self.assertInvalid(r"num_kv_heads is 3", M, 16, 4, num_kv_heads=3)
        self.assertInvalid(r"w_k: shape is \(16, 16\); must be \(16, 8\)", M, 16, 4, kdim=8,
                           w_k=np.zeros((16, 16), np.float32))
        self.assertInvalid(r"b_o: shape", M, 16, 4, b_o=np.zeros(15, np.float32))
        self.assertInvalid(r"bias=False", M, 16, 4, bias=False, b_q=np.zeros(16, np.float32))
        self.assertInvalid(r"add_bias_kv", M.from_torch_state,
                           {"out_proj.weight": np.zeros((4, 4)), "bias_k": np.zeros((1, 1, 4)),
                            "in_proj_weight": np.zeros((12, 4))}, 2)

    def test_bad_inputs_carry_library_message(self):
        with hwyattn.MultiheadAttention(16, 4) as mha:
            x = np.zeros((2, 5, 16), np.float32)
            with self.assertRaises(hwyattn.Error) as cm:
                mha(np.zeros((2, 5, 12), np.float32))
            self.assertIsInstance(cm.exception, ValueError)
            self.assertRegex(str(cm.exception), r"query")
            self.assertRegex(str(cm.exception), r"12")
            with self.assertRaises(hwyattn.Error) as cm:
                mha(x, np.zeros((2, 6, 16), np.float32), np.zeros((2, 7, 16), np.float32))
            self.assertRegex(str(cm.exception), r"value")
            self.assertInvalid(r"key_padding_mask: shape", mha, x,
                               key_padding_mask=np.zeros((2, 4), bool))
            self.assertInvalid(r"kv_len", mha, x, kv_len=[9, 1])


if __name__ == "__main__":
    unittest.main()
