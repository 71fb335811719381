// SPDX-License-Identifier: Apache-2.0
//
// The decode kernel's integer scores (int8_products.h's Int8Kernels) on
// AVX512_VNNI: vpdpbusd multiplies 64 unsigned bytes by 64 signed bytes and
// adds each lane's 4 products to an int32 lane, so one 64-byte step of a K
// row (two blocks of 32: one load of integers, or two Q8_0 blocks' numbers,
// or two Q4_0 blocks' nibbles unpacked, KeyStep) feeds one instruction per
// query row. The query is
// the unsigned operand, offset by 128 (Int8QueryRows::u, q + 128 in
// [1, 255]): sum (q + 128) k = sum q k + 128 sum k, and the key's 128 sum k
// (one more vpdpbusd per load, against bytes of 128, shared by the rows)
// starts each row's sum negated, so every lane ends exact (|sum| < 2^31).
// Each 64-byte step's int32 lanes (8 per block) are converted once and
// multiplied by their block's scales (d per lane, Int8QueryRows::d_lanes,
// times the key's block scale e for ggml's formats) into one fp32
// accumulator per (row, key); the transpose-reduce of the other decode loops
// (reduce_keys_avx512.h) sums 16 of them at once.
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
#include <type_traits>
#include <utility>

#include "hwy/targets.h"
#include "src/ops/reduce_keys_avx512.h"

#define HWYATTN_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

namespace hwyattn {
namespace {

// 64 bytes from p, or (kHalf: the last block of an odd count) 32 and zeros.
template <bool kHalf>
HWYATTN_VNNI_TARGET inline __m512i LoadBytes(const void* p) {
  return kHalf ? _mm512_maskz_loadu_epi8(0xFFFFFFFFull, p) : _mm512_loadu_si512(p);
}

// 16 floats from p, or (kHalf) 8 and zeros.
template <bool kHalf>
HWYATTN_VNNI_TARGET inline __m512 LoadFloats(const float* p) {
  return kHalf ? _mm512_maskz_loadu_ps(0x00FF, p) : _mm512_loadu_ps(p);
}

// Step `step` of a key's row: the 64 numbers of blocks 2 step and 2 step + 1
// as int8 (kHalf: block 2 step's 32 and zeros), from contiguous integers,
// two Q8_0 blocks' 32 bytes after each 2-byte scale, or two Q4_0 blocks'
// 16 bytes of nibbles (element j < 16 the low nibble of byte j, j + 16 its
// high one; the number the nibble - 8).
template <Int8KeyLayout kLayout, bool kHalf>
HWYATTN_VNNI_TARGET inline __m512i KeyStep(const int8_t* k, size_t step) {
  constexpr size_t kBytes = kInPlaceBlockBytes<kLayout>;
  const int8_t* numbers = k + 2 * step * kBytes + 2;
  if constexpr (kLayout == Int8KeyLayout::kQ8_0) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(numbers));
    if constexpr (kHalf) return _mm512_zextsi256_si512(lo);
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(numbers + kBytes));
    return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
  } else if constexpr (kLayout == Int8KeyLayout::kQ4_0) {
    // [a, b] -> [a, a, b, b] (128-bit parts), the low nibbles of parts 0
    // and 2, the high ones of 1 and 3, each minus 8.
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(numbers));
    const __m256i ab =
        kHalf ? _mm256_zextsi128_si256(a)
              : _mm256_inserti128_si256(
                    _mm256_zextsi128_si256(a),
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(numbers + kBytes)), 1);
    const __m512i aabb = _mm512_shuffle_i64x2(_mm512_zextsi256_si512(ab),
                                              _mm512_zextsi256_si512(ab), _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    const __m512i v =
        _mm512_sub_epi8(_mm512_and_si512(_mm512_srlv_epi64(aabb, shifts), _mm512_set1_epi8(0x0F)),
                        _mm512_set1_epi8(8));
    if constexpr (kHalf) return _mm512_zextsi256_si512(_mm512_castsi512_si256(v));
    return v;
  } else {
    return LoadBytes<kHalf>(k + step * 64);
  }
}

// The block scales e of step `step` of key `key`, each 8 times (kHalf: the
// upper 8 lanes 0): from Int8KeyRows::e, or the in-place blocks' fp16 d.
template <Int8KeyLayout kLayout, bool kHalf>
HWYATTN_VNNI_TARGET inline __m512 KeyScales(const Int8KeyRows& keys, size_t blocks, size_t key,
                                            size_t step) {
  if constexpr (kLayout == Int8KeyLayout::kQ8_0 || kLayout == Int8KeyLayout::kQ4_0) {
    constexpr size_t kBytes = kInPlaceBlockBytes<kLayout>;
    const int8_t* block = keys.rows[key] + 2 * step * kBytes;
    uint16_t d0, d1 = 0;
    memcpy(&d0, block, sizeof(d0));
    if constexpr (!kHalf) memcpy(&d1, block + kBytes, sizeof(d1));
    const __m128i lo = _mm_set1_epi16(static_cast<short>(d0));
    const __m128i hi = _mm_set1_epi16(static_cast<short>(d1));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_zextsi128_si256(lo), hi, 1));
  } else {
    const float* eb = keys.e + key * blocks + 2 * step;
    return _mm512_insertf32x8(_mm512_set1_ps(eb[0]), _mm256_set1_ps(kHalf ? 0.0f : eb[1]), 1);
  }
}

