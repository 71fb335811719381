/* SPDX-License-Identifier: Apache-2.0
 *
 * consumer.c: a minimal user of an INSTALLED hwyattn (tests/install/). It
 * checks the version and ABI against the header it was compiled with and runs
 * one hwyattn_sdpa whose result is worked out by hand below. Exit status 0 on
 * success; prints what differs otherwise.
 *
 * Cross-attention, B = H = 1, Lq = 2, Lk = 3, D = Dv = 2, scale = ln 2, so
 * exp(scale * s) = 2^s and the softmax weights are powers of two:
 *   q0 = (1, 0), q1 = (0, 2);  k0 = (1, 0), k1 = (0, 1), k2 = (0, 0)
 *   v0 = (4, 0), v1 = (0, 4), v2 = (2, 2)
 *   q0.k = (1, 0, 0) -> weights (2, 1, 1)/4 -> (2*v0 + v1 + v2)/4 = (10, 6)/4 = (2.5, 1.5)
 *   q1.k = (0, 2, 0) -> weights (1, 4, 1)/6 -> (v0 + 4*v1 + v2)/6 = (6, 18)/6 = (1, 3)
 */
#include <hwyattn.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "FAILED: %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);           \
      fprintf(stderr, "\n");                  \
      ++g_failures;                           \
    }                                         \
  } while (0)

int main(void) {
  char expected_version[32];
  float q[2 * 2] = {1, 0, 0, 2};
  float k[3 * 2] = {1, 0, 0, 1, 0, 0};
  float v[3 * 2] = {4, 0, 0, 4, 2, 2};
  const float expected[2 * 2] = {2.5f, 1.5f, 1.0f, 3.0f};
  float out[2 * 2] = {-1, -1, -1, -1};
  const int64_t qshape[4] = {1, 1, 2, 2}, kshape[4] = {1, 1, 3, 2};
  hwyattn_tensor tq, tk, tv, to;
  hwyattn_sdpa_options opts;
  hwyattn_status st;
  int i;

  snprintf(expected_version, sizeof(expected_version), "%d.%d.%d", HWYATTN_VERSION_MAJOR,
           HWYATTN_VERSION_MINOR, HWYATTN_VERSION_PATCH);
  CHECK(strcmp(hwyattn_version(), expected_version) == 0, "library %s, header %s",
        hwyattn_version(), expected_version);
  CHECK(hwyattn_abi_version() == HWYATTN_ABI_VERSION, "library ABI %u, header %d",
        (unsigned)hwyattn_abi_version(), HWYATTN_ABI_VERSION);
  printf("hwyattn %s (ABI %u), SIMD target %s\n", hwyattn_version(),
         (unsigned)hwyattn_abi_version(), hwyattn_simd_target());

  CHECK(hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, qshape) == HWYATTN_OK, "q");
  CHECK(hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, kshape) == HWYATTN_OK, "k");
  CHECK(hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, kshape) == HWYATTN_OK, "v");
  CHECK(hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 4, qshape) == HWYATTN_OK, "out");
  hwyattn_sdpa_options_init(&opts);
  opts.scale = 0.69314718f; /* ln 2 */

  st = hwyattn_sdpa(&tq, &tk, &tv, &to, &opts);
  CHECK(st == HWYATTN_OK, "hwyattn_sdpa: %s (%s)", hwyattn_status_string(st), hwyattn_last_error());
  for (i = 0; i < 4; ++i) {
    CHECK(fabsf(out[i] - expected[i]) <= 1e-5f, "out[%d][%d] = %.7f, expected %.7f", i / 2, i % 2,
          out[i], expected[i]);
  }
  printf("out = [[%.4f, %.4f], [%.4f, %.4f]]\n", out[0], out[1], out[2], out[3]);

  /* A failing call reports through the status and the last-error text. */
  st = hwyattn_sdpa(NULL, &tk, &tv, &to, NULL);
  CHECK(st == HWYATTN_INVALID_ARGUMENT, "hwyattn_sdpa(NULL q) gave %d", (int)st);
  CHECK(hwyattn_last_error()[0] != '\0', "empty hwyattn_last_error() after a failure");

  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("consumer OK\n");
  return 0;
}
