#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How attention works, in five small steps, computed with hwyattn.

    PYTHONPATH=python python3 examples/walkthrough.py [--out examples/out] [--format auto|svg|png]

Each step prints its numbers with an explanation and saves a heatmap of the
attention weights (rows = queries, columns = keys) into --out: PNG when
matplotlib is importable (--format auto), otherwise a dependency-free SVG.
For every head it also prints the entropy of each query's attention
distribution, -sum_j p_j ln p_j, against its maximum ln(Lk) (a query that
spreads its attention evenly over all Lk keys): low entropy = a focused head.

examples/walkthrough.c prints the same weights through the C API.
"""

import argparse
import math
import os
import sys

import numpy as np

try:
    import hwyattn
except ImportError:  # a source checkout: use python/ next to examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "python"))
    import hwyattn

# --------------------------------------------------------------------------
# The data (walkthrough.c uses the same numbers)
# --------------------------------------------------------------------------

# Four words as 4-d embeddings, one feature per "meaning":
#   feature 0 = article, 1 = animal, 2 = action, 3 = "about the cat".
# "cat" and "sat" share feature 3, so their dot product is 1, not 0.
WORDS = ["the", "cat", "sat", "down"]
EMBED = np.array([[1, 0, 0, 0],    # the
                  [0, 1, 0, 1],    # cat
                  [0, 0, 1, 1],    # sat
                  [0, 0, 1, 0]],   # down
                 dtype=np.float32)

# Step 2: one head of size 2. Rows are output features (the nn.Linear layout
# [out, in]): Q = X W_q^T, K = X W_k^T, V = X W_v^T.
W_Q = np.array([[1, 0, 0, 1],      # articles and cat-words look for an animal,
                [0, 0, 1, 0]], np.float32)  # actions look for actions;
W_K = np.array([[0, 2, 0, 1],      # a key says "I am an animal / about the cat",
                [0, 0, 2, 0]], np.float32)  # or "I am an action".
W_V = np.array([[1, 0, 0, 0],
                [0, 1, 1, 0]], np.float32)

# Step 3: two heads of size 2 (embed_dim 4). Head 0 is step 2's head; head 1
# asks a different question: "who acts?" (queries from nouns, keys on verbs).
W_Q2 = np.concatenate([W_Q, np.array([[0, 2, 0, 0], [1, 0, 0, 0]], np.float32)])
W_K2 = np.concatenate([W_K, np.array([[0, 0, 2, 0], [0, 1, 0, 0]], np.float32)])
W_V2 = np.concatenate([W_V, np.array([[0, 0, 0, 1], [0, 0, 1, 0]], np.float32)])
# The output projection mixes the two heads' results back into 4 features.
W_O2 = np.array([[1, 0, 1, 0],
                 [0, 1, 0, 0],
                 [0, 0, 0, 1],
                 [0, 1, 0, 1]], np.float32) * 0.5

np.set_printoptions(precision=4, suppress=True)


# --------------------------------------------------------------------------
# Heatmaps: matplotlib PNG, or a small SVG writer with no dependency
# --------------------------------------------------------------------------

def _color(p):
    """White (0) to dark blue (1)."""
    p = min(max(float(p), 0.0), 1.0)
    r = int(round(255 - p * (255 - 8)))
    g = int(round(255 - p * (255 - 48)))
    b = int(round(255 - p * (255 - 107)))
    return "#%02x%02x%02x" % (r, g, b)


def _esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_svg_heatmaps(path, title, panels):
    """panels: list of (subtitle, matrix [Lq, Lk] in [0, 1], query labels, key labels)."""
    cell, gap, left, top = 46, 40, 60, 70
    widths = [len(p[3]) * cell for p in panels]
    height = top + max(len(p[2]) for p in panels) * cell + 30
    width = left + sum(widths) + gap * (len(panels) - 1) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>' % (10, _esc(title))]
    x0 = left
    for (sub, m, rows, cols), w in zip(panels, widths):
        m = np.asarray(m, np.float64)
        out.append('<text x="%d" y="42" font-weight="bold">%s</text>' % (x0, _esc(sub)))
        for j, c in enumerate(cols):
            out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
                       % (x0 + j * cell + cell // 2, top - 8, _esc(c)))
        for i, r in enumerate(rows):
            y = top + i * cell
            out.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                       % (x0 - 6, y + cell // 2 + 4, _esc(r)))
            for j in range(len(cols)):
                p = m[i, j]
                out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s" '
                           'stroke="#999" stroke-width="0.5"/>'
                           % (x0 + j * cell, y, cell, cell, _color(p)))
                out.append('<text x="%d" y="%d" text-anchor="middle" fill="%s">%.2f</text>'
                           % (x0 + j * cell + cell // 2, y + cell // 2 + 4,
                              "white" if p > 0.55 else "black", p))
        x0 += w + gap
    out.append('<text x="10" y="%d" fill="#555">rows: queries, columns: keys; each row sums '
               'to 1</text>' % (height - 10))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def save_heatmaps(args, name, title, panels):
    """Saves one figure; returns its path."""
    os.makedirs(args.out, exist_ok=True)
    use_png = args.format == "png"
    if args.format == "auto":
        try:
            import matplotlib
            matplotlib.use("Agg")
            use_png = True
        except ImportError:
            use_png = False
    if use_png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2), squeeze=False)
        for ax, (sub, m, rows, cols) in zip(axes[0], panels):
            ax.imshow(m, cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks(range(len(cols)), cols)
            ax.set_yticks(range(len(rows)), rows)
            ax.set_title(sub)
            for i in range(len(rows)):
                for j in range(len(cols)):
                    ax.text(j, i, "%.2f" % m[i][j], ha="center", va="center",
                            color="white" if m[i][j] > 0.55 else "black", fontsize=8)
        fig.suptitle(title)
        fig.tight_layout()
        path = os.path.join(args.out, name + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
    else:
        path = os.path.join(args.out, name + ".svg")
        write_svg_heatmaps(path, title, panels)
    print("  -> heatmap saved to %s" % path)
    return path


# --------------------------------------------------------------------------
# Printing helpers
# --------------------------------------------------------------------------

def say(text):
    print("\n".join("  " + line if line else "" for line in text.strip("\n").split("\n")))


def print_weights(w, rows, cols, indent="    "):
    print(indent + " " * 7 + "".join("%8s" % c for c in cols))
    for r, row in zip(rows, w):
        print(indent + "%-7s" % r + "".join("%8.4f" % p for p in row))


def entropy_report(w, rows, head_names, valid_keys=None):
    """Entropy per query for each head, against the uniform maximum ln(Lk)."""
    Lk = w.shape[-1]
    for h, name in enumerate(head_names):
        print("    entropy, %s:" % name)
        for i, r in enumerate(rows):
            p = w[h, i]
            nz = p[p > 0]
            ent = max(0.0, float(-(nz * np.log(nz)).sum()))
            n = Lk if valid_keys is None else int(valid_keys[i] if np.ndim(valid_keys) else
                                                  valid_keys)
            extra = "" if n == Lk else ", ln(%d valid keys) = %.4f" % (n, math.log(n))
            print("      %-6s %.4f nats of max ln(%d) = %.4f (%3.0f%%)%s"
                  % (r, ent, Lk, math.log(Lk), 100 * ent / math.log(Lk), extra))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------

def step1(args):
    print("\n=== Step 1: words attending to each other with plain dot products ===\n")
    words = WORDS[:3]
    X = EMBED[:3]
    say("""
