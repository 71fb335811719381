// SPDX-License-Identifier: Apache-2.0
//
// Rows of a packed cache (blocks.h: ggml's block formats and I4) read per
// target with Highway's vectors: DequantizeRows (the fp32 values, which the
// decode kernel stages) and IntegerRows (the integers and block scales that
// the integer products multiply, int8_products.h). The decode kernel calls
// them once per staged run of K and V (kStageKeys rows), which as scalar
// loops were most of its time over a block-format cache (D1q8_0cold on Zen
// 5: 67% of the samples, the baseline's auto-vectorized blocks.h loops).
//
// A block's 32 numbers are made as two 16-byte vectors (elements 0-15 and
// 16-31), whatever the target's vector length: Q8_0's bytes as they are;
// the 4-bit formats' low and high nibbles; IQ4_NL's levels by a byte table
// lookup (pshufb, tbl); Q5's fifth bits spread from qh's four bytes, in
// memory order, to one byte lane each (the machine's byte order does not
// enter: qh is little-endian bytes in every ggml file). The numbers are the
// ones blocks.h's BlockNumbers reads (the scalar definition, which the
// prefill packing uses and the tests compare against), so the values,
// d * q (+ m: one fp32 rounding, as there; d * q is exact), are equal bit
// for bit.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/ops/blocks.h"
#include "src/ops/int8_products.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/block_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// (HWY_SCALAR, one lane: blocks.h's scalar reading.)
#if HWY_TARGET != HWY_SCALAR
using DU8 = hn::FixedTag<uint8_t, 16>;
using DI8 = hn::FixedTag<int8_t, 16>;
#endif
// fp32 vectors of at most 16 lanes (a block is whole vectors) and the int8
// vectors they widen from.
using DF = hn::CappedTag<float, 16>;
using DI32 = hn::RebindToSigned<DF>;
using DQ = hn::Rebind<int8_t, DI32>;

// For byte lane i of a Q5 half: the byte of qh holding its fifth bit (lanes
// 0-15: qh's bytes 0 and 1; 16-31: 2 and 3) and the bit in it.
alignas(16) constexpr uint8_t kQhByteLow[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
alignas(16) constexpr uint8_t kQhByteHigh[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(16) constexpr uint8_t kQhBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                            1, 2, 4, 8, 16, 32, 64, 128};

// The fp16 at byte `at` of a block (BlockHalf's value): one vcvtph2ps where
// the target converts fp16 in hardware (x86 from AVX2: F16C), else the
// scalar conversion (Highway 1.0.3's SSE4 emulation does not map fp16
// infinities and NaNs to fp32's).
HWY_INLINE float BlockScale(const unsigned char* HWY_RESTRICT block, size_t at) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(
      hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(block + at))));
#else
  return BlockHalf(block, at);
#endif
}

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

// out[0, 32) = d * q (+ m with kOffset) for the 32 integers q.
template <bool kOffset>
HWY_INLINE void ScaleInts(const int8_t* HWY_RESTRICT q, float d, float m, float* HWY_RESTRICT out) {
  const DF df;
  const DI32 di32;
  const DQ dq;
  const auto vd = hn::Set(df, d);
  const auto vm = hn::Set(df, m);
  for (size_t i = 0; i < static_cast<size_t>(kBlockElems); i += hn::Lanes(df)) {
    const auto x = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(dq, q + i)));
    hn::StoreU(kOffset ? hn::MulAdd(x, vd, vm) : hn::Mul(x, vd), df, out + i);
  }
}

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
        ScaleInts<false>(q, 1.0f, 0.0f, o + i);
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
        const float d = BlockScale(block, 0);
        if constexpr (kType == Dtype::kQ8_0) {
          ScaleInts<false>(reinterpret_cast<const int8_t*>(block + 2), d, 0.0f, o + i);
        } else {
          BlockInts<kType>(block, q);
          ScaleInts<kBlockHasOffset<kType>>(
              q, d, kBlockHasOffset<kType> ? BlockScale(block, 2) : 0.0f, o + i);
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
          e[r * blocks + b] = BlockScale(block, 0);
          if constexpr (kBlockHasOffset<kType>) m[r * blocks + b] = BlockScale(block, 2);
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

constexpr PackedRowKernels kPackedRowKernels = {HWY_TARGET, &DequantizeRowsT, &IntegerRowsT};

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
