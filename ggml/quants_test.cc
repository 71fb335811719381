// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_kv_cache_write into ggml's block formats gives the bytes of ggml's
// own reference quantizers (quantize_row_<type>_ref, reached through
// ggml_get_type_traits(type)->from_float_ref of the pinned ggml), and
// hwyattn reads those bytes back as ggml's dequantizer does (to_float):
// rows of random values of several magnitudes and shapes (uniform, heavy
// tailed, one outlier, constant, exact multiples that put values on
// rounding ties). Built and run by ggml_test_backend_ops.sh against the same
// ggml build as test-backend-ops, linked to libhwyattn.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <random>
#include <vector>

#include "ggml.h"
#include "hwyattn.h"

namespace {

struct Format {
  hwyattn_dtype ours;
  ggml_type theirs;
  const char* name;
};

constexpr Format kFormats[] = {
    {HWYATTN_Q8_0, GGML_TYPE_Q8_0, "q8_0"}, {HWYATTN_Q4_0, GGML_TYPE_Q4_0, "q4_0"},
    {HWYATTN_Q4_1, GGML_TYPE_Q4_1, "q4_1"}, {HWYATTN_Q5_0, GGML_TYPE_Q5_0, "q5_0"},
    {HWYATTN_Q5_1, GGML_TYPE_Q5_1, "q5_1"}, {HWYATTN_IQ4_NL, GGML_TYPE_IQ4_NL, "iq4_nl"},
};

constexpr int64_t kDim = 128, kRows = 512;

// Row r's values: a different kind of row every few rows.
void FillRow(int64_t r, std::mt19937* rng, float* x) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const float scale = ldexpf(1.0f, static_cast<int>(r % 13) - 6);
  for (int64_t d = 0; d < kDim; ++d) {
    switch (r % 6) {
      case 0: x[d] = scale * u(*rng); break;
      case 1: x[d] = scale * n(*rng) * n(*rng); break;                      // heavy tails
      case 2: x[d] = d % 32 == 5 ? 40.0f * scale : scale * u(*rng); break;  // an outlier
      case 3:
        x[d] = 0.75f * scale;
        break;  // constant blocks (Q4_1: d = 0)
      // Multiples of a block's step: values on Q8_0's and Q4's rounding ties.
      case 4: x[d] = scale * static_cast<float>(static_cast<int>(u(*rng) * 16.0f)) * 0.5f; break;
      default: x[d] = scale * (u(*rng) > 0.0f ? 1.0f : -1.0f) * (1.0f + u(*rng) * 1e-3f);
    }
  }
}

}  // namespace

