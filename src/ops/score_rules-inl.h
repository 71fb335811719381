// SPDX-License-Identifier: Apache-2.0
//
// The vector side of the score rules (score_rules.h has the scalar side),
// per target: K/V elements of any storage dtype widened to float vectors,
// the caller's mask a vector at a time, the test for non-finite values that
// decides whether a P . V pass must skip zero probabilities, and the score
// modifiers (softcap, ALiBi).

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
#include "src/ops/convert.h"
#include "src/ops/score_rules.h"
#include "src/ops/tanh-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway 1.0.3 widens F16 in software where the target has no conversion
// instruction (x86 below AVX2, and the portable EMU128 and SCALAR: every
// target of ppc64el and s390x) and takes the infinities and NaNs there
// (exponent 31) for numbers of 2^16 and more. LoadWide mends those lanes.
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || \
    HWY_TARGET == HWY_SCALAR
constexpr bool kSoftwareF16 = true;
#else
constexpr bool kSoftwareF16 = false;
#endif

// One vector of floats from p[0, lanes): F32 as is, F16 and BF16 widened
// (exactly, infinities and NaNs too) on load, so that half-precision K/V are
// read in place; a quantized cache's int8 or fp8 numbers converted (exactly;
// its scales are the caller's).
template <typename T, class D = DF>
HWY_INLINE hn::Vec<D> LoadWide(const T* HWY_RESTRICT p) {
  const D df;
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<int8_t, D> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  } else if constexpr (kIsFp8<T> && !kSoftwareF16) {
    // As binary16 bits, widened by the target's F16 conversion: E5M2 is the
    // top byte of a binary16; E4M3's sign to bit 15 and exponent and mantissa
    // to bits 13..7 make the binary16 2^-8 times its value (subnormals
    // included), S.1111.111 an all-ones exponent (NaN).
    const hn::Rebind<uint16_t, D> d16;
    const auto x = hn::PromoteTo(
        d16, hn::LoadU(hn::Rebind<uint8_t, D>(), reinterpret_cast<const uint8_t*>(p)));
    const hn::Rebind<hwy::float16_t, D> dh;
    if constexpr (std::is_same_v<T, F8E5M2>) {
      return hn::PromoteTo(df, hn::BitCast(dh, hn::ShiftLeft<8>(x)));
    } else {
      const auto mag = hn::And(x, hn::Set(d16, uint16_t{0x7F}));
      auto h =
          hn::Or(hn::ShiftLeft<8>(hn::And(x, hn::Set(d16, uint16_t{0x80}))), hn::ShiftLeft<7>(mag));
      h = hn::Or(h, hn::IfThenElseZero(hn::Eq(mag, hn::Set(d16, uint16_t{0x7F})),
                                       hn::Set(d16, uint16_t{0x7C00})));
      return hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, h)), hn::Set(df, 256.0f));
    }
  } else if constexpr (kIsFp8<T>) {
    // Without an F16 conversion: the scalar ToFloat's rule (convert.h) per
    // lane: rebias a normal number's exponent, scale a subnormal's integer,
    // then infinities/NaNs.
    using F = Fp8Format<T>;
    constexpr int kM = F::kMantissa;
    const hn::RebindToSigned<D> di;  // signed: integer Lt and Gt on every target
    const auto x = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(),
                                                 hn::LoadU(hn::Rebind<uint8_t, D>(),
                                                           reinterpret_cast<const uint8_t*>(p))));
    const auto mag = hn::And(x, hn::Set(di, 0x7F));
    const auto normal = hn::Add(hn::ShiftLeft<23 - kM>(mag), hn::Set(di, (127 - F::kBias) << 23));
    const auto subnormal =
        hn::Mul(hn::ConvertTo(df, mag), hn::Set(df, std::ldexp(1.0f, 1 - F::kBias - kM)));
    auto v = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag, hn::Set(di, 1 << kM))), subnormal,
                            hn::BitCast(df, normal));
    // E5M2: exponent all ones (mag >= 0x7C); E4M3: mag == 0x7F.
    const auto special = hn::RebindMask(
        df, hn::Gt(mag, hn::Set(di, F::kIeee ? (0x7F & ~((1 << kM) - 1)) - 1 : 0x7E)));
    const auto inf_nan = hn::Or(hn::Set(di, 0x7F800000),
                                hn::ShiftLeft<23 - kM>(hn::And(mag, hn::Set(di, (1 << kM) - 1))));
    v = hn::IfThenElse(special, hn::BitCast(df, inf_nan), v);
    return hn::Or(v, hn::BitCast(df, hn::ShiftLeft<24>(hn::And(x, hn::Set(di, 0x80)))));
  } else if constexpr (std::is_same_v<T, F16> && kSoftwareF16) {
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::PromoteTo(
        du, hn::LoadU(hn::Rebind<uint16_t, D>(), reinterpret_cast<const uint16_t*>(p)));
    const auto exponent = hn::Set(du, 0x7C00u);
    const auto special = hn::Eq(hn::And(bits, exponent), exponent);
    // sign | all-ones exponent | the mantissa's 10 bits at the top (ToFloat).
    const auto inf_nan = hn::Or(
        hn::Or(hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u))), hn::Set(du, 0x7F800000u)),
        hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x3FFu))));
    const hn::Rebind<hwy::float16_t, D> dh;
    const auto widened =
        hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
    return hn::IfThenElse(hn::RebindMask(df, special), hn::BitCast(df, inf_nan), widened);
  } else {
    using H = std::conditional_t<std::is_same_v<T, F16>, hwy::float16_t, hwy::bfloat16_t>;
    const hn::Rebind<H, D> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const H*>(p)));
  }
}

// RoundToBf16 (convert.h) per lane, the same bits: nearest bf16, ties to
// even, as floats; a NaN lane becomes the quiet NaN the scalar form gives.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundToBf16(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, x);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), odd));
  const auto nan = hn::Or(u, hn::Set(du, 0x00400000u));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), nan, rounded);
  return hn::BitCast(df, hn::And(bits, hn::Set(du, 0xFFFF0000u)));
}

// LoadWide of a T row read as bf16 products' operands (Bf16Operand, convert.h):
// each lane rounded to bf16.
template <typename T, class D = DF>
HWY_INLINE hn::Vec<D> LoadWide(const Bf16Operand<T>* HWY_RESTRICT p) {
  return RoundToBf16(D(), LoadWide<T, D>(reinterpret_cast<const T*>(p)));
}

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
