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
#define HWYATTN_HARDWARE_F16 1
#else
#define HWYATTN_HARDWARE_F16 0
#endif
constexpr bool kSoftwareF16 = !HWYATTN_HARDWARE_F16;

// Fp8 numbers as binary16 bits (the targets with an F16 conversion): x holds
// the bytes sign-extended to 16 bits. E5M2 is the top byte of a binary16.
// E4M3's sign to bit 15 and exponent and mantissa to bits 13..7 make the
// binary16 2^-8 times its value (subnormals included: kWideFactor),
// S.1111.111 an all-ones exponent (NaN): shifted left by 7, the byte lands as
// S S EEEE MMM 0000000 (bit 14 a copy of the sign, cleared), three
// operations where separating sign and magnitude took five.
template <typename T, class D16>
HWY_INLINE hn::Vec<D16> Fp8AsF16(D16 d16, hn::Vec<D16> x) {
  if constexpr (std::is_same_v<T, F8E5M2>) {
    return hn::ShiftLeft<8>(x);
  } else {
    const auto h = hn::And(hn::ShiftLeft<7>(x), hn::Set(d16, static_cast<int16_t>(0xBF80)));
    const auto mag = hn::Set(d16, int16_t{0x3F80});
    return hn::Or(h,
                  hn::IfThenElseZero(hn::Eq(hn::And(h, mag), mag), hn::Set(d16, int16_t{0x7C00})));
  }
}

// What LoadWideUnscaled's numbers are to be multiplied by: 2^8 for E4M3 where
// it is widened through binary16 (Fp8AsF16), else 1. A kernel that reads such
// numbers by the vector and sums products of them multiplies its sums once
// (by a power of two: the same sums, unless they leave fp32's normal range)
// instead of every vector: the multiply takes an FMA pipe.
template <typename T>
constexpr float kWideFactor = (std::is_same_v<T, F8E4M3> && HWYATTN_HARDWARE_F16) ? 256.0f : 1.0f;

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

// LoadWide's vector divided by kWideFactor<T> (exactly).
template <class D = DF, typename T>
HWY_INLINE hn::Vec<D> LoadWideUnscaled(const T* HWY_RESTRICT p) {
  const D df;
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<int8_t, D> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  } else if constexpr (kIsFp8<T> && !kSoftwareF16) {
    const hn::Rebind<int16_t, D> d16;
    const auto x =
        hn::PromoteTo(d16, hn::LoadU(hn::Rebind<int8_t, D>(), reinterpret_cast<const int8_t*>(p)));
    return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), Fp8AsF16<T>(d16, x)));
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

// One vector of floats from p[0, lanes): F32 as is, F16 and BF16 widened
// (exactly, infinities and NaNs too) on load, so that half-precision K/V are
// read in place; a quantized cache's int8 or fp8 numbers converted (exactly;
// its scales are the caller's).
template <class D = DF, typename T>
HWY_INLINE hn::Vec<D> LoadWide(const T* HWY_RESTRICT p);

// A T row read as bf16 products' operands (Bf16Operand, convert.h): LoadWide
// with each lane rounded to bf16 (exact: kWideFactor 1).
template <class D = DF, typename T>
HWY_INLINE hn::Vec<D> LoadWideUnscaled(const Bf16Operand<T>* HWY_RESTRICT p) {
  return RoundToBf16(D(), LoadWide<D>(reinterpret_cast<const T*>(p)));
}

template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadWide(const T* HWY_RESTRICT p) {
  const auto x = LoadWideUnscaled<D>(p);
  if constexpr (kWideFactor<T> != 1.0f) return hn::Mul(x, hn::Set(D(), kWideFactor<T>));
  return x;
}

// LoadWideUnscaled of p[0, lanes) into lo and p[lanes, 2 lanes) into hi. Fp8
// on the targets with an F16 conversion widens the pair's bytes as one vector
// of 16-bit lanes (Fp8AsF16: its integer operations once per 2 lanes numbers,
// not once per lanes in half a vector); every other dtype loads two vectors.
template <class D = DF, typename T>
HWY_INLINE void LoadWidePairUnscaled(const T* HWY_RESTRICT p, hn::Vec<D>& lo, hn::Vec<D>& hi) {
  const D df;
#if HWYATTN_HARDWARE_F16  // (SCALAR has no UpperHalf)
  if constexpr (kIsFp8<T>) {
    const hn::Repartition<int16_t, D> d16;  // 2 lanes 16-bit numbers
    const auto bits =
        Fp8AsF16<T>(d16, hn::PromoteTo(d16, hn::LoadU(hn::Rebind<int8_t, decltype(d16)>(),
                                                      reinterpret_cast<const int8_t*>(p))));
    const hn::Half<decltype(d16)> d16h;  // (Highway 1.0.3's NEON halves no float16_t vector)
    const hn::Rebind<hwy::float16_t, D> dh;
    lo = hn::PromoteTo(df, hn::BitCast(dh, hn::LowerHalf(d16h, bits)));
    hi = hn::PromoteTo(df, hn::BitCast(dh, hn::UpperHalf(d16h, bits)));
    return;
  }
#endif
  lo = LoadWideUnscaled<D>(p);
  hi = LoadWideUnscaled<D>(p + hn::Lanes(df));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
#undef HWYATTN_HARDWARE_F16

HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_CONVERT_INL_H_
