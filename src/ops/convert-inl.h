// SPDX-License-Identifier: Apache-2.0
//
// The vector side of convert.h's dtype conversions, per target: elements of
// any storage dtype (F32, F16, BF16, a quantized cache's int8 or fp8)
// widened to float vectors exactly (LoadWide), and the bf16 rounding of a
// vector (RoundToBf16, the same bits as convert.h's scalar rule). For every
// kernel that reads such elements: the attention kernels (through
// score_rules-inl.h) and the packed matmul.

#if defined(HWYATTN_SRC_OPS_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_CONVERT_INL_H_
#undef HWYATTN_SRC_OPS_CONVERT_INL_H_
#else
#define HWYATTN_SRC_OPS_CONVERT_INL_H_
#endif

#include <stdint.h>

#include <cmath>
#include <type_traits>

#include "hwy/highway.h"
#include "src/ops/convert.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway widens F16 in software where the target has no conversion
// instruction and takes the infinities and NaNs there (exponent 31) for
// numbers of 2^16 and more; LoadWide mends those lanes. Converted in
// hardware: x86 from AVX2 (F16C), arm64's NEON and SVE targets, RVV with
// Zvfhmin. In software: x86 below AVX2, every portable fallback (EMU128,
// SCALAR), s390x's Z14 and Z15, RVV without Zvfhmin, and POWER (PPC8; and
// PPC9/PPC10, whose xvcvhpsp gave an FP8 NaN code a finite value under QEMU:
// KvFp8.EveryCodeAsKeyAndValue).
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) ||                                   \
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR) || \
    (HWY_ARCH_RVV && defined(HWY_RVV_HAVE_F16C) && HWY_TARGET == HWY_RVV && HWY_RVV_HAVE_F16C)
constexpr bool kSoftwareF16 = false;
#else
constexpr bool kSoftwareF16 = true;
#endif

