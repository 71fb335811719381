// SPDX-License-Identifier: Apache-2.0
//
// Rows of a packed cache (blocks.h: ggml's block formats and I4) read per
// target with Highway's vectors: BlockScores and BlockValues (the decode
// kernel's F32 loops over a block format's rows, each block dequantized in
// registers where it is multiplied), DequantizeRows (the fp32 values of the
// rows the decode kernel stages: I4, bf16 products) and IntegerRows (the
// integers and block scales that the integer products multiply where K is
// not read in place, int8_products.h).
//
// The fused loops (BlockScores, BlockValues) and DequantizeRows read a
// block's numbers where they lie, a vector of fp32 lanes at a time
// (BlockOperands): Q8_0's bytes widened; the 4-bit formats' nibbles widened
// from their 16 bytes, masked or shifted, and where a vector has 16 lanes
// looked up in a vector of the format's 16 numbers (IQ4_NL's levels, Q4_0's
// -8..7), else converted; Q5's fifth bits tested in qh. IntegerRows (and
// IQ4_NL on narrower vectors) make a block's 32 numbers as two 16-byte
// vectors (BlockInts): IQ4_NL's levels by a byte table lookup (pshufb, tbl),
// Q5's fifth bits spread from qh's four bytes, in memory order, to one byte
// lane each (the machine's byte order does not enter: qh is little-endian
// bytes in every ggml file). The numbers are the ones blocks.h's
// BlockNumbers reads (the scalar definition, which the prefill packing uses
// and the tests compare against), so the values, d * q (+ m: one fp32
// rounding, as there; d * q is exact), are equal bit for bit.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/cache_line.h"
#include "src/ops/blocks.h"
#include "src/ops/int8_products.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/block_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/ops/reduce_keys-inl.h"
#include "src/ops/registers-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// (HWY_SCALAR, one lane: blocks.h's scalar reading.)
#if HWY_TARGET != HWY_SCALAR
using DU8 = hn::FixedTag<uint8_t, 16>;
using DI8 = hn::FixedTag<int8_t, 16>;
#endif
// The decode kernels' fp32 vectors (vectors-inl.h: at most 16 lanes, so a
// block is whole vectors) and the int8 vectors they widen from.
using VF = hn::Vec<DF>;
using DI32 = hn::RebindToSigned<DF>;
using DQ = hn::Rebind<int8_t, DI32>;

