// SPDX-License-Identifier: Apache-2.0
//
// AVX512_BF16 register tiles (see flash_bf16.h). Not a foreach_target unit:
// one copy for x86-64, each function under a target attribute.
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
#include "src/ops/bf16_dot_avx512.h"

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
    DotStep<kTileRows, kVectors>(acc, q_pairs + i * ldq, k_pairs + i * kTileRows);
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) acc[r][c] = _mm512_mul_ps(acc[r][c], sc);
  StoreRows(acc, s, lds);
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
  for (size_t i = 0; i < pairs; ++i)
    DotStep<kRows, kVectors>(acc, p_pairs + i * ldp, v_pairs + i * ldv);
  StoreRows(acc, o, ldo);
}

constexpr bool kValueRowsAtRunTime = false;

}  // namespace

#include "src/ops/flash_bf16_shapes-inl.h"

}  // namespace avx512_bf16
}  // namespace hwyattn

#endif  // HWYATTN_BF16_DOT_COMPILED && __x86_64__
