// SPDX-License-Identifier: Apache-2.0
//
// The decode kernel's AVX512_BF16 loops (see decode_bf16.h). Not a
// foreach_target unit: one copy for x86-64, each function under a target
// attribute.
#include "src/ops/decode_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include <algorithm>
#include <type_traits>

#include "hwy/base.h"
#include "src/cache_line.h"
#include "src/ops/convert.h"
#include "src/ops/reduce_keys_avx512.h"

// AVX512_VBMI for the FP8 lookups (Bf16DotFor asks for it).
#define HWYATTN_BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")))

namespace hwyattn {
namespace {

// The lines of the 32 elements of T from p, vector `vec` of a row's span:
// one line for 16-bit elements, two for floats, and for 1-byte elements one
// at every other vector (a vector is half a line). Each span of vectors also
// prefetches its last element (as the fp32 loops: PrefetchAt).
template <bool kL2, typename T>
HWYATTN_BF16_TARGET inline void PrefetchVector(const T* p, size_t vec) {
  if constexpr (sizeof(T) == 1) {
    if (vec % 2 != 0) return;
  }
  PrefetchLine<kL2>(p);
  if constexpr (sizeof(T) == 4) PrefetchLine<kL2>(p + 16);
}

// The elements of a mask of n < 32 or more elements.
inline __mmask32 FirstElements(size_t n) {
  return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u);
}

// What LoadPairs needs besides the elements: for the FP8 formats, the bf16
// bits of their 128 magnitudes (every fp8 number is a bf16 number: E4M3's
// and E5M2's subnormals are bf16 normals, infinities and NaN stay so), the
// low bytes in `low` and the high bytes in `high`, each a vpermt2b table of
// 128 (two registers; index bits 0-6, so a number's own byte indexes them
// and its sign bit, bit 7, is or-ed in after); nothing for the other types.
// Made once per loop, kept in registers.
template <typename T, bool kFp8 = kIsFp8<T>>
struct PairTable {
  HWYATTN_BF16_TARGET static PairTable Load() { return {}; }
};
template <typename T>
struct PairTable<T, true> {
  __m512i low[2], high[2];
  HWYATTN_BF16_TARGET static PairTable Load() {
    struct Bytes {
      alignas(64) uint8_t low[128], high[128];
      Bytes() {
        for (unsigned i = 0; i < 128; ++i) {
          const uint16_t bits = FloatToBf16(ToFloat(T{static_cast<uint8_t>(i)})).bits;  // exact
          low[i] = static_cast<uint8_t>(bits & 0xFF);
          high[i] = static_cast<uint8_t>(bits >> 8);
        }
      }
    };
    static const Bytes kBytes;
    PairTable t;
    for (int i = 0; i < 2; ++i) {
      t.low[i] = _mm512_load_si512(kBytes.low + 64 * i);
      t.high[i] = _mm512_load_si512(kBytes.high + 64 * i);
    }
    return t;
  }
  // The low and high bytes of the bf16 bits of the numbers whose bytes are
  // x's (the sign bit in `high`): two lookups and an or.
  HWYATTN_BF16_TARGET void Bytes(__m512i x, __m512i& lo, __m512i& hi) const {
    lo = _mm512_permutex2var_epi8(low[0], x, low[1]);
    hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(high[0], x, high[1]), x,
                                   _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // | x & 0x80
  }
};

// Byte-permute indices of the FP8 lookups (vpermb): `twice` puts number i's
// byte in both bytes of word i (32 numbers); `halves` puts numbers 8l..8l+7 in
// bytes 16l..16l+7 of 128-bit lane l and numbers 32+8l..32+8l+7 in bytes
// 16l+8..16l+15, so that the per-lane byte unpacks of the looked-up bytes
// give numbers 0-31 and 32-63 in order.
struct Fp8Indices {
  alignas(64) uint8_t twice[64], halves[64];
  constexpr Fp8Indices() : twice(), halves() {
    for (unsigned i = 0; i < 64; ++i) {
      twice[i] = static_cast<uint8_t>(i / 2);
      const unsigned lane = i / 16, j = i % 16;
      halves[i] = static_cast<uint8_t>(j < 8 ? 8 * lane + j : 32 + 8 * lane + j - 8);
    }
  }
};
constexpr Fp8Indices kFp8Indices;

// 16 int8 numbers as fp32 (kMasked: those of m, the others 0).
template <bool kMasked>
HWYATTN_BF16_TARGET inline __m512i WideI8(const int8_t* p, __mmask16 m) {
  const __m128i b =
      kMasked ? _mm_maskz_loadu_epi8(m, p) : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)));
}

