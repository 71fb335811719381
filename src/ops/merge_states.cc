// SPDX-License-Identifier: Apache-2.0
//
// Merging partial attention states, per target (hwyattn_merge_states):
// out = sum_i exp(lse_i - L) out_i with L = log(sum_i exp(lse_i) [+ exp(sink)]).
//
// Rows are merged in blocks of kMergeBlockRows. For a block, the lses are
// read partial by partial three times: their maximum (with the sink), the sum
// of exp(lse_i - max) in double, then, with L = max + log(sum), the weights
// exp(lse_i - L) (in double, rounded to float once; the exps of a block are
// vector Exps). The weighted output rows are then folded into out in index
// order, kGroup partials per pass over a row, summed in registers a vector at
// a time. The max first keeps every exp argument <= 0: nothing overflows,
// whatever the lses' range. A partial row whose lse is -inf is skipped
// outright, so that a shard with no visible key contributes nothing even if
// its output row holds garbage.
//
// The arithmetic of an element depends on its row's lses and its own values
// only, never on the block, the group, the strides or the call's thread
// count: every element gets w_0 * x_0, then MulAdd(w_i, x_i, acc) for each
// next contributing partial (a group resumes from the stored float, which is
// the register's value), in the vector path and the lane-at-a-time path
// alike, so every layout gives the same bits.
//
// One thread: the merge reads each partial once and does two multiply-adds
// per 8 bytes read; it is bound by memory bandwidth (measured at 60-70% of a
// plain 4-way sum loop's throughput, which does no weighting), and it runs
// on the caller's thread without allocating anything.

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/ops/merge_states.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/merge_states.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "hwy/contrib/math/math-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DF: vectors-inl.h.
using VF = hn::Vec<DF>;

constexpr int64_t kR = kMergeBlockRows;

// a[r] = exp(a[r]) for the whole block, in double (arguments <= 0; -inf
// gives 0). Highway's vector Exp (1 ulp) where the target has double lanes:
// the exps are 2 per row and partial, as many as a short row's multiply-adds.
void ExpBlock(double* HWY_RESTRICT a) {
#if HWY_HAVE_FLOAT64 && HWY_HAVE_INTEGER64
  const hn::CappedTag<double, kR> dd;  // (no more lanes than the block on any vector length)
  for (int64_t r = 0; r < kR; r += static_cast<int64_t>(hn::Lanes(dd))) {
    hn::Store(hn::Exp(dd, hn::Load(dd, a + r)), dd, a + r);
  }
#else
  for (int64_t r = 0; r < kR; ++r) a[r] = exp(a[r]);
#endif
}

// Partials folded per pass over a row: their weighted rows are summed in
// registers and the out row is read (after the first group) and written
// once per group, instead of once per partial.
constexpr int kGroup = 8;

// One contributing partial of a row: its output row and weight.
struct Term {
  const float* src;
  int64_t stride;
  float w;
};

// dst = sum over the terms, in their order: the first product rounded
// (Mul), each next one added by MulAdd (fused where the target's is),
// continuing from dst when `resume` (an earlier group). Every element gets
// exactly this sequence whatever path computes it: a vector at a time when
// every row is contiguous, else a lane at a time with the same operations.
// In place (a term's src is dst) each element is read before it is written.
void FoldTerms(const Term* HWY_RESTRICT t, int count, bool resume, float* dst, int64_t sd,
               int64_t dv) {
  int64_t i = 0;
  bool contiguous = sd == 1;
  for (int k = 0; k < count; ++k) contiguous = contiguous && t[k].stride == 1;
  if (contiguous) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    // Each weight broadcast where it is used (from L1; an embedded broadcast
    // on AVX-512): sizeless vectors cannot be kept in an array.
    for (; i + lanes <= dv; i += lanes) {
      VF acc = resume ? hn::LoadU(df, dst + i)
                      : hn::Mul(hn::Set(df, t[0].w), hn::LoadU(df, t[0].src + i));
      for (int k = resume ? 0 : 1; k < count; ++k) {
        acc = hn::MulAdd(hn::Set(df, t[k].w), hn::LoadU(df, t[k].src + i), acc);
      }
      hn::StoreU(acc, df, dst + i);
    }
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < dv; ++i) {
    auto acc = resume ? hn::Set(d1, dst[i * sd])
                      : hn::Mul(hn::Set(d1, t[0].w), hn::Set(d1, t[0].src[i * t[0].stride]));
    for (int k = resume ? 0 : 1; k < count; ++k) {
      acc = hn::MulAdd(hn::Set(d1, t[k].w), hn::Set(d1, t[k].src[i * t[k].stride]), acc);
    }
    dst[i * sd] = hn::GetLane(acc);
  }
}

