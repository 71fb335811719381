// SPDX-License-Identifier: Apache-2.0
//
// The decode kernels' transpose-and-sum of 16 AVX-512 accumulators, one per
// (row, key): the fp32 loops' (decode_attention.cc, AVX3) and the
// AVX512_BF16 loops' (decode_bf16.cc). x86-64 only.
#ifndef HWYATTN_SRC_OPS_REDUCE_KEYS_AVX512_H_
#define HWYATTN_SRC_OPS_REDUCE_KEYS_AVX512_H_

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace hwyattn {

// Lane i of the result is the sum of acc[i]'s 16 lanes. Two levels within
// 128-bit blocks (unpacks: one-cycle shuffles), then two across blocks
// (vshuff32x4): on Zen 4 D1q -7% against four levels of two-source
// permutes (vpermt2ps), whose 30 permutes per 16 accumulators were a third
// of the score loop's time.
__attribute__((target("avx512f"))) inline __m512 ReduceKeys16(const __m512 (&acc)[16]) {
  // The zero-masking forms with every lane kept: the same instructions, but
  // GCC 12 warns that the plain forms' undefined pass-through may be used.
  const __mmask16 kAll = 0xFFFF;
  __m512 x[8], z[4], u[2];
  for (int i = 0; i < 8; ++i) {  // block b of x[i]: (a0+a2, b0+b2, a1+a3, b1+b3) of acc 2i, 2i+1
    x[i] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(kAll, acc[2 * i], acc[2 * i + 1]),
                         _mm512_maskz_unpackhi_ps(kAll, acc[2 * i], acc[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // lane w of block b of z[i]: block b's sum of acc 4i + w
    const __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
    z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a, b)),
                         _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a, b)));
  }
  for (int i = 0; i < 2; ++i) {  // blocks: z[2i]'s halves summed, then z[2i+1]'s
    u[i] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, z[2 * i], z[2 * i + 1], 0x44),
                         _mm512_maskz_shuffle_f32x4(kAll, z[2 * i], z[2 * i + 1], 0xEE));
  }
  // Block j: z[j]'s total, lane w of it acc 4j + w's.
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, u[0], u[1], 0x88),
                       _mm512_maskz_shuffle_f32x4(kAll, u[0], u[1], 0xDD));
}

}  // namespace hwyattn

#endif  // x86-64
#endif  // HWYATTN_SRC_OPS_REDUCE_KEYS_AVX512_H_
