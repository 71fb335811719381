// SPDX-License-Identifier: Apache-2.0
//
// Vector exp2 and the online-softmax update of one score tile, per target.
//
// Scores are kept in the log2 domain (the query is pre-multiplied by
// scale * log2(e)), so exp(s - m) becomes Exp2(s2 - m2) with no multiply.
// Tiles are transposed, S^T[key][query]: each vector holds one key's score for
// several queries, so the per-query running max and sum are element-wise
// vector operations; nothing needs a horizontal reduction.

#if defined(HWYATTN_SRC_OPS_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_SOFTMAX_INL_H_
#undef HWYATTN_SRC_OPS_SOFTMAX_INL_H_
#else
#define HWYATTN_SRC_OPS_SOFTMAX_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "src/ops/registers-inl.h"
#include "src/ops/score_rules.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 2^x for float lanes: x = n + f with n = round(x), f in [-0.5, 0.5], and
// 2^f by the degree-5 polynomial kExp2Poly (score_rules.h), in two stages
// (Exp2Reduce, then Exp2Finish) so that a loop can issue the range
// reduction of its next vectors before the polynomial of the current ones.
// Accuracy: max relative error 3e-7 on [-126, 127] (tests/softmax_test.cc
// checks it against std::exp2 per target). Range: -inf and every x < -150
// return exactly 0 (on AVX-512 every x < -126.5: results below the smallest
// normal float are flushed to 0), which the softmax relies on for blocked
// keys (a fully masked row must have a zero denominator); x > 127 is not
// supported (softmax arguments are <= 0). NaN returns NaN.
//
// On AVX-512, scalef applies 2^n in one instruction (XNNPACK's "rr1-p5-
// scalef"): 9 operations per vector instead of 14 with the exponent-field
// construction the other targets use.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE void Exp2Reduce(DF df, VF x, VF& n, VF& f) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  // maxps returns its second operand when either is NaN, so NaN stays NaN.
  constexpr float kLowest = HWY_TARGET <= HWY_AVX3 ? -160.0f : -127.0f;
  x = hn::Max(hn::Set(df, kLowest), x);
#else
  // Max may drop NaN here; a compare is false for NaN, which then stays.
  const VF lower = hn::Set(df, -127.0f);
  x = hn::IfThenElse(hn::Lt(x, lower), lower, x);
#endif
  n = hn::Round(x);
  f = hn::Sub(x, n);
}

template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Exp2Finish(DF df, VF n, VF f) {
  VF p = hn::Set(df, kExp2Poly[0]);
  HWY_UNROLL(5)
  for (size_t i = 1; i < 6; ++i) p = hn::MulAdd(p, f, hn::Set(df, kExp2Poly[i]));
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
  // p * 2^n for n >= -126 (or NaN); lanes with n < -126 are exactly +0
  // without being computed: a scalef whose result underflows takes a
  // microcode assist on Intel cores (~100+ cycles), and blocked scores
  // (-inf) are exactly such lanes: before this, a prefill with a 1-key window
  // spent most of its time there.
  const __mmask16 normal = _mm512_cmp_ps_mask(n.raw, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ);
  return VF{_mm512_maskz_scalef_ps(normal, p.raw, n.raw)};
#else
  // 2^n from the exponent field; n = -127 gives the bit pattern of +0.0.
  const hn::RebindToSigned<DF> di;
  const VF scale =
      hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  return hn::Mul(p, scale);
#endif
}

template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Exp2(DF df, VF x) {
  VF n, f;
  Exp2Reduce(df, x, n, f);
  return Exp2Finish(df, n, f);
}

// The new running max of each query column: m_new = max(m, max_rows s) over
// a tile of `rows` keys (rows of S^T, `ld` floats apart) and the first `cols`
// queries (a multiple of the vector). The fused kernel gets it for free while
// the scores are still in registers; this pass is for scores that changed
// after that (an additive or boolean mask).
template <class DF>
HWY_INLINE void TileMax(DF df, const float* HWY_RESTRICT s, size_t rows, size_t ld, size_t cols,
                        const float* HWY_RESTRICT m, float* HWY_RESTRICT m_new) {
  using VF = hn::Vec<DF>;
  const size_t N = hn::Lanes(df);
  for (size_t c = 0; c < cols; c += N) {
    VF mx0 = hn::Load(df, m + c);
    VF mx1 = mx0;
    size_t r = 0;
    for (; r + 2 <= rows; r += 2) {
      mx0 = hn::Max(mx0, hn::Load(df, s + r * ld + c));
      mx1 = hn::Max(mx1, hn::Load(df, s + (r + 1) * ld + c));
    }
    if (r < rows) mx0 = hn::Max(mx0, hn::Load(df, s + r * ld + c));
    hn::Store(hn::Max(mx0, mx1), df, m_new + c);
  }
}