// 32 elements of T from p as bf16 (16 pairs, element 2i in the low half of
// lane i): a BF16 row's own bits; F16 and F32 elements rounded to nearest
// even by vcvtne2ps2bf16 (NaN becomes the quiet NaN RoundToBf16 gives,
// fp32 denormals become zeros); FP8 numbers exactly, by looking the
// magnitude up in `table` and adding the sign bit; I8 numbers exactly, the
// upper halves of their fp32 values. kMasked: only the
// elements of m are read, the others are 0.
template <typename T, bool kMasked>
HWYATTN_BF16_TARGET inline __m512i LoadPairs(const T* p, __mmask32 m, const PairTable<T>& table) {
  if constexpr (std::is_same_v<T, BF16>) {
    return kMasked ? _mm512_maskz_loadu_epi16(m, p) : _mm512_loadu_si512(p);
  } else if constexpr (std::is_same_v<T, F16>) {
    const __m256i lo = kMasked ? _mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), p)
                               : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i hi = kMasked ? _mm256_maskz_loadu_epi16(static_cast<__mmask16>(m >> 16), p + 16)
                               : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
    return reinterpret_cast<__m512i>(
        _mm512_cvtne2ps_pbh(_mm512_maskz_cvtph_ps(0xFFFF, hi), _mm512_maskz_cvtph_ps(0xFFFF, lo)));
  } else if constexpr (kIsFp8<T>) {
    const __m256i bytes = kMasked ? _mm256_maskz_loadu_epi8(m, p)
                                  : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    // Word i's two bytes both number i's: the low byte looked up in the even
    // bytes, the high byte in the odd ones.
    const __m512i twice = _mm512_permutexvar_epi8(_mm512_load_si512(kFp8Indices.twice),
                                                  _mm512_castsi256_si512(bytes));
    __m512i lo, hi;
    table.Bytes(twice, lo, hi);
    return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, lo, hi);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    // int8 -> fp32 is exact and leaves the low 16 bits zero: the upper
    // halves are the bf16 numbers, paired by one vpermt2w.
    const __m512i lo = WideI8<kMasked>(p, static_cast<__mmask16>(m));
    const __m512i hi = WideI8<kMasked>(p + 16, static_cast<__mmask16>(m >> 16));
    const __m512i upper =
        _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(lo, upper, hi);
  } else {
    static_assert(std::is_same_v<T, float>);
    const __m512 lo =
        kMasked ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p) : _mm512_loadu_ps(p);
    const __m512 hi = kMasked ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), p + 16)
                              : _mm512_loadu_ps(p + 16);
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
  }
}

// 64 FP8 numbers from p as bf16 pairs, numbers 0-31 in `a` and 32-63 in `b`
// (as two LoadPairs, in 6 operations where those take 10).
template <typename T>
HWYATTN_BF16_TARGET inline void LoadPairs64(const T* p, const PairTable<T>& table, __m512i& a,
                                            __m512i& b) {
  static_assert(kIsFp8<T>);
  const __m512i x =
      _mm512_permutexvar_epi8(_mm512_load_si512(kFp8Indices.halves), _mm512_loadu_si512(p));
  __m512i lo, hi;
  table.Bytes(x, lo, hi);
  a = _mm512_unpacklo_epi8(lo, hi);
  b = _mm512_unpackhi_epi8(lo, hi);
}

// The key pairs of P . V: 32 value dims of two V rows (a, and b under mb:
// 0 for a run's odd last key) as (a[d], b[d]) bf16 pairs in lo and hi. For
// most types the rows' LoadPairs interleaved (vpunpcklwd / vpunpckhwd: lo
// holds dims {0-3, 8-11, 16-19, 24-27}, hi the others); an I8 row's exact fp32
// values are paired straight from their upper halves by vpermt2w (lo: dims
// 0-15, hi: 16-31), 10 operations where LoadPairs and the unpacks take 12.
template <typename T>
constexpr bool kNaturalKeyPairs = std::is_same_v<T, int8_t>;

