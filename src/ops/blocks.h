// SPDX-License-Identifier: Apache-2.0
//
// ggml's block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), byte for
// byte as ggml-common.h lays them out: blocks of kBlockElems (32)
// consecutive elements of a row, each block an fp16 scale d (and, for Q4_1
// and Q5_1, an fp16 offset m) in the machine's byte order, then the
// numbers. In the 4- and 5-bit formats element j < 16 is the low nibble of
// qs[j] and element j + 16 its high nibble; Q5's fifth bit of element j is
// bit j of the 32-bit little-endian qh. Values:
//   Q8_0    d * q               (int8 q)
//   Q4_0    d * (nibble - 8)
//   Q4_1    d * nibble + m
//   Q5_0    d * (q5 - 16)
//   Q5_1    d * q5 + m
//   IQ4_NL  d * kIq4nlValues[nibble]
// Every product is exact in fp32 (an 11-bit d times a number of at most 8
// bits), so a dequantized element is the exact value except Q4_1 / Q5_1's
// "+ m", rounded once to nearest even.
//
// I4 (not a block format, but packed too: IsPackedDtype) is signed nibbles,
// element 2i of a row the low nibble of byte i; its scales are the cache's
// (as I8's) and the kernels apply them: its rows dequantize to the numbers.
//
// The scalar reading of the formats is here (inline: the prefill kernel's
// per-target packing calls it where it loads a tile); the decode kernel's
// rows are read by block_rows.cc's vector code (the same numbers);
// quantization (hwyattn_kv_cache_write), which must give ggml's reference
// quantizers' bytes, is in blocks.cc.
#ifndef HWYATTN_SRC_OPS_BLOCKS_H_
#define HWYATTN_SRC_OPS_BLOCKS_H_

#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "src/ops/convert.h"
#include "src/tensor.h"

namespace hwyattn {

// IQ4_NL's 16 levels (ggml-common.h's kvalues_iq4nl: published numbers of
// the format, not code).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The fp16 at byte i of a block, in the machine's byte order.
inline float BlockHalf(const unsigned char* block, size_t i) {
  uint16_t bits;
  memcpy(&bits, block + i, sizeof(bits));
  return ToFloat(F16{bits});
}

// Q5's 32 fifth bits (qh at byte `at` of the block, little-endian).
inline uint32_t BlockHighBits(const unsigned char* block, size_t at) {
  return uint32_t{block[at]} | uint32_t{block[at + 1]} << 8 | uint32_t{block[at + 2]} << 16 |
         uint32_t{block[at + 3]} << 24;
}

// Whether the block format kType has an offset m (Q4_1, Q5_1).
template <Dtype kType>
inline constexpr bool kBlockHasOffset = kType == Dtype::kQ4_1 || kType == Dtype::kQ5_1;

// The block's offset m (0 for a format without one).
template <Dtype kType>
inline float BlockOffset(const unsigned char* block) {
  return kBlockHasOffset<kType> ? BlockHalf(block, 2) : 0.0f;
}

// out[j] = value(q_j) for the block's 32 integers q_j (element j's value is
// d * q_j, plus m with an offset): the one reading of the formats' bits,
// which the dequantization below (value: d * q (+ m)) uses; block_rows.cc's
// vector code reads the same numbers. `value` takes an int.
template <Dtype kType, typename T, class Value>
HWY_INLINE void BlockNumbers(const unsigned char* HWY_RESTRICT block, T* HWY_RESTRICT out,
                             const Value value) {
  constexpr size_t kAt = kBlockHasOffset<kType> ? 4 : 2;  // after d (and m)
  if constexpr (kType == Dtype::kQ8_0) {
    for (int j = 0; j < 32; ++j)
      out[j] = value(static_cast<int>(static_cast<int8_t>(block[2 + j])));
  } else if constexpr (kType == Dtype::kQ4_0 || kType == Dtype::kQ4_1 || kType == Dtype::kIQ4_NL) {
    const unsigned char* qs = block + kAt;
    for (int j = 0; j < 16; ++j) {
      const int lo = qs[j] & 0xF, hi = qs[j] >> 4;
      if constexpr (kType == Dtype::kIQ4_NL) {
        out[j] = value(static_cast<int>(kIq4nlValues[lo]));
        out[j + 16] = value(static_cast<int>(kIq4nlValues[hi]));
      } else {
        constexpr int kZero = kType == Dtype::kQ4_0 ? 8 : 0;
        out[j] = value(lo - kZero);
        out[j + 16] = value(hi - kZero);
      }
    }
  } else {
    static_assert(kType == Dtype::kQ5_0 || kType == Dtype::kQ5_1, "a block format");
    constexpr int kZero = kType == Dtype::kQ5_0 ? 16 : 0;
    const uint32_t qh = BlockHighBits(block, kAt);
    const unsigned char* qs = block + kAt + 4;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0xF) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      out[j] = value(lo - kZero);
      out[j + 16] = value(hi - kZero);
    }
  }
}

// out[i] = value(q_i) for the n signed nibbles q_i of `bytes` (I4; the
// first in the low nibble). Reads (n + 1) / 2 bytes.
template <typename T, class Value>
HWY_INLINE void I4Numbers(const unsigned char* HWY_RESTRICT bytes, int64_t n, T* HWY_RESTRICT out,
                          const Value value) {
  // (nibble ^ 8) - 8: the nibble as a two's complement int4.
  for (int64_t i = 0; 2 * i + 1 < n; ++i) {
    out[2 * i] = value(((bytes[i] & 0xF) ^ 8) - 8);
    out[2 * i + 1] = value(((bytes[i] >> 4) ^ 8) - 8);
  }
  if (n % 2 != 0) out[n - 1] = value(((bytes[n / 2] & 0xF) ^ 8) - 8);
}

