/* SPDX-License-Identifier: Apache-2.0
 *
 * decode_loop.c: a toy generator on hwyattn's KV-cache interface,
 * continuous-batching style.
 *
 * Attention only (no weights): each layer's query, key and value of a token
 * are pseudo-random vectors derived from the token id, and the "next token"
 * is read off the attention output. What it shows is the engine's loop:
 *
 *   - one paged cache per layer (BF16 pages of 16 tokens, vLLM's layout
 *     [pages, Hkv, 16, D]) and a free list of pages shared by the sequences;
 *   - a queue of requests with prompts of different lengths; up to
 *     MAX_ACTIVE run at once, and a finished sequence's slot and pages go to
 *     the next request at once;
 *   - every step is ONE batch: sequences still in their prompt prefill a
 *     chunk of up to CHUNK tokens, the others decode one token; per layer,
 *     hwyattn_kv_cache_write puts the step's keys and values into their
 *     slots, then hwyattn_kv_attention attends (q_pos NULL: the new tokens
 *     are the last ones of each sequence's cache).
 *
 * Prints the generated tokens per second (each sequence's first token comes
 * from its last prompt chunk, the others from decode steps; the prompt
 * tokens are counted apart). hwyattn_kv_attention still runs the
 * sequences of a batch one after the other (each with its own parallel
 * regions), so this loop is not yet the speed one balanced region per step
 * will give. Plain C99: cc decode_loop.c -lhwyattn -lm
 */
#define _POSIX_C_SOURCE 199309L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hwyattn.h"

enum {
  LAYERS = 4,
  HQ = 8,
  HKV = 2,
  D = 64,
  PAGE = 16,
  NUM_PAGES = 512,
  MAX_PAGES_PER_SEQ = 64,
  MAX_ACTIVE = 6,
  NUM_REQUESTS = 12,
  CHUNK = 64,
  NEW_TOKENS = 48,
  VOCAB = 32000
};

/* A deterministic value in [-1, 1) for (token, layer, kind, index). */
static float toy(uint32_t token, uint32_t layer, uint32_t kind, uint32_t i) {
  uint32_t h =
      token * 2654435761u ^ (layer + 1u) * 40503u ^ (kind + 7u) * 2246822519u ^ i * 3266489917u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (float)(h & 0xFFFFu) / 32768.0f - 1.0f;
}

typedef struct {
  int prompt_len, generated, cached; /* cached = tokens whose K/V are in the cache */
  uint32_t last_token;
  int32_t pages[MAX_PAGES_PER_SEQ];
  int num_pages;
} Sequence;

static int32_t free_pages[NUM_PAGES];
static int num_free;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check(hwyattn_status s, const char* what) {
  if (s != HWYATTN_OK) {
    fprintf(stderr, "%s: %s\n", what, hwyattn_last_error());
    return 1;
  }
  return 0;
}

