/* SPDX-License-Identifier: Apache-2.0
 *
 * A pure C99 user of hwyattn.h: it includes nothing of the library but the
 * header, is compiled with -std=c99 -Wall -Wextra -pedantic -Werror, and links
 * the shared library. It proves the header is valid C, that the ABI is
 * usable from C, and checks small examples whose results are computed by hand
 * below (no oracle, no library output as expected values).
 *
 * Status codes reached: HWYATTN_OK, HWYATTN_INVALID_ARGUMENT, and
 * HWYATTN_UNSUPPORTED if the library reports it for an F16 output tensor (the
 * header lists out as F32 only, so INVALID_ARGUMENT is accepted there too; the
 * program prints which one it got). HWYATTN_OUT_OF_MEMORY and
 * HWYATTN_INTERNAL_ERROR cannot be provoked safely from a test; only their
 * status strings are checked.
 */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hwyattn.h"

static int g_passed = 0;
static int g_failed = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (cond) {                                                          \
      ++g_passed;                                                        \
    } else {                                                             \
      ++g_failed;                                                        \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)

static int Near(double got, double want, double tol) {
  const double diff = got > want ? got - want : want - got;
  return diff <= tol; /* False for NaN. */
}

/* Natural logs, by hand (to 17 digits), so the program needs no libm call
 * (math.h is only for INFINITY and isinf, both macros). */
#define LN2 0.69314718055994531
#define LN3 1.0986122886681098
#define LN4 1.3862943611198906

static void TestVersion(void) {
  CHECK(strcmp(hwyattn_version(), "0.4.0") == 0);
  CHECK(hwyattn_abi_version() == HWYATTN_ABI_VERSION);
}

static void TestStatusStrings(void) {
  int s;
  for (s = HWYATTN_OK; s <= HWYATTN_INTERNAL_ERROR; ++s) {
    const char* text = hwyattn_status_string((hwyattn_status)s);
    CHECK(text != NULL && text[0] != '\0');
  }
  CHECK(strcmp(hwyattn_status_string((hwyattn_status)99), "unknown hwyattn_status") == 0);
}

static void TestThreads(void) {
  int saved = hwyattn_get_num_threads();
  CHECK(saved >= 1);
  CHECK(hwyattn_set_num_threads(-1) == HWYATTN_INVALID_ARGUMENT);
  CHECK(strlen(hwyattn_last_error()) > 0);
  CHECK(hwyattn_set_num_threads(1) == HWYATTN_OK);
  CHECK(hwyattn_get_num_threads() == 1);
  CHECK(hwyattn_set_num_threads(saved) == HWYATTN_OK);
}

/* Scale 1, D = 1, Dv = 2, Lq = 3, Lk = 2.
 *   q = [1, 0, 5], k = [0, ln 3], v = [[4, 0], [0, 8]].
 * Row 0: scores (1*0, 1*ln 3) = (0, ln 3); exp = (1, 3); sum 4;
 *        weights (1/4, 3/4); out = (4/4, 8*3/4) = (1, 6); lse = ln 4.
 * Row 1: scores (0, 0); weights (1/2, 1/2); out = (2, 4); lse = ln 2.
 * Row 2: the BOOL mask blocks both keys: out (0, 0), weights (0, 0),
 *        lse = -INFINITY.
 * The mask uses 1 and 7 for "attend": any nonzero byte means true.
 * k[1] is ln 3 rounded to float (relative error 3e-8), which moves the
 * weights by about 1e-8: well inside the 1e-6 tolerance. */
