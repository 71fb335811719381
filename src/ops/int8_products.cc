// SPDX-License-Identifier: Apache-2.0
//
// The quantization side of the integer products (int8_products.h): the
// query's blocks (ggml's quantize_row_q8_0_ref arithmetic, in fp32 without
// contraction: this file is compiled with -ffp-contract=off, for the
// baseline target only, so every target quantizes a query to the same
// numbers). The integers of K rows (IntegerRows) are block_rows.cc's.

#include "src/ops/int8_products.h"

#include <math.h>
#include <string.h>

#include <algorithm>

#include "src/ops/blocks.h"

namespace hwyattn {

void QuantizeQueryRow(const float* x, int64_t dim, int8_t* q, float* d, float* dsum) {
  const int64_t blocks = IntegerBlocks(dim);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t d0 = b * kBlockElems, n = std::min(kBlockElems, dim - d0);
    int8_t* qb = q + d0;
    float xb[kBlockElems] = {};  // the block, zero-padded
    for (int64_t i = 0; i < n; ++i) xb[i] = x[d0 + i];
    // max |x| on the magnitudes' bits (ordered as the values are; NaN's and
    // the infinities' above FLT_MAX's), so the loop vectorizes.
    uint32_t amax_bits = 0;
    for (int64_t i = 0; i < kBlockElems; ++i) {
      uint32_t bits;
      memcpy(&bits, &xb[i], sizeof(bits));
      bits &= 0x7FFFFFFFu;
      amax_bits = amax_bits > bits ? amax_bits : bits;
    }
    const bool finite = amax_bits <= 0x7F7FFFFFu;  // FLT_MAX's bits
    float amax;
    memcpy(&amax, &amax_bits, sizeof(amax));
    const float db = amax / 127;
    const float id = finite && db != 0.0f ? 1.0f / db : 0.0f;
    if (!finite) memset(xb, 0, sizeof(xb));  // q = 0 (and no NaN to convert)
    int32_t sum = 0;
    for (int64_t i = 0; i < kBlockElems; ++i) {
      // roundf(y) for |y| = |x * id| <= 127 (rounded up at most to
      // 127.00001: 127): truncation, then one away from zero from a half
      // on (y - t is exact there); no call, so the loop vectorizes.
      const float y = xb[i] * id;
      const int t = static_cast<int>(y);
      const float rem = y - static_cast<float>(t);
      const int v = t + (rem >= 0.5f ? 1 : 0) - (rem <= -0.5f ? 1 : 0);
      qb[i] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = finite ? db : NAN;
    dsum[b] = d[b] * static_cast<float>(sum);
  }
}

void QueryBlockStarts(const int8_t* q, size_t blocks, int32_t zero_point, int32_t* start) {
  for (size_t b = 0; b < blocks; ++b) {
    int32_t sum = 0;
    for (size_t i = 0; i < static_cast<size_t>(kBlockElems); ++i) sum += q[b * kBlockElems + i];
    start[b] = -zero_point * sum;
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
