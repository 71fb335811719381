// SPDX-License-Identifier: Apache-2.0
//
// Tiny problems (the toy call T1: 3 tokens, 2 heads of dim 2) cost more in
// the tiled kernels' set-up than in arithmetic, so they are done row by row,
// the way a textbook writes it: per query row the scores of its visible keys
// (log2 units, masked by the rules of score_rules.h) and their max m; then
// p = 2^(s - m) for all rows at once, in vectors (the exps are most of the
// arithmetic: T1's 18 as scalar code took longer than the rest of the kernel);
// then per row l = sum p and out = sum p v / l. Zero probabilities are
// skipped, so a NaN or an infinity in V reaches only the rows that attend to
// it, as in the other kernels. K and V are read as floats: F32 in place,
// F16 and BF16 converted a kv head at a time (at most kSmallMaxHeadFloats
// elements), so the kernel is compiled once per mask rule rather than once
// per pair of K and V dtypes as well. About 10 KiB of stack, no heap, no
// threads. Compiled per SIMD target (the scalar parts too: FMA, no SSE2
// fallbacks).
#include "src/ops/small_attention.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <type_traits>

#include "src/ops/convert.h"
#include "src/ops/score_rules.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/small_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/score_rules-inl.h"
#include "src/ops/softmax-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x[i] = 2^x[i] for i < n, in whole vectors: x holds room for n rounded up
// to a vector, whose extra entries are set to 0 first.
void Exp2InPlace(float* HWY_RESTRICT x, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  for (size_t i = n; i % lanes != 0; ++i) x[i] = 0.0f;
  for (size_t i = 0; i < n; i += lanes) hn::Store(Exp2(df, hn::Load(df, x + i)), df, x + i);
}

// Rows [0, rows) x elements [0, n) of a K or V head as floats: element
// (j, d) is data[j * row + d * elem].
struct FloatRows {
  const float* data;
  int64_t row, elem;
  float At(int64_t j, int64_t d) const { return data[j * row + d * elem]; }
};

// Elements [0, n) of rows [0, rows) of the F16 or BF16 head at `offset`,
// converted (exactly) into buf[j * n + d].
HWY_NOINLINE void ConvertHead(const TensorView& t, int64_t offset, int64_t rows, int64_t n,
                              float* HWY_RESTRICT buf) {
  const int64_t row = t.stride[2], elem = t.stride[3];
  DispatchFloatDtype(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = t.As<T>() + offset;
    for (int64_t j = 0; j < rows; ++j) {
      for (int64_t d = 0; d < n; ++d) buf[j * n + d] = ToFloat(x[j * row + d * elem]);
    }
  });
}

// The head of `t` at `offset` as FloatRows: an F32 tensor in place, with its
// strides; F16 and BF16 converted into buf, which holds rows * n floats.
HWY_INLINE FloatRows HeadAsFloat(const TensorView& t, int64_t offset, int64_t rows, int64_t n,
                                 float* HWY_RESTRICT buf) {
  if (t.dtype == Dtype::kF32) return {t.As<float>() + offset, t.stride[2], t.stride[3]};
  ConvertHead(t, offset, rows, n, buf);
  return {buf, n, 1};
}