// out[0, n) = elements [d0, d0 + n) of a row in the packed format kType, with
// d0 a multiple of kBlockElems and n = kBlockElems except at an I4 row's
// end: the unit the packing loops dequantize. A block's values are
// d * q (+ m); I4's are its numbers (the kernels apply the cache's scales).
template <Dtype kType>
inline void DequantizeSpan(const unsigned char* HWY_RESTRICT row, int64_t d0, int64_t n,
                           float* HWY_RESTRICT out) {
  if constexpr (kType == Dtype::kI4) {
    I4Numbers(row + d0 / 2, n, out, [](int x) { return static_cast<float>(x); });
  } else {
    const unsigned char* block = row + d0 / kBlockElems * static_cast<int64_t>(BlockBytes(kType));
    const float d = BlockHalf(block, 0);
    if constexpr (kBlockHasOffset<kType>) {
      const float m = BlockOffset<kType>(block);
      BlockNumbers<kType>(block, out, [d, m](int q) { return d * static_cast<float>(q) + m; });
    } else {
      BlockNumbers<kType>(block, out, [d](int q) { return d * static_cast<float>(q); });
    }
  }
}

// Calls body(std::integral_constant<Dtype, t>) for the block format t: the
// one switch over block formats.
template <class Body>
HWY_INLINE void DispatchBlockDtype(Dtype t, const Body& body) {
  switch (t) {
    case Dtype::kQ8_0: return body(std::integral_constant<Dtype, Dtype::kQ8_0>());
    case Dtype::kQ4_0: return body(std::integral_constant<Dtype, Dtype::kQ4_0>());
    case Dtype::kQ4_1: return body(std::integral_constant<Dtype, Dtype::kQ4_1>());
    case Dtype::kQ5_0: return body(std::integral_constant<Dtype, Dtype::kQ5_0>());
    case Dtype::kQ5_1: return body(std::integral_constant<Dtype, Dtype::kQ5_1>());
    case Dtype::kIQ4_NL: return body(std::integral_constant<Dtype, Dtype::kIQ4_NL>());
    default: break;
  }
  HWY_ABORT("hwyattn: dtype %d reached a kernel that reads block formats", static_cast<int>(t));
}

// DispatchBlockDtype for a packed format (IsPackedDtype): a block format or I4.
template <class Body>
HWY_INLINE void DispatchPackedDtype(Dtype t, const Body& body) {
  if (t == Dtype::kI4) return body(std::integral_constant<Dtype, Dtype::kI4>());
  DispatchBlockDtype(t, body);
}

// Rows i < n of `dim` values in the packed format t (rows[i]; for a block
// format dim is a multiple of kBlockElems) into out + i * ld: DequantizeSpan's
// values, block by block, in the vectors of the decode kernels' target
// (block_rows.cc).
void DequantizeRows(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, float* out,
                    size_t ld);

// n rows of a block format as the decode kernel's F32 products read them:
// rows[j] a row's first block, and ahead[j] the row whose lines to prefetch
// meanwhile (into L2 with prefetch_l2, else L1).
struct BlockRowSpan {
  const unsigned char* const* rows;
  const unsigned char* const* ahead;
  size_t n;
  bool prefetch_l2;
};

// The decode kernel's F32 products over the rows of a block format t (dim a
// multiple of kBlockElems), each block dequantized in registers as
// DequantizeRows dequantizes it, with the sums the decode kernel's F32 loops
// make of those rows (block_rows.cc):
//   BlockScores  s[r * lds + j] = q_r . k_j for r < rows, j < n; q's rows
//                ldq apart, up to a whole score group (GroupRows, zeros past
//                `rows`);
//   BlockValues  out[r * ldo + i] = (accumulate ? out[r * ldo + i] : 0) +
//                sum over j of p[r * ldp + j] v_j[i], keys in order.
void BlockScores(Dtype t, const BlockRowSpan& k, size_t dim, const float* q, size_t ldq,
                 size_t rows, float* s, size_t lds);
void BlockValues(Dtype t, const BlockRowSpan& v, size_t dim, const float* p, size_t ldp,
                 size_t rows, bool accumulate, float* out, size_t ldo);

// One target's DequantizeRows, IntegerRows (int8_products.h), BlockScores
// and BlockValues, picked as the decode kernels are (PickKernels).
struct PackedRowKernels {
  int64_t target;
  void (*dequantize)(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, float* out,
                     size_t ld);
  void (*integers)(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, int8_t* q,
                   float* e, float* m);
  void (*scores)(Dtype t, const BlockRowSpan& k, size_t dim, const float* q, size_t ldq,
                 size_t rows, float* s, size_t lds);
  void (*values)(Dtype t, const BlockRowSpan& v, size_t dim, const float* p, size_t ldp,
                 size_t rows, bool accumulate, float* out, size_t ldo);
};

// dst = the n values of x (a multiple of kBlockElems) in the block format t,
// the bytes of ggml's quantize_row_<t>_ref (blocks.cc).
void QuantizeBlocks(Dtype t, const float* x, int64_t n, unsigned char* dst);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_BLOCKS_H_
