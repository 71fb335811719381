// SPDX-License-Identifier: Apache-2.0
//
// Merging partial attention states, per target (hwyattn_merge_states):
// out = sum_i exp(lse_i - L) out_i with L = log(sum_i exp(lse_i) [+ exp(sink)]).
//
// Rows are merged in blocks of kMergeBlockRows. For a block, the lses are
// read partial by partial three times: their maximum (with the sink), the sum
// of exp(lse_i - max) in double, then, with L = max + log(sum), the weights
// exp(lse_i - L) (in double, rounded to float once) that fold the partials'
// output rows into the block's out rows in index order, a vector at a time.
// The max first keeps every exp argument <= 0: nothing overflows, whatever
// the lses' range. A partial row whose lse is -inf is skipped outright, so
// that a shard with no visible key contributes nothing even if its output
// row holds garbage.
//
// The arithmetic of an element depends on its row's lses and its own values
// only, never on the block, the strides or the call's thread count: the
// vector path and the lane-at-a-time path use the same multiply(-add), so
// every layout gives the same bits.

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/ops/merge_states.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/merge_states.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// dst = w * src (first contributing partial of the row) or dst += w * src
// (fused where the target's MulAdd is), over `count` elements `sd` and `ss`
// apart. In place (dst == src, the first partial written over itself) each
// element is read before it is written.
void FoldRow(float w, bool first, const float* src, int64_t ss, float* dst, int64_t sd,
             int64_t count) {
  int64_t i = 0;
  if (ss == 1 && sd == 1) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const VF wv = hn::Set(df, w);
    if (first) {
      for (; i + lanes <= count; i += lanes) {
        hn::StoreU(hn::Mul(wv, hn::LoadU(df, src + i)), df, dst + i);
      }
    } else {
      for (; i + lanes <= count; i += lanes) {
        hn::StoreU(hn::MulAdd(wv, hn::LoadU(df, src + i), hn::LoadU(df, dst + i)), df, dst + i);
      }
    }
  }
  // The rest (all of a strided row) a lane at a time, with the same
  // operation as the vectors.
  const hn::CappedTag<float, 1> d1;
  const auto w1 = hn::Set(d1, w);
  for (; i < count; ++i) {
    const auto x = hn::Set(d1, src[i * ss]);
    dst[i * sd] = hn::GetLane(first ? hn::Mul(w1, x) : hn::MulAdd(w1, x, hn::Set(d1, dst[i * sd])));
  }
}

// Rows [row0, row0 + rows) of the flattened [B, H, L], rows <= kMergeBlockRows.
void MergeBlock(const MergeProblem& p, int64_t row0, int64_t rows) {
  constexpr int64_t kR = kMergeBlockRows;
  int64_t bi[kR], hi[kR], li[kR];
  double top[kR], sum[kR], total[kR];  // max (with the sink), sum, then L
  bool nan[kR], started[kR];
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
    const TensorView lv = MergeView(*p.lses[i]);
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
  // The sum of exp(x - max) over the finite terms (the maximum's is 1). With
  // an lse of +inf the max is +inf: the row is NaN below.
  for (int64_t r = 0; r < rows; ++r) {
    sum[r] = 0.0;
    if (p.sinks != nullptr && isfinite(top[r])) {
      sum[r] = exp(static_cast<double>(p.sinks[hi[r]]) - top[r]);
    }
  }
  for (int64_t i = 0; i < p.count; ++i) {
    const TensorView lv = MergeView(*p.lses[i]);
    const float* lse = lv.As<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float x = lse[lv.Offset(0, bi[r], hi[r], li[r])];
      if (isfinite(top[r]) && x != -INFINITY) sum[r] += exp(static_cast<double>(x) - top[r]);
    }
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
  // The outputs, partial by partial in index order. With a NaN total every
  // weight is NaN, and so is the row.
  const int64_t dv = p.value_dim, so = p.out.stride[3];
  float* const out = p.out.AsMutable<float>();
  for (int64_t i = 0; i < p.count; ++i) {
    const TensorView lv = MergeView(*p.lses[i]);
    const TensorView ov = MergeView(*p.outs[i]);
    const float* lse = lv.As<float>();
    const float* o = ov.As<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float x = lse[lv.Offset(0, bi[r], hi[r], li[r])];
      if (x == -INFINITY) continue;
      const float w = static_cast<float>(exp(static_cast<double>(x) - total[r]));
      FoldRow(w, !started[r], o + ov.Offset(bi[r], hi[r], li[r], 0), ov.stride[3],
              out + p.out.Offset(bi[r], hi[r], li[r], 0), so, dv);
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