// Rows [row0, row0 + rows) of the flattened [B, H, L], rows <= kMergeBlockRows.
void MergeBlock(const MergeProblem& p, int64_t row0, int64_t rows) {
  int64_t bi[kR], hi[kR], li[kR];
  double top[kR], sum[kR], total[kR];  // max (with the sink), sum, then L
  HWY_ALIGN double e[kR];              // exp arguments, then the exps
  bool nan[kR], started[kR];
  for (int64_t r = rows; r < kR; ++r) e[r] = -INFINITY;  // rows past the block: exp 0
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = row0 + r;
    li[r] = row % p.length;
    hi[r] = row / p.length % p.heads;
    bi[r] = row / p.length / p.heads;
    // A sink of -inf is off: it adds exp(-inf) = 0 below.
    top[r] = p.sinks != nullptr ? static_cast<double>(p.sinks[hi[r]]) : -INFINITY;
    nan[r] = false;
    started[r] = false;
  }
  // The maximum of each row's lses and sink; NaN noted apart (a comparison
  // would drop it).
  for (int64_t i = 0; i < p.count; ++i) {
    const TensorView lv = p.PartialLse(i);
    const float* lse = lv.As<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float x = lse[lv.Offset(0, bi[r], hi[r], li[r])];
      if (isnan(x)) {
        nan[r] = true;
      } else if (x > top[r]) {
        top[r] = x;
      }
    }
  }
  // The sum of exp(x - max) over the terms (the maximum's is 1; -inf terms
  // add 0). With an lse of +inf the max is +inf, and with a NaN the row is
  // NaN anyway: such rows add nothing here and are NaN below.
  for (int64_t r = 0; r < rows; ++r) {
    const bool finite = isfinite(top[r]) && !nan[r];
    e[r] = p.sinks != nullptr && finite ? static_cast<double>(p.sinks[hi[r]]) - top[r] : -INFINITY;
  }
  ExpBlock(e);
  for (int64_t r = 0; r < rows; ++r) sum[r] = e[r];
  for (int64_t i = 0; i < p.count; ++i) {
    const TensorView lv = p.PartialLse(i);
    const float* lse = lv.As<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float x = lse[lv.Offset(0, bi[r], hi[r], li[r])];
      const bool finite = isfinite(top[r]) && !nan[r];
      e[r] = finite ? static_cast<double>(x) - top[r] : -INFINITY;
    }
    ExpBlock(e);
    for (int64_t r = 0; r < rows; ++r) sum[r] += e[r];
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (nan[r] || top[r] == INFINITY) {
      total[r] = NAN;
    } else if (top[r] == -INFINITY) {
      total[r] = -INFINITY;  // no term at all: the row is zeros
    } else {
      total[r] = top[r] + log(sum[r]);  // sum >= 1
    }
  }
  // The outputs, in index order, kGroup partials at a time: their weights
  // exp(lse_i - L) (rounded to float once), then per row the fold of the
  // ones that contribute. With a NaN total every weight is NaN, and so is
  // the row.
  const int64_t dv = p.value_dim, so = p.out.stride[3];
  float* const out = p.out.AsMutable<float>();
  Term terms[kR][kGroup];
  int counts[kR];
  for (int64_t i0 = 0; i0 < p.count; i0 += kGroup) {
    const int64_t i1 = i0 + kGroup < p.count ? i0 + kGroup : p.count;
    for (int64_t r = 0; r < rows; ++r) counts[r] = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const TensorView lv = p.PartialLse(i);
      const TensorView ov = p.PartialOut(i);
      const float* lse = lv.As<float>();
      float x[kR];
      for (int64_t r = 0; r < rows; ++r) {
        x[r] = lse[lv.Offset(0, bi[r], hi[r], li[r])];
        e[r] = isfinite(total[r]) ? static_cast<double>(x[r]) - total[r] : -INFINITY;
      }
      ExpBlock(e);
      for (int64_t r = 0; r < rows; ++r) {
        if (x[r] == -INFINITY) continue;  // contributes nothing, whatever its row holds
        terms[r][counts[r]++] = {ov.As<float>() + ov.Offset(bi[r], hi[r], li[r], 0), ov.stride[3],
                                 isnan(total[r]) ? NAN : static_cast<float>(e[r])};
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (counts[r] == 0) continue;
      FoldTerms(terms[r], counts[r], started[r], out + p.out.Offset(bi[r], hi[r], li[r], 0), so,
                dv);
      started[r] = true;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (!started[r]) {
      float* dst = out + p.out.Offset(bi[r], hi[r], li[r], 0);
      for (int64_t d = 0; d < dv; ++d) dst[d * so] = 0.0f;
    }
    // In place, lse_out is lses[0]: written only after the block's last read.
    if (p.has_lse) {
      p.lse.AsMutable<float>()[p.lse.Offset(0, bi[r], hi[r], li[r])] = static_cast<float>(total[r]);
    }
  }
}

void Merge(const MergeProblem& p) {
  HWY_DASSERT(p.Valid());  // a precondition (free in Release)
  const int64_t rows = p.batch * p.heads * p.length;
  for (int64_t row0 = 0; row0 < rows; row0 += kMergeBlockRows) {
    MergeBlock(p, row0, rows - row0 < kMergeBlockRows ? rows - row0 : kMergeBlockRows);
  }
}

constexpr MergeKernels kMergeKernels = {HWY_TARGET, &Merge};

const MergeKernels* GetMergeKernelTable() { return &kMergeKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetMergeKernelTable);

const MergeKernels& GetMergeKernels() {
  static const MergeKernels* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetMergeKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
