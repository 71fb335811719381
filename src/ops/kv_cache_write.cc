// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_kv_cache_write, per target: each token's rows of K and V (one per
// kv head) are read into a float buffer (converting from F32, F16 or BF16),
// then stored at the token's slot in the cache's dtype: F32 as is, F16 and
// BF16 rounded to nearest even (src/ops/convert.h), I8 and FP8 quantized,
// the block formats as ggml's reference quantizers (src/ops/blocks.cc).
// Their arithmetic runs in vectors on the buffer: max |x| over the row (NaNs
// ignored), x / scale (fp32 division); then I8's NaN -> 0, clamped to
// [-127, 127] (I4: [-8, 7]), rounded to nearest even, or FP8's rounding
// (FloatToFp8, convert.h), one element at a time. Elementwise and with a fixed order
// per row, so every target and every thread count gives the same bytes
// (the maximum is order-free, the rest is per element).
//
// The planner (RunKvCacheWrite, src/kv_attention.cc) splits the tokens into a
// contiguous range per worker. Tokens write disjoint slots (validation
// rejects a slot written twice), so workers never touch the same bytes.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "src/ops/blocks.h"
#include "src/ops/convert.h"
#include "src/ops/kv_cache_write.h"
#include "src/scratch.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/kv_cache_write.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DF and kLanes: vectors-inl.h.

// buffer[0, dim) = row (head h of token t of `src`) as floats; zeros up to
// a whole vector.
void LoadRow(const TensorView& src, int64_t t, int64_t h, int64_t dim, float* buffer) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t stride = src.stride[3];
  DispatchFloatDtype(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* row = src.As<T>() + src.Offset(0, t, h, 0);
    for (int64_t d = 0; d < dim; ++d) buffer[d] = ToFloat(row[d * stride]);
  });
  for (int64_t d = dim; d < (dim + lanes - 1) / lanes * lanes; ++d) buffer[d] = 0.0f;
}

// buffer[d] /= scale[d] (fp32 division), with scale[d] = scales[d] (per
// channel) or *scales (per token).
void Divide(float* HWY_RESTRICT buffer, const float* HWY_RESTRICT scales, bool per_channel,
            int64_t dim) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t d = 0; d < dim; d += lanes) {
    const auto s = per_channel ? hn::LoadU(df, scales + d) : hn::Set(df, scales[0]);
    hn::Store(hn::Div(hn::Load(df, buffer + d), s), df, buffer + d);
  }
}

// buffer[d] = round_even(clamp(buffer[d], lo, hi)), NaN -> 0: I8's rule
// ([-127, 127]) and I4's ([-8, 7]).
void RoundToInt(float* HWY_RESTRICT buffer, int64_t dim, float lowest, float highest) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto lo = hn::Set(df, lowest), hi = hn::Set(df, highest);
  for (int64_t d = 0; d < dim; d += lanes) {
    auto y = hn::Load(df, buffer + d);
    y = hn::IfThenZeroElse(hn::IsNaN(y), y);
    y = hn::Min(hn::Max(y, lo), hi);
    hn::Store(hn::Round(y), df, buffer + d);
  }
}

// max |buffer[d]| over the row (NaNs ignored; the padding is zeros).
float MaxAbs(const float* HWY_RESTRICT buffer, int64_t dim) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  auto m = hn::Zero(df);
  for (int64_t d = 0; d < dim; d += lanes) {
    const auto x = hn::Abs(hn::Load(df, buffer + d));
    m = hn::Max(m, hn::IfThenZeroElse(hn::IsNaN(x), x));
  }
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

// The magnitude a per-token scale maps the row's largest |x| to: 127 for
// I8, 7 for I4, the largest finite number for FP8.
template <typename T>
constexpr float QuantizedMax() {
  if constexpr (kIsFp8<T>) return Fp8Format<T>::kMax;
  return 127.0f;
}
constexpr float kI4Max = 7.0f;