static void TestHandExample(void) {
  float q[3] = {1.0f, 0.0f, 5.0f};
  float k[2] = {0.0f, (float)LN3};
  float v[4] = {4.0f, 0.0f, 0.0f, 8.0f};
  float out[6], weights[6], lse[3];
  uint8_t mask[6] = {1, 7, 1, 1, 0, 0};
  const int64_t q_shape[4] = {1, 1, 3, 1}, k_shape[4] = {1, 1, 2, 1};
  const int64_t v_shape[4] = {1, 1, 2, 2}, out_shape[4] = {1, 1, 3, 2};
  const int64_t w_shape[4] = {1, 1, 3, 2}, lse_shape[3] = {1, 1, 3}, mask_shape[2] = {3, 2};
  hwyattn_tensor tq, tk, tv, tout, tw, tlse, tmask;
  hwyattn_sdpa_options opts;
  hwyattn_status status;
  int i;

  for (i = 0; i < 6; ++i) out[i] = weights[i] = -123.0f;
  for (i = 0; i < 3; ++i) lse[i] = -123.0f;
  CHECK(hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, q_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, k_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, v_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 4, out_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tw, weights, HWYATTN_F32, 4, w_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tlse, lse, HWYATTN_F32, 3, lse_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tmask, mask, HWYATTN_BOOL, 2, mask_shape) == HWYATTN_OK);

  hwyattn_sdpa_options_init(&opts);
  CHECK(opts.struct_size == sizeof(opts));
  opts.scale = 1.0f;
  opts.mask = &tmask;
  opts.weights = &tw;
  opts.lse = &tlse;
  status = hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts);
  CHECK(status == HWYATTN_OK);
  if (status != HWYATTN_OK) fprintf(stderr, "  %s\n", hwyattn_last_error());

  CHECK(Near(out[0], 1.0, 1e-6));
  CHECK(Near(out[1], 6.0, 1e-6));
  CHECK(Near(weights[0], 0.25, 1e-6));
  CHECK(Near(weights[1], 0.75, 1e-6));
  CHECK(Near(lse[0], LN4, 1e-6));
  CHECK(Near(out[2], 2.0, 1e-6));
  CHECK(Near(out[3], 4.0, 1e-6));
  CHECK(Near(weights[2], 0.5, 1e-6));
  CHECK(Near(weights[3], 0.5, 1e-6));
  CHECK(Near(lse[1], LN2, 1e-6));
  /* The fully masked row: exact zeros and -INFINITY. */
  CHECK(out[4] == 0.0f && out[5] == 0.0f);
  CHECK(weights[4] == 0.0f && weights[5] == 0.0f);
  CHECK(isinf(lse[2]) && lse[2] < 0);
}

/* The default scale 1/sqrt(D): D = 4 gives 1/2.
 *   q = [1, 1, 1, 1]; k0 = [0, 0, 0, 0]; k1 = [ln3/2, ln3/2, ln3/2, ln3/2].
 *   Scores: 0 and (1/2) * 4 * ln3/2 = ln 3; weights 1/4 and 3/4.
 *   v = [4], [8] (Dv = 1): out = 1 + 6 = 7.
 * Rank-3 tensors ([H, L, D]) exercise the right-aligned shapes. */
static void TestDefaultScaleRank3(void) {
  const float h = (float)(LN3 / 2.0);
  float q[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  float k[8] = {0.0f, 0.0f, 0.0f, 0.0f, h, h, h, h};
  float v[2] = {4.0f, 8.0f};
  float out[1] = {-1.0f};
  const int64_t q_shape[3] = {1, 1, 4}, k_shape[3] = {1, 2, 4}, v_shape[3] = {1, 2, 1};
  const int64_t out_shape[3] = {1, 1, 1};
  hwyattn_tensor tq, tk, tv, tout;
  hwyattn_status status;

  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 3, q_shape);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 3, k_shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 3, v_shape);
  hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 3, out_shape);
  status = hwyattn_sdpa(&tq, &tk, &tv, &tout, NULL);
  CHECK(status == HWYATTN_OK);
  CHECK(Near(out[0], 7.0, 1e-6));
}

/* An F32 additive mask, -INFINITY and kv_len.
 *   D = 1, q = [0]: every score is 0. Mask = [0, ln 3, -INFINITY, 0].
 *   v = [4, 8, 1000, 2000].
 * With kv_len = 3, key 3 is padding; key 2 is blocked by -INFINITY; keys 0
 * and 1 get exp(0) = 1 and exp(ln 3) = 3: weights 1/4, 3/4, out = 7,
 * lse = ln 4.
 * With kv_len = 0 every key is padding: out 0, lse -INFINITY. */
