// SPDX-License-Identifier: Apache-2.0
//
// Vector tanh for float lanes, per target: the logit softcap (Gemma 2, ONNX
// Attention) turns every scaled score s into c * tanh(s / c); in the
// kernels' log2 units that is c2 * tanh(s2 / c2) with c2 = c * log2(e).

#if defined(HWYATTN_SRC_OPS_TANH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_TANH_INL_H_
#undef HWYATTN_SRC_OPS_TANH_INL_H_
#else
#define HWYATTN_SRC_OPS_TANH_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "src/ops/score_rules.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// tanh(x) for float lanes, one formula over the whole range (no branches to
// blend): with em = expm1(-2|x|) in (-1, 0],
//   tanh(x) = -sign(x) * em / (2 + em).
// expm1 keeps its relative accuracy as x -> 0 (no 1 - e^(-2|x|) cancellation)
// and the quotient tends to (1 - e) / (1 + e) as |x| grows, so one formula is
// accurate at both ends.
//
// Range reduction: -2|x| = n ln2 + 2r with n = round(-2|x| log2(e)) and
// |r| <= ln2/4. One FMA, -|x| * 2log2(e) + (1.5 * 2^23 + 128), rounds the
// exact product to an integer and leaves n + 128 in the low mantissa bits;
// a shift moves them into the exponent field: t2 = 2^(n+1) with no convert.
// r = -|x| - n * ln2/2 is one more FMA (with float(ln2/2), off by 1e-9;
// |n| <= 29, and the error this puts on e^(-2|x|) is negligible next to 1).
// Then (e^(2r) - 1) / 2 = r + r^2 P(r), P the degree-4 minimax polynomial
// kTanhExpm1Poly (score_rules.h): em = (2^n - 1) + 2^(n+1) (r + r^2 P(r)),
// and 2 + em = (2^n + 1) + 2^(n+1) (...) from the same product, rather than
// em + 2, whose two roundings cost up to half an ulp more near |x| = 4.
//
// Saturation: |x| is clamped to kTanhClamp = 10 (the clamp keeps +-inf and
// huge values from making inf - inf); em is then -1 and 2 + em is 1 exactly.
// The result is exactly +-1 for every |x| >= 8.4911, which includes every
// |x| >= 9.0109, where tanh rounds to 1 (below that it is within the bound).
//
// Accuracy, measured over every float against tanh in double (error in
// ulps of the float grid at the exact value): max 1.97 ulp on AVX3 and AVX2;
// 2.02 ulp on SSE4, SCALAR and EMU128, where Highway's MulAdd is a multiply
// and an add (two roundings). tests/tanh_test.cc asserts 2.0 and 2.05 ulp.
// Exact: tanh(+-0) = +-0; x itself for |x| <= 2^-25, subnormals included
// (tanh rounds to x up to |x| ~ 2^-12; in between the result is within 1.34
// ulp); +-inf gives +-1. Odd bit for bit (everything is computed from -|x|,
// and the sign copied back); NaN gives NaN. Measured non-decreasing over
// every pair of consecutive floats, on every target.
//
// Cost on AVX3: 18 operations per vector: or + max (-|x|, clamped), FMA +
// shift + sub + FMA (n, 2^(n+1), r), mul + 5 FMAs (e^(2r) - 1), 4 FMAs (em,
// 2 + em), div, ternlog (copy the sign); Exp2 is 9, and takes about half
// the time. The division is a plain vdivps: rcp14 with a Newton-Raphson
// correction (4 operations, same accuracy) ran 12-30% slower.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Tanh(DF df, VF x) {
  const hn::RebindToUnsigned<DF> du;
  VF h = hn::Or(x, hn::SignBit(df));  // -|x|
  const VF lower = hn::Set(df, -kTanhClamp);
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  // maxps returns its second operand when either is NaN, so NaN stays NaN.
  h = hn::Max(lower, h);
#else
  // Max may drop NaN here; a compare is false for NaN, which then stays.
  h = hn::IfThenElse(hn::Lt(h, lower), lower, h);
#endif
  // n = round(h * 2 log2(e)); the magic sum's low mantissa bits hold
  // n + 128, and shifting them into the exponent field gives t2 = 2^(n+1).
  const VF magic = hn::Set(df, 12583040.0f);  // 1.5 * 2^23 + 128
  const VF biased = hn::MulAdd(h, hn::Set(df, 2.0f * kLog2e), magic);
  const VF t2 = hn::BitCast(df, hn::ShiftLeft<23>(hn::BitCast(du, biased)));
  const VF n = hn::Sub(biased, magic);
  // -2|x| = n ln2 + 2r, |r| <= ln2/4.
  const VF r = hn::NegMulAdd(n, hn::Set(df, 0.5f * kLn2), h);
  // (e^(2r) - 1) / 2 = r + r^2 P(r).
  VF p = hn::Set(df, kTanhExpm1Poly[0]);
  HWY_UNROLL(4)
  for (size_t i = 1; i < 5; ++i) p = hn::MulAdd(p, r, hn::Set(df, kTanhExpm1Poly[i]));
  const VF q = hn::MulAdd(hn::Mul(r, r), p, r);
  // em = 2^n e^(2r) - 1 = (2^n - 1) + 2^(n+1) q, and 2 + em likewise.
  const VF half = hn::Set(df, 0.5f), one = hn::Set(df, 1.0f);
  const VF em = hn::MulAdd(t2, q, hn::MulSub(t2, half, one));
  const VF den = hn::MulAdd(t2, q, hn::MulAdd(t2, half, one));
  return hn::CopySign(hn::Div(em, den), x);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_TANH_INL_H_ toggle
