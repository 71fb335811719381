// SPDX-License-Identifier: Apache-2.0
//
// The storage dtypes of K, V and Q: their tag types, their scalar conversion
// to float (exact: every f16 and bf16 value is a float), and the one switch
// from a Dtype to the tag type that every kernel goes through.
#ifndef HWYATTN_SRC_OPS_CONVERT_H_
#define HWYATTN_SRC_OPS_CONVERT_H_

#include <stdint.h>
#include <string.h>

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

inline float BitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

inline float ToFloat(float x) { return x; }
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

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_CONVERT_H_
