#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A toy generator on hwyattn's KV-cache interface, continuous-batching
style: examples/decode_loop.c in Python, through hwyattn.KVCache.

    PYTHONPATH=python python3 examples/decode_loop.py [--requests 12] [--new-tokens 48] [--check]

Attention only (no weights): each layer's query, key and value of a token
are pseudo-random vectors derived from the token id (the hash of
decode_loop.c), and the "next token" is read off the attention output.
What it shows is the engine's loop:

  - one paged cache per layer (hwyattn.KVCache: float16 pages of 16 tokens,
    vLLM's layout [pages, Hkv, 16, D]; --dtype float32 or int8 for the
    others) and a free list of pages shared by the sequences;
  - a queue of requests with prompts of different lengths; up to
    --max-active run at once, and a finished sequence's slot and pages go
    to the next request at once;
  - every step is ONE batch: sequences still in their prompt prefill a
    chunk of up to --chunk tokens, the others decode one token; per layer,
    cache.write puts the step's keys and values into their slots, then
    cache.attend attends (the new tokens are the last ones of each
    sequence's cache: causal, positions kv_len - q_len + i).

Prints the generated tokens per second (each sequence's first token comes
from its last prompt chunk, the others from decode steps; the prompt tokens
are counted apart). --check compares every step's output with numpy
float64 attention over each sequence's dequantized cache pages and exits
non-zero on a difference (slow: for short runs; ctest runs it so).
"""

import argparse
import os
import sys
import time

import numpy as np

try:
    import hwyattn
except ImportError:  # a source checkout: use python/ next to examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "python"))
    import hwyattn

HQ, HKV, D, PAGE, VOCAB = 8, 2, 64, 16, 32000


def toy(tokens, layer, kind, n):
    """[len(tokens), n] values in [-1, 1): decode_loop.c's hash of (token,
    layer, kind, index), in uint32 arithmetic."""
    t = np.asarray(tokens, np.uint32)[:, None]
    i = np.arange(n, dtype=np.uint32)[None, :]
    h = (t * np.uint32(2654435761)) ^ np.uint32(((layer + 1) * 40503) & 0xFFFFFFFF) \
        ^ np.uint32(((kind + 7) * 2246822519) & 0xFFFFFFFF) ^ (i * np.uint32(3266489917))
    h ^= h >> np.uint32(15)
    h *= np.uint32(2246822519)
    h ^= h >> np.uint32(13)
    return ((h & np.uint32(0xFFFF)).astype(np.float32) / np.float32(32768.0)) - np.float32(1.0)


def reference(q, k_pages, v_pages, pages, kv_len):
    """float64 causal attention of one sequence's q [q_len, Hq, D] (its last
    q_len positions) over its keys, gathered from the pages in order."""
    keys = np.concatenate([k_pages[p] for p in pages], axis=1)[:, :kv_len]  # [Hkv, L, D]
    vals = np.concatenate([v_pages[p] for p in pages], axis=1)[:, :kv_len]
    q = q.astype(np.float64)
    q_len = q.shape[0]
    out = np.empty((q_len, HQ, vals.shape[-1]))
    for h in range(HQ):
        s = q[:, h] @ keys[h // (HQ // HKV)].T / np.sqrt(D)  # [q_len, L]
        pos = kv_len - q_len + np.arange(q_len)
        s[np.arange(kv_len)[None, :] > pos[:, None]] = -np.inf
        w = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h] = (w / w.sum(axis=1, keepdims=True)) @ vals[h // (HQ // HKV)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--max-active", type=int, default=6)
    ap.add_argument("--new-tokens", type=int, default=48, help="tokens generated per request")
    ap.add_argument("--chunk", type=int, default=64, help="prefill chunk, tokens")
    ap.add_argument("--max-prompt", type=int, default=608, help="prompts have 9 .. this many tokens")
    ap.add_argument("--pages", type=int, default=512)
    ap.add_argument("--dtype", choices=["float16", "float32", "int8"], default="float16")
    ap.add_argument("--check", action="store_true",
                    help="compare every output with numpy float64 (slow)")
    args = ap.parse_args()

    max_pages = (args.max_prompt + args.new_tokens + PAGE - 1) // PAGE
    caches = [hwyattn.KVCache(args.pages, PAGE, HKV, D, dtype=args.dtype)
              for _ in range(args.layers)]
    free_pages = list(range(args.pages - 1, -1, -1))
    active = [None] * args.max_active  # per slot: a dict, or None
    next_request = done = generated = prefill_tokens = steps = 0
    worst = 0.0
    t0 = time.perf_counter()
    while done < args.requests:
        # Admit requests into free slots.
        for s in range(args.max_active):
            if active[s] is None and next_request < args.requests:
                active[s] = dict(prompt_len=9 + (next_request * 397) % (args.max_prompt - 8),
                                 last_token=1000 + next_request, cached=0, generated=0, pages=[])
                next_request += 1
        # This step's tokens: a prompt chunk or one decode token per sequence.
        members, q_start, kv_len, tokens, slots = [], [0], [], [], []
        for s, seq in enumerate(active):
            if seq is None:
                continue
            first = seq["cached"]
            count = min(seq["prompt_len"] - first if first < seq["prompt_len"] else 1, args.chunk)
            while len(seq["pages"]) * PAGE < first + count:
                if not free_pages or len(seq["pages"]) == max_pages:
                    sys.exit("out of pages")
                seq["pages"].append(free_pages.pop())
            for pos in range(first, first + count):
                tokens.append((seq["last_token"] * 31 + pos) & 0xFFFFFFFF
                              if pos < seq["prompt_len"] else seq["last_token"])
                slots.append(seq["pages"][pos // PAGE] * PAGE + pos % PAGE)
            if first < seq["prompt_len"]:
                prefill_tokens += count
            members.append(s)
            kv_len.append(first + count)
            q_start.append(q_start[-1] + count)
        table = np.full((len(members), max_pages), -1, np.int32)
        for i, s in enumerate(members):
            table[i, :len(active[s]["pages"])] = active[s]["pages"]
        for layer, cache in enumerate(caches):
            T = len(tokens)
            q = toy(tokens, layer, 0, HQ * D).reshape(T, HQ, D)
            cache.write(toy(tokens, layer, 1, HKV * D).reshape(T, HKV, D),
                        toy(tokens, layer, 2, HKV * D).reshape(T, HKV, D), slots)
            out = cache.attend(q, q_start, kv_len, table)  # causal by default
            if args.check:
                k_pages, v_pages = cache.dequantized()
                for i, s in enumerate(members):
                    rows = slice(q_start[i], q_start[i + 1])
                    want = reference(q[rows], k_pages, v_pages, active[s]["pages"], kv_len[i])
                    worst = max(worst, float(np.abs(out[rows] - want).max()))
        # The next token of each sequence, from the last layer's output at its
        # last query (a real model would run the MLP and the LM head here).
        for i, s in enumerate(members):
            seq = active[s]
            best = int(np.argmax(out[q_start[i + 1] - 1].reshape(-1)))
            seq["cached"] = kv_len[i]
            if seq["cached"] >= seq["prompt_len"]:  # the prompt is done: a generated token
                seq["last_token"] = (seq["last_token"] * 131 + best) % VOCAB
                generated += 1
                seq["generated"] += 1
                if seq["generated"] == args.new_tokens:  # finished: free its pages and slot
                    free_pages.extend(seq["pages"])
                    active[s] = None
                    done += 1
                    print("request done: prompt %4d tokens, %d generated, last token %d"
                          % (seq["prompt_len"], seq["generated"], seq["last_token"]))
        steps += 1
    seconds = time.perf_counter() - t0
    print("%d steps, %d layers: %d prompt tokens, %d generated tokens in %.3f s: "
          "%.0f generated tokens/s (%s, %d threads, %s pages)"
          % (steps, args.layers, prefill_tokens, generated, seconds, generated / seconds,
             hwyattn.simd_target(), hwyattn.get_num_threads(), args.dtype))
    if args.check:
        print("check: max |out - numpy float64| = %.2e" % worst)
        if not worst < 1e-4:
            sys.exit("check failed: the outputs differ from numpy float64 attention")


if __name__ == "__main__":
    main()