// For byte lane i of a Q5 half: the byte of qh holding its fifth bit (lanes
// 0-15: qh's bytes 0 and 1; 16-31: 2 and 3) and the bit in it.
alignas(16) constexpr uint8_t kQhByteLow[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
alignas(16) constexpr uint8_t kQhByteHigh[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(16) constexpr uint8_t kQhBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                            1, 2, 4, 8, 16, 32, 64, 128};

// The block's 32 integers into q[0, 32) (BlockNumbers' numbers).
template <Dtype kType>
HWY_INLINE void BlockInts(const unsigned char* HWY_RESTRICT block, int8_t* HWY_RESTRICT q) {
#if HWY_TARGET == HWY_SCALAR
  BlockNumbers<kType>(block, q, [](int x) { return static_cast<int8_t>(x); });
#else
  const DU8 du;
  const DI8 di;
  constexpr size_t kAt = kBlockHasOffset<kType> ? 4 : 2;  // after d (and m)
  if constexpr (kType == Dtype::kQ8_0) {
    hn::StoreU(hn::LoadU(du, block + 2), du, reinterpret_cast<uint8_t*>(q));
    hn::StoreU(hn::LoadU(du, block + 18), du, reinterpret_cast<uint8_t*>(q) + 16);
  } else {
    constexpr bool kQ5 = kType == Dtype::kQ5_0 || kType == Dtype::kQ5_1;
    const auto packed = hn::LoadU(du, block + kAt + (kQ5 ? 4 : 0));
    auto lo = hn::And(packed, hn::Set(du, uint8_t{0xF}));
    auto hi = hn::ShiftRight<4>(packed);
    if constexpr (kQ5) {
      // qh's bytes are the first 4 lanes of the 16 bytes from it (within
      // the block: qs follows).
      const auto qh = hn::LoadU(du, block + kAt);
      const auto bit = hn::Load(du, kQhBit);
      const auto fifth = hn::Set(du, uint8_t{0x10});
      lo = hn::Or(lo,
                  hn::IfThenElseZero(
                      hn::TestBit(hn::TableLookupBytes(qh, hn::Load(du, kQhByteLow)), bit), fifth));
      hi = hn::Or(
          hi, hn::IfThenElseZero(
                  hn::TestBit(hn::TableLookupBytes(qh, hn::Load(du, kQhByteHigh)), bit), fifth));
    }
    auto qlo = hn::BitCast(di, lo), qhi = hn::BitCast(di, hi);
    if constexpr (kType == Dtype::kIQ4_NL) {
      const auto levels = hn::LoadU(di, kIq4nlValues);
      qlo = hn::TableLookupBytes(levels, qlo);
      qhi = hn::TableLookupBytes(levels, qhi);
    } else if constexpr (kType == Dtype::kQ4_0 || kType == Dtype::kQ5_0) {
      const auto zero = hn::Set(di, static_cast<int8_t>(kType == Dtype::kQ4_0 ? 8 : 16));
      qlo = hn::Sub(qlo, zero);
      qhi = hn::Sub(qhi, zero);
    }
    hn::StoreU(qlo, di, q);
    hn::StoreU(qhi, di, q + 16);
  }
#endif
}

// I4's 32 numbers from 16 bytes (element 2i the low nibble of byte i) into
// q[0, 32).
HWY_INLINE void I4Ints(const unsigned char* HWY_RESTRICT bytes, int8_t* HWY_RESTRICT q) {
#if HWY_TARGET == HWY_SCALAR
  I4Numbers(bytes, kBlockElems, q, [](int x) { return static_cast<int8_t>(x); });
#else
  const DU8 du;
  const DI8 di;
  const auto packed = hn::LoadU(du, bytes);
  const auto eight = hn::Set(du, uint8_t{8});
  // (nibble ^ 8) - 8: the nibble as a two's complement int4.
  const auto lo =
      hn::BitCast(di, hn::Sub(hn::Xor(hn::And(packed, hn::Set(du, uint8_t{0xF})), eight), eight));
  const auto hi = hn::BitCast(di, hn::Sub(hn::Xor(hn::ShiftRight<4>(packed), eight), eight));
  hn::StoreU(hn::InterleaveLower(di, lo, hi), di, q);
  hn::StoreU(hn::InterleaveUpper(di, lo, hi), di, q + 16);
#endif
}

// Bit e of element e's lanes: Q5's fifth bits tested in qh (a 32-bit word).
alignas(64) constexpr uint32_t kElementBit[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

// Where a vector holds 16 floats (AVX-512, 512-bit SVE), a 4-bit format's
// 16 numbers fit one vector, and a nibble's number is one lane permutation
// (vpermps) of it: no subtraction and conversion, and IQ4_NL's levels read
// in place too.
constexpr bool kNibbleTables = kLanes == 16;

template <Dtype kType>
struct NibbleLevels {
  alignas(64) float v[16];
};
template <Dtype kType>
constexpr NibbleLevels<kType> MakeNibbleLevels() {
  NibbleLevels<kType> levels{};
  for (int n = 0; n < 16; ++n) {
    levels.v[n] = kType == Dtype::kIQ4_NL ? static_cast<float>(kIq4nlValues[n])
                  : kType == Dtype::kQ4_0 ? static_cast<float>(n - 8)
                                          : static_cast<float>(n);
  }
  return levels;
}
template <Dtype kType>
constexpr NibbleLevels<kType> kNibbleLevels = MakeNibbleLevels<kType>();

// The formats whose numbers are read where they lie, a vector at a time
// (BlockOperands::Values): Q8_0's bytes, and the 4- and 5-bit formats'
// nibbles widened from their bytes to int32 lanes (vpmovzxbd from memory),
// masked or shifted, then looked up (kNibbleTables) or with Q5's fifth bits
// or-ed in, the zero point subtracted and converted. IQ4_NL's levels on
// narrower vectors are made in a buffer by BlockInts (a byte table lookup),
// 32 at a time.
template <Dtype kType>
inline constexpr bool kNumbersInPlace = kType != Dtype::kIQ4_NL || kNibbleTables;

// The fp16 at byte `at` of a block in every lane: vpbroadcastw and vcvtph2ps
// where the target converts fp16 in hardware (x86 from AVX2: F16C), else
// the scalar conversion (Highway 1.0.3's SSE4 emulation does not map fp16
// infinities and NaNs to fp32's).
HWY_INLINE VF BlockScales(const unsigned char* HWY_RESTRICT block, size_t at) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::Rebind<hwy::float16_t, DF> dh;
  const hn::RebindToUnsigned<decltype(dh)> du16;
  uint16_t bits;
  memcpy(&bits, block + at, sizeof(bits));
  return hn::PromoteTo(DF(), hn::BitCast(dh, hn::Set(du16, bits)));
#else
  return hn::Set(DF(), BlockHalf(block, at));
#endif
}

// A block of a ggml format as DequantizeRows and the fused loops read it:
// where its numbers lie (in the block where kNumbersInPlace, else made in
// `buf` by BlockInts) and its scales. (Pointers, not vectors: SVE's vectors
// have no size and cannot be members.)
template <Dtype kType>
struct BlockOperands {
  static constexpr bool kQ5 = kType == Dtype::kQ5_0 || kType == Dtype::kQ5_1;
  static constexpr size_t kAt = kBlockHasOffset<kType> ? 4 : 2;  // after d (and m)

  HWY_INLINE BlockOperands(const unsigned char* HWY_RESTRICT block_in, int8_t* HWY_RESTRICT buf)
      : block(block_in) {
    if constexpr (kType == Dtype::kQ8_0) {
      numbers = block + 2;
    } else if constexpr (kNumbersInPlace<kType>) {
      numbers = block + kAt + (kQ5 ? 4 : 0);
      if constexpr (kQ5) qh = BlockHighBits(block, kAt);
    } else {
      BlockInts<kType>(block, buf);
      numbers = reinterpret_cast<const unsigned char*>(buf);
    }
  }
  // Values [c kLanes, (c + 1) kLanes) of the block: DequantizeRows' numbers
  // (d * q, exact, or d * q + m, one rounding).
  HWY_INLINE VF Values(size_t c) const {
    const DF df;
    const DI32 di;
    VF x;
    if constexpr (kType == Dtype::kQ8_0 || !kNumbersInPlace<kType>) {
      x = hn::ConvertTo(
          df, hn::PromoteTo(
                  di, hn::LoadU(DQ(), reinterpret_cast<const int8_t*>(numbers + c * kLanes))));
    } else {
      // Elements [0, 16) are the low nibbles of the 16 bytes, [16, 32) the
      // high ones.
      constexpr size_t kPerHalf = 16 / kLanes;
      const size_t at = (c % kPerHalf) * kLanes;
      const auto bytes = hn::PromoteTo(di, hn::LoadU(hn::Rebind<uint8_t, DI32>(), numbers + at));
      auto q = c < kPerHalf ? hn::And(bytes, hn::Set(di, 0xF)) : hn::ShiftRight<4>(bytes);
      if constexpr (kNibbleTables && !kQ5) {
        x = hn::TableLookupLanes(hn::Load(df, kNibbleLevels<kType>.v), hn::IndicesFromVec(df, q));
      } else {
        if constexpr (kQ5) {
          const auto bit =
              hn::LoadU(di, reinterpret_cast<const int32_t*>(kElementBit) + c * kLanes);
          q = hn::Or(q, hn::IfThenElseZero(hn::TestBit(hn::Set(di, static_cast<int32_t>(qh)), bit),
                                           hn::Set(di, 0x10)));
        }
        constexpr int32_t kZero = kType == Dtype::kQ4_0 ? 8 : kType == Dtype::kQ5_0 ? 16 : 0;
        if constexpr (kZero != 0) q = hn::Sub(q, hn::Set(di, kZero));
        x = hn::ConvertTo(df, q);
      }
    }
    const VF d = BlockScales(block, 0);
    return kBlockHasOffset<kType> ? hn::MulAdd(x, d, BlockScales(block, 2)) : hn::Mul(x, d);
  }
  const unsigned char* block;
  const unsigned char* numbers;
  uint32_t qh = 0;
};

void DequantizeRowsT(Dtype t, const unsigned char* const* HWY_RESTRICT rows, int64_t n, int64_t dim,
                     float* HWY_RESTRICT out, size_t ld) {
  alignas(64) int8_t q[kBlockElems];
  if (t == Dtype::kI4) {
    for (int64_t r = 0; r < n; ++r) {
      const unsigned char* HWY_RESTRICT src = rows[r];
      float* HWY_RESTRICT o = out + r * ld;
      int64_t i = 0;
      for (; i + kBlockElems <= dim; i += kBlockElems) {
        I4Ints(src + i / 2, q);
        for (size_t c = 0; c < static_cast<size_t>(kBlockElems); c += kLanes) {
          hn::StoreU(hn::ConvertTo(DF(), hn::PromoteTo(DI32(), hn::LoadU(DQ(), q + c))), DF(),
                     o + i + c);
        }
      }
      if (i < dim) DequantizeSpan<Dtype::kI4>(src, i, dim - i, o + i);
    }
    return;
  }
  DispatchBlockDtype(t, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    for (int64_t r = 0; r < n; ++r) {
      const unsigned char* HWY_RESTRICT block = rows[r];
      float* HWY_RESTRICT o = out + r * ld;
      for (int64_t i = 0; i < dim; i += kBlockElems, block += BlockBytes(kType)) {
        const BlockOperands<kType> values(block, q);
        for (size_t c = 0; c < static_cast<size_t>(kBlockElems) / kLanes; ++c) {
          hn::StoreU(values.Values(c), DF(), o + i + c * kLanes);
        }
      }
    }
  });
}

