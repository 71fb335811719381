// SPDX-License-Identifier: Apache-2.0
//
// The vector side of the score rules (score_rules.h has the scalar side),
// per target: the caller's mask a vector at a time, the test for
// non-finite values that decides whether a P . V pass must skip zero
// probabilities, and the score modifiers (softcap, ALiBi). K/V elements are
// read through convert-inl.h's LoadWide.

#if defined(HWYATTN_SRC_OPS_SCORE_RULES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#undef HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#else
#define HWYATTN_SRC_OPS_SCORE_RULES_INL_H_
#endif

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "hwy/highway.h"
#include "src/ops/convert-inl.h"
#include "src/ops/convert.h"
#include "src/ops/score_rules.h"
#include "src/ops/tanh-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// MaskBias (score_rules.h) of hn::Lanes(DF) contiguous mask elements: F32
// and F16 as LoadWide reads them, BOOL 0 (kept) or -inf.
template <typename M>
HWY_INLINE hn::Vec<DF> LoadMaskBiases(const M* HWY_RESTRICT m) {
  const DF df;
  if constexpr (std::is_same_v<M, uint8_t>) {
    const hn::Rebind<uint32_t, DF> du;
    const hn::Rebind<uint8_t, DF> d8;
    const auto blocked = hn::Eq(hn::PromoteTo(du, hn::LoadU(d8, m)), hn::Zero(du));
    return hn::IfThenElseZero(hn::RebindMask(df, blocked), hn::Set(df, -INFINITY));
  } else {
    return LoadWide(m);
  }
}

// The biases of `keys` mask elements from m, `step` apart, into out[0, keys):
// a contiguous run a vector at a time.
template <typename M>
HWY_INLINE void MaskBiases(const M* HWY_RESTRICT m, int64_t step, size_t keys,
                           float* HWY_RESTRICT out) {
  size_t j = 0;
  if (step == 1) {
    for (; j + kLanes <= keys; j += kLanes) hn::StoreU(LoadMaskBiases(m + j), DF(), out + j);
  }
  for (; j < keys; ++j) out[j] = MaskBias(m[static_cast<int64_t>(j) * step]);
}

// MaskedScore (score_rules.h) per lane, the same value: -inf where the bias
// or the score is -inf, else the score plus the bias in log2 units clamped
// to +-FLT_MAX (a NaN bias stays NaN, as std::min/max leave it).
template <class D>
HWY_INLINE hn::Vec<D> MaskedScores(D d, hn::Vec<D> score, hn::Vec<D> bias) {
  const auto neg_inf = hn::Set(d, -INFINITY);
  const auto x = hn::Mul(bias, hn::Set(d, kLog2e));
  const auto clamped = hn::IfThenElse(
      hn::IsNaN(x), x, hn::Min(hn::Max(x, hn::Set(d, -FLT_MAX)), hn::Set(d, FLT_MAX)));
  const auto blocked = hn::Or(hn::Eq(bias, neg_inf), hn::Eq(score, neg_inf));
  return hn::IfThenElse(blocked, neg_inf, hn::Add(score, clamped));
}

// s[j] = MaskedScore(s[j], MaskBias(m[j * step])) for j < keys: the caller's
// mask added to a row of scores, a contiguous run a vector at a time.
template <typename M>
HWY_INLINE void AddMaskRow(const M* HWY_RESTRICT m, int64_t step, size_t keys,
                           float* HWY_RESTRICT s) {
  const DF df;
  size_t j = 0;
  if (step == 1) {
    for (; j + kLanes <= keys; j += kLanes)
      hn::StoreU(MaskedScores(df, hn::LoadU(df, s + j), LoadMaskBiases(m + j)), df, s + j);
  }
  for (; j < keys; ++j) s[j] = MaskedScore(s[j], MaskBias(m[static_cast<int64_t>(j) * step]));
}

