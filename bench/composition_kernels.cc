// SPDX-License-Identifier: Apache-2.0
//
// composition_kernels.cc: see composition_kernels.h. exp is Highway's
// contrib Exp (hwy/contrib/math, ~1 ulp), not the library's Exp2, so the
// composed path shares nothing with the fused kernel but the matmul.

#include "bench/composition_kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/composition_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row of n visible scores (n >= 1); the rest of the row [n, cols) is zeroed.
HWY_INLINE void SoftmaxRow(float* HWY_RESTRICT s, size_t n, size_t cols, float scale) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto neg_inf = hn::Set(d, -HUGE_VALF);
  // Pass 1: the row max, two accumulators.
  auto m0 = neg_inf, m1 = neg_inf;
  size_t j = 0;
  for (; j + 2 * N <= n; j += 2 * N) {
    m0 = hn::Max(m0, hn::LoadU(d, s + j));
    m1 = hn::Max(m1, hn::LoadU(d, s + j + N));
  }
  for (; j + N <= n; j += N) m0 = hn::Max(m0, hn::LoadU(d, s + j));
  if (j < n) {
    const auto mask = hn::FirstN(d, n - j);
    m1 = hn::Max(m1, hn::IfThenElse(mask, hn::MaskedLoad(mask, d, s + j), neg_inf));
  }
  const auto vscale = hn::Set(d, scale);
  // exp(scale * s - scale * max) = exp(scale * s + bias)
  const auto bias = hn::Neg(hn::Mul(hn::MaxOfLanes(d, hn::Max(m0, m1)), vscale));
  // Pass 2: p = exp(scale * s - scale * max), stored in place, and the sum.
  auto l0 = hn::Zero(d), l1 = hn::Zero(d);
  for (j = 0; j + 2 * N <= n; j += 2 * N) {
    const auto p0 = hn::Exp(d, hn::MulAdd(hn::LoadU(d, s + j), vscale, bias));
    const auto p1 = hn::Exp(d, hn::MulAdd(hn::LoadU(d, s + j + N), vscale, bias));
    hn::StoreU(p0, d, s + j);
    hn::StoreU(p1, d, s + j + N);
    l0 = hn::Add(l0, p0);
    l1 = hn::Add(l1, p1);
  }
  for (; j + N <= n; j += N) {
    const auto p = hn::Exp(d, hn::MulAdd(hn::LoadU(d, s + j), vscale, bias));
    hn::StoreU(p, d, s + j);
    l0 = hn::Add(l0, p);
  }
  if (j < n) {
    const auto mask = hn::FirstN(d, n - j);
    const auto p = hn::IfThenElseZero(
        mask, hn::Exp(d, hn::MulAdd(hn::MaskedLoad(mask, d, s + j), vscale, bias)));
    hn::BlendedStore(p, mask, d, s + j);
    l1 = hn::Add(l1, p);
  }
  // Pass 3: normalise.
  const auto inv = hn::Div(hn::Set(d, 1.0f), hn::SumOfLanes(d, hn::Add(l0, l1)));
  for (j = 0; j + N <= n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, s + j), inv), d, s + j);
  if (j < n) {
    const auto mask = hn::FirstN(d, n - j);
    hn::BlendedStore(hn::Mul(hn::MaskedLoad(mask, d, s + j), inv), mask, d, s + j);
  }
  // The masked keys.
  for (j = n; j < cols; ++j) s[j] = 0.0f;
}

void SoftmaxRowsImpl(float* s, int64_t rows, int64_t cols, int64_t ld, float scale, bool causal) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t n = causal ? (i + 1 < cols ? i + 1 : cols) : cols;
    SoftmaxRow(s + i * ld, static_cast<size_t>(n), static_cast<size_t>(cols), scale);
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn_bench {

HWY_EXPORT(SoftmaxRowsImpl);
HWY_EXPORT(TargetNameImpl);

void SoftmaxRows(float* s, int64_t rows, int64_t cols, int64_t ld, float scale, bool causal) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRowsImpl)(s, rows, cols, ld, scale, causal);
}

const char* CompositionTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

// 32 x 32 blocks: both sides stay in L1.
void Transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kB = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kB) {
    for (int64_t c0 = 0; c0 < cols; c0 += kB) {
      const int64_t r1 = r0 + kB < rows ? r0 + kB : rows, c1 = c0 + kB < cols ? c0 + kB : cols;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

}  // namespace hwyattn_bench
#endif  // HWY_ONCE
