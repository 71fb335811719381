/* SPDX-License-Identifier: Apache-2.0
 *
 * walkthrough.c: how attention works, in five small steps, with the hwyattn C
 * API. It prints the same attention weights as examples/walkthrough.py (which
 * also explains each step at length and draws heatmaps):
 *
 *   1. three words attend to each other with plain dot products (scale 1);
 *   2. learned Q/K/V projections and the 1/sqrt(d) scale;
 *   3. two heads, split and merged by an output projection (hwyattn_mha);
 *   4. the causal mask;
 *   5. cross-attention over a padded batch (kv_len, hwyattn_mha).
 *
 * For every row it prints the entropy of the attention distribution,
 * -sum_j p_j ln p_j, against its maximum ln(Lk) (uniform attention).
 *
 * Build against an installed hwyattn:
 *   cc -std=c99 walkthrough.c $(pkg-config --cflags --libs hwyattn) -lm -o walkthrough
 */
#include <hwyattn.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Four words as 4-d embeddings: feature 0 = article, 1 = animal, 2 = action,
 * 3 = "about the cat". */
static const char* const kWords[4] = {"the", "cat", "sat", "down"};
static const float kEmbed[4][4] = {{1, 0, 0, 0},  /* the */
                                   {0, 1, 0, 1},  /* cat */
                                   {0, 0, 1, 1},  /* sat */
                                   {0, 0, 1, 0}}; /* down */

/* Projections in the nn.Linear layout [out, in]. Rows 0-1 are the single head
 * of step 2; rows 2-3 are the second head of step 3. */
static const float kWq[4][4] = {{1, 0, 0, 1}, {0, 0, 1, 0}, {0, 2, 0, 0}, {1, 0, 0, 0}};
static const float kWk[4][4] = {{0, 2, 0, 1}, {0, 0, 2, 0}, {0, 0, 2, 0}, {0, 1, 0, 0}};
static const float kWv[4][4] = {{1, 0, 0, 0}, {0, 1, 1, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}};
static const float kWo[4][4] = {
    {0.5f, 0, 0.5f, 0}, {0, 0.5f, 0, 0}, {0, 0, 0, 0.5f}, {0, 0.5f, 0, 0.5f}};

static int Check(hwyattn_status s, const char* what) {
  if (s == HWYATTN_OK) return 0;
  fprintf(stderr, "%s failed: %s (%s)\n", what, hwyattn_status_string(s), hwyattn_last_error());
  return 1;
}

/* Prints a weights matrix [lq, lk] with row/column labels and each row's entropy. */
static void PrintWeights(const float* w, int lq, int lk, const char* const* rows,
                         const char* const* cols, int valid_keys) {
  int i, j;
  printf("           ");
  for (j = 0; j < lk; ++j) printf("%8s", cols[j]);
  printf("   entropy / ln(%d)\n", valid_keys);
  for (i = 0; i < lq; ++i) {
    double h = 0.0;
    printf("    %-7s", rows[i]);
    for (j = 0; j < lk; ++j) {
      const double p = w[i * lk + j];
      printf("%8.4f", p);
      if (p > 0.0) h -= p * log(p);
    }
    if (h < 0.0) h = 0.0;
    printf("   %.4f / %.4f\n", h, log((double)valid_keys));
  }
}

/* y[n, out] = x[n, in] W^T, W [out, in] (the first `out` rows of a 4x4). */
static void Project(const float* x, int n, const float w[4][4], int out, float* y) {
  int i, o, c;
  for (i = 0; i < n; ++i) {
    for (o = 0; o < out; ++o) {
      float s = 0.0f;
      for (c = 0; c < 4; ++c) s += x[i * 4 + c] * w[o][c];
      y[i * out + o] = s;
    }
  }
}