// Whether keys x value_dim values of V (rows ldv apart) are all finite.
// Masking (causal, windows, a mask tensor) gives some rows a probability of
// exactly 0 at keys that other rows see; where such a key's V holds a NaN or
// an infinity, P . V must skip the zero probabilities (0 * NaN would reach a
// row that never attends to it). x * 0 is NaN exactly when x is a NaN or an
// infinity: one FMA per vector.
template <typename T>
bool ValuesFinite(const T* HWY_RESTRICT v, size_t keys, int64_t ldv, size_t value_dim) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const size_t dv_vec = value_dim / lanes * lanes;
  auto acc = hn::Zero(df);
  float tail = 0.0f;
  for (size_t j = 0; j < keys; ++j) {
    const T* row = v + static_cast<int64_t>(j) * ldv;
    for (size_t dv = 0; dv < dv_vec; dv += lanes)
      acc = hn::MulAdd(LoadWide(row + dv), hn::Zero(df), acc);
    for (size_t dv = dv_vec; dv < value_dim; ++dv) tail += ToFloat(row[dv]) * 0.0f;
  }
  return hn::AllFalse(df, hn::IsNaN(acc)) && tail == 0.0f;
}

// The score modifiers of a problem, in the log2 units of the scores:
// softcap (c tanh(s / c) becomes c2 tanh(s2 / c2) with c2 = c log2(e): the
// same form) and then ALiBi (slope[h] (j - p), times log2(e)). Applied to a
// score before the caller's mask and the blocking rules, which turn it into
// -inf whatever it became (hwyattn.h: scale, softcap, then ALiBi and the mask).
struct ScoreModifiers {
  bool any = false;
  float cap = 0.0f, inv_cap = 0.0f;  // 0: no softcap
  const float* slopes = nullptr;     // [Hq], natural units, or null

  explicit ScoreModifiers(const SdpaProblem& p)
      : any(p.softcap != 0.0f || p.alibi_slopes != nullptr),
        cap(p.softcap * kLog2e),
        inv_cap(p.softcap != 0.0f ? 1.0f / (p.softcap * kLog2e) : 0.0f),
        slopes(p.alibi_slopes) {}

  // Query head h's ALiBi slope in log2 units (0 without ALiBi).
  float Slope(int64_t head) const { return slopes != nullptr ? slopes[head] * kLog2e : 0.0f; }

  // The key position ALiBi's bias is measured from in the row of query
  // head `head` at position `pos` (batch b): the visible key (by position:
  // kv_len, causal, windows) whose bias slope (j - pos) is largest, so that
  // every visible key's bias is <= 0 and small near the keys that weigh
  // most. The bias as defined reaches 1e4 on long rows (a negative slope
  // looking back, or a positive one looking ahead); added to a score it
  // would take fp32's resolution of the score with it. The row's scores
  // are computed shifted by -Shift, and its end (RowEnd) adds it back.
  int64_t AlibiOrigin(const SdpaProblem& p, int64_t b, int64_t head, int64_t pos) const {
    if (slopes == nullptr) return pos;
    int64_t first, end;
    p.VisibleKeys(b, pos, &first, &end);
    if (first == end) return pos;
    return slopes[head] >= 0.0f ? end - 1 : first;
  }
  // slope (origin - pos) in log2 units: what the row's scores lack.
  float Shift(int64_t head, int64_t origin, int64_t pos) const {
    return Slope(head) * static_cast<float>(origin - pos);
  }

  // c2 tanh(x / c2) per lane.
  template <class DF>
  HWY_INLINE hn::Vec<DF> Cap(DF df, hn::Vec<DF> x) const {
    return hn::Mul(hn::Set(df, cap), Tanh(df, hn::Mul(x, hn::Set(df, inv_cap))));
  }

  // Scores s[0, keys) of one row of query head `head` whose key 0 is at
  // distance `distance0` from the row's position, in place, a vector at a
  // time (s has room for whole vectors; lanes past `keys` are left alone).
  void ApplyRow(float* HWY_RESTRICT s, int64_t keys, int64_t head, int64_t distance0) const {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const auto slope = hn::Set(df, Slope(head));
    for (int64_t j = 0; j < keys; j += lanes) {
      auto x = hn::LoadU(df, s + j);
      const auto real = hn::RebindMask(df, hn::FirstN(di, static_cast<size_t>(keys - j)));
      if (cap != 0.0f) x = hn::IfThenElse(real, Cap(df, x), x);
      // Distances fit in int32: lengths are validated to be < 2^31.
      const auto distance = hn::ConvertTo(
          df, hn::Add(hn::Set(di, static_cast<int32_t>(distance0 + j)), hn::Iota(di, 0)));
      x = hn::IfThenElse(real, hn::MulAdd(slope, distance, x), x);
      hn::StoreU(x, df, s + j);
    }
  }
};

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_SCORE_RULES_INL_H_ toggle