int main() {
  int failures = 0;
  std::mt19937 rng(2026);
  std::vector<float> x(static_cast<size_t>(kRows * kDim));
  for (int64_t r = 0; r < kRows; ++r) FillRow(r, &rng, &x[static_cast<size_t>(r * kDim)]);
  // V: one F32 channel block per token, unused here.
  std::vector<float> v_new(static_cast<size_t>(kRows * 32), 0.5f), v_pool(v_new.size());
  std::vector<int64_t> slots(static_cast<size_t>(kRows));
  for (int64_t r = 0; r < kRows; ++r) slots[static_cast<size_t>(r)] = r;
  for (const Format& f : kFormats) {
    const ggml_type_traits* traits = ggml_get_type_traits(f.theirs);
    const size_t row_bytes = ggml_row_size(f.theirs, kDim);
    std::vector<unsigned char> ours(row_bytes * kRows, 0xA5), theirs(row_bytes * kRows);
    for (int64_t r = 0; r < kRows; ++r) {
      traits->from_float_ref(&x[static_cast<size_t>(r * kDim)], &theirs[row_bytes * r], kDim);
    }
    // The cache: kRows pages of one slot, one kv head.
    hwyattn_kv_cache cache;
    hwyattn_kv_cache_init(&cache);
    const int64_t kshape[4] = {kRows, 1, 1, kDim}, vshape[4] = {kRows, 1, 1, 32};
    const int64_t nshape[3] = {kRows, 1, kDim}, nvshape[3] = {kRows, 1, 32};
    hwyattn_tensor k_new, tv_new;
    if (hwyattn_tensor_contiguous(&cache.k, ours.data(), f.ours, 4, kshape) != HWYATTN_OK ||
        hwyattn_tensor_contiguous(&cache.v, v_pool.data(), HWYATTN_F32, 4, vshape) != HWYATTN_OK ||
        hwyattn_tensor_contiguous(&k_new, x.data(), HWYATTN_F32, 3, nshape) != HWYATTN_OK ||
        hwyattn_tensor_contiguous(&tv_new, v_new.data(), HWYATTN_F32, 3, nvshape) != HWYATTN_OK ||
        hwyattn_kv_cache_write(&cache, &k_new, &tv_new, slots.data(), nullptr) != HWYATTN_OK) {
      printf("FAIL %s: %s\n", f.name, hwyattn_last_error());
      ++failures;
      continue;
    }
    int64_t differ = 0, first = -1, compared = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      const unsigned char* a = &ours[row_bytes * r];
      const unsigned char* b = &theirs[row_bytes * r];
      const size_t block = row_bytes / (kDim / 32);
      for (int64_t blk = 0; blk < kDim / 32; ++blk) {
        // ggml's IQ4_NL leaves the nibbles of a block of zeros (largest
        // |x| < 1e-15) as its index buffer held them: not comparable.
        bool zero = true;
        for (int64_t d = 0; d < 32; ++d) zero = zero && x[r * kDim + blk * 32 + d] == 0.0f;
        if (f.theirs == GGML_TYPE_IQ4_NL && zero) continue;
        ++compared;
        if (memcmp(a + block * blk, b + block * blk, block) != 0) {
          if (first < 0) first = r * (kDim / 32) + blk;
          ++differ;
        }
      }
    }
    // Read back: attention over one key returns that key's V row exactly
    // (weight 1), so hwyattn_sdpa with k = v = row r of our cache (a batch
    // of kRows one-key problems) must give ggml's to_float of the row.
    std::vector<float> out(static_cast<size_t>(kRows * kDim)), want(out.size());
    for (int64_t r = 0; r < kRows; ++r) {
      traits->to_float(&ours[row_bytes * r], &want[static_cast<size_t>(r * kDim)], kDim);
    }
    const int64_t one[4] = {kRows, 1, 1, kDim};
    hwyattn_tensor tq, tk, tout;
    int64_t mismatches = 0;
    if (hwyattn_tensor_contiguous(&tq, x.data(), HWYATTN_F32, 4, one) != HWYATTN_OK ||
        hwyattn_tensor_contiguous(&tk, ours.data(), f.ours, 4, one) != HWYATTN_OK ||
        hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, one) != HWYATTN_OK ||
        hwyattn_sdpa(&tq, &tk, &tk, &tout, nullptr) != HWYATTN_OK) {
      printf("FAIL %s: hwyattn_sdpa: %s\n", f.name, hwyattn_last_error());
      mismatches = 1;
    }
    for (size_t i = 0; i < out.size() && mismatches == 0; ++i) {
      if (out[i] != want[i]) {  // equal values (a sum of products has no -0)
        printf("  element %zu: hwyattn reads %.9g, ggml's to_float %.9g\n", i, out[i], want[i]);
        ++mismatches;
      }
    }
    const bool reads_back = mismatches == 0;
    printf("%s: %lld of %lld blocks differ from quantize_row_%s_ref's bytes; read back %s\n",
           f.name, static_cast<long long>(differ), static_cast<long long>(compared), f.name,
           reads_back ? "as ggml's to_float does" : "DIFFERENTLY from ggml's to_float");
    if (differ != 0 || !reads_back) {
      ++failures;
      if (first >= 0) {
        const size_t block = row_bytes / (kDim / 32);
        const unsigned char* a = &ours[block * static_cast<size_t>(first)];
        const unsigned char* b = &theirs[block * static_cast<size_t>(first)];
        printf("  first: block %lld\n  ours:  ", static_cast<long long>(first));
        for (size_t i = 0; i < block; ++i) printf("%02x", a[i]);
        printf("\n  ggml:  ");
        for (size_t i = 0; i < block; ++i) printf("%02x", b[i]);
        printf("\n");
      }
    }
  }
  printf("%s\n", failures == 0 ? "PASS: every block format writes ggml's bytes" : "FAIL");
  return failures == 0 ? 0 : 1;
}