void IntegerRowsT(Dtype t, const unsigned char* const* HWY_RESTRICT rows, int64_t n, int64_t dim,
                  int8_t* HWY_RESTRICT q, float* HWY_RESTRICT e, float* HWY_RESTRICT m) {
  const int64_t blocks = IntegerBlocks(dim);
  const int64_t ldq = blocks * kBlockElems;
  if (IsBlockDtype(t)) {
    DispatchBlockDtype(t, [&](auto type) {
      constexpr Dtype kType = decltype(type)::value;
      for (int64_t r = 0; r < n; ++r) {
        const unsigned char* HWY_RESTRICT block = rows[r];
        for (int64_t b = 0; b < blocks; ++b, block += BlockBytes(kType)) {
          BlockInts<kType>(block, q + r * ldq + b * kBlockElems);
          e[r * blocks + b] = hn::GetLane(BlockScales(block, 0));
          if constexpr (kBlockHasOffset<kType>)
            m[r * blocks + b] = hn::GetLane(BlockScales(block, 2));
        }
      }
    });
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const unsigned char* HWY_RESTRICT src = rows[r];
    int8_t* HWY_RESTRICT qr = q + r * ldq;
    if (t == Dtype::kI4) {
      int64_t i = 0;
      for (; i + kBlockElems <= dim; i += kBlockElems) I4Ints(src + i / 2, qr + i);
      I4Numbers(src + i / 2, dim - i, qr + i, [](int x) { return static_cast<int8_t>(x); });
    } else {
      HWY_DASSERT(t == Dtype::kI8);
      memcpy(qr, src, static_cast<size_t>(dim));
    }
    memset(qr + dim, 0, static_cast<size_t>(ldq - dim));
  }
}