template <typename T>
HWYATTN_BF16_TARGET inline void KeyPairs(const T* a, const T* b, __mmask32 ma, __mmask32 mb,
                                         const PairTable<T>& table, __m512i& lo, __m512i& hi) {
  if constexpr (kNaturalKeyPairs<T>) {
    // Word 2i: a's element i, word 2i + 1: b's (the upper half of each fp32).
    const __m512i upper =
        _mm512_set_epi16(63, 31, 61, 29, 59, 27, 57, 25, 55, 23, 53, 21, 51, 19, 49, 17, 47, 15, 45,
                         13, 43, 11, 41, 9, 39, 7, 37, 5, 35, 3, 33, 1);
    lo = _mm512_permutex2var_epi16(WideI8<true>(a, static_cast<__mmask16>(ma)), upper,
                                   WideI8<true>(b, static_cast<__mmask16>(mb)));
    hi = _mm512_permutex2var_epi16(WideI8<true>(a + 16, static_cast<__mmask16>(ma >> 16)), upper,
                                   WideI8<true>(b + 16, static_cast<__mmask16>(mb >> 16)));
  } else {
    const __m512i x = LoadPairs<T, true>(a, ma, table);
    const __m512i y = LoadPairs<T, true>(b, mb, table);
    lo = _mm512_unpacklo_epi16(x, y);
    hi = _mm512_unpackhi_epi16(x, y);
  }
}

// FP8 key pairs of 64 value dims (kQuadKeyPairs: the P . V tiles of two
// vectors): the two rows' bytes interleaved, looked up, and each number's
// two bytes joined, 12 operations where two KeyPairs take 24. Vector v's
// 128-bit lane l holds the pairs of dims 16l + 4v .. 16l + 4v + 3
// (TransposeLanes puts them in order).
template <typename T>
constexpr bool kQuadKeyPairs = kIsFp8<T>;

template <typename T>
HWYATTN_BF16_TARGET inline void KeyPairs64(const T* a, const T* b, __mmask64 ma, __mmask64 mb,
                                           const PairTable<T>& table, __m512i (&v)[4]) {
  const __m512i x = _mm512_maskz_loadu_epi8(ma, a), y = _mm512_maskz_loadu_epi8(mb, b);
  const __m512i xy[2] = {_mm512_unpacklo_epi8(x, y), _mm512_unpackhi_epi8(x, y)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512i lo, hi;
    table.Bytes(xy[h], lo, hi);
    v[2 * h] = _mm512_unpacklo_epi8(lo, hi);
    v[2 * h + 1] = _mm512_unpackhi_epi8(lo, hi);
  }
}

// The 4 x 4 transpose of the 128-bit lanes of v[0..3] (its own inverse):
// KeyPairs64's order of dims to 0-15, 16-31, 32-47, 48-63 and back.
HWYATTN_BF16_TARGET inline void TransposeLanes(__m512 (&v)[4]) {
  const __m512 t0 = _mm512_shuffle_f32x4(v[0], v[1], 0x44),
               t1 = _mm512_shuffle_f32x4(v[2], v[3], 0x44);
  const __m512 t2 = _mm512_shuffle_f32x4(v[0], v[1], 0xEE),
               t3 = _mm512_shuffle_f32x4(v[2], v[3], 0xEE);
  v[0] = _mm512_shuffle_f32x4(t0, t1, 0x88);
  v[1] = _mm512_shuffle_f32x4(t0, t1, 0xDD);
  v[2] = _mm512_shuffle_f32x4(t2, t3, 0x88);
  v[3] = _mm512_shuffle_f32x4(t2, t3, 0xDD);
}

// ------------------------------------------------------------------ scores

// Key kk of a group from key j: keys past the last repeat the last one
// (their scores are dropped), so every group is whole and each key's score
// is the same whatever group it is in.
template <typename T>
inline const T* KeyRow(const T* k, int64_t ldk, size_t j, size_t last) {
  return k + static_cast<int64_t>(std::min(j, last)) * ldk;
}

