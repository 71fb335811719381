// SPDX-License-Identifier: Apache-2.0
//
// The decode kernel's integer scores (int8_products.h's Int8Kernels) on
// AVX512_VNNI, 16 keys at a time with a key per lane: vpdpbusd multiplies
// 64 unsigned bytes by 64 signed bytes and adds each lane's 4 products to
// its int32 lane, so with K transposed (lane l of vector i holds numbers
// 4i..4i+3 of key l's block, KeyBlock) and 4 of the query's numbers
// broadcast, 8 instructions make a block's 32 products for 16 keys and a
// query row, already summed per key: no horizontal sums. K is the unsigned
// operand, its numbers plus a zero point z (Int8KeyZeroPoint: the sign bit
// flipped, + 128, or Q4_0's nibbles as they are, + 8), the query's int8
// numbers the signed one: sum (k + z) q = sum k q + z sum q, so each sum
// starts at the query block's -z sum q (Int8QueryRows::start) and ends exact
// (|sum| < 2^31). Each block's sums are converted once and multiplied by
// the block's scales (the query's d times the 16 keys' e for ggml's
// formats) into one fp32 accumulator per row. The transposes (4 x 4 of
// 32-bit numbers within 128-bit parts, KeyBlock) cost 2 (Q4_0) or 3
// operations per key and block, shared by the rows; the products and scales
// 11 per row, block and 16 keys.
//
// Not a foreach_target unit: one copy for x86-64, each function under a
// target attribute, used in place of the AVX3 target's portable integer
// kernel (int8_scores.cc) where the CPU has AVX512_VNNI (Int8DotFor,
// src/targets.h).
#include "src/ops/int8_products.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_* as the unused source
// of their masked builtins, which -Wmaybe-uninitialized reports in every
// caller (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <string.h>

#include <algorithm>

#include "hwy/targets.h"

#define HWYATTN_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

namespace hwyattn {
namespace {

// Where the numbers of block b of a key row start, and its bytes: integers
// (32 a block), Q8_0's (after the block's fp16 d) or Q4_0's (16 bytes of
// nibbles after d: element i < 16 the low nibble of byte i, i + 16 its high
// one).
template <Int8KeyLayout kLayout>
constexpr size_t kBlockStride = kLayout == Int8KeyLayout::kQ8_0 || kLayout == Int8KeyLayout::kQ4_0
                                    ? kInPlaceBlockBytes<kLayout>
                                    : static_cast<size_t>(kBlockElems);
template <Int8KeyLayout kLayout>
constexpr size_t kNumbersAt =
    kLayout == Int8KeyLayout::kQ8_0 || kLayout == Int8KeyLayout::kQ4_0 ? 2 : 0;

// 16 bytes at byte `at` of the 4 keys' blocks k[0], k[4], k[8], k[12] (from
// the first key given), one per 128-bit part.
HWYATTN_VNNI_TARGET inline __m512i Parts(const int8_t* const* k, size_t at) {
  const auto load = [&](size_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(k[i] + at));
  };
  const __m512i x = _mm512_castsi128_si512(load(0));
  const __m512i y = _mm512_inserti32x4(x, load(4), 1);
  return _mm512_inserti32x4(_mm512_inserti32x4(y, load(8), 2), load(12), 3);
}

// The 4 x 4 transpose of 32-bit numbers within each 128-bit part: number i
// of part p of x[m] to number m of part p of t[i].
HWYATTN_VNNI_TARGET inline void Transpose4(const __m512i (&x)[4], __m512i* t) {
  const __m512i a = _mm512_unpacklo_epi32(x[0], x[1]), b = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i c = _mm512_unpacklo_epi32(x[2], x[3]), d = _mm512_unpackhi_epi32(x[2], x[3]);
  t[0] = _mm512_unpacklo_epi64(a, c);
  t[1] = _mm512_unpackhi_epi64(a, c);
  t[2] = _mm512_unpacklo_epi64(b, d);
  t[3] = _mm512_unpackhi_epi64(b, d);
}

// Block b of the 16 keys k[0..15], transposed and offset: lane l of t[i]
// holds numbers 4i..4i+3 of key l's block, each + the zero point, as
// unsigned bytes. (Key l = 4 p + m sits in part p of Parts(k + m).)
template <Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET inline void KeyBlock(const int8_t* const* k, size_t b, __m512i (&t)[8]) {
  const size_t at = b * kBlockStride<kLayout> + kNumbersAt<kLayout>;
  __m512i x[4];
  if constexpr (kLayout == Int8KeyLayout::kQ4_0) {
    for (size_t m = 0; m < 4; ++m) x[m] = Parts(k + m, at);
    __m512i u[4];
    Transpose4(x, u);
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (size_t i = 0; i < 4; ++i) {
      t[i] = _mm512_and_si512(u[i], low);
      t[4 + i] = _mm512_and_si512(_mm512_srli_epi16(u[i], 4), low);
    }
  } else {
    const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
    for (size_t half = 0; half < 2; ++half) {
      for (size_t m = 0; m < 4; ++m) x[m] = Parts(k + m, at + 16 * half);
      Transpose4(x, t + 4 * half);
      for (size_t i = 0; i < 4; ++i) t[4 * half + i] = _mm512_xor_si512(t[4 * half + i], sign);
    }
  }
}

// The 16 keys' scales of block b (ggml's formats: Int8KeyRows::e, or the
// in-place blocks' fp16 d).
template <Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET inline __m512 KeyScales(const Int8KeyRows& keys, const int8_t* const* k,
                                            const size_t* key, size_t blocks, size_t b) {
  if constexpr (kLayout == Int8KeyLayout::kQ8_0 || kLayout == Int8KeyLayout::kQ4_0) {
    // Four fp16 numbers to a 64-bit word in general-purpose registers (no
    // store to reload), four words to a vector.
    const auto four = [&](size_t l) {
      uint64_t w = 0;
      for (size_t i = 0; i < 4; ++i) {
        uint16_t h;
        memcpy(&h, k[l + i] + b * kBlockStride<kLayout>, sizeof(h));
        w |= static_cast<uint64_t>(h) << (16 * i);
      }
      return static_cast<long long>(w);
    };
    return _mm512_cvtph_ps(_mm256_set_epi64x(four(12), four(8), four(4), four(0)));
  } else {
    alignas(64) float e[16];
    for (size_t l = 0; l < 16; ++l) e[l] = keys.e[key[l] * blocks + b];
    return _mm512_load_ps(e);
  }
}

// Int8Kernels::scores for group_rows = kRows.
template <size_t kRows, Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET void ScoreRows(size_t rows, const Int8QueryRows& q, const Int8KeyRows& keys,
                                   size_t n, float scale, float* s, size_t lds) {
  constexpr bool kScaled = kLayout != Int8KeyLayout::kUnscaled;
  const size_t blocks = q.blocks;
  const size_t ldq = blocks * static_cast<size_t>(kBlockElems);
  const __m512 sc = _mm512_set1_ps(scale);
  for (size_t j = 0; j < n; j += 16) {
    // Keys past n repeat the last one (their lanes are not stored).
    const int8_t* k[16];
    size_t key[16];
    for (size_t l = 0; l < 16; ++l) {
      key[l] = std::min(j + l, n - 1);
      k[l] = keys.rows[key[l]];
    }
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
    for (size_t b = 0; b < blocks; ++b) {
      __m512i t[8];
      KeyBlock<kLayout>(k, b, t);
      __m512 e = _mm512_setzero_ps();
      if constexpr (kScaled) e = KeyScales<kLayout>(keys, k, key, blocks, b);
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) {
        const int8_t* qb = q.s + r * ldq + b * kBlockElems;
        __m512i sum = _mm512_set1_epi32(q.start[r * blocks + b]);
#pragma GCC unroll 8
        for (size_t i = 0; i < 8; ++i) {
          int32_t four;
          memcpy(&four, qb + 4 * i, sizeof(four));
          sum = _mm512_dpbusd_epi32(sum, t[i], _mm512_set1_epi32(four));
        }
        __m512 d = _mm512_set1_ps(q.d[r * blocks + b]);
        if constexpr (kScaled) d = _mm512_mul_ps(d, e);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc[r]);
      }
    }
    const size_t valid_keys = std::min<size_t>(16, n - j);
    const __mmask16 valid = static_cast<__mmask16>((1u << valid_keys) - 1u);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      if (r < rows) _mm512_mask_storeu_ps(s + r * lds + j, valid, _mm512_mul_ps(acc[r], sc));
    }
    // The formats' offsets (Q4_1, Q5_1): m d sum(q) per block.
    const float* m = keys.m;
    for (size_t r = 0; r < rows && m != nullptr; ++r) {
      float* sr = s + r * lds + j;
      for (size_t kk = 0; kk < valid_keys; ++kk) {
        float offset = 0.0f;
        for (size_t b = 0; b < blocks; ++b) {
          offset += m[(j + kk) * blocks + b] * q.dsum[r * blocks + b];
        }
        sr[kk] += offset * scale;
      }
    }
  }
}