Each word is a vector. Attention lets every word (a *query*) look at every
word (the *keys*), score each by a dot product, turn the scores into
probabilities with softmax, and return the probability-weighted average of
the words' *values*. Here queries, keys and values are the embeddings
themselves and the scale is 1:

    weights = softmax(X X^T),   out = weights X
""")
    print()
    for w_, e in zip(words, X):
        print("    %-5s = %s" % (w_, e.astype(int)))
    print("\n    scores X X^T:")
    print_weights(X @ X.T, words, words)
    out, w = hwyattn.sdpa(X, X, X, scale=1.0, return_weights=True)
    print("\n    weights = softmax(scores), row by row (hwyattn.sdpa(..., scale=1)):")
    print_weights(w, words, words)
    say("""
"cat" and "sat" share a feature, so each gives the other more weight than it
gives "the"; every word gives itself the most (its own dot product is the
largest). The output for each word is the weighted average of the rows of X:
""")
    print_weights(out, words, ["f0", "f1", "f2", "f3"])
    assert np.allclose(w, softmax(X @ X.T), atol=1e-6)
    entropy_report(w[None], words, ["the single head"])
    save_heatmaps(args, "step1_dot_product", "Step 1: softmax(X X^T)",
                  [("scale 1", w, words, words)])


def step2(args):
    print("\n=== Step 2: learned projections Q, K, V and the 1/sqrt(d) scale ===\n")
    words = WORDS[:3]
    X = EMBED[:3]
    say("""