static void TestAdditiveMaskAndKvLen(void) {
  float q[1] = {0.0f};
  float k[4] = {0.5f, -0.5f, 2.0f, 3.0f};
  float v[4] = {4.0f, 8.0f, 1000.0f, 2000.0f};
  float mask[4] = {0.0f, (float)LN3, -INFINITY, 0.0f};
  float out[1] = {-1.0f}, lse[1] = {-1.0f};
  const int64_t q_shape[4] = {1, 1, 1, 1}, k_shape[4] = {1, 1, 4, 1};
  const int64_t mask_shape[1] = {4}, lse_shape[3] = {1, 1, 1};
  int32_t kv_len[1] = {3};
  hwyattn_tensor tq, tk, tv, tout, tmask, tlse;
  hwyattn_sdpa_options opts;

  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, q_shape);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, k_shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, k_shape);
  hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 4, q_shape);
  hwyattn_tensor_contiguous(&tmask, mask, HWYATTN_F32, 1, mask_shape);
  hwyattn_tensor_contiguous(&tlse, lse, HWYATTN_F32, 3, lse_shape);
  hwyattn_sdpa_options_init(&opts);
  opts.scale = 1.0f;
  opts.mask = &tmask;
  opts.kv_len = kv_len;
  opts.lse = &tlse;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts) == HWYATTN_OK);
  CHECK(Near(out[0], 7.0, 1e-6));
  CHECK(Near(lse[0], LN4, 1e-6));

  kv_len[0] = 0;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts) == HWYATTN_OK);
  CHECK(out[0] == 0.0f);
  CHECK(isinf(lse[0]) && lse[0] < 0);
}

/* Causal masks, all scores 0 (q = 0), so the weights are uniform over the
 * visible keys. v = [1, 2, 4] (Dv = 1).
 *   TOP_LEFT, Lq = 2, Lk = 3: row 0 sees key 0 -> 1; row 1 sees keys 0..1
 *   -> (1 + 2) / 2 = 1.5.
 *   BOTTOM_RIGHT: row 0 sees keys 0..1 -> 1.5; row 1 sees all -> 7/3. */
static void TestCausal(void) {
  float q[2] = {0.0f, 0.0f};
  float k[3] = {1.0f, 2.0f, 3.0f};
  float v[3] = {1.0f, 2.0f, 4.0f};
  float out[2];
  const int64_t q_shape[2] = {2, 1}, k_shape[2] = {3, 1};
  hwyattn_tensor tq, tk, tv, tout;
  hwyattn_sdpa_options opts;

  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 2, q_shape);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 2, k_shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 2, k_shape);
  hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 2, q_shape);
  hwyattn_sdpa_options_init(&opts);
  opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts) == HWYATTN_OK);
  CHECK(Near(out[0], 1.0, 1e-6));
  CHECK(Near(out[1], 1.5, 1e-6));
  opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts) == HWYATTN_OK);
  CHECK(Near(out[0], 1.5, 1e-6));
  CHECK(Near(out[1], 7.0 / 3.0, 1e-6));
}

/* Errors: the status, an untouched output, and a message naming the
 * argument. */