// The dot products of head-dim vectors [c0, c0 + kBlock) for the kKeys keys
// of the group at j and kRows rows, the rows' query vectors in registers
// (each K load feeds kRows vdpbf16ps), key by key.
template <bool kL2, size_t kRows, size_t kBlock, bool kMasked, typename T>
HWYATTN_BF16_TARGET inline void ScoreBlock(const uint32_t* q, size_t ldq, size_t c0, const T* k,
                                           int64_t ldk, int64_t ahead, size_t j, size_t last,
                                           __mmask32 m, const PairTable<T>& table,
                                           __m512 (&acc)[16]) {
  constexpr size_t kKeys = 16 / kRows;
  __m512bh qv[kRows][kBlock];
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 16
    for (size_t c = 0; c < kBlock; ++c) {
      qv[r][c] =
          reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + r * ldq + (c0 + c) * kBf16DecodeLanes));
    }
  }
#pragma GCC unroll 16
  for (size_t kk = 0; kk < kKeys; ++kk) {
    const T* kr = KeyRow(k, ldk, j + kk, last) + c0 * kBf16DecodeDims;
    // FP8: two vectors from one 64-byte load where the block has them.
    constexpr bool kWide = kIsFp8<T> && !kMasked && kBlock % 2 == 0;
#pragma GCC unroll 16
    for (size_t c = 0; c < kBlock; c += kWide ? 2 : 1) {
      PrefetchVector<kL2>(kr + ahead + c * kBf16DecodeDims, c0 + c);
      __m512i kv[2];
      if constexpr (kWide) {
        LoadPairs64(kr + c * kBf16DecodeDims, table, kv[0], kv[1]);
      } else {
        kv[0] = LoadPairs<T, kMasked>(kr + c * kBf16DecodeDims, m, table);
      }
#pragma GCC unroll 2
      for (size_t h = 0; h < (kWide ? 2 : 1); ++h) {
#pragma GCC unroll 16
        for (size_t r = 0; r < kRows; ++r) {
          acc[r * kKeys + kk] = _mm512_dpbf16_ps(acc[r * kKeys + kk],
                                                 reinterpret_cast<__m512bh>(kv[h]), qv[r][c + h]);
        }
      }
    }
    PrefetchLine<kL2>(kr + ahead + kBlock * kBf16DecodeDims - 1);
  }
}

// Whole head-dim vectors [c, full) in blocks of kBlock, then halving blocks.
template <bool kL2, size_t kRows, size_t kBlock, typename T>
HWYATTN_BF16_TARGET inline void ScoreBlocks(const uint32_t* q, size_t ldq, size_t c, size_t full,
                                            const T* k, int64_t ldk, int64_t ahead, size_t j,
                                            size_t last, const PairTable<T>& table,
                                            __m512 (&acc)[16]) {
  for (; c + kBlock <= full; c += kBlock) {
    ScoreBlock<kL2, kRows, kBlock, false>(q, ldq, c, k, ldk, ahead, j, last, 0, table, acc);
  }
  if constexpr (kBlock > 1) {
    ScoreBlocks<kL2, kRows, kBlock / 2>(q, ldq, c, full, k, ldk, ahead, j, last, table, acc);
  }
}

// Scores of all `keys` keys for `rows` rows in groups of kRows (rows past
// `rows` have zero queries), 16 / kRows keys at a time.
template <bool kL2, size_t kRows, typename T>
HWYATTN_BF16_TARGET void ScoreRows(size_t rows, const uint32_t* q, size_t dim, const T* k,
                                   int64_t ldk, int64_t ahead, size_t keys, float scale, float* s,
                                   size_t lds) {
  constexpr size_t kKeys = 16 / kRows;
  constexpr size_t kBlock = kRows >= 8 ? 1 : 8 / kRows;
  const size_t ldq = Bf16DecodeQueryPairs(static_cast<int64_t>(dim));
  const size_t full = dim / kBf16DecodeDims, tail = dim % kBf16DecodeDims;
  const __m512 sc = _mm512_set1_ps(scale);
  const PairTable<T> table = PairTable<T>::Load();
  for (size_t j = 0; j < keys; j += kKeys) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    ScoreBlocks<kL2, kRows, kBlock>(q, ldq, 0, full, k, ldk, ahead, j, keys - 1, table, acc);
    if (tail != 0) {
      ScoreBlock<kL2, kRows, 1, true>(q, ldq, full, k, ldk, ahead, j, keys - 1, FirstElements(tail),
                                      table, acc);
    }
    const __m512 sums = _mm512_mul_ps(ReduceKeys16(acc), sc);
    const __mmask16 valid = static_cast<__mmask16>((1u << std::min(kKeys, keys - j)) - 1u);
    if constexpr (kRows == 1) {
      _mm512_mask_storeu_ps(s + j, valid, sums);
    } else {
      for (size_t r = 0; r < rows; ++r) {
        const __mmask16 lanes = static_cast<__mmask16>(((1u << kKeys) - 1u) << (r * kKeys));
        _mm512_mask_storeu_ps(s + r * lds + j, valid, _mm512_maskz_compress_ps(lanes, sums));
      }
    }
  }
}

