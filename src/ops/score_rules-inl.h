// SPDX-License-Identifier: Apache-2.0
//
// The vector side of the score rules (score_rules.h has the scalar side),
// per target: K/V elements of any storage dtype widened to float vectors,
// and the test for non-finite values that decides whether a P . V pass must
// skip zero probabilities.

#if defined(HWYATTN_SRC_OPS_SCORE_RULES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#undef HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#else
#define HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "hwy/highway.h"
#include "src/ops/convert.h"
#include "src/ops/score_rules.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One vector of floats from p[0, lanes): F32 as is, F16 and BF16 widened
// (exactly) on load, so that half-precision K/V are read in place.
template <typename T, class DF = hn::ScalableTag<float>>
HWY_INLINE hn::Vec<DF> LoadWide(const T* HWY_RESTRICT p) {
  const DF df;
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    using H = std::conditional_t<std::is_same_v<T, F16>, hwy::float16_t, hwy::bfloat16_t>;
    const hn::Rebind<H, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const H*>(p)));
  }
}

// Whether keys x value_dim values of V (rows ldv apart) are all finite.
// Masking (causal, windows, a mask tensor) gives some rows a probability of
// exactly 0 at keys that other rows see; where such a key's V holds a NaN or
// an infinity, P . V must skip the zero probabilities (0 * NaN would reach a
// row that never attends to it). x * 0 is NaN exactly when x is a NaN or an
// infinity: one FMA per vector.
template <typename T>
bool ValuesFinite(const T* HWY_RESTRICT v, size_t keys, int64_t ldv, size_t value_dim) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const size_t dv_vec = value_dim / lanes * lanes;
  auto acc = hn::Zero(df);
  float tail = 0.0f;
  for (size_t j = 0; j < keys; ++j) {
    const T* row = v + static_cast<int64_t>(j) * ldv;
    for (size_t dv = 0; dv < dv_vec; dv += lanes) acc = hn::MulAdd(LoadWide(row + dv), hn::Zero(df), acc);
    for (size_t dv = dv_vec; dv < value_dim; ++dv) tail += ToFloat(row[dv]) * 0.0f;
  }
  return hn::AllFalse(df, hn::IsNaN(acc)) && tail == 0.0f;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_SCORE_RULES_INL_H_ toggle
