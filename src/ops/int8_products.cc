// SPDX-License-Identifier: Apache-2.0
//
// The quantization side of the integer products (int8_products.h): the
// query's blocks (ggml's quantize_row_q8_0_ref arithmetic, in fp32 without
// contraction: this file is compiled with -ffp-contract=off, for the
// baseline target only, so every target quantizes a query to the same
// numbers) and the integers of a K row in each quantized format.

#include "src/ops/int8_products.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include <algorithm>

#include "src/ops/blocks.h"

namespace hwyattn {
namespace {

// Block b's integers, scale and offset in the block format kType
// (blocks.h's values, without multiplying them out).
template <Dtype kType>
void IntegerBlock(const unsigned char* HWY_RESTRICT block, int8_t* HWY_RESTRICT q, float* e,
                  float* m) {
  *e = BlockHalf(block, 0);
  *m = 0.0f;
  if constexpr (kType == Dtype::kQ8_0) {
    memcpy(q, block + 2, 32);
  } else if constexpr (kType == Dtype::kQ4_0 || kType == Dtype::kQ4_1 || kType == Dtype::kIQ4_NL) {
    constexpr bool kOffset = kType == Dtype::kQ4_1;
    if (kOffset) *m = BlockHalf(block, 2);
    const unsigned char* qs = block + (kOffset ? 4 : 2);
    for (int j = 0; j < 16; ++j) {
      const int lo = qs[j] & 0xF, hi = qs[j] >> 4;
      if constexpr (kType == Dtype::kIQ4_NL) {
        q[j] = kIq4nlValues[lo];
        q[j + 16] = kIq4nlValues[hi];
      } else {
        q[j] = static_cast<int8_t>(kOffset ? lo : lo - 8);
        q[j + 16] = static_cast<int8_t>(kOffset ? hi : hi - 8);
      }
    }
  } else {
    static_assert(kType == Dtype::kQ5_0 || kType == Dtype::kQ5_1, "a block format");
    constexpr bool kOffset = kType == Dtype::kQ5_1;
    if (kOffset) *m = BlockHalf(block, 2);
    const size_t at = kOffset ? 4 : 2;
    const uint32_t qh = BlockHighBits(block, at);
    const unsigned char* qs = block + at + 4;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0xF) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      q[j] = static_cast<int8_t>(kOffset ? lo : lo - 16);
      q[j + 16] = static_cast<int8_t>(kOffset ? hi : hi - 16);
    }
  }
}

}  // namespace

void QuantizeQueryRow(const float* x, int64_t dim, int8_t* q, float* d, float* dsum) {
  const int64_t blocks = IntegerBlocks(dim);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t d0 = b * kBlockElems, n = std::min(kBlockElems, dim - d0);
    int8_t* qb = q + d0;
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) {
      const float a = fabsf(x[d0 + i]);
      finite = finite && a <= FLT_MAX;  // false for NaN and infinities
      amax = std::max(amax, a);
    }
    const float db = amax / 127;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < kBlockElems; ++i) {
      // |x * id| <= 127 (rounded up at most to 127.00001: roundf gives 127).
      const int v = i < n && finite ? static_cast<int>(roundf(x[d0 + i] * id)) : 0;
      qb[i] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = finite ? db : NAN;
    dsum[b] = d[b] * static_cast<float>(sum);
  }
}

void IntegerRow(Dtype t, const unsigned char* src, int64_t dim, int8_t* q, float* e, float* m) {
  const int64_t blocks = IntegerBlocks(dim);
  if (IsBlockDtype(t)) {
    DispatchBlockDtype(t, [&](auto type) {
      constexpr Dtype kType = decltype(type)::value;
      const size_t bytes = BlockBytes(kType);
      for (int64_t b = 0; b < blocks; ++b) {
        IntegerBlock<kType>(src + b * static_cast<int64_t>(bytes), q + b * kBlockElems, e + b,
                            m + b);
      }
    });
    return;
  }
  if (t == Dtype::kI4) {
    // (nibble ^ 8) - 8: the nibble as a two's complement int4 (blocks.h).
    for (int64_t i = 0; 2 * i + 1 < dim; ++i) {
      q[2 * i] = static_cast<int8_t>(((src[i] & 0xF) ^ 8) - 8);
      q[2 * i + 1] = static_cast<int8_t>(((src[i] >> 4) ^ 8) - 8);
    }
    if (dim % 2 != 0) q[dim - 1] = static_cast<int8_t>(((src[dim / 2] & 0xF) ^ 8) - 8);
  } else {
    HWY_DASSERT(t == Dtype::kI8);
    memcpy(q, src, static_cast<size_t>(dim));
  }
  memset(q + dim, 0, static_cast<size_t>(blocks * kBlockElems - dim));
  for (int64_t b = 0; b < blocks; ++b) {
    e[b] = 1.0f;
    m[b] = 0.0f;
  }
}

void DequantizedQueryRow(float* x, int64_t dim, int64_t stride, const float* channel_scale,
                         int64_t step) {
  const int64_t blocks = IntegerBlocks(dim);
  float y[kBlockElems];
  int8_t q[kBlockElems];
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t d0 = b * kBlockElems, n = std::min(kBlockElems, dim - d0);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = x[(d0 + i) * stride];
      if (channel_scale != nullptr) y[i] *= channel_scale[(d0 + i) * step];
    }
    float d, dsum;
    QuantizeQueryRow(y, n, q, &d, &dsum);
    for (int64_t i = 0; i < n; ++i) {
      float v = d * static_cast<float>(q[i]);
      if (channel_scale != nullptr) {
        const float s = channel_scale[(d0 + i) * step];
        v = s != 0.0f ? v / s : 0.0f;
      }
      x[(d0 + i) * stride] = v;
    }
  }
}

}  // namespace hwyattn