// The caller's mask (when there is one) applied by mask_rule (WithMaskRule).
// Two passes over all rows (scores and their max; then sums and outputs)
// around one vector pass of exps, rather than one row start to end: the
// rows' dependency chains (dot, max, 2^x, 1 / l) then overlap (T1: two
// passes 4% faster than three, 21% faster than one).
//
// kModified: the problem has score modifiers (windows, softcap, ALiBi,
// sinks). Without them every row's keys are a prefix and the sink is off,
// which the compiler then knows: the same code, instantiated twice, keeps a
// plain tiny call (T1) as short as before the modifiers existed (+15% of
// instructions otherwise).
template <bool kModified, class MaskRule>
void Attend(const SdpaProblem& p, const MaskRule& mask_rule) {
  const int64_t group = p.group(), dim = p.head_dim, value_dim = p.value_dim, lk = p.kv_len;
  const float q_scale = p.scale * kLog2e;
  const int64_t offset = p.PositionOffset();
  const ScoreModifiers mods(p);
  const bool modify_scores = kModified && mods.any;
  // [row][Lk]: scores, then probabilities; room for whole vectors.
  HWY_ALIGN float s[kSmallMaxScores + kLanes];
  float m[kSmallMaxScores];                              // per row: max score (log2 units)
  int32_t first[kSmallMaxScores], end[kSmallMaxScores];  // per row: keys it may see
  // A kv head's K (first pass), then its V (second pass), unless F32.
  float head[kSmallMaxHeadFloats];
  FloatRows kh{}, vh{};

  int64_t r = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.q_heads; ++h) {
      if (h % group == 0) kh = HeadAsFloat(p.k, p.k.Offset(b, h / group, 0, 0), lk, dim, head);
      for (int64_t i = 0; i < p.q_len; ++i, ++r) {
        int64_t j0, j1;
        p.VisibleKeys<kModified>(b, i + offset, &j0, &j1);
        first[r] = static_cast<int32_t>(j0);
        end[r] = static_cast<int32_t>(j1);
        float q[kSmallMaxDim];
        ScaledQueryRow(p, b, h, i, q_scale, q);
        // m starts finite so that a row whose keys are all blocked gets
        // p = 2^(-inf) = 0 and l = 0, not NaN.
        float mr = -FLT_MAX;
        float* __restrict__ sr = s + r * lk;
        if (modify_scores) {
          // The modifiers in a pass of their own (a vector one), before the
          // mask: the plain loop below stays as short as without them.
          for (int64_t j = j0; j < j1; ++j) {
            float dot = 0.0f;
            for (int64_t d = 0; d < dim; ++d) dot += q[d] * kh.At(j, d);
            sr[j] = dot;
          }
          // Stores whole vectors: past j1 it rewrites the next rows' room
          // unchanged, within s.
          mods.ApplyRow(sr + j0, j1 - j0, h, j0 - mods.AlibiOrigin(p, b, h, i + offset));
        }
        for (int64_t j = j0; j < j1; ++j) {
          float dot;
          if (modify_scores) {
            dot = sr[j];
          } else {
            dot = 0.0f;
            for (int64_t d = 0; d < dim; ++d) dot += q[d] * kh.At(j, d);
          }
          if (p.has_mask) dot = mask_rule(dot, p.mask.Offset(b, h, i, j));
          sr[j] = dot;
          mr = dot > mr ? dot : mr;  // a NaN score leaves m; its p is NaN below
        }
        m[r] = mr;
        // The exponents s - m; keys the row may not see get 2^-inf = 0.
        for (int64_t j = 0; j < j0; ++j) sr[j] = -INFINITY;
        for (int64_t j = j0; j < j1; ++j) sr[j] -= mr;
        for (int64_t j = j1; j < lk; ++j) sr[j] = -INFINITY;
      }
    }
  }
  Exp2InPlace(s, static_cast<size_t>(r * lk));

  r = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.q_heads; ++h) {
      if (h % group == 0) {
        vh = HeadAsFloat(p.v, p.v.Offset(b, h / group, 0, 0), lk, value_dim, head);
      }
      for (int64_t i = 0; i < p.q_len; ++i, ++r) {
        float* __restrict__ pr = s + r * lk;
        const int64_t j0 = kModified ? first[r] : 0, j1 = end[r];
        float l = 0.0f;
        for (int64_t j = j0; j < j1; ++j) l += pr[j];
        // No visible key: l == 0 and the row is zeros (RowInverse).
        const int64_t at = i + offset;
        const RowEnd row_end(m[r], l, kModified ? SinkLog2(p, h) : -INFINITY,
                             kModified ? mods.Shift(h, mods.AlibiOrigin(p, b, h, at), at) : 0.0f,
                             p.has_lse);
        const float inv = row_end.inverse;
        const int64_t out_row = p.out.Offset(b, h, i, 0), od = p.out.stride[3];
        // A piece of the row at a time, stored in the output's dtype (a
        // contiguous F32 row is written in place: T1 -4% of instructions).
        constexpr int64_t kPiece = 64;
        float piece[kPiece];
        float* const in_place =
            p.out.dtype == Dtype::kF32 && od == 1 ? p.out.AsMutable<float>() + out_row : nullptr;
        for (int64_t dv0 = 0; dv0 < value_dim; dv0 += kPiece) {
          const int64_t n = std::min(kPiece, value_dim - dv0);
          float* const dst = in_place != nullptr ? in_place + dv0 : piece;
          for (int64_t e = 0; e < n; ++e) {
            const int64_t dv = dv0 + e;
            // Zero probabilities are skipped: 0 * NaN must not reach this row.
            float acc = 0.0f;
            for (int64_t j = j0; j < j1; ++j) {
              if (pr[j] != 0.0f) acc += pr[j] * vh.At(j, dv);
            }
            dst[e] = acc * inv;
          }
          if (in_place == nullptr) StoreOutputRow(p.out, out_row + dv0 * od, piece, n);
        }
        if (p.has_lse) p.lse.AsMutable<float>()[p.lse.Offset(0, b, h, i)] = row_end.lse;
        if (p.has_weights) {
          float* w = p.weights.AsMutable<float>() + p.weights.Offset(b, h, i, 0);
          const int64_t sw = p.weights.stride[3];
          for (int64_t j = 0; j < lk; ++j) w[j * sw] = j >= j0 && j < j1 ? pr[j] * inv : 0.0f;
        }
      }
    }
  }
}

void SmallAttentionHere(const SdpaProblem& p) {
  // Preconditions (free in Release): the stack arrays of Attend hold every
  // score and a query row.
  HWY_DASSERT(p.Valid());
  HWY_DASSERT(p.batch * p.q_heads * p.q_len * p.kv_len <= kSmallMaxScores);
  HWY_DASSERT(p.head_dim <= kSmallMaxDim);
  HWY_DASSERT(p.kv_len * std::max(p.head_dim, p.value_dim) <= kSmallMaxHeadFloats);
  const auto attend = [&](auto modified) {
    if (p.has_mask) {
      WithMaskRule(p.mask, [&](const auto& rule) { Attend<modified.value>(p, rule); });
    } else {
      Attend<modified.value>(p, [](float score, int64_t) { return score; });
    }
  };
  if (p.HasModifiers()) {
    attend(std::true_type());
  } else {
    attend(std::false_type());
  }
}

constexpr SmallKernels kSmallKernels = {HWY_TARGET, &SmallAttentionHere};

const SmallKernels* GetSmallKernelTable() { return &kSmallKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetSmallKernelTable);

void SmallAttention(const SdpaProblem& p) {
  static const auto* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetSmallKernelTable));
  kernels->attend(p);
}

}  // namespace hwyattn
#endif  // HWY_ONCE
