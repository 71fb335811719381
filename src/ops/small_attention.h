// SPDX-License-Identifier: Apache-2.0
//
// Attention for tiny problems (a few hundred nanoseconds of arithmetic), row
// by row (only the exps in vectors): no tiles, no packing, no scratch, no
// threads.
#ifndef HWYATTN_SRC_OPS_SMALL_ATTENTION_H_
#define HWYATTN_SRC_OPS_SMALL_ATTENTION_H_

#include <stdint.h>

#include "src/sdpa_problem.h"

namespace hwyattn {

// Limits of the small kernel: the whole call is at most kSmallMaxFlops
// (under a microsecond of scalar arithmetic, less than the set-up of the
// tiled kernels), so its scores (each costs 2 * (D + Dv) >= 4 FLOPs) and
// per-row statistics fit on the stack, as do one query row and one kv
// head's K or V.
constexpr double kSmallMaxFlops = 2048;
constexpr int64_t kSmallMaxScores = 512;
constexpr int64_t kSmallMaxDim = 64;
// A kv head's K or V as floats: kv_len * (D + Dv) <= kSmallMaxFlops / 2.
constexpr int64_t kSmallMaxHeadFloats = 1024;
static_assert(kSmallMaxHeadFloats * 2 == kSmallMaxFlops, "one score's FLOPs are 2 * (D + Dv)");

// Paged K/V and I8 caches go to the tiled kernels, which read them through
// the block table and apply the scales; bf16 products to the prefill kernel,
// the one that rounds its operands.
inline bool SmallApplies(const SdpaProblem& p, double flops) {
  return flops <= kSmallMaxFlops && p.head_dim <= kSmallMaxDim && !p.Paged() &&
         p.k_scale.layout == KvScales::kNone && !p.Bf16Products() && !p.Int8Products() &&
         !IsPackedDtype(p.k.dtype) && !IsPackedDtype(p.v.dtype);
}

// Every feature of hwyattn_sdpa (masks, causal, key lengths, weights, lse,
// any strides and dtypes), on the calling thread, on the best allowed SIMD
// target.
void SmallAttention(const SdpaProblem& p);

// One target's small kernel (`target` first, see PickKernels).
struct SmallKernels {
  int64_t target;
  void (*attend)(const SdpaProblem& p);
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_SMALL_ATTENTION_H_
