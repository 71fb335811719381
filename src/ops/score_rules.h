// SPDX-License-Identifier: Apache-2.0
//
// The scalar rules every attention kernel shares (the vector ones are in
// score_rules-inl.h; which keys a row may see by position is
// SdpaProblem::VisibleKeys): scores live in log2 units (the query is
// pre-multiplied by scale * log2(e), so exp(x) becomes 2^x), how the
// caller's mask enters a score, the lse of a row and its end (RowInverse,
// RowLse, with a sink), the polynomials behind 2^x (the vector Exp2 in
// softmax-inl.h) and tanh (tanh-inl.h); and the scaled query row that the
// row-wise kernels (decode, small) start from.
#ifndef HWYATTN_SRC_OPS_SCORE_RULES_H_
#define HWYATTN_SRC_OPS_SCORE_RULES_H_

#include <float.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>

#include "src/sdpa_problem.h"
#include "src/ops/convert.h"

namespace hwyattn {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;

// Score (log2 units) plus an additive mask value (natural units). -inf
// blocks; a key blocked already (causal) stays blocked whatever the mask
// holds, NaN included; finite values move to log2 units clamped to +-FLT_MAX,
// so a large finite mask (-FLT_MAX) stays finite instead of overflowing to
// -inf: a row masked only by such values still has a softmax.
inline float MaskedScore(float score, float bias) {
  return (bias == -INFINITY || score == -INFINITY)
             ? -INFINITY
             : score + std::min(std::max(bias * kLog2e, -FLT_MAX), FLT_MAX);
}

// Calls body(m) with the caller's mask as a pointer to its elements: const
// uint8_t* (BOOL), const F16* or const float*. The one home of the mask's
// dtype switch, made once, outside the loops.
template <class Body>
inline void WithMaskElements(const TensorView& mask, const Body& body) {
  if (mask.dtype == Dtype::kBool) {
    body(mask.As<uint8_t>());
  } else if (mask.dtype == Dtype::kF16) {
    body(mask.As<F16>());
  } else {
    body(mask.As<float>());
  }
}

// The additive bias of a mask element (natural units, MaskedScore adds it):
// F32 as is, F16 widened exactly, BOOL 0 (kept) or -inf (blocked).
inline float MaskBias(float m) { return m; }
inline float MaskBias(F16 m) { return ToFloat(m); }
inline float MaskBias(uint8_t m) { return m != 0 ? 0.0f : -INFINITY; }

// Whether a mask element blocks its key (MaskBias is -inf), read from its
// bits: F16 -inf is 0xFC00.
inline bool MaskBlocks(float m) { return m == -INFINITY; }
inline bool MaskBlocks(F16 m) { return m.bits == 0xFC00u; }
inline bool MaskBlocks(uint8_t m) { return m == 0; }

// Narrows keys [*first, *end) to those from the first to the last that the
// mask row whose key 0 is element `at` does not block (*first == *end when
// it blocks them all). Blocked keys stay blocked whatever their scores
// (MaskedScore), so the kernels need not compute the keys cut off, and skip
// the key tiles and chunks that no row sees: an engine's masks (ggml's,
// which hold the causal triangle, the sliding window and the padding of the
// cache) then cost what causal and windows do. A scan from both ends, which
// stops at the first key seen.
inline void MaskRowSpan(const TensorView& mask, int64_t at, int64_t* first, int64_t* end) {
  const int64_t step = mask.stride[3];
  WithMaskElements(mask, [&](const auto* m) {
    int64_t lo = *first, hi = *end;
    while (lo < hi && MaskBlocks(m[at + lo * step])) ++lo;
    while (hi > lo && MaskBlocks(m[at + (hi - 1) * step])) --hi;
    *first = lo;
    *end = hi;
  });
}

// Calls body(rule) with rule(score, at) = the score (log2 units) under the
// caller's mask element at offset `at`: MaskedScore(score, MaskBias(m[at])).
// (The prefill kernel applies the same rule a vector at a time:
// MaskBiases and MaskedScores, score_rules-inl.h.)
template <class Body>
inline void WithMaskRule(const TensorView& mask, const Body& body) {
  WithMaskElements(mask, [&](const auto* m) {
    body([m](float score, int64_t at) { return MaskedScore(score, MaskBias(m[at])); });
  });
}

// The natural-log lse of a row from its running max m (log2 units) and
// denominator l (relative to 2^m): -inf for a row that saw no key (l == 0).
inline float LseFromLog2(float m, float l) { return l == 0.0f ? -INFINITY : (m + log2f(l)) * kLn2; }

// How a row ends, from its running max m (log2 units, -FLT_MAX if it saw no
// key) and denominator l (relative to 2^m): out = O * RowInverse and
// lse = RowLse (computed only when asked for: a log per row is a visible
// part of a tiny call). With a sink (its logit in log2 units, -inf = none)
// the denominator is l + 2^(sink - m): a row that saw no key gets zeros and
// lse = the sink. A huge sink makes 2^(sink - m) infinite and the row zeros
// (its true values underflow too). A NaN l (NaN input) stays NaN rather than
// being hidden.
inline float RowInverse(float m, float l, float sink) {
  const float denominator = sink == -INFINITY ? l : l + exp2f(sink - m);
  return denominator == 0.0f ? 0.0f : 1.0f / denominator;
}
inline float RowLse(float m, float l, float sink) {
  if (sink == -INFINITY) return LseFromLog2(m, l);
  // log(l 2^m + 2^sink), scaled by the larger of the two maxima.
  const float top = std::max(m, sink);
  return LseFromLog2(top, l * exp2f(m - top) + exp2f(sink - top));
}

// RowInverse and RowLse of a row whose scores were computed `shift` (log2
// units) below their definition (ALiBi measured from another origin,
// ScoreModifiers::AlibiOrigin): the sink is compared in the same frame and
// the lse gets the shift back.
struct RowEnd {
  float inverse, lse;
  RowEnd(float m, float l, float sink, float shift, bool want_lse)
      : inverse(RowInverse(m, l, sink - shift)),
        lse(want_lse ? RowLse(m, l, sink - shift) + shift * kLn2 : 0.0f) {}
};

// The sink of query head h in log2 units, -inf without sinks.
inline float SinkLog2(const SdpaProblem& p, int64_t head) {
  return p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
}

// Query row (b, head, pos) of p as floats times `scale` (scale * log2(e)
// puts its scores in log2 units), into dst[0, head_dim); with `bf16`, each
// element rounded to bf16 (RoundToBf16) before the scale.
HWY_INLINE void ScaledQueryRow(const SdpaProblem& p, int64_t b, int64_t head, int64_t pos,
                               float scale, float* __restrict__ dst, bool bf16 = false) {
  const int64_t q0 = p.q.Offset(b, head, pos, 0), sd = p.q.stride[3];
  DispatchFloatDtype(p.q.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* q = p.q.As<T>() + q0;
    for (int64_t d = 0; d < p.head_dim; ++d) {
      const float x = ToFloat(q[d * sd]);
      dst[d] = (bf16 ? RoundToBf16(x) : x) * scale;
    }
  });
}