// Where SoftmaxTileUpdate puts the probabilities: rows [r, r + count) of
// column block c (r even), P as fp32, the first `count` of a pack of
// kSoftmaxGroup vectors (count <= kSoftmaxGroup; registers-inl.h). The
// default stores them in place (the tile becomes P^T); the bf16 products
// pass an emitter that stores them rounded, and pairs them too
// (flash_attention.cc), so the tile is written once.
constexpr size_t kSoftmaxGroup = 4;
struct StoreProbabilities {
  float* HWY_RESTRICT s;
  size_t ld;
  template <class DF, class... VF>
  HWY_INLINE void operator()(DF df, size_t r, size_t c, size_t count, const VF&... p) const {
    Unroll<sizeof...(VF)>([&](auto i) HWYATTN_INLINE_LAMBDA {
      if (i < count) hn::Store(Nth<i>(p...), df, s + (r + i) * ld + c);
    });
  }
};

// Online-softmax update for a tile of `rows` keys (rows of S^T, `ld` floats
// apart) and the first `cols` queries (lanes; a multiple of the vector), given
// m_new = max(m, max_rows s) per query column (see TileMax): alpha =
// 2^(m - m_new), p = 2^(s - m_new) given to `emit` (StoreProbabilities: in
// place, the tile becomes P^T), l <- l * alpha + sum_rows p, m <- m_new.
// Writes alpha for rescaling the output accumulator. m must start finite
// (e.g. -FLT_MAX): blocked scores are -inf, and -inf - (-inf) would be NaN.
//
// The exps are software-pipelined, kSoftmaxGroup rows at a time: the range
// reduction of the next group is issued before the polynomial of the
// current one. Each exp is a chain of ~10 dependent operations (~35 cycles);
// written one after another, the chains fill the out-of-order scheduler with
// waiting operations (pipelined: 17% fewer cycles per vector on a 64 x 48
// tile).
template <class DF, class Emit>
HWY_INLINE void SoftmaxTileUpdate(DF df, float* HWY_RESTRICT s, size_t rows, size_t ld, size_t cols,
                                  const float* HWY_RESTRICT m_new, float* HWY_RESTRICT m,
                                  float* HWY_RESTRICT l, float* HWY_RESTRICT alpha,
                                  const Emit& emit) {
  using VF = hn::Vec<DF>;
  constexpr size_t kGroup = kSoftmaxGroup;
  const size_t N = hn::Lanes(df);
  const size_t group_rows = rows / kGroup * kGroup;
  for (size_t c = 0; c < cols; c += N) {
    const VF mn = hn::Load(df, m_new + c);
    const VF a = Exp2(df, hn::Sub(hn::Load(df, m + c), mn));
    // The group's sums, then the reduced n and f of the next group's exps.
    WithRegisters<3 * kGroup>(hn::Zero(df), [&](auto&... v) HWYATTN_INLINE_LAMBDA {
      const auto reduce = [&](size_t r) HWYATTN_INLINE_LAMBDA {
        Unroll<kGroup>([&](auto i) HWYATTN_INLINE_LAMBDA {
          Exp2Reduce(df, hn::Sub(hn::Load(df, s + (r + i) * ld + c), mn), Nth<kGroup + i>(v...),
                     Nth<2 * kGroup + i>(v...));
        });
      };
      if (group_rows != 0) reduce(0);
      for (size_t r = 0; r < group_rows; r += kGroup) {
        WithRegistersFrom<2 * kGroup>(
            [&](auto i) HWYATTN_INLINE_LAMBDA { return Nth<kGroup + i>(v...); },
            [&](auto&... now) HWYATTN_INLINE_LAMBDA {
              if (r + kGroup < group_rows) reduce(r + kGroup);
              WithRegistersFrom<kGroup>(
                  [&](auto i) HWYATTN_INLINE_LAMBDA {
                    const VF p = Exp2Finish(df, Nth<i>(now...), Nth<kGroup + i>(now...));
                    Nth<i>(v...) = hn::Add(Nth<i>(v...), p);
                    return p;
                  },
                  [&](auto&... p) HWYATTN_INLINE_LAMBDA { emit(df, r, c, kGroup, p...); });
            });
      }
      if (group_rows < rows) {
        auto& sum0 = Nth<0>(v...);
        WithRegisters<kGroup>(hn::Zero(df), [&](auto&... p) HWYATTN_INLINE_LAMBDA {
          Unroll<kGroup - 1>([&](auto i) HWYATTN_INLINE_LAMBDA {
            if (group_rows + i < rows) {
              Nth<i>(p...) = Exp2(df, hn::Sub(hn::Load(df, s + (group_rows + i) * ld + c), mn));
              sum0 = hn::Add(sum0, Nth<i>(p...));
            }
          });
          emit(df, group_rows, c, rows - group_rows, p...);
        });
      }
      const VF total =
          hn::Add(hn::Add(Nth<0>(v...), Nth<1>(v...)), hn::Add(Nth<2>(v...), Nth<3>(v...)));
      hn::Store(mn, df, m + c);
      hn::Store(a, df, alpha + c);
      hn::Store(hn::MulAdd(hn::Load(df, l + c), a, total), df, l + c);
    });
  }
}

template <class DF>
HWY_INLINE void SoftmaxTileUpdate(DF df, float* HWY_RESTRICT s, size_t rows, size_t ld, size_t cols,
                                  const float* HWY_RESTRICT m_new, float* HWY_RESTRICT m,
                                  float* HWY_RESTRICT l, float* HWY_RESTRICT alpha) {
  SoftmaxTileUpdate(df, s, rows, ld, cols, m_new, m, l, alpha, StoreProbabilities{s, ld});
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_SOFTMAX_INL_H_ toggle