// The decode kernel's F32 loops over a block format's rows, each block
// dequantized in registers where it is multiplied (PackedRowKernels::scores
// and values: no fp32 copy of the rows in between, whose stores and loads
// were a third of a decode step over Q8_0). Their sums are the ones the F32
// loops make of DequantizeRows' rows (ScoreKeyGroup, WeightedValues): the
// same values, the same multiply-adds, in the same order.

// Row ahead[j]'s lines (row_bytes from it), into L2 or L1, at the point of
// the loop that reads the row PrefetchKeys rows before it, among the vector
// loads. A fixed count per row (predicted branches): on Zen 5 every
// instruction here shows, D1q8_0 +11% time warm with these prefetches
// (+20% with a count of lines that varied with the row's alignment), and
// -18% cold (without them a cold step waits on memory: hardware's stream
// prefetches do not reach far enough).
HWY_INLINE void PrefetchRow(const BlockRowSpan& span, size_t j, size_t row_bytes) {
  const unsigned char* row = span.ahead[j];
  for (size_t byte = 0; byte < row_bytes; byte += kCacheLineBytes) {
    span.prefetch_l2 ? PrefetchLine<true>(row + byte) : PrefetchLine<false>(row + byte);
  }
}

// BlockScores for groups of kRows rows (GroupRows), kKeys keys at a time (the
// last key repeated past n, its scores not stored): as ScoreKeyGroup, an
// accumulator per (row, key) over the head dims in increasing order, block
// by block, then ReduceKeys.
template <Dtype kType, size_t kRows>
HWY_NOINLINE void BlockScoreGroups(const BlockRowSpan& keys, size_t blocks,
                                   const float* HWY_RESTRICT q, size_t ldq, size_t rows,
                                   float* HWY_RESTRICT s, size_t lds) {
  constexpr size_t kKeys = kLanes / kRows;
  constexpr size_t kVecs = kBlockElems / kLanes;
  const DF df;
  const size_t n = keys.n;
  for (size_t j = 0; j < n; j += kKeys) {
    const unsigned char* HWY_RESTRICT k[kKeys];
    for (size_t kk = 0; kk < kKeys; ++kk) k[kk] = keys.rows[HWY_MIN(j + kk, n - 1)];
    const size_t valid = HWY_MIN(kKeys, n - j);
    for (size_t kk = 0; kk < valid; ++kk) PrefetchRow(keys, j + kk, blocks * BlockBytes(kType));
    for (size_t r0 = 0; r0 < rows; r0 += kRows) {
      const float* HWY_RESTRICT qr = q + r0 * ldq;
      WithRegisters<kLanes>(hn::Zero(df), [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
        for (size_t b = 0; b < blocks; ++b) {
          const float* HWY_RESTRICT qb = qr + b * kBlockElems;
          Unroll<kKeys>([&](auto kk) HWYATTN_INLINE_LAMBDA {
            alignas(16) int8_t buf[kBlockElems];
            const BlockOperands<kType> block(k[kk] + b * BlockBytes(kType), buf);
            Unroll<kVecs>([&](auto c) HWYATTN_INLINE_LAMBDA {
              const VF kv = block.Values(c);
              Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
                auto& x = Nth<r * kKeys + kk>(acc...);
                x = hn::MulAdd(hn::LoadU(df, qb + r * ldq + c * kLanes), kv, x);
              });
            });
          });
        }
        HWY_ALIGN float lanes[kLanes];
        hn::Store(ReduceKeys(acc...), df, lanes);
        // (A whole group's scores by a copy of constant size: a variable
        // one was a call's worth of branches per row.)
        for (size_t r = 0; r < HWY_MIN(kRows, rows - r0); ++r) {
          if (valid == kKeys) {
            memcpy(s + (r0 + r) * lds + j, lanes + r * kKeys, kKeys * sizeof(float));
          } else {
            memcpy(s + (r0 + r) * lds + j, lanes + r * kKeys, valid * sizeof(float));
          }
        }
      });
    }
  }
}

