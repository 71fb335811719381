# SPDX-License-Identifier: Apache-2.0
"""hwyattn.MultiheadAttention against torch.nn.MultiheadAttention outputs
stored in tests/data/mha_torch_reference.npz (made by
tests/data/make_mha_torch_reference.py with torch 1.13.0a0; torch is not
needed here). Each case checks the output and the per-head weights to
max|err|/max|ref| < 1e-5, and also checks the float64 oracle of
reference.py against torch, so the two references agree."""

import os
import unittest

import numpy as np

from reference import TOLERANCE, mha_ref, rel_err
import hwyattn

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "mha_torch_reference.npz")


def load_case(data, name):
    prefix = name + "."
    d = {k[len(prefix):]: v for k, v in data.items() if k.startswith(prefix)}
    sd = {k[3:]: v for k, v in d.items() if k.startswith("sd.")}
    return d, sd


class TorchParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with np.load(DATA) as f:
            cls.data = {k: f[k] for k in f.files}

    def check(self, got, ref, what):
        err = rel_err(got, ref)
        self.assertLess(err, TOLERANCE, "%s: max|err|/max|ref| = %g" % (what, err))

    def run_case(self, name, **call):
        d, sd = load_case(self.data, name)
        H = int(d["num_heads"])
        key, value = d.get("key"), d.get("value")
        with hwyattn.MultiheadAttention.from_torch_state(sd, num_heads=H) as mha:
            out, w = mha(d["query"], key, value, key_padding_mask=d.get("key_padding_mask"),
                         need_weights=True, **call)
            self.check(out, d["out"], "%s out" % name)
            self.check(w, d["weights"], "%s weights" % name)
        return d, sd

    def test_version_recorded(self):
        self.assertTrue(str(self.data["torch_version"]))

    def test_a_bias_self_attention_key_padding(self):
        d, sd = self.run_case("a")
        self.assertTrue(d["key_padding_mask"].any())

    def test_b_no_bias_causal(self):
        d, _ = self.run_case("b", causal=True)
        self.assertNotIn("in_proj_bias", _)
        # The same through the float attn_mask PyTorch was given.
        self.run_case("b", attn_mask=d["attn_mask"])

    def test_c_kdim_vdim_cross_attention(self):
        d, sd = self.run_case("c")
        self.assertNotEqual(d["query"].shape[1], d["key"].shape[1])
        self.assertIn("q_proj_weight", sd)

    def test_oracle_agrees_with_torch(self):
        for name in ("a", "b", "c"):
            d, sd = load_case(self.data, name)
            H = int(d["num_heads"])
            E = sd["out_proj.weight"].shape[0]
            if "in_proj_weight" in sd:
                p = sd["in_proj_weight"]
                w = dict(w_q=p[:E], w_k=p[E:2 * E], w_v=p[2 * E:])
            else:
                w = dict(w_q=sd["q_proj_weight"], w_k=sd["k_proj_weight"],
                         w_v=sd["v_proj_weight"])
            if "in_proj_bias" in sd:
                b = sd["in_proj_bias"]
                w.update(b_q=b[:E], b_k=b[E:2 * E], b_v=b[2 * E:], b_o=sd["out_proj.bias"])
            q = d["query"]
            k = d.get("key", q)
            v = d.get("value", q)
            mask = None
            if "key_padding_mask" in d:
                mask = ~d["key_padding_mask"][:, None, None, :]
            out, weights = mha_ref(q, k, v, w_o=sd["out_proj.weight"], num_heads=H,
                                   causal=bool(d["causal"]), mask=mask, **w)
            self.assertLess(rel_err(out, d["out"]), 1e-12, name)
            self.assertLess(rel_err(weights, d["weights"]), 1e-12, name)


if __name__ == "__main__":
    unittest.main()
