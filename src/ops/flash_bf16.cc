// SPDX-License-Identifier: Apache-2.0
//
// AVX512_BF16 register tiles (see flash_bf16.h). Not a foreach_target unit:
// one copy for x86-64, each function under a target attribute.
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
#include <immintrin.h>

#define HWYATTN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace hwyattn {
namespace avx512_bf16 {
namespace {

template <size_t kVectors>
HWYATTN_BF16_TARGET inline void ScoreTileFixed(size_t pairs, const uint32_t* k_pairs,
                                               const uint32_t* q_pairs, size_t ldq, float scale,
                                               float* s, size_t lds) {
  __m512 acc[kTileRows][kVectors];
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) acc[r][c] = _mm512_setzero_ps();
  for (size_t i = 0; i < pairs; ++i) {
    __m512bh q[kVectors];
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) {
      q[c] = (__m512bh)_mm512_loadu_si512(q_pairs + i * ldq + c * kLanes);
    }
    const uint32_t* k = k_pairs + i * kTileRows;
#pragma GCC unroll 16
    for (size_t r = 0; r < kTileRows; ++r) {
      const __m512bh kr = (__m512bh)_mm512_set1_epi32(static_cast<int>(k[r]));
#pragma GCC unroll 16
      for (size_t c = 0; c < kVectors; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], kr, q[c]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c)
      _mm512_storeu_ps(s + r * lds + c * kLanes, _mm512_mul_ps(acc[r][c], sc));
}

template <size_t kRows, size_t kVectors>
HWYATTN_BF16_TARGET inline void ValueTileFixed(size_t pairs, const uint32_t* v_pairs, size_t ldv,
                                               const uint32_t* p_pairs, size_t ldp,
                                               const float* alpha, float* o, size_t ldo) {
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 16
  for (size_t c = 0; c < kVectors; ++c) {
    const __m512 a = _mm512_loadu_ps(alpha + c * kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(o + r * ldo + c * kLanes), a);
    }
  }
  for (size_t i = 0; i < pairs; ++i) {
    __m512bh p[kVectors];
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) {
      p[c] = (__m512bh)_mm512_loadu_si512(p_pairs + i * ldp + c * kLanes);
    }
    const uint32_t* v = v_pairs + i * ldv;
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      const __m512bh vr = (__m512bh)_mm512_set1_epi32(static_cast<int>(v[r]));
#pragma GCC unroll 16
      for (size_t c = 0; c < kVectors; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], vr, p[c]);
    }
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) _mm512_storeu_ps(o + r * ldo + c * kLanes, acc[r][c]);
}

constexpr bool kValueRowsAtRunTime = false;

}  // namespace

#include "src/ops/flash_bf16_shapes-inl.h"

}  // namespace avx512_bf16
}  // namespace hwyattn

#endif  // HWYATTN_BF16_DOT_COMPILED && __x86_64__