// out[r][b0 * 32, (b0 + kBlocks) * 32) for kRows rows (+)= sum_j p[r][j] v_j
// over the rows v_j: as WeightedValues, the accumulators in registers, keys
// in order. The first pass over the rows (b0 = 0) prefetches.
template <Dtype kType, size_t kRows, size_t kBlocks>
HWY_INLINE void BlockValuePass(const BlockRowSpan& vals, size_t blocks, size_t b0,
                               const float* HWY_RESTRICT p, size_t ldp, bool accumulate,
                               float* HWY_RESTRICT out, size_t ldo) {
  constexpr size_t kBlockVecs = kBlockElems / kLanes;
  constexpr size_t kVecs = kBlocks * kBlockVecs;
  const DF df;
  float* HWY_RESTRICT o = out + b0 * kBlockElems;
  WithRegistersFrom<kRows * kVecs>(
      [&](auto i) HWYATTN_INLINE_LAMBDA {
        return accumulate ? hn::LoadU(df, o + (i / kVecs) * ldo + (i % kVecs) * kLanes)
                          : hn::Zero(df);
      },
      [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
        for (size_t j = 0; j < vals.n; ++j) {
          if (b0 == 0) PrefetchRow(vals, j, blocks * BlockBytes(kType));
          Unroll<kBlocks>([&](auto bb) HWYATTN_INLINE_LAMBDA {
            alignas(16) int8_t buf[kBlockElems];
            const BlockOperands<kType> block(vals.rows[j] + (b0 + bb) * BlockBytes(kType), buf);
            Unroll<kBlockVecs>([&](auto c) HWYATTN_INLINE_LAMBDA {
              const VF vv = block.Values(c);
              Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
                auto& x = Nth<r * kVecs + bb * kBlockVecs + c>(acc...);
                x = hn::MulAdd(hn::Set(df, p[r * ldp + j]), vv, x);
              });
            });
          });
        }
        Unroll<kRows * kVecs>([&](auto i) HWYATTN_INLINE_LAMBDA {
          hn::StoreU(Nth<i>(acc...), df, o + (i / kVecs) * ldo + (i % kVecs) * kLanes);
        });
      });
}