static void TestErrors(void) {
  float q[2] = {1.0f, 2.0f}, k[2] = {3.0f, 4.0f}, v[2] = {5.0f, 6.0f};
  float out[2] = {-7.0f, -7.0f};
  uint16_t half[2] = {0, 0};
  const int64_t shape[4] = {1, 1, 1, 2};
  hwyattn_tensor tq, tk, tv, tout;
  hwyattn_sdpa_options opts;
  hwyattn_status status;

  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&tout, out, HWYATTN_F32, 4, shape);

  CHECK(hwyattn_sdpa(NULL, &tk, &tv, &tout, NULL) == HWYATTN_INVALID_ARGUMENT);
  CHECK(strstr(hwyattn_last_error(), "q") != NULL);
  CHECK(out[0] == -7.0f && out[1] == -7.0f);

  tk.shape[3] = 1; /* head_dim mismatch */
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, NULL) == HWYATTN_INVALID_ARGUMENT);
  CHECK(strstr(hwyattn_last_error(), "k") != NULL);
  CHECK(out[0] == -7.0f && out[1] == -7.0f);
  tk.shape[3] = 2;

  hwyattn_sdpa_options_init(&opts);
  opts.struct_size = 0;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts) == HWYATTN_INVALID_ARGUMENT);
  CHECK(out[0] == -7.0f && out[1] == -7.0f);

  CHECK(hwyattn_tensor_contiguous(NULL, q, HWYATTN_F32, 4, shape) == HWYATTN_INVALID_ARGUMENT);

  /* An I8 output: I8 is a cache dtype only. */
  tout.dtype = HWYATTN_I8;
  status = hwyattn_sdpa(&tq, &tk, &tv, &tout, NULL);
  CHECK(status == HWYATTN_INVALID_ARGUMENT);
  CHECK(strstr(hwyattn_last_error(), "out: dtype I8") != NULL);
  CHECK(out[0] == -7.0f && out[1] == -7.0f);

  /* F16 and BF16 outputs: one key, so out = v = {5, 6}, whose binary16
   * bits are 0x4500, 0x4600 and bfloat16 bits 0x40A0, 0x40C0. */
  tout.data = half;
  tout.dtype = HWYATTN_F16;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, NULL) == HWYATTN_OK);
  CHECK(half[0] == 0x4500 && half[1] == 0x4600);
  tout.dtype = HWYATTN_BF16;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &tout, NULL) == HWYATTN_OK);
  CHECK(half[0] == 0x40A0 && half[1] == 0x40C0);
}

/* hwyattn_sdpa_options and hwyattn_mha_config as the 0.1 header laid them
 * out: what a binary built against 0.1 passes. */
typedef struct {
  uint32_t struct_size;
  float scale;
  hwyattn_causal causal;
  const hwyattn_tensor* mask;
  const int32_t* kv_len;
  hwyattn_tensor* weights;
  hwyattn_tensor* lse;
} SdpaOptions01;
typedef struct {
  uint32_t struct_size;
  int64_t embed_dim, num_heads, head_dim, num_kv_heads, kdim, vdim;
  int32_t has_bias;
} MhaConfig01;

#define GUARD_BYTES 64
static int GuardIntact(const unsigned char* g) {
  int i;
  for (i = 0; i < GUARD_BYTES; ++i) {
    if (g[i] != 0xA5) return 0;
  }
  return 1;
}

/* Growing structs safely: the 0.1 init symbols write exactly the 0.1 sizes,
 * the sized inits exactly the caller's, and 0.1-sized structs still work in
 * every entry point. */
