// SPDX-License-Identifier: Apache-2.0
//
// The step every AVX512_BF16 register tile takes (the prefill's score and
// value tiles, flash_bf16.cc; the projections' matmul tile, matmul_bf16.cc):
// kVectors vectors of 16 bf16 pairs loaded, each of kRows broadcast pairs
// multiplied into them by vdpbf16ps. x86-64 only; the callers compile it
// under HWYATTN_BF16_TARGET and call it only where Bf16DotFor says the CPU
// has AVX512_BF16.
#ifndef HWYATTN_SRC_OPS_BF16_DOT_AVX512_H_
#define HWYATTN_SRC_OPS_BF16_DOT_AVX512_H_

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define HWYATTN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace hwyattn {
namespace avx512_bf16 {

constexpr size_t kPairLanes = 16;  // bf16 pairs (fp32 sums) per vector

// acc[r][c] += rows[r] . vecs[c]: vecs[c] is the vector of 16 pairs at
// vecs + c * 16, rows[r] row r's pair broadcast to every lane.
template <size_t kRows, size_t kVectors>
HWYATTN_BF16_TARGET inline void DotStep(__m512 (&acc)[kRows][kVectors], const uint32_t* vecs,
                                        const uint32_t* rows) {
  __m512bh b[kVectors];
#pragma GCC unroll 16
  for (size_t c = 0; c < kVectors; ++c) {
    b[c] = (__m512bh)_mm512_loadu_si512(vecs + c * kPairLanes);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(rows[r]));
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, b[c]);
  }
}

}  // namespace avx512_bf16
}  // namespace hwyattn

#endif  // __x86_64__
#endif  // HWYATTN_SRC_OPS_BF16_DOT_AVX512_H_