// The blocks from b0 in passes of kBlocks, then halving ones.
template <Dtype kType, size_t kRows, size_t kBlocks>
HWY_INLINE void BlockValuePasses(const BlockRowSpan& vals, size_t b0, size_t blocks,
                                 const float* HWY_RESTRICT p, size_t ldp, bool accumulate,
                                 float* HWY_RESTRICT out, size_t ldo) {
  for (; b0 + kBlocks <= blocks; b0 += kBlocks) {
    BlockValuePass<kType, kRows, kBlocks>(vals, blocks, b0, p, ldp, accumulate, out, ldo);
  }
  if constexpr (kBlocks > 1) {
    BlockValuePasses<kType, kRows, kBlocks / 2>(vals, b0, blocks, p, ldp, accumulate, out, ldo);
  }
}

// Up to 16 accumulators: kRows rows by as many blocks as fit.
template <Dtype kType, size_t kRows>
HWY_NOINLINE void BlockValueRows(const BlockRowSpan& vals, size_t blocks,
                                 const float* HWY_RESTRICT p, size_t ldp, bool accumulate,
                                 float* HWY_RESTRICT out, size_t ldo) {
  constexpr size_t kAccumulators = kRows * kBlockElems / kLanes;
  constexpr size_t kBlocks = kAccumulators >= 16 ? 1 : 16 / kAccumulators;
  BlockValuePasses<kType, kRows, kBlocks>(vals, 0, blocks, p, ldp, accumulate, out, ldo);
}

