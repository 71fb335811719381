// SPDX-License-Identifier: Apache-2.0
//
// Quantization into ggml's block formats: the same bytes as
// ggml's reference quantizers, quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1,
// iq4_nl}_ref of ggml-quants.c, which llama.cpp's model files and tests use
// (tests/ggml compares the two on the pinned ggml). The arithmetic is theirs,
// operation for operation, in fp32 without contraction into FMAs (this file
// is compiled with -ffp-contract=off, and for the baseline target only), so
// every target and compiler gives the same bytes. Where ggml's C has
// undefined behaviour (a NaN or an infinity in a block, converted to an
// integer), the numbers here are 0 for NaN and saturate otherwise; an IQ4_NL
// block whose largest |x| is below 1e-15 gets scale 0 and zero nibbles
// (ggml leaves whatever its index buffer held: the values are 0 either way).

#include "src/ops/blocks.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>

namespace hwyattn {
namespace {

// (int)x for a float, truncated toward zero as C's conversion, with NaN ->
// 0 and values beyond [lo, hi] clamped (where C's conversion is undefined).
int TruncClamped(float x, int lo, int hi) {
  if (!(x == x)) return 0;
  if (x <= static_cast<float>(lo)) return lo;
  if (x >= static_cast<float>(hi)) return hi;
  return static_cast<int>(x);
}

void PutHalf(float x, unsigned char* at) {
  const uint16_t bits = FloatToF16(x).bits;
  memcpy(at, &bits, sizeof(bits));
}

void PutHighBits(uint32_t qh, unsigned char* at) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(qh >> (8 * i));
}

void QuantizeQ8_0(const float* x, unsigned char* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, fabsf(x[j]));  // MAX(amax, |v|)
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(d, y);
  for (int j = 0; j < 32; ++j) {
    const float x0 = x[j] * id;
    y[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(TruncClamped(roundf(x0), -128, 127)));
  }
}

// Q4_0 (kBits 4) and Q5_0 (5): d = the signed value of largest magnitude
// over -2^(kBits-1); number = min(2^kBits - 1, (int8)(x / d + 2^(kBits-1) + 0.5)).
template <int kBits>
void QuantizeSymmetric(const float* x, unsigned char* y) {
  constexpr int kHalf = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  const float d = max / -kHalf;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(d, y);
  const float bias = static_cast<float>(kHalf) + 0.5f;
  unsigned char* qs = y + (kBits == 4 ? 2 : 6);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[16 + j] * id;
    const int q0 = std::min(kTop, TruncClamped(x0 + bias, -128, 127));
    const int q1 = std::min(kTop, TruncClamped(x1 + bias, -128, 127));
    qs[j] = static_cast<unsigned char>((q0 & 0xF) | (q1 & 0xF) << 4);
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  if (kBits == 5) PutHighBits(qh, y + 2);
}

// Q4_1 (kBits 4) and Q5_1 (5): d = (max - min) / (2^kBits - 1), m = min;
// number = (int8)((x - min) / d + 0.5), at most 15 (Q4_1), or
// (uint8)((x - min) / d + 0.5) (Q5_1, its low 5 bits kept).
template <int kBits>
void QuantizeOffset(const float* x, unsigned char* y) {
  constexpr int kTop = (1 << kBits) - 1;
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / kTop;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(d, y);
  PutHalf(min, y + 2);
  unsigned char* qs = y + (kBits == 4 ? 4 : 8);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[16 + j] - min) * id;
    // Q4_1: MIN(15, (int8_t)(x + 0.5)); Q5_1: (uint8_t)(x + 0.5), then 5 bits.
    const int q0 = kBits == 4 ? std::min(kTop, TruncClamped(x0 + 0.5f, -128, 127))
                              : TruncClamped(x0 + 0.5f, 0, 255);
    const int q1 = kBits == 4 ? std::min(kTop, TruncClamped(x1 + 0.5f, -128, 127))
                              : TruncClamped(x1 + 0.5f, 0, 255);
    qs[j] = static_cast<unsigned char>((q0 & 0xF) | (q1 & 0xF) << 4);
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  if (kBits == 5) PutHighBits(qh, y + 4);
}

// The index of the level of kIq4nlValues nearest x (ties: the upper; ggml's
// best_index_int8).
int NearestIq4nl(float x) {
  const int8_t* val = kIq4nlValues;
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// IQ4_NL as quantize_row_iq4_nl_ref: d = max / -127 picks each element's
// level, then d is the weighted least-squares scale of those levels
// (weights x^2).
void QuantizeIq4nl(const float* x, unsigned char* y) {
  unsigned char* qs = y + 2;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = fabsf(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  int levels[32] = {};
  float d = 0.0f;
  if (!(amax < 1e-15f)) {
    d = max / kIq4nlValues[0];
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float al = id * x[j];
      levels[j] = NearestIq4nl(al);
      const float q = kIq4nlValues[levels[j]];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  }
  PutHalf(d, y);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<unsigned char>(levels[j] | levels[16 + j] << 4);
}

}  // namespace

void QuantizeBlocks(Dtype t, const float* x, int64_t n, unsigned char* dst) {
  DispatchBlockDtype(t, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    void (*block)(const float*, unsigned char*) = kType == Dtype::kQ8_0   ? QuantizeQ8_0
                                                  : kType == Dtype::kQ4_0 ? QuantizeSymmetric<4>
                                                  : kType == Dtype::kQ4_1 ? QuantizeOffset<4>
                                                  : kType == Dtype::kQ5_0 ? QuantizeSymmetric<5>
                                                  : kType == Dtype::kQ5_1 ? QuantizeOffset<5>
                                                                          : QuantizeIq4nl;
    const size_t bytes = BlockBytes(kType);
    for (int64_t i = 0; i < n; i += kBlockElems, dst += bytes) block(x + i, dst);
  });
}

}  // namespace hwyattn
