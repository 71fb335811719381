// SPDX-License-Identifier: Apache-2.0
//
// The storage dtypes of K, V and Q: their tag types, their scalar conversion
// to float (exact: every f16 and bf16 value is a float), and the one switch
// from a Dtype to the tag type that every kernel goes through.
#ifndef HWYATTN_SRC_OPS_CONVERT_H_
#define HWYATTN_SRC_OPS_CONVERT_H_

#include <stdint.h>
#include <string.h>

#include <cmath>
#include <type_traits>

#include "hwy/base.h"
#include "src/tensor.h"

namespace hwyattn {

// Tag types for 16-bit storage formats (both stored as uint16_t).
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

// OCP 8-bit floats (one byte each, sign in the top bit): E4M3 "fn" (no
// infinities, NaN at S.1111.111, largest finite 448) and E5M2 (IEEE-like:
// infinities and NaNs at exponent 31, largest finite 57344).
struct F8E4M3 {
  uint8_t bits;
};
struct F8E5M2 {
  uint8_t bits;
};

// The two formats' parameters: the one home of their encodings, read by the
// scalar conversions here and the vector load (LoadWide, convert-inl.h).
template <typename T>
struct Fp8Format;
template <>
struct Fp8Format<F8E4M3> {
  static constexpr int kMantissa = 3, kBias = 7;
  static constexpr bool kIeee = false;  // no infinities; NaN only at all ones
  static constexpr float kMax = 448.0f;
  static constexpr uint8_t kMaxBits = 0x7E, kNaNBits = 0x7F, kInfBits = 0x7E;
};
template <>
struct Fp8Format<F8E5M2> {
  static constexpr int kMantissa = 2, kBias = 15;
  static constexpr bool kIeee = true;
  static constexpr float kMax = 57344.0f;
  static constexpr uint8_t kMaxBits = 0x7B, kNaNBits = 0x7E, kInfBits = 0x7C;
};

template <typename T>
constexpr bool kIsFp8 = std::is_same_v<T, F8E4M3> || std::is_same_v<T, F8E5M2>;
// Element types of quantized caches: numbers that stand for number * scale,
// with the scales of the cache (SdpaProblem::ScaleRow).
template <typename T>
constexpr bool kIsQuantized = std::is_same_v<T, int8_t> || kIsFp8<T>;

inline float BitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

inline float ToFloat(float x) { return x; }
// An I8 cache's integer, before its scale (SdpaProblem::ScaleRow).
inline float ToFloat(int8_t x) { return static_cast<float>(x); }
// An FP8 number, exactly (every one is a float; subnormals included).
template <typename T, std::enable_if_t<kIsFp8<T>, int> = 0>
inline float ToFloat(T x) {
  using F = Fp8Format<T>;
  constexpr int kM = F::kMantissa;
  const uint32_t sign = uint32_t{x.bits & 0x80u} << 24;
  const uint32_t mag = x.bits & 0x7Fu;
  const uint32_t exp = mag >> kM;
  if (F::kIeee ? exp == (0x7Fu >> kM) : mag == 0x7Fu) {  // infinity (E5M2) or NaN
    return BitsToFloat(sign | 0x7F800000u | ((mag & ((1u << kM) - 1)) << (23 - kM)));
  }
  if (exp == 0) {  // zero or subnormal: mag * 2^(1 - bias - M)
    const float m = static_cast<float>(mag) * std::ldexp(1.0f, 1 - F::kBias - kM);
    return sign ? -m : m;
  }
  return BitsToFloat(sign | ((mag << (23 - kM)) + (uint32_t{127 - F::kBias} << 23)));
}
inline float ToFloat(BF16 x) { return BitsToFloat(uint32_t{x.bits} << 16); }
inline float ToFloat(F16 x) {
  const uint32_t sign = uint32_t{x.bits & 0x8000u} << 16;
  const uint32_t exp = (x.bits >> 10) & 0x1Fu;
  const uint32_t mant = x.bits & 0x3FFu;
  if (exp == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in float.
  const float mag = static_cast<float>(mant) * (1.0f / 16777216.0f);
  return sign ? -mag : mag;
}

inline uint32_t FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

// float to bfloat16, rounded to nearest, ties to even (NaN stays a quiet NaN).
inline BF16 FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return BF16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return BF16{static_cast<uint16_t>((u + rounding) >> 16)};
}

// The bf16 products' rounding rule (precision = BF16): x rounded to the
// nearest bf16, ties to even, as a float. Values beyond bf16's largest
// finite value become infinities, NaN stays NaN (quiet). The one home of the
// rule: the vector form (RoundToBf16 in convert-inl.h) gives the same
// bits, and every kernel rounds its operands through one of the two.
inline float RoundToBf16(float x) { return ToFloat(FloatToBf16(x)); }

// An element of a T tensor read as an operand of bf16 products: its value
// rounded to bf16 (RoundToBf16; the vector load is LoadWide in
// convert-inl.h). Kernels that read T in place take a Bf16Operand<T>
// pointer to the same memory to read it rounded (the decode kernel's F32 and
// F16 caches under precision = BF16; BF16 and I8 elements are bf16 values).
template <typename T>
struct Bf16Operand {
  T value;
};
template <typename T>
inline float ToFloat(Bf16Operand<T> x) {
  return RoundToBf16(ToFloat(x.value));
}

// float to IEEE binary16, rounded to nearest, ties to even (overflow gives
// infinity, NaN stays a quiet NaN, small values become subnormals or zero).
inline F16 FloatToF16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return F16{static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu))};
  if (abs >= 0x477FF000u) return F16{static_cast<uint16_t>(sign | 0x7C00u)};  // >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal (or zero), in units of 2^-24
    // abs * 2^24 rounded to nearest even, from the float's own bits.
    const int32_t exp = static_cast<int32_t>(abs >> 23);
    if (exp < 102) return F16{sign};  // < 2^-25: rounds to 0
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - exp;  // value = mant * 2^(exp - 150); units 2^-24 -> shift right
    const uint32_t half = 1u << (shift - 1), rest = mant & ((1u << shift) - 1u);
    uint32_t q = mant >> shift;
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return F16{static_cast<uint16_t>(sign | q)};
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t rounding = 0xFFFu + ((rebased >> 13) & 1u);
  return F16{static_cast<uint16_t>(sign | ((rebased + rounding) >> 13))};
}