// Rows per value pass: at most 4, and 16 accumulators over a block.
constexpr size_t kValueRows = HWY_MAX(1, HWY_MIN(4, 16 * kLanes / kBlockElems));

void BlockScoresT(Dtype t, const BlockRowSpan& k, size_t dim, const float* HWY_RESTRICT q,
                  size_t ldq, size_t rows, float* HWY_RESTRICT s, size_t lds) {
  const size_t blocks = dim / kBlockElems;
  DispatchBlockDtype(t, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    switch (GroupRows(rows)) {
      case 1: return BlockScoreGroups<kType, 1>(k, blocks, q, ldq, rows, s, lds);
#if HWY_TARGET != HWY_SCALAR
      case 2: return BlockScoreGroups<kType, 2>(k, blocks, q, ldq, rows, s, lds);
      case 4: return BlockScoreGroups<kType, 4>(k, blocks, q, ldq, rows, s, lds);
#endif
#if HWY_MAX_BYTES >= 32
      default: return BlockScoreGroups<kType, 8>(k, blocks, q, ldq, rows, s, lds);
#endif
    }
  });
}

void BlockValuesT(Dtype t, const BlockRowSpan& v, size_t dim, const float* HWY_RESTRICT p,
                  size_t ldp, size_t rows, bool accumulate, float* HWY_RESTRICT out, size_t ldo) {
  const size_t blocks = dim / kBlockElems;
  DispatchBlockDtype(t, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    for (size_t r0 = 0; r0 < rows; r0 += kValueRows) {
      const float* HWY_RESTRICT pr = p + r0 * ldp;
      float* HWY_RESTRICT o = out + r0 * ldo;
      switch (HWY_MIN(kValueRows, rows - r0)) {
        case 1: BlockValueRows<kType, 1>(v, blocks, pr, ldp, accumulate, o, ldo); break;
#if HWY_TARGET != HWY_SCALAR
        case 2: BlockValueRows<kType, 2>(v, blocks, pr, ldp, accumulate, o, ldo); break;
        case 3: BlockValueRows<kType, 3>(v, blocks, pr, ldp, accumulate, o, ldo); break;
        default: BlockValueRows<kType, 4>(v, blocks, pr, ldp, accumulate, o, ldo); break;
#endif
      }
    }
  });
}

constexpr PackedRowKernels kPackedRowKernels = {HWY_TARGET, &DequantizeRowsT, &IntegerRowsT,
                                                &BlockScoresT, &BlockValuesT};

const PackedRowKernels* GetPackedRowKernelTable() { return &kPackedRowKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetPackedRowKernelTable);

namespace {
const PackedRowKernels& Kernels() {
  static const PackedRowKernels* const kernels =
      PickKernels(HWY_DISPATCH_TABLE(GetPackedRowKernelTable));
  return *kernels;
}
}  // namespace

void BlockScores(Dtype t, const BlockRowSpan& k, size_t dim, const float* q, size_t ldq,
                 size_t rows, float* s, size_t lds) {
  Kernels().scores(t, k, dim, q, ldq, rows, s, lds);
}

void BlockValues(Dtype t, const BlockRowSpan& v, size_t dim, const float* p, size_t ldp,
                 size_t rows, bool accumulate, float* out, size_t ldo) {
  Kernels().values(t, v, dim, p, ldp, rows, accumulate, out, ldo);
}

void DequantizeRows(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, float* out,
                    size_t ld) {
  Kernels().dequantize(t, rows, n, dim, out, ld);
}

void IntegerRows(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, int8_t* q,
                 float* e, float* m) {
  Kernels().integers(t, rows, n, dim, q, e, m);
}

}  // namespace hwyattn
#endif  // HWY_ONCE