template <bool kL2, typename T>
HWYATTN_BF16_TARGET void ScoresOf(size_t rows, size_t group_rows, const uint32_t* q, size_t dim,
                                  const T* k, int64_t ldk, int64_t ahead, size_t keys, float scale,
                                  float* s, size_t lds) {
  switch (group_rows) {
    case 1: ScoreRows<kL2, 1>(rows, q, dim, k, ldk, ahead, keys, scale, s, lds); break;
    case 2: ScoreRows<kL2, 2>(rows, q, dim, k, ldk, ahead, keys, scale, s, lds); break;
    case 4: ScoreRows<kL2, 4>(rows, q, dim, k, ldk, ahead, keys, scale, s, lds); break;
    default: ScoreRows<kL2, 8>(rows, q, dim, k, ldk, ahead, keys, scale, s, lds); break;
  }
}

// ------------------------------------------------------------------ P . V

// Each row's probabilities of the runs as pairs (p_j, p_j+1) of bf16 bits
// (an odd run's last pair with a zero partner), the runs' pairs one after
// the other, rows ldpairs apart; with `masks`, also 0xFFFF halves where p is
// not 0 (NaN included). vcvtne2ps2bf16 is exact here: p holds bf16 values.
HWYATTN_BF16_TARGET void PairProbabilities(size_t rows, const float* p, size_t ldp,
                                           const Bf16ValueRun* runs, size_t num_runs, bool masks,
                                           uint32_t* pairs, uint32_t* nonzero, size_t ldpairs) {
  const __m512 zero = _mm512_setzero_ps();
  for (size_t r = 0; r < rows; ++r) {
    size_t base = r * ldpairs;
    for (size_t k = 0; k < num_runs; ++k) {
      const float* pr = p + r * ldp + runs[k].first;
      const size_t count = runs[k].count;
      for (size_t j = 0; j < count; j += 32) {
        const __mmask32 m = FirstElements(count - j);
        const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), pr + j);
        const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), pr + j + 16);
        _mm512_storeu_si512(pairs + base + j / 2,
                            reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
        if (masks) {
          const __mmask32 nz =
              static_cast<__mmask32>(_mm512_cmp_ps_mask(lo, zero, _CMP_NEQ_UQ)) |
              (static_cast<__mmask32>(_mm512_cmp_ps_mask(hi, zero, _CMP_NEQ_UQ)) << 16);
          _mm512_storeu_si512(nonzero + base + j / 2, _mm512_movm_epi16(nz));
        }
      }
      base += (count + 1) / 2;
    }
  }
}