// One vector of floats from p[0, lanes): F32 as is, F16 and BF16 widened
// (exactly, infinities and NaNs too) on load, so that half-precision K/V are
// read in place; a quantized cache's int8 or fp8 numbers converted (exactly;
// its scales are the caller's).
template <typename T, class D = DF>
HWY_INLINE hn::Vec<D> LoadWide(const T* HWY_RESTRICT p) {
  const D df;
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<int8_t, D> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  } else if constexpr (kIsFp8<T> && !kSoftwareF16) {
    // As binary16 bits, widened by the target's F16 conversion: E5M2 is the
    // top byte of a binary16; E4M3's sign to bit 15 and exponent and mantissa
    // to bits 13..7 make the binary16 2^-8 times its value (subnormals
    // included), S.1111.111 an all-ones exponent (NaN).
    const hn::Rebind<hwy::float16_t, D> dh;
    if constexpr (std::is_same_v<T, F8E5M2>) {
      const hn::Rebind<uint16_t, D> d16;
      const auto x = hn::PromoteTo(
          d16, hn::LoadU(hn::Rebind<uint8_t, D>(), reinterpret_cast<const uint8_t*>(p)));
      return hn::PromoteTo(df, hn::BitCast(dh, hn::ShiftLeft<8>(x)));
    } else {
      // Sign-extended to 16 bits and shifted left by 7, the byte S.EEEE.MMM
      // lands as S S EEEE MMM 0000000 (bit 14 a copy of the sign, cleared):
      // three operations where separating sign and magnitude took five.
      const hn::Rebind<int16_t, D> d16;
      const auto x = hn::PromoteTo(
          d16, hn::LoadU(hn::Rebind<int8_t, D>(), reinterpret_cast<const int8_t*>(p)));
      auto h = hn::And(hn::ShiftLeft<7>(x), hn::Set(d16, static_cast<int16_t>(0xBF80)));
      // S.1111.111 (NaN): an all-ones binary16 exponent.
      const auto mag = hn::Set(d16, int16_t{0x3F80});
      h = hn::Or(h,
                 hn::IfThenElseZero(hn::Eq(hn::And(h, mag), mag), hn::Set(d16, int16_t{0x7C00})));
      return hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, h)), hn::Set(df, 256.0f));
    }
  } else if constexpr (kIsFp8<T>) {
    // Without an F16 conversion: the scalar ToFloat's rule (convert.h) per
    // lane: rebias a normal number's exponent, scale a subnormal's integer,
    // then infinities/NaNs.
    using F = Fp8Format<T>;
    constexpr int kM = F::kMantissa;
    const hn::RebindToSigned<D> di;  // signed: integer Lt and Gt on every target
    const auto x = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(),
                                                 hn::LoadU(hn::Rebind<uint8_t, D>(),
                                                           reinterpret_cast<const uint8_t*>(p))));
    const auto mag = hn::And(x, hn::Set(di, 0x7F));
    const auto normal = hn::Add(hn::ShiftLeft<23 - kM>(mag), hn::Set(di, (127 - F::kBias) << 23));
    const auto subnormal =
        hn::Mul(hn::ConvertTo(df, mag), hn::Set(df, std::ldexp(1.0f, 1 - F::kBias - kM)));
    auto v = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag, hn::Set(di, 1 << kM))), subnormal,
                            hn::BitCast(df, normal));
    // E5M2: exponent all ones (mag >= 0x7C); E4M3: mag == 0x7F.
    const auto special = hn::RebindMask(
        df, hn::Gt(mag, hn::Set(di, F::kIeee ? (0x7F & ~((1 << kM) - 1)) - 1 : 0x7E)));
    const auto inf_nan = hn::Or(hn::Set(di, 0x7F800000),
                                hn::ShiftLeft<23 - kM>(hn::And(mag, hn::Set(di, (1 << kM) - 1))));
    v = hn::IfThenElse(special, hn::BitCast(df, inf_nan), v);
    return hn::Or(v, hn::BitCast(df, hn::ShiftLeft<24>(hn::And(x, hn::Set(di, 0x80)))));
  } else if constexpr (std::is_same_v<T, F16> && kSoftwareF16) {
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::PromoteTo(
        du, hn::LoadU(hn::Rebind<uint16_t, D>(), reinterpret_cast<const uint16_t*>(p)));
    const auto exponent = hn::Set(du, 0x7C00u);
    const auto special = hn::Eq(hn::And(bits, exponent), exponent);
    // sign | all-ones exponent | the mantissa's 10 bits at the top (ToFloat).
    const auto inf_nan = hn::Or(
        hn::Or(hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u))), hn::Set(du, 0x7F800000u)),
        hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x3FFu))));
    const hn::Rebind<hwy::float16_t, D> dh;
    const auto widened =
        hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
    return hn::IfThenElse(hn::RebindMask(df, special), hn::BitCast(df, inf_nan), widened);
  } else {
    using H = std::conditional_t<std::is_same_v<T, F16>, hwy::float16_t, hwy::bfloat16_t>;
    const hn::Rebind<H, D> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const H*>(p)));
  }
}

// RoundToBf16 (convert.h) per lane, the same bits: nearest bf16, ties to
// even, as floats; a NaN lane becomes the quiet NaN the scalar form gives.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundToBf16(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, x);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), odd));
  const auto nan = hn::Or(u, hn::Set(du, 0x00400000u));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), nan, rounded);
  return hn::BitCast(df, hn::And(bits, hn::Set(du, 0xFFFF0000u)));
}

// LoadWide of a T row read as bf16 products' operands (Bf16Operand, convert.h):
// each lane rounded to bf16.
template <typename T, class D = DF>
HWY_INLINE hn::Vec<D> LoadWide(const Bf16Operand<T>* HWY_RESTRICT p) {
  return RoundToBf16(D(), LoadWide<T, D>(reinterpret_cast<const T*>(p)));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_CONVERT_INL_H_