// float to FP8, the cache write's rule: rounded to nearest, ties to even
// (subnormals included), finite values beyond the largest finite number
// saturate to it, infinities stay infinite in E5M2 and saturate in E4M3,
// NaN stays NaN (sign kept).
template <typename T>
inline T FloatToFp8(float f) {
  using F = Fp8Format<T>;
  constexpr int kM = F::kMantissa;
  const uint32_t u = FloatBits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return T{static_cast<uint8_t>(sign | F::kNaNBits)};
  if (abs == 0x7F800000u) return T{static_cast<uint8_t>(sign | F::kInfBits)};
  const float a = BitsToFloat(abs);
  if (a >= F::kMax) return T{static_cast<uint8_t>(sign | F::kMaxBits)};
  // a's binade (at least the subnormals'), and a in units of its quantum
  // 2^(e - M): exact (a power-of-two scaling), then rounded to even.
  int e = static_cast<int>(abs >> 23) - 127;
  if (e < 1 - F::kBias) e = 1 - F::kBias;
  const uint32_t q = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, kM - e)));
  if (q == 0) return T{sign};
  if (q < (1u << kM)) return T{static_cast<uint8_t>(sign | q)};  // subnormal
  // q in [2^M, 2^(M+1)]: 2^(M+1) is the next binade's first number.
  const uint32_t field = static_cast<uint32_t>(e + F::kBias) + (q >> (kM + 1));
  const uint32_t mant = q == (2u << kM) ? 0u : q - (1u << kM);
  return T{static_cast<uint8_t>(sign | (field << kM) | mant)};
}

inline void FromFloat(float x, float* out) { *out = x; }
inline void FromFloat(float x, F16* out) { *out = FloatToF16(x); }
inline void FromFloat(float x, BF16* out) { *out = FloatToBf16(x); }

// Calls body(T{}) with T the element type of `dtype`: float, F16 or BF16.
// Validation admits nothing else here, so any other dtype is a bug in
// hwyattn: it aborts rather than reading memory as the wrong type.
template <class Body>
HWY_INLINE void DispatchFloatDtype(Dtype dtype, const Body& body) {
  switch (dtype) {
    case Dtype::kF32: body(float{}); return;
    case Dtype::kF16: body(F16{}); return;
    case Dtype::kBF16: body(BF16{}); return;
    default: break;
  }
  HWY_ABORT("hwyattn: dtype %d reached a kernel that reads F32, F16 or BF16",
            static_cast<int>(dtype));
}

// Stores row[0, n) as the elements offset, offset + stride[3], ... of
// `out`, rounded once to its dtype (F32 as is, F16 and BF16 to nearest,
// ties to even: the same bits as rounding an F32 output). The one home of
// the outputs' dtype switch.
inline void StoreOutputRow(const TensorView& out, int64_t offset, const float* row, int64_t n) {
  const int64_t stride = out.stride[3];
  DispatchFloatDtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.AsMutable<T>() + offset;
    for (int64_t i = 0; i < n; ++i) FromFloat(row[i], &o[i * stride]);
  });
}

// DispatchFloatDtype for K/V, which may also be a quantized cache's numbers
// (body(int8_t{}), body(F8E4M3{}), body(F8E5M2{}): the kernel applies the
// cache's scales).
template <class Body>
HWY_INLINE void DispatchCacheDtype(Dtype dtype, const Body& body) {
  switch (dtype) {
    case Dtype::kI8: body(int8_t{}); return;
    case Dtype::kF8E4M3: body(F8E4M3{}); return;
    case Dtype::kF8E5M2: body(F8E5M2{}); return;
    default: DispatchFloatDtype(dtype, body); return;
  }
}

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_CONVERT_H_