static void TestStructGrowth(void) {
  struct {
    SdpaOptions01 opts;
    unsigned char guard[GUARD_BYTES];
  } old_opts;
  struct {
    MhaConfig01 cfg;
    unsigned char guard[GUARD_BYTES];
  } old_cfg;
  struct {
    hwyattn_sdpa_options opts;
    unsigned char guard[GUARD_BYTES];
  } new_opts;
  struct {
    hwyattn_parallel p;
    unsigned char guard[GUARD_BYTES];
  } pool;
  struct {
    hwyattn_mha_config cfg;
    unsigned char guard[GUARD_BYTES];
  } new_cfg;
  float q[2 * 3 * 4], k[2 * 5 * 4], v[2 * 5 * 4], out_old[2 * 3 * 4], out_new[2 * 3 * 4];
  float x[2 * 3 * 4], w[16 * 4] = {0}, y_old[2 * 3 * 4], y_new[2 * 3 * 4];
  int64_t q_shape[4] = {1, 2, 3, 4}, k_shape[4] = {1, 2, 5, 4}, x_shape[3] = {2, 3, 4};
  hwyattn_tensor tq, tk, tv, to_old, to_new, tx, ty_old, ty_new;
  hwyattn_mha_config cfg;
  hwyattn_mha_weights mw;
  hwyattn_mha *m_old = NULL, *m_new = NULL;
  int i;

  memset(&old_opts, 0xCD, sizeof(old_opts.opts));
  memset(old_opts.guard, 0xA5, GUARD_BYTES);
  (hwyattn_sdpa_options_init)((hwyattn_sdpa_options*)(void*)&old_opts.opts);
  CHECK(GuardIntact(old_opts.guard));
  CHECK(old_opts.opts.struct_size == sizeof(SdpaOptions01));
  CHECK(old_opts.opts.scale == 0.0f && old_opts.opts.causal == HWYATTN_CAUSAL_NONE &&
        old_opts.opts.mask == NULL && old_opts.opts.lse == NULL);
  {
    /* hwyattn_sdpa_options_copy of the 0.1 struct: its fields, this header's
       later ones at their defaults, this header's struct_size. */
    hwyattn_sdpa_options copied;
    old_opts.opts.scale = 0.5f;
    old_opts.opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
    memset(&copied, 0xEE, sizeof(copied));
    CHECK(hwyattn_sdpa_options_copy(&copied, (const hwyattn_sdpa_options*)(void*)&old_opts.opts) ==
          HWYATTN_OK);
    CHECK(copied.struct_size == sizeof(hwyattn_sdpa_options) && copied.scale == 0.5f &&
          copied.causal == HWYATTN_CAUSAL_TOP_LEFT && copied.window_left == 0 &&
          copied.softcap == 0.0f && copied.sinks == NULL && copied.parallel == NULL &&
          copied.precision == HWYATTN_PRECISION_F32 && copied.reserved0 == 0);
    old_opts.opts.scale = 0.0f;
    old_opts.opts.causal = HWYATTN_CAUSAL_NONE;
  }

  memset(&old_cfg, 0xCD, sizeof(old_cfg.cfg));
  memset(old_cfg.guard, 0xA5, GUARD_BYTES);
  (hwyattn_mha_config_init)((hwyattn_mha_config*)(void*)&old_cfg.cfg);
  CHECK(GuardIntact(old_cfg.guard));
  CHECK(old_cfg.cfg.struct_size == sizeof(MhaConfig01) && old_cfg.cfg.embed_dim == 0 &&
        old_cfg.cfg.has_bias == 0);

  memset(&new_opts, 0xCD, sizeof(new_opts.opts));
  memset(new_opts.guard, 0xA5, GUARD_BYTES);
  hwyattn_sdpa_options_init(&new_opts.opts);
  CHECK(GuardIntact(new_opts.guard));
  CHECK(new_opts.opts.struct_size == sizeof(hwyattn_sdpa_options));
  CHECK(new_opts.opts.window_left == 0 && new_opts.opts.softcap == 0.0f &&
        new_opts.opts.sinks == NULL && new_opts.opts.parallel == NULL &&
        new_opts.opts.precision == HWYATTN_PRECISION_F32 && new_opts.opts.reserved0 == 0);

  memset(&new_cfg, 0xCD, sizeof(new_cfg.cfg));
  memset(new_cfg.guard, 0xA5, GUARD_BYTES);
  hwyattn_mha_config_init(&new_cfg.cfg);
  CHECK(GuardIntact(new_cfg.guard));
  CHECK(new_cfg.cfg.struct_size == sizeof(hwyattn_mha_config) &&
        sizeof(hwyattn_mha_config) > sizeof(MhaConfig01) && new_cfg.cfg.has_bias == 0 &&
        new_cfg.cfg.reserved0 == 0 && new_cfg.cfg.weight_dtype == HWYATTN_F32 &&
        new_cfg.cfg.reserved1 == 0);

  memset(&pool, 0xCD, sizeof(pool.p));
  memset(pool.guard, 0xA5, GUARD_BYTES);
  hwyattn_parallel_init(&pool.p);
  CHECK(GuardIntact(pool.guard));
  CHECK(pool.p.struct_size == sizeof(hwyattn_parallel) && pool.p.num_workers == 1 &&
        pool.p.pool == NULL && pool.p.parallel_for == NULL);

  /* 0.1 options with causal set: the same bits as 0.2 options. */
  for (i = 0; i < 2 * 3 * 4; ++i) q[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
  for (i = 0; i < 2 * 5 * 4; ++i) {
    k[i] = (float)((i * 5) % 13) / 6.0f - 1.0f;
    v[i] = (float)((i * 3) % 7) - 3.0f;
  }
  CHECK(hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, q_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, k_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, k_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&to_old, out_old, HWYATTN_F32, 4, q_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&to_new, out_new, HWYATTN_F32, 4, q_shape) == HWYATTN_OK);
  old_opts.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  new_opts.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &to_old, (const hwyattn_sdpa_options*)(void*)&old_opts.opts) ==
        HWYATTN_OK);
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &to_new, &new_opts.opts) == HWYATTN_OK);
  CHECK(memcmp(out_old, out_new, sizeof(out_old)) == 0);
  CHECK(GuardIntact(old_opts.guard));

  /* A 0.1 config creates the same module as a 0.2 one; 0.1 options run it. */
  for (i = 0; i < 16 * 4; ++i) w[i] = (float)((i * 3) % 5) / 4.0f - 0.5f;
  for (i = 0; i < 2 * 3 * 4; ++i) x[i] = (float)((i * 5) % 9) / 4.0f - 1.0f;
  mw.w_q = w;
  mw.w_k = w + 16;
  mw.w_v = w + 32;
  mw.w_o = w + 48;
  mw.b_q = mw.b_k = mw.b_v = mw.b_o = NULL;
  old_cfg.cfg.embed_dim = 4;
  old_cfg.cfg.num_heads = 2;
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = 4;
  cfg.num_heads = 2;
  CHECK(hwyattn_mha_create((const hwyattn_mha_config*)(void*)&old_cfg.cfg, &mw, &m_old) ==
        HWYATTN_OK);
  CHECK(hwyattn_mha_create(&cfg, &mw, &m_new) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tx, x, HWYATTN_F32, 3, x_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&ty_old, y_old, HWYATTN_F32, 3, x_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&ty_new, y_new, HWYATTN_F32, 3, x_shape) == HWYATTN_OK);
  if (m_old != NULL && m_new != NULL) {
    CHECK(hwyattn_mha_forward(m_old, &tx, NULL, NULL, &ty_old,
                              (const hwyattn_sdpa_options*)(void*)&old_opts.opts) == HWYATTN_OK);
    CHECK(hwyattn_mha_forward(m_new, &tx, NULL, NULL, &ty_new, &new_opts.opts) == HWYATTN_OK);
    CHECK(memcmp(y_old, y_new, sizeof(y_old)) == 0);
  }
  hwyattn_mha_destroy(m_old);
  hwyattn_mha_destroy(m_new);

  /* A size between the released ones is no struct at all. */
  new_opts.opts.struct_size = sizeof(SdpaOptions01) + 8;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &to_new, &new_opts.opts) == HWYATTN_INVALID_ARGUMENT);
  /* A reserved field set: a newer header's field this library does not know. */
  new_opts.opts.struct_size = sizeof(hwyattn_sdpa_options);
  new_opts.opts.reserved0 = 1;
  CHECK(hwyattn_sdpa(&tq, &tk, &tv, &to_new, &new_opts.opts) == HWYATTN_UNSUPPORTED);
  cfg.reserved0 = 1;
  CHECK(hwyattn_mha_create(&cfg, &mw, &m_new) == HWYATTN_UNSUPPORTED);
  cfg.reserved0 = 0;
  cfg.reserved1 = 1;
  CHECK(hwyattn_mha_create(&cfg, &mw, &m_new) == HWYATTN_UNSUPPORTED);
  /* weight_dtype is outside the 0.1 struct: a 0.1-sized config never sets it. */
  cfg.reserved1 = 0;
  cfg.weight_dtype = HWYATTN_BF16;
  CHECK(hwyattn_mha_create(&cfg, &mw, &m_new) == HWYATTN_OK);
  hwyattn_mha_destroy(m_new);
}