template <Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET void ScoresOf(size_t group_rows, size_t rows, const Int8QueryRows& q,
                                  const Int8KeyRows& keys, size_t n, float scale, float* s,
                                  size_t lds) {
  switch (group_rows) {
    case 1: return ScoreRows<1, kLayout>(rows, q, keys, n, scale, s, lds);
    case 2: return ScoreRows<2, kLayout>(rows, q, keys, n, scale, s, lds);
    case 4: return ScoreRows<4, kLayout>(rows, q, keys, n, scale, s, lds);
    default: return ScoreRows<8, kLayout>(rows, q, keys, n, scale, s, lds);
  }
}

void Scores(size_t group_rows, size_t rows, const Int8QueryRows& q, const Int8KeyRows& keys,
            size_t n, float scale, float* s, size_t lds) {
  switch (keys.layout) {
    case Int8KeyLayout::kQ8_0:
      return ScoresOf<Int8KeyLayout::kQ8_0>(group_rows, rows, q, keys, n, scale, s, lds);
    case Int8KeyLayout::kQ4_0:
      return ScoresOf<Int8KeyLayout::kQ4_0>(group_rows, rows, q, keys, n, scale, s, lds);
    case Int8KeyLayout::kScaled:
      return ScoresOf<Int8KeyLayout::kScaled>(group_rows, rows, q, keys, n, scale, s, lds);
    default: return ScoresOf<Int8KeyLayout::kUnscaled>(group_rows, rows, q, keys, n, scale, s, lds);
  }
}

constexpr Int8Kernels kVnniKernels = {HWY_AVX3, true, &Scores};

}  // namespace

const Int8Kernels* Int8VnniKernels() { return &kVnniKernels; }

}  // namespace hwyattn

#else  // !(HWYATTN_BF16_DOT_COMPILED && __x86_64__)

namespace hwyattn {

const Int8Kernels* Int8VnniKernels() { return nullptr; }

}  // namespace hwyattn

#endif