Raw embeddings are a poor question and a poor answer at once. A layer learns
three matrices: the query projection (what a word looks for), the key
projection (what a word offers to be found by) and the value projection
(what it hands over when found). Here they are fixed, 2 x 4 (nn.Linear
layout [out, in]):
""")
    for name, m in (("W_q", W_Q), ("W_k", W_K), ("W_v", W_V)):
        print("    %s = %s" % (name, m.astype(int).tolist()))
    Q, K, V = X @ W_Q.T, X @ W_K.T, X @ W_V.T
    d = Q.shape[-1]
    say("""
Q = X W_q^T, K = X W_k^T, V = X W_v^T. The scores Q K^T are divided by
sqrt(d) = sqrt(%d): dot products of d-dimensional vectors grow like sqrt(d),
and unscaled they would saturate the softmax (one weight near 1, the rest
near 0) as d grows. hwyattn's default scale (scale=None) is 1/sqrt(d).
""" % d)
    print("    Q =", Q.tolist(), "\n    K =", K.tolist(), "\n    V =", V.tolist())
    out, w = hwyattn.sdpa(Q, K, V, return_weights=True)
    print("\n    weights = softmax(Q K^T / sqrt(2)):")
    print_weights(w, words, words)
    print("\n    out = weights V:")
    print_weights(out, words, ["v0", "v1"])
    assert np.allclose(w, softmax(Q @ K.T / math.sqrt(d)), atol=1e-6)
    say("""
Now "the" looks mostly at "cat" (its query asks for animals and "cat"'s key
offers one): the projections, not the raw embeddings, decide who attends to
whom.
""")
    entropy_report(w[None], words, ["the head"])
    save_heatmaps(args, "step2_projections", "Step 2: softmax(Q K^T / sqrt(2))",
                  [("one head, d = 2", w, words, words)])


def step3(args):
    print("\n=== Step 3: two heads, split and merged (multi-head attention) ===\n")
    words = WORDS[:3]
    X = EMBED[:3]
    E, H, D = 4, 2, 2
    say("""
One softmax gives one way of mixing. Multi-head attention runs several
smaller attentions side by side: project to embed_dim = 4, *split* the 4
features into 2 heads of 2, attend in each head separately, *concatenate*
the heads' outputs and mix them with an output projection W_o:

    out = concat(head_0, head_1) W_o^T,  head_h = softmax(Q_h K_h^T / sqrt(2)) V_h

Head 0 uses step 2's matrices; head 1 asks another question (nouns look for
the verb). hwyattn.MultiheadAttention does all of it in one call
(hwyattn_mha_forward in C), like torch.nn.MultiheadAttention(batch_first=True).
""")
    with hwyattn.MultiheadAttention(E, H, bias=False, w_q=W_Q2, w_k=W_K2, w_v=W_V2,
                                    w_o=W_O2) as mha:
        out, w = mha(X[None], need_weights=True)  # [1, L, E], weights [1, H, L, L]
    out, w = out[0], w[0]
    # The same by hand: split, attend per head with sdpa, merge.
    Q = (X @ W_Q2.T).reshape(3, H, D).transpose(1, 0, 2)   # [H, L, D]
    K = (X @ W_K2.T).reshape(3, H, D).transpose(1, 0, 2)
    V = (X @ W_V2.T).reshape(3, H, D).transpose(1, 0, 2)
    heads, w_hand = hwyattn.sdpa(Q, K, V, return_weights=True)  # [H, L, D]
    merged = heads.transpose(1, 0, 2).reshape(3, H * D) @ W_O2.T
    for h in range(H):
        print("    head %d weights:" % h)
        print_weights(w[h], words, words)
    print("\n    output (after W_o):")
    print_weights(out, words, ["o0", "o1", "o2", "o3"])
    print("\n    split + sdpa per head + merge by hand gives the same: max |diff| = %.2g"
          % float(np.abs(merged - out).max()))
    assert np.allclose(merged, out, atol=1e-5) and np.allclose(w_hand, w, atol=1e-6)
    say("""
The heads disagree on purpose: head 0 sends "the" to "cat", head 1 sends the
noun "cat" to its verb "sat" (and leaves "sat" undecided: uniform weights,
maximal entropy). Each head is a separate pattern.
""")
    entropy_report(w, words, ["head 0", "head 1"])
    save_heatmaps(args, "step3_two_heads", "Step 3: two heads of multi-head attention",
                  [("head %d" % h, w[h], words, words) for h in range(H)])
    if args.docs:
        os.makedirs(os.path.dirname(args.docs), exist_ok=True)
        write_svg_heatmaps(args.docs, "Two attention heads over \"the cat sat\"",
                           [("head %d" % h, w[h], words, words) for h in range(H)])
        print("  -> also written to %s" % args.docs)


def step4(args):
    print("\n=== Step 4: the causal mask ===\n")
    words = WORDS
    X = EMBED
    say("""