// One pair of keys (v0: the even key's row, v0 + ldv the odd key's, read
// under my: m, or 0 for the zero partner of a run's odd last key) into the
// kRows x kVecs x 2 accumulators: the V rows paired (KeyPairs), times each
// row's broadcast P pair; kSkip: V halves zeroed where the row's p is 0.
template <bool kL2, bool kSkip, size_t kRows, size_t kVecs, typename T>
HWYATTN_BF16_TARGET inline void ValuePair(const T* v0, int64_t ldv, int64_t ahead,
                                          const __mmask32 (&m)[kVecs], const __mmask32 (&my)[kVecs],
                                          const uint32_t* pp, const uint32_t* nz, size_t ldpairs,
                                          const PairTable<T>& table,
                                          __m512 (&acc)[kRows][2 * kVecs]) {
  __m512i lo[kVecs], hi[kVecs];
#pragma GCC unroll 16
  for (size_t c = 0; c < kVecs; ++c) {
    const T* a = v0 + c * kBf16DecodeDims;
    PrefetchVector<kL2>(a + ahead, c);  // (dv: a multiple of 64 elements)
    PrefetchVector<kL2>(a + ldv + ahead, c);
    if constexpr (!(kQuadKeyPairs<T> && kVecs == 2))
      KeyPairs(a, a + ldv, m[c], my[c], table, lo[c], hi[c]);
  }
  if constexpr (kQuadKeyPairs<T> && kVecs == 2) {
    __m512i v[4];
    KeyPairs64(v0, v0 + ldv, m[0] | (__mmask64{m[1]} << 32), my[0] | (__mmask64{my[1]} << 32),
               table, v);
    lo[0] = v[0], hi[0] = v[1], lo[1] = v[2], hi[1] = v[3];
  }
  PrefetchLine<kL2>(v0 + ahead + kVecs * kBf16DecodeDims - 1);
  PrefetchLine<kL2>(v0 + ldv + ahead + kVecs * kBf16DecodeDims - 1);
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    const __m512bh pr =
        reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pp[r * ldpairs])));
#pragma GCC unroll 16
    for (size_t c = 0; c < kVecs; ++c) {
      __m512i l = lo[c], h = hi[c];
      if constexpr (kSkip) {
        const __m512i keep = _mm512_set1_epi32(static_cast<int>(nz[r * ldpairs]));
        l = _mm512_and_si512(l, keep);
        h = _mm512_and_si512(h, keep);
      }
      acc[r][2 * c] = _mm512_dpbf16_ps(acc[r][2 * c], reinterpret_cast<__m512bh>(l), pr);
      acc[r][2 * c + 1] = _mm512_dpbf16_ps(acc[r][2 * c + 1], reinterpret_cast<__m512bh>(h), pr);
    }
  }
}

// out[r][dv + d] for kRows rows and kVecs vectors of 32 value dims (the
// elements of m), over every pair of every run, the accumulators in
// registers throughout, un-permuted once at the end.
// The pairs of keys of a batch of runs, flattened (one loop over them
// keeps the accumulators in registers; a loop per run made GCC 12 store all
// 16 of them at every pair): the even key's V row, the prefetch address for
// it, and whether the odd key exists (a run's odd last key has a zero
// partner).
template <typename T>
struct PairRows {
  const T** row;
  const T** ahead;
  uint8_t* partner;
  size_t count;
};

// out[r][dv + d] for kRows rows and kVecs vectors of 32 value dims (the
// elements of m), over every pair, the accumulators in registers
// throughout, un-permuted once at the end.
template <bool kL2, bool kSkip, size_t kRows, size_t kVecs, typename T>
HWYATTN_BF16_TARGET void ValueTile(const uint32_t* pairs, const uint32_t* nonzero, size_t ldpairs,
                                   const PairRows<T>& rows, size_t dv, int64_t ldv,
                                   const __mmask32 (&m)[kVecs], bool accumulate, float* out,
                                   size_t ldo) {
  // A = dims 0-15 of a vector, B = dims 16-31, from (lo, hi) and back.
  const __m512i to_a = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i to_b =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512i to_lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i to_hi =
      _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  // Every loop over rows and vectors fully unrolled (#pragma GCC unroll):
  // with any of them rolled GCC 12 kept acc in memory too, storing all 16
  // accumulators to the stack at every pair of keys (V1b 1t +20% time).
  constexpr bool kQuads = kQuadKeyPairs<T> && kVecs == 2;
  __m512 acc[kRows][2 * kVecs];
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 16
    for (size_t c = 0; c < kVecs; ++c) {
      if (accumulate) {
        const float* o = out + r * ldo + dv + c * kBf16DecodeDims;
        const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m[c]), o);
        const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m[c] >> 16), o + 16);
        const bool natural = kNaturalKeyPairs<T> || kQuads;
        acc[r][2 * c] = natural ? a : _mm512_permutex2var_ps(a, to_lo, b);
        acc[r][2 * c + 1] = natural ? b : _mm512_permutex2var_ps(a, to_hi, b);
      } else {
        acc[r][2 * c] = acc[r][2 * c + 1] = _mm512_setzero_ps();
      }
    }
    if constexpr (kQuads) TransposeLanes(reinterpret_cast<__m512(&)[4]>(acc[r]));
  }
  const PairTable<T> table = PairTable<T>::Load();
  for (size_t i = 0; i < rows.count; ++i) {
    __mmask32 my[kVecs];
#pragma GCC unroll 16
    for (size_t c = 0; c < kVecs; ++c) my[c] = rows.partner[i] ? m[c] : 0;
    ValuePair<kL2, kSkip, kRows, kVecs>(rows.row[i] + dv, ldv, rows.ahead[i] - rows.row[i], m, my,
                                        pairs + i, nonzero + i, ldpairs, table, acc);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r) {
    if constexpr (kQuads) TransposeLanes(reinterpret_cast<__m512(&)[4]>(acc[r]));
#pragma GCC unroll 16
    for (size_t c = 0; c < kVecs; ++c) {
      float* o = out + r * ldo + dv + c * kBf16DecodeDims;
      const __m512 a = kNaturalKeyPairs<T> || kQuads
                           ? acc[r][2 * c]
                           : _mm512_permutex2var_ps(acc[r][2 * c], to_a, acc[r][2 * c + 1]);
      const __m512 b = kNaturalKeyPairs<T> || kQuads
                           ? acc[r][2 * c + 1]
                           : _mm512_permutex2var_ps(acc[r][2 * c], to_b, acc[r][2 * c + 1]);
      _mm512_mask_storeu_ps(o, static_cast<__mmask16>(m[c]), a);
      _mm512_mask_storeu_ps(o + 16, static_cast<__mmask16>(m[c] >> 16), b);
    }
  }
}

