/* SPDX-License-Identifier: Apache-2.0
 *
 * sdpa_example.c: a first hwyattn program. Self-attention over three tokens
 * with one head of dimension 2, once bidirectional and once causal.
 *
 * Build against an installed hwyattn:
 *   cc -std=c99 sdpa_example.c $(pkg-config --cflags --libs hwyattn) -o sdpa_example
 * or with CMake: find_package(hwyattn CONFIG REQUIRED) and link hwyattn::hwyattn.
 *
 * The numbers are picked so the result can be checked by hand. The tokens are
 *   x0 = (1, 0), x1 = (0, 1), x2 = (1, 1)   (used as queries and as keys)
 * with values
 *   v0 = (1, 2), v1 = (3, 4), v2 = (5, 6),
 * and scale = ln 2, so exp(scale * q.k) = 2^(q.k): the softmax weights are
 * powers of two over their sum.
 *
 *   query x0: q.k = (1, 0, 1) -> weights (2, 1, 2)/5 -> (2*v0 + v1 + 2*v2)/5 = (15, 20)/5 = (3, 4)
 *   query x1: q.k = (0, 1, 1) -> weights (1, 2, 2)/5 -> (v0 + 2*v1 + 2*v2)/5 = (17, 22)/5 =
 * (3.4, 4.4) query x2: q.k = (1, 1, 2) -> weights (2, 2, 4)/8 -> (2*v0 + 2*v1 + 4*v2)/8 = (28,
 * 36)/8 = (3.5, 4.5)
 *
 * Causal (query i sees keys j <= i):
 *   query x0: only k0 -> v0 = (1, 2)
 *   query x1: q.k = (0, 1) -> weights (1, 2)/3 -> (v0 + 2*v1)/3 = (7, 10)/3 = (2.3333, 3.3333)
 *   query x2: sees every key, as above -> (3.5, 4.5)
 *
 * Expected output (the target line depends on the CPU: AVX3, AVX2, SSE4, NEON, ...):
 *   hwyattn 0.4.0, SIMD target: AVX3
 *   bidirectional:
 *     out[0] = 3.0000 4.0000
 *     out[1] = 3.4000 4.4000
 *     out[2] = 3.5000 4.5000
 *   causal:
 *     out[0] = 1.0000 2.0000
 *     out[1] = 2.3333 3.3333
 *     out[2] = 3.5000 4.5000
 */
#include <hwyattn.h>

#include <stdio.h>

/* Runs attention over x (queries and keys) and v into out; returns 0 on success. */
static int attend(float* x, float* v, float* out, hwyattn_causal causal) {
  /* [B, H, L, D] = [1, 1, 3, 2] for q, k, v and out alike. */
  const int64_t shape[4] = {1, 1, 3, 2};
  hwyattn_tensor tq, tk, tv, to;
  hwyattn_sdpa_options opts;
  hwyattn_status st;

  hwyattn_tensor_contiguous(&tq, x, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&tk, x, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 4, shape);

  hwyattn_sdpa_options_init(&opts);
  opts.scale = 0.69314718f; /* ln 2 (0 would mean 1/sqrt(head_dim)) */
  opts.causal = causal;

  st = hwyattn_sdpa(&tq, &tk, &tv, &to, &opts);
  if (st != HWYATTN_OK) {
    fprintf(stderr, "hwyattn_sdpa: %s (%s)\n", hwyattn_status_string(st), hwyattn_last_error());
    return 1;
  }
  return 0;
}

static void print_rows(const char* title, const float* out) {
  int i;
  printf("%s:\n", title);
  for (i = 0; i < 3; ++i) printf("  out[%d] = %.4f %.4f\n", i, out[2 * i], out[2 * i + 1]);
}

int main(void) {
  float x[3 * 2] = {1, 0, /* x0 */
                    0, 1, /* x1 */
                    1, 1 /* x2 */};
  float v[3 * 2] = {1, 2, /* v0 */
                    3, 4, /* v1 */
                    5, 6 /* v2 */};
  float out[3 * 2];

  /* Catch a header/library mismatch before anything else. */
  if (hwyattn_abi_version() != HWYATTN_ABI_VERSION) {
    fprintf(stderr, "hwyattn.h has ABI %d but the library has %u\n", HWYATTN_ABI_VERSION,
            (unsigned)hwyattn_abi_version());
    return 1;
  }
  printf("hwyattn %s, SIMD target: %s\n", hwyattn_version(), hwyattn_simd_target());

  if (attend(x, v, out, HWYATTN_CAUSAL_NONE) != 0) return 1;
  print_rows("bidirectional", out);
  if (attend(x, v, out, HWYATTN_CAUSAL_TOP_LEFT) != 0) return 1;
  print_rows("causal", out);
  return 0;
}