/* One head of attention over rank-2 tensors q [l, d], k, v [l, dv]. */
static int Attend(const float* q, const float* k, const float* v, int lq, int lk, int d, int dv,
                  float scale, hwyattn_causal causal, float* out, float* weights) {
  const int64_t sq[2] = {lq, d}, sk[2] = {lk, d}, sv[2] = {lk, dv}, so[2] = {lq, dv};
  const int64_t sw[2] = {lq, lk};
  hwyattn_tensor tq, tk, tv, to, tw;
  hwyattn_sdpa_options opts;
  hwyattn_tensor_contiguous(&tq, (void*)q, HWYATTN_F32, 2, sq);
  hwyattn_tensor_contiguous(&tk, (void*)k, HWYATTN_F32, 2, sk);
  hwyattn_tensor_contiguous(&tv, (void*)v, HWYATTN_F32, 2, sv);
  hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 2, so);
  hwyattn_tensor_contiguous(&tw, weights, HWYATTN_F32, 2, sw);
  hwyattn_sdpa_options_init(&opts);
  opts.scale = scale; /* 0 = 1/sqrt(d) */
  opts.causal = causal;
  opts.weights = &tw;
  return Check(hwyattn_sdpa(&tq, &tk, &tv, &to, &opts), "hwyattn_sdpa");
}

/* The two-head module of steps 3 and 5: embed_dim 4, 2 heads of 2, no bias. */
static int MakeModule(hwyattn_mha** m) {
  hwyattn_mha_config cfg;
  hwyattn_mha_weights w;
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = 4;
  cfg.num_heads = 2;
  memset(&w, 0, sizeof(w));
  w.w_q = &kWq[0][0];
  w.w_k = &kWk[0][0];
  w.w_v = &kWv[0][0];
  w.w_o = &kWo[0][0];
  return Check(hwyattn_mha_create(&cfg, &w, m), "hwyattn_mha_create");
}

static int Step1(void) {
  float out[3 * 4], w[3 * 3];
  printf("\n=== Step 1: softmax(X X^T), plain dot products (scale 1) ===\n");
  if (Attend(&kEmbed[0][0], &kEmbed[0][0], &kEmbed[0][0], 3, 3, 4, 4, 1.0f, HWYATTN_CAUSAL_NONE,
             out, w))
    return 1;
  PrintWeights(w, 3, 3, kWords, kWords, 3);
  return 0;
}

static int Step2(void) {
  float q[3 * 2], k[3 * 2], v[3 * 2], out[3 * 2], w[3 * 3];
  printf("\n=== Step 2: Q = X Wq^T, K = X Wk^T, V = X Wv^T; softmax(Q K^T / sqrt(2)) ===\n");
  Project(&kEmbed[0][0], 3, kWq, 2, q);
  Project(&kEmbed[0][0], 3, kWk, 2, k);
  Project(&kEmbed[0][0], 3, kWv, 2, v);
  if (Attend(q, k, v, 3, 3, 2, 2, 0.0f, HWYATTN_CAUSAL_NONE, out, w)) return 1;
  PrintWeights(w, 3, 3, kWords, kWords, 3);
  return 0;
}

static int Step3(void) {
  const int64_t sx[3] = {1, 3, 4}, sw[4] = {1, 2, 3, 3};
  float out[3 * 4], w[2 * 3 * 3];
  hwyattn_mha* m = NULL;
  hwyattn_tensor tx, to, tw;
  hwyattn_sdpa_options opts;
  int h, i, rc;
  printf("\n=== Step 3: two heads (hwyattn_mha: project, split, attend, merge, W_o) ===\n");
  if (MakeModule(&m)) return 1;
  hwyattn_tensor_contiguous(&tx, (void*)&kEmbed[0][0], HWYATTN_F32, 3, sx);
  hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 3, sx);
  hwyattn_tensor_contiguous(&tw, w, HWYATTN_F32, 4, sw);
  hwyattn_sdpa_options_init(&opts);
  opts.weights = &tw;
  rc = Check(hwyattn_mha_forward(m, &tx, NULL, NULL, &to, &opts), "hwyattn_mha_forward");
  hwyattn_mha_destroy(m);
  if (rc) return 1;
  for (h = 0; h < 2; ++h) {
    printf("  head %d:\n", h);
    PrintWeights(w + h * 9, 3, 3, kWords, kWords, 3);
  }
  printf("  output after W_o:\n");
  for (i = 0; i < 3; ++i) {
    printf("    %-7s%8.4f%8.4f%8.4f%8.4f\n", kWords[i], out[i * 4], out[i * 4 + 1], out[i * 4 + 2],
           out[i * 4 + 3]);
  }
  return 0;
}