template <bool kL2, bool kSkip, size_t kVecs, typename T>
HWYATTN_BF16_TARGET void ValueTileRows(size_t rows, const uint32_t* pairs, const uint32_t* nonzero,
                                       size_t ldpairs, const PairRows<T>& refs, size_t dv,
                                       int64_t ldv, const __mmask32 (&m)[kVecs], bool accumulate,
                                       float* out, size_t ldo) {
  switch (rows) {
    case 1:
      ValueTile<kL2, kSkip, 1, kVecs, T>(pairs, nonzero, ldpairs, refs, dv, ldv, m, accumulate, out,
                                         ldo);
      break;
    case 2:
      ValueTile<kL2, kSkip, 2, kVecs, T>(pairs, nonzero, ldpairs, refs, dv, ldv, m, accumulate, out,
                                         ldo);
      break;
    case 3:
      ValueTile<kL2, kSkip, 3, kVecs, T>(pairs, nonzero, ldpairs, refs, dv, ldv, m, accumulate, out,
                                         ldo);
      break;
    default:
      ValueTile<kL2, kSkip, 4, kVecs, T>(pairs, nonzero, ldpairs, refs, dv, ldv, m, accumulate, out,
                                         ldo);
      break;
  }
}

// All rows (in groups of up to 4) and value dims (in blocks of 64: 4 rows x
// 2 vectors x (lo, hi) = 16 accumulators, as the fp32 kernel's 4 x 4).
template <bool kL2, bool kSkip, typename T>
HWYATTN_BF16_TARGET void ValuesOf(size_t rows, const float* p, size_t ldp, const Bf16ValueRun* runs,
                                  size_t num_runs, size_t value_dim, int64_t ldv, bool accumulate,
                                  float* out, uint32_t* scratch) {
  size_t ldpairs = kBf16DecodeLanes;
  for (size_t k = 0; k < num_runs; ++k) ldpairs += (runs[k].count + 1) / 2;
  uint32_t* pairs = scratch;
  uint32_t* nonzero = scratch + 8 * ldpairs;
  PairProbabilities(rows, p, ldp, runs, num_runs, kSkip, pairs, nonzero, ldpairs);
  // Two pointers and a flag per pair after the masks (16 * ldpairs words:
  // 64-byte aligned).
  PairRows<T> refs;
  refs.row = reinterpret_cast<const T**>(nonzero + 8 * ldpairs);
  refs.ahead = refs.row + ldpairs;
  refs.partner = reinterpret_cast<uint8_t*>(refs.ahead + ldpairs);
  refs.count = 0;
  for (size_t k = 0; k < num_runs; ++k) {
    const T* v = static_cast<const T*>(runs[k].rows);
    for (size_t j = 0; j < runs[k].count; j += 2, ++refs.count) {
      refs.row[refs.count] = v + static_cast<int64_t>(j) * ldv;
      refs.ahead[refs.count] = refs.row[refs.count] + runs[k].ahead;
      refs.partner[refs.count] = j + 1 < runs[k].count;
    }
  }
  for (size_t r0 = 0; r0 < rows; r0 += 4) {
    const size_t nr = std::min<size_t>(4, rows - r0);
    const uint32_t* pr = pairs + r0 * ldpairs;
    const uint32_t* zr = nonzero + r0 * ldpairs;
    float* o = out + r0 * value_dim;
    for (size_t dv = 0; dv < value_dim; dv += 2 * kBf16DecodeDims) {
      const size_t left = value_dim - dv;
      if (left > kBf16DecodeDims) {
        const __mmask32 m[2] = {FirstElements(left), FirstElements(left - kBf16DecodeDims)};
        ValueTileRows<kL2, kSkip, 2, T>(nr, pr, zr, ldpairs, refs, dv, ldv, m, accumulate, o,
                                        value_dim);
      } else {
        const __mmask32 m[1] = {FirstElements(left)};
        ValueTileRows<kL2, kSkip, 1, T>(nr, pr, zr, ldpairs, refs, dv, ldv, m, accumulate, o,
                                        value_dim);
      }
    }
  }
}