// 2^f for f in [-0.5, 0.5]: degree-5 relative-error fit with p(0) = 1,
// highest degree first (Horner order). Max relative error 3e-7.
constexpr float kExp2Poly[6] = {1.326472731307149e-3f, 9.671512991189957e-3f,
                                5.550733581185341e-2f, 2.4022242426872253e-1f,
                                6.931470036506653e-1f, 1.0f};

// (e^(2r) - 1) / 2 = r + r^2 P(r) for |r| <= ln2/4, used by the vector Tanh
// (tanh-inl.h) for expm1(-2|x|): P is degree 4, highest degree first (Horner
// order). Fitted in float64 numpy, on |r| <= 0.1734 (ln2/4 and a margin), as
// the minimax of the relative error |(r + r^2 P(r)) / ((e^(2r) - 1) / 2) - 1|
// by Lawson's iteratively reweighted least squares on 4000 Chebyshev nodes
// (float64 optimum 1.32e-8); then rounded to float one coefficient at a time
// from the constant term up, the higher ones refitted after each rounding:
// max relative error 1.37e-8 with these float values.
constexpr float kTanhExpm1Poly[5] = {4.438617080e-02f, 1.338602453e-01f, 3.333394825e-01f,
                                     6.666618586e-01f, 9.999999404e-01f};

// |x| beyond which Tanh computes tanh(kTanhClamp), exactly 1 in float (tanh
// rounds to 1 from 9.0109 on); it keeps +-inf and huge inputs from turning
// into inf - inf.
constexpr float kTanhClamp = 10.0f;

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_SCORE_RULES_H_