// The sums of 64-byte steps [c0, c0 + kSteps) of the kKeys keys of the group
// at j for kRows rows (the rows' query steps in registers), added, scaled,
// to acc[r * kKeys + key].
template <size_t kRows, size_t kSteps, Int8KeyLayout kLayout, bool kHalf>
HWYATTN_VNNI_TARGET inline void ScoreSteps(const Int8QueryRows& q, size_t c0,
                                           const Int8KeyRows& keys, size_t j, size_t last,
                                           __m512 (&acc)[16]) {
  constexpr size_t kKeys = 16 / kRows;
  constexpr bool kScaled = kLayout != Int8KeyLayout::kUnscaled;
  const size_t ldu = q.blocks * static_cast<size_t>(kBlockElems);
  const size_t ldd = q.blocks * 8;
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i qv[kRows][kSteps];
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 16
    for (size_t c = 0; c < kSteps; ++c) qv[r][c] = LoadBytes<kHalf>(q.u + r * ldu + (c0 + c) * 64);
  }
#pragma GCC unroll 16
  for (size_t kk = 0; kk < kKeys; ++kk) {
    const size_t key = std::min(j + kk, last);
    const int8_t* k = keys.rows[key];
#pragma GCC unroll 16
    for (size_t c = 0; c < kSteps; ++c) {
      const size_t step = c0 + c;
      const __m512i kv = KeyStep<kLayout, kHalf>(k, step);
      const __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k128, kv));
      __m512 ev = _mm512_setzero_ps();
      if constexpr (kScaled) ev = KeyScales<kLayout, kHalf>(keys, q.blocks, key, step);
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) {
        const __m512i sum = _mm512_dpbusd_epi32(start, qv[r][c], kv);
        __m512 scale = LoadFloats<kHalf>(q.d_lanes + r * ldd + step * 16);
        if constexpr (kScaled) scale = _mm512_mul_ps(scale, ev);
        __m512& a = acc[r * kKeys + kk];
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, a);
      }
    }
  }
}

// Whole steps [c, full) in groups of kSteps, then halving groups.
template <size_t kRows, size_t kSteps, Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET inline void ScoreAllSteps(const Int8QueryRows& q, size_t c, size_t full,
                                              const Int8KeyRows& keys, size_t j, size_t last,
                                              __m512 (&acc)[16]) {
  for (; c + kSteps <= full; c += kSteps) {
    ScoreSteps<kRows, kSteps, kLayout, false>(q, c, keys, j, last, acc);
  }
  if constexpr (kSteps > 1) {
    ScoreAllSteps<kRows, kSteps / 2, kLayout>(q, c, full, keys, j, last, acc);
  }
}

// Row r's kKeys scores (lanes [r kKeys, (r + 1) kKeys) of sums) to sr, the
// keys of `valid`: a part of the vector taken out whole (vextractf32x4 /
// x8; masked stores write only their lanes), not vcompressps.
template <size_t kKeys, size_t kRow>
HWYATTN_VNNI_TARGET inline void StoreRow(__m512 sums, __mmask16 valid, float* sr) {
  if constexpr (kKeys == 16) {
    _mm512_mask_storeu_ps(sr, valid, sums);
  } else if constexpr (kKeys == 8) {
    _mm256_mask_storeu_ps(sr, static_cast<__mmask8>(valid), _mm512_extractf32x8_ps(sums, kRow));
  } else if constexpr (kKeys == 4) {
    _mm_mask_storeu_ps(sr, static_cast<__mmask8>(valid), _mm512_extractf32x4_ps(sums, kRow));
  } else {  // 2 keys: half of a 128-bit part, stored from 2 floats before sr when odd
    constexpr size_t kAt = 2 * (kRow % 2);
    _mm_mask_storeu_ps(sr - kAt, static_cast<__mmask8>(valid << kAt),
                       _mm512_extractf32x4_ps(sums, kRow / 2));
  }
}

template <size_t kKeys, size_t... kRows>
HWYATTN_VNNI_TARGET inline void StoreRows(std::index_sequence<kRows...>, size_t rows, __m512 sums,
                                          __mmask16 valid, float* s, size_t lds) {
  ((kRows < rows ? StoreRow<kKeys, kRows>(sums, valid, s + kRows * lds) : void()), ...);
}

// Int8Kernels::scores for group_rows = kRows, 16 / kRows keys at a time.
template <size_t kRows, Int8KeyLayout kLayout>
HWYATTN_VNNI_TARGET void ScoreRows(size_t rows, const Int8QueryRows& q, const Int8KeyRows& keys,
                                   size_t n, float scale, float* s, size_t lds) {
  constexpr size_t kKeys = 16 / kRows;
  constexpr size_t kSteps = kRows >= 8 ? 1 : 8 / kRows;
  const size_t full = q.blocks / 2;
  const bool half = q.blocks % 2 != 0;
  const __m512 sc = _mm512_set1_ps(scale);
  for (size_t j = 0; j < n; j += kKeys) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    ScoreAllSteps<kRows, kSteps, kLayout>(q, 0, full, keys, j, n - 1, acc);
    if (half) ScoreSteps<kRows, 1, kLayout, true>(q, full, keys, j, n - 1, acc);
    const __m512 sums = _mm512_mul_ps(ReduceKeys16(acc), sc);
    const size_t valid_keys = std::min(kKeys, n - j);
    const __mmask16 valid = static_cast<__mmask16>((1u << valid_keys) - 1u);
    StoreRows<kKeys>(std::make_index_sequence<kRows>(), rows, sums, valid, s + j, lds);
    // The formats' offsets (Q4_1, Q5_1): m d sum(q) per block.
    const float* m = keys.m;
    for (size_t r = 0; r < rows && m != nullptr; ++r) {
      float* sr = s + r * lds + j;
      for (size_t kk = 0; kk < valid_keys; ++kk) {
        float offset = 0.0f;
        for (size_t b = 0; b < q.blocks; ++b) {
          offset += m[(j + kk) * q.blocks + b] * q.dsum[r * q.blocks + b];
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