/* The header's split-and-merge example at a small size: the keys of a call
 * cut at key 4 into two strided views, each half computed with its lse, merged
 * in place into the first half's buffers; against the unsplit call. */
static void TestMergeExample(void) {
  float q[1 * 1 * 2 * 3], kd[1 * 1 * 8 * 3], vd[1 * 1 * 8 * 2];
  float whole[4], whole_lse[2], out0[4], out1[4], l0[2], l1[2];
  const int64_t q_shape[4] = {1, 1, 2, 3}, k_shape[4] = {1, 1, 8, 3}, v_shape[4] = {1, 1, 8, 2};
  const int64_t o_shape[4] = {1, 1, 2, 2}, l_shape[3] = {1, 1, 2};
  hwyattn_tensor tq, k, v, tw, twl, to0, to1, lse0, lse1, k0, k1, v0, v1;
  hwyattn_sdpa_options opts;
  const hwyattn_tensor* outs[2];
  const hwyattn_tensor* lses[2];
  int i;
  for (i = 0; i < 6; ++i) q[i] = (float)(i % 4) * 0.5f - 0.7f;
  for (i = 0; i < 24; ++i) kd[i] = (float)((i * 7) % 11) * 0.2f - 1.0f;
  for (i = 0; i < 16; ++i) vd[i] = (float)((i * 5) % 13) * 0.25f - 1.5f;
  CHECK(hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, q_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&k, kd, HWYATTN_F32, 4, k_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&v, vd, HWYATTN_F32, 4, v_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&tw, whole, HWYATTN_F32, 4, o_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&twl, whole_lse, HWYATTN_F32, 3, l_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&to0, out0, HWYATTN_F32, 4, o_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&to1, out1, HWYATTN_F32, 4, o_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&lse0, l0, HWYATTN_F32, 3, l_shape) == HWYATTN_OK);
  CHECK(hwyattn_tensor_contiguous(&lse1, l1, HWYATTN_F32, 3, l_shape) == HWYATTN_OK);
  hwyattn_sdpa_options_init(&opts);
  opts.lse = &twl;
  CHECK(hwyattn_sdpa(&tq, &k, &v, &tw, &opts) == HWYATTN_OK);

  k0 = k, k1 = k, v0 = v, v1 = v;
  k0.shape[2] = v0.shape[2] = 4;
  k1.shape[2] = v1.shape[2] = 4;
  k1.data = (float*)k.data + 4 * k.stride[2];
  v1.data = (float*)v.data + 4 * v.stride[2];
  opts.lse = &lse0;
  CHECK(hwyattn_sdpa(&tq, &k0, &v0, &to0, &opts) == HWYATTN_OK);
  opts.lse = &lse1;
  CHECK(hwyattn_sdpa(&tq, &k1, &v1, &to1, &opts) == HWYATTN_OK);
  outs[0] = &to0, outs[1] = &to1;
  lses[0] = &lse0, lses[1] = &lse1;
  CHECK(hwyattn_merge_states(2, outs, lses, NULL, &to0, &lse0) == HWYATTN_OK);
  for (i = 0; i < 4; ++i) CHECK(Near(out0[i], whole[i], 2e-6));
  for (i = 0; i < 2; ++i) CHECK(Near(l0[i], whole_lse[i], 2e-6));
  /* n = 0 is refused, naming n. */
  CHECK(hwyattn_merge_states(0, outs, lses, NULL, &to0, &lse0) == HWYATTN_INVALID_ARGUMENT);
  CHECK(strstr(hwyattn_last_error(), "n is 0") != NULL);
}

int main(void) {
  printf("hwyattn %s, SIMD target %s\n", hwyattn_version(), hwyattn_simd_target());
  TestVersion();
  TestStatusStrings();
  TestThreads();
  TestHandExample();
  TestDefaultScaleRank3();
  TestAdditiveMaskAndKvLen();
  TestCausal();
  TestErrors();
  TestStructGrowth();
  TestMergeExample();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