// A quantized cache's row in buffer divided by its scales (per token: max
// |x| / `most`, computed here and stored at (page, h, offset) of `scale`).
void DivideByScales(KvScales layout, const TensorView& scale, int64_t page, int64_t h,
                    int64_t offset, int64_t dim, float most, float* HWY_RESTRICT buffer) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t padded = (dim + lanes - 1) / lanes * lanes;
  float* scales = buffer + padded;  // per channel: this row's scales, padded with ones
  if (layout == KvScales::kPerToken) {
    const float s = MaxAbs(buffer, dim) / most;
    scale.AsMutable<float>()[scale.Offset(page, h, offset, 0)] = s;
    scales[0] = s;
    if (s == 0.0f) {
      for (int64_t d = 0; d < dim; ++d) buffer[d] = 0.0f;
    } else {
      Divide(buffer, scales, false, dim);
    }
  } else {
    const float* sc = scale.As<float>() + scale.Offset(0, h, 0, 0);
    for (int64_t d = 0; d < dim; ++d) scales[d] = sc[d * scale.stride[3]];
    for (int64_t d = dim; d < padded; ++d) scales[d] = 1.0f;
    Divide(buffer, scales, true, dim);
  }
}

// Stores the row in buffer into (page, h, offset) of `dst` (and, with
// per-token scales, its scale). A quantized cache's row is divided by its
// scales first (DivideByScales).
void StoreRow(const TensorView& dst, KvScales layout, const TensorView& scale, int64_t page,
              int64_t h, int64_t offset, int64_t dim, float* HWY_RESTRICT buffer) {
  const int64_t at = dst.Offset(page, h, offset, 0), stride = dst.stride[3];
  if (IsBlockDtype(dst.dtype)) {  // ggml's reference quantizers (blocks.cc)
    QuantizeBlocks(dst.dtype, buffer, dim, const_cast<unsigned char*>(dst.BytesAt(at)));
    return;
  }
  if (dst.dtype == Dtype::kI4) {  // nibbles, element 2i low (validation: stride 1)
    DivideByScales(layout, scale, page, h, offset, dim, kI4Max, buffer);
    RoundToInt(buffer, dim, -8.0f, 7.0f);
    unsigned char* out = const_cast<unsigned char*>(dst.BytesAt(at));
    for (int64_t d = 0; d < dim; d += 2) {
      const int lo = static_cast<int>(buffer[d]);
      const int hi = d + 1 < dim ? static_cast<int>(buffer[d + 1]) : 0;
      out[d / 2] = static_cast<unsigned char>((lo & 0xF) | (hi & 0xF) << 4);
    }
    return;
  }
  DispatchCacheDtype(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = dst.AsMutable<T>() + at;
    if constexpr (kIsQuantized<T>) {
      DivideByScales(layout, scale, page, h, offset, dim, QuantizedMax<T>(), buffer);
      if constexpr (std::is_same_v<T, int8_t>) {
        RoundToInt(buffer, dim, -127.0f, 127.0f);
        for (int64_t d = 0; d < dim; ++d) out[d * stride] = static_cast<int8_t>(buffer[d]);
      } else {
        for (int64_t d = 0; d < dim; ++d) out[d * stride] = FloatToFp8<T>(buffer[d]);
      }
    } else {
      for (int64_t d = 0; d < dim; ++d) FromFloat(buffer[d], &out[d * stride]);
    }
  });
}

void WriteToken(const KvWriteProblem& p, int64_t t, float* buffer) {
  const KvCacheView& c = p.cache;
  const int64_t page = p.slot[t] / c.page_size, offset = p.slot[t] % c.page_size;
  for (int64_t h = 0; h < c.kv_heads; ++h) {
    LoadRow(p.k_new, t, h, c.head_dim, buffer);
    StoreRow(c.k, c.k_scales, c.k_scale, page, h, offset, c.head_dim, buffer);
    LoadRow(p.v_new, t, h, c.value_dim, buffer);
    StoreRow(c.v, c.v_scales, c.v_scale, page, h, offset, c.value_dim, buffer);
  }
}

constexpr KvWriteKernels kKvWriteKernels = {HWY_TARGET, kLanes, &WriteToken};

const KvWriteKernels* GetKvWriteKernelTable() { return &kKvWriteKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetKvWriteKernelTable);

const KvWriteKernels& GetKvWriteKernels() {
  static const KvWriteKernels* const kernels =
      PickKernels(HWY_DISPATCH_TABLE(GetKvWriteKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