// Calls body(T{}, bool_constant<l2>) for the dtype (F32, F16, BF16, FP8,
// I8: Bf16DotApplies).
template <class Body>
inline void Dispatch(Dtype dtype, bool l2, const Body& body) {
  const auto with = [&](auto tag) {
    if (l2) {
      body(tag, std::true_type());
    } else {
      body(tag, std::false_type());
    }
  };
  DispatchCacheDtype(dtype, with);
}

}  // namespace

HWYATTN_BF16_TARGET void Bf16DecodeScores(Dtype dtype, bool l2, size_t rows, size_t group_rows,
                                          const uint32_t* q_pairs, size_t dim, const void* k,
                                          int64_t ldk, int64_t ahead, size_t keys, size_t pad,
                                          float scale, float* s, size_t lds) {
  Dispatch(dtype, l2, [&](auto tag, auto l2_tag) {
    using T = decltype(tag);
    ScoresOf<decltype(l2_tag)::value>(rows, group_rows, q_pairs, dim, static_cast<const T*>(k), ldk,
                                      ahead, keys, scale, s, lds);
  });
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = keys; j < pad; ++j) s[r * lds + j] = -INFINITY;
  }
}

HWYATTN_BF16_TARGET void Bf16DecodeValues(Dtype dtype, bool l2, size_t rows, const float* p,
                                          size_t ldp, const Bf16ValueRun* runs, size_t num_runs,
                                          size_t value_dim, int64_t ldv, bool accumulate,
                                          bool skip_zeros, float* out, uint32_t* scratch) {
  Dispatch(dtype, l2, [&](auto tag, auto l2_tag) {
    using T = decltype(tag);
    constexpr bool kL2 = decltype(l2_tag)::value;
    if (skip_zeros) {
      ValuesOf<kL2, true, T>(rows, p, ldp, runs, num_runs, value_dim, ldv, accumulate, out,
                             scratch);
    } else {
      ValuesOf<kL2, false, T>(rows, p, ldp, runs, num_runs, value_dim, ldv, accumulate, out,
                              scratch);
    }
  });
}

}  // namespace hwyattn

#else  // not compiled (src/targets.h) or not x86-64: Bf16DotFor() is false, nothing calls these

#include "hwy/base.h"
#include "src/cache_line.h"

namespace hwyattn {
void Bf16DecodeScores(Dtype, bool, size_t, size_t, const uint32_t*, size_t, const void*, int64_t,
                      int64_t, size_t, size_t, float, float*, size_t) {
  HWY_ABORT("hwyattn: AVX512_BF16 decode loops called on a CPU without them");
}
void Bf16DecodeValues(Dtype, bool, size_t, const float*, size_t, const Bf16ValueRun*, size_t,
                      size_t, int64_t, bool, bool, float*, uint32_t*) {
  HWY_ABORT("hwyattn: AVX512_BF16 decode loops called on a CPU without them");
}
}  // namespace hwyattn

#endif