A language model generates text left to right, so while training it must
not let a word see the words after it. The causal mask blocks key j for
query i when j > i (scores set to -inf, weight 0), and the softmax
renormalises over the keys that remain: "the" can only look at itself.
hwyattn.sdpa(..., causal=True) skips the blocked blocks entirely.
""")
    Q, K, V = X @ W_Q.T, X @ W_K.T, X @ W_V.T
    out, w = hwyattn.sdpa(Q, K, V, causal=True, return_weights=True)
    print("    weights, causal (step 2's head on \"the cat sat down\"):")
    print_weights(w, words, words)
    print("\n    out:")
    print_weights(out, words, ["v0", "v1"])
    say("""
The upper triangle is exactly 0. Query i has only i + 1 keys to choose from,
so the first rows cannot spread much: the entropy's ceiling grows with i.
""")
    for i, r in enumerate(words):
        p = w[i][w[i] > 0]
        print("      %-6s %.4f nats of max ln(%d visible) = %.4f"
              % (r, max(0.0, float(-(p * np.log(p)).sum())), i + 1, math.log(i + 1)))
    save_heatmaps(args, "step4_causal", "Step 4: causal attention",
                  [("causal", w, words, words)])


def step5(args):
    print("\n=== Step 5: cross-attention with padding (kv_len) ===\n")
    say("""
In cross-attention the queries come from one sequence (what is being
written) and the keys and values from another (what is being read, e.g. the
encoded source sentence): Lq != Lk in general. A batch holds sentences of
different lengths, padded to the longest; padded keys must get no weight.
kv_len[b] = number of real keys of batch item b (PyTorch's key_padding_mask
with True on the padding, which hwyattn.MultiheadAttention also accepts).

Queries "cat", "sat" read two source sentences: "the cat sat down" (4 real
keys) and "the cat" padded to 4 (kv_len = 2). Step 3's two-head module.
""")
    src = np.stack([EMBED, np.concatenate([EMBED[:2], np.zeros((2, 4), np.float32)])])
    qry = np.stack([EMBED[1:3], EMBED[1:3]])
    kv_len = [4, 2]
    keys = [WORDS, ["the", "cat", "<pad>", "<pad>"]]
    qwords = WORDS[1:3]
    with hwyattn.MultiheadAttention(4, 2, bias=False, w_q=W_Q2, w_k=W_K2, w_v=W_V2,
                                    w_o=W_O2) as mha:
        out, w = mha(qry, src, src, kv_len=kv_len, need_weights=True)
        pad = np.arange(4)[None, :] >= np.array(kv_len)[:, None]
        out2 = mha(qry, src, src, key_padding_mask=pad)
    assert np.allclose(out, out2, atol=1e-6)
    panels = []
    for b in range(2):
        for h in range(2):
            print("    sentence %d (kv_len %d), head %d:" % (b, kv_len[b], h))
            print_weights(w[b, h], qwords, keys[b])
            panels.append(("sentence %d, head %d" % (b, h), w[b, h], qwords, keys[b]))
        print("    out, sentence %d:" % b)
        print_weights(out[b], qwords, ["o0", "o1", "o2", "o3"])
    say("""
The padded keys get weight exactly 0 and the real ones share all of it; the
outputs equal those of the same call with key_padding_mask. The entropy
ceiling for sentence 1 is ln(2), not ln(4).
""")
    for b in range(2):
        print("    sentence %d" % b)
        entropy_report(w[b], qwords, ["head 0", "head 1"], valid_keys=kv_len[b])
    save_heatmaps(args, "step5_cross_padding", "Step 5: cross-attention with padding",
                  panels)


def main():
    ap = argparse.ArgumentParser(description="How attention works, step by step, with hwyattn.")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "out"),
                    help="directory for the heatmaps (default: examples/out)")
    ap.add_argument("--format", choices=("auto", "svg", "png"), default="auto",
                    help="png needs matplotlib; auto = png if importable, else svg")
    ap.add_argument("--docs", default=None, metavar="SVG",
                    help="also write step 3's heatmap as an SVG here "
                         "(the repository keeps docs/walkthrough_heads.svg)")
    ap.add_argument("--steps", default="12345", help="which steps to run, e.g. 124")
    args = ap.parse_args()
    print("hwyattn %s, SIMD target %s" % (hwyattn.version(), hwyattn.simd_target()))
    for s, fn in zip("12345", (step1, step2, step3, step4, step5)):
        if s in args.steps:
            fn(args)
    print("\nDone. Heatmaps are in %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