static int Step4(void) {
  float q[4 * 2], k[4 * 2], v[4 * 2], out[4 * 2], w[4 * 4];
  int i;
  printf("\n=== Step 4: the causal mask (query i sees keys j <= i) ===\n");
  Project(&kEmbed[0][0], 4, kWq, 2, q);
  Project(&kEmbed[0][0], 4, kWk, 2, k);
  Project(&kEmbed[0][0], 4, kWv, 2, v);
  if (Attend(q, k, v, 4, 4, 2, 2, 0.0f, HWYATTN_CAUSAL_TOP_LEFT, out, w)) return 1;
  /* Row i has i + 1 visible keys: print each row against its own ceiling. */
  for (i = 0; i < 4; ++i) PrintWeights(w + i * 4, 1, 4, kWords + i, kWords, i + 1);
  return 0;
}

static int Step5(void) {
  /* Queries "cat", "sat" read two sentences: "the cat sat down" and "the cat"
   * padded to 4 keys (kv_len 2). */
  static const char* const kPadded[4] = {"the", "cat", "<pad>", "<pad>"};
  const int64_t sq[3] = {2, 2, 4}, sk[3] = {2, 4, 4}, sw[4] = {2, 2, 2, 4};
  const int32_t kv_len[2] = {4, 2};
  float query[2 * 2 * 4], src[2 * 4 * 4], out[2 * 2 * 4], w[2 * 2 * 2 * 4];
  hwyattn_mha* m = NULL;
  hwyattn_tensor tq, tk, to, tw;
  hwyattn_sdpa_options opts;
  int b, h, rc;
  printf("\n=== Step 5: cross-attention with padding (kv_len = {4, 2}) ===\n");
  memcpy(query, &kEmbed[1][0], 2 * 4 * sizeof(float));
  memcpy(query + 8, &kEmbed[1][0], 2 * 4 * sizeof(float));
  memcpy(src, &kEmbed[0][0], 4 * 4 * sizeof(float));
  memset(src + 16, 0, 4 * 4 * sizeof(float));
  memcpy(src + 16, &kEmbed[0][0], 2 * 4 * sizeof(float));
  if (MakeModule(&m)) return 1;
  hwyattn_tensor_contiguous(&tq, query, HWYATTN_F32, 3, sq);
  hwyattn_tensor_contiguous(&tk, src, HWYATTN_F32, 3, sk);
  hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 3, sq);
  hwyattn_tensor_contiguous(&tw, w, HWYATTN_F32, 4, sw);
  hwyattn_sdpa_options_init(&opts);
  opts.kv_len = kv_len;
  opts.weights = &tw;
  rc = Check(hwyattn_mha_forward(m, &tq, &tk, &tk, &to, &opts), "hwyattn_mha_forward");
  hwyattn_mha_destroy(m);
  if (rc) return 1;
  for (b = 0; b < 2; ++b) {
    for (h = 0; h < 2; ++h) {
      printf("  sentence %d (kv_len %d), head %d:\n", b, (int)kv_len[b], h);
      PrintWeights(w + (b * 2 + h) * 8, 2, 4, kWords + 1, b == 0 ? kWords : kPadded,
                   (int)kv_len[b]);
    }
  }
  return 0;
}

int main(void) {
  if (hwyattn_abi_version() != HWYATTN_ABI_VERSION) {
    fprintf(stderr, "hwyattn.h is ABI %d but the library is ABI %u\n", HWYATTN_ABI_VERSION,
            (unsigned)hwyattn_abi_version());
    return 1;
  }
  printf("hwyattn %s, SIMD target %s\n", hwyattn_version(), hwyattn_simd_target());
  if (Step1() || Step2() || Step3() || Step4() || Step5()) return 1;
  return 0;
}