int main(void) {
  static uint16_t kpool[LAYERS][NUM_PAGES * HKV * PAGE * D],
      vpool[LAYERS][NUM_PAGES * HKV * PAGE * D];
  hwyattn_kv_cache cache[LAYERS];
  int32_t table[MAX_ACTIVE * MAX_PAGES_PER_SEQ];
  const int64_t pool_shape[4] = {NUM_PAGES, HKV, PAGE, D};
  Sequence seq[MAX_ACTIVE];
  int active[MAX_ACTIVE] = {0}, next_request = 0, done = 0, l, s, i, d;
  long generated = 0, prefill_tokens = 0, steps = 0;
  /* Per step: at most MAX_ACTIVE * CHUNK tokens. */
  static float q[MAX_ACTIVE * CHUNK * HQ * D], out[MAX_ACTIVE * CHUNK * HQ * D];
  static float knew[MAX_ACTIVE * CHUNK * HKV * D], vnew[MAX_ACTIVE * CHUNK * HKV * D];
  static int64_t slot[MAX_ACTIVE * CHUNK];
  static uint32_t token_of[MAX_ACTIVE * CHUNK];
  int32_t q_start[MAX_ACTIVE + 1], kv_len[MAX_ACTIVE], member[MAX_ACTIVE];
  hwyattn_sdpa_options opts;
  double t0;

  for (i = 0; i < NUM_PAGES; ++i) free_pages[i] = NUM_PAGES - 1 - i;
  num_free = NUM_PAGES;
  for (l = 0; l < LAYERS; ++l) {
    hwyattn_kv_cache_init(&cache[l]);
    hwyattn_tensor_contiguous(&cache[l].k, kpool[l], HWYATTN_BF16, 4, pool_shape);
    hwyattn_tensor_contiguous(&cache[l].v, vpool[l], HWYATTN_BF16, 4, pool_shape);
    cache[l].block_table = table;
    cache[l].block_table_stride = MAX_PAGES_PER_SEQ;
  }
  hwyattn_sdpa_options_init(&opts);
  opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;

  t0 = now();
  while (done < NUM_REQUESTS) {
    int n = 0, T = 0;
    hwyattn_kv_batch batch;
    hwyattn_tensor tq, tout, tk, tv;
    int64_t qs[3], ks[3];
    /* Admit requests into free slots. */
    for (s = 0; s < MAX_ACTIVE && next_request < NUM_REQUESTS; ++s) {
      if (active[s]) continue;
      memset(&seq[s], 0, sizeof(seq[s]));
      seq[s].prompt_len = 9 + (int)((next_request * 397u) % 600u); /* 9 .. 608 tokens */
      seq[s].last_token = 1000u + (uint32_t)next_request;
      active[s] = 1;
      ++next_request;
    }
    /* This step's tokens: a prompt chunk or one decode token per sequence. */
    q_start[0] = 0;
    for (s = 0; s < MAX_ACTIVE; ++s) {
      int count, first;
      if (!active[s]) continue;
      first = seq[s].cached;
      count = first < seq[s].prompt_len ? seq[s].prompt_len - first : 1;
      if (count > CHUNK) count = CHUNK;
      /* Pages for the new tokens. */
      while (seq[s].num_pages * PAGE < first + count) {
        if (num_free == 0 || seq[s].num_pages == MAX_PAGES_PER_SEQ) {
          fprintf(stderr, "out of pages\n");
          return 1;
        }
        seq[s].pages[seq[s].num_pages++] = free_pages[--num_free];
      }
      memcpy(&table[n * MAX_PAGES_PER_SEQ], seq[s].pages,
             sizeof(int32_t) * (size_t)seq[s].num_pages);
      for (i = 0; i < count; ++i) {
        const int pos = first + i;
        token_of[T + i] = pos < seq[s].prompt_len
                              ? (uint32_t)(seq[s].last_token * 31u + (uint32_t)pos)
                              : seq[s].last_token;
        slot[T + i] = (int64_t)seq[s].pages[pos / PAGE] * PAGE + pos % PAGE;
      }
      member[n] = s;
      kv_len[n] = first + count;
      T += count;
      q_start[++n] = T;
      if (first < seq[s].prompt_len) prefill_tokens += count;
    }
    hwyattn_kv_batch_init(&batch);
    batch.num_seqs = n;
    batch.q_start = q_start;
    batch.kv_len = kv_len;
    qs[0] = T, qs[1] = HQ, qs[2] = D;
    ks[0] = T, ks[1] = HKV, ks[2] = D;
    hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tk, knew, HWYATTN_F32, 3, ks);
    hwyattn_tensor_contiguous(&tv, vnew, HWYATTN_F32, 3, ks);
    for (l = 0; l < LAYERS; ++l) {
      for (i = 0; i < T; ++i) {
        for (d = 0; d < HQ * D; ++d)
          q[i * HQ * D + d] = toy(token_of[i], (uint32_t)l, 0, (uint32_t)d);
        for (d = 0; d < HKV * D; ++d) {
          knew[i * HKV * D + d] = toy(token_of[i], (uint32_t)l, 1, (uint32_t)d);
          vnew[i * HKV * D + d] = toy(token_of[i], (uint32_t)l, 2, (uint32_t)d);
        }
      }
      if (check(hwyattn_kv_cache_write(&cache[l], &tk, &tv, slot, NULL),
                "hwyattn_kv_cache_write") ||
          check(hwyattn_kv_attention(&tq, &cache[l], &batch, &tout, &opts),
                "hwyattn_kv_attention")) {
        return 1;
      }
    }
    /* The next token of each sequence: from the last layer's output at its
     * last query (a real model would run the MLP and the LM head here). */
    for (i = 0; i < n; ++i) {
      Sequence* sq = &seq[member[i]];
      const float* o = &out[(size_t)(q_start[i + 1] - 1) * HQ * D];
      uint32_t best = 0;
      for (d = 1; d < HQ * D; ++d) {
        if (o[d] > o[best]) best = (uint32_t)d;
      }
      sq->cached = kv_len[i];
      if (sq->cached >= sq->prompt_len) { /* the prompt is done: this is a generated token */
        sq->last_token = (sq->last_token * 131u + best) % VOCAB;
        ++generated;
        if (++sq->generated == NEW_TOKENS) { /* finished: free its pages and its slot */
          int p;
          for (p = 0; p < sq->num_pages; ++p) free_pages[num_free++] = sq->pages[p];
          active[member[i]] = 0;
          ++done;
          printf("request done: prompt %4d tokens, %d generated, last token %u\n", sq->prompt_len,
                 sq->generated, sq->last_token);
        }
      }
    }
    ++steps;
  }
  {
    const double seconds = now() - t0;
    printf(
        "%ld steps, %d layers: %ld prompt tokens, %ld generated tokens in %.3f s: "
        "%.0f generated tokens/s (%s, %d threads)\n",
        steps, LAYERS, prefill_tokens, generated, seconds, (double)generated / seconds,
        hwyattn_simd_target(), hwyattn_get_num_threads());
  }
  return 0;
}
