// SPDX-License-Identifier: Apache-2.0
//
// Merging partial attention states (hwyattn_merge_states): non-SIMD
// declarations. The kernels are in merge_states.cc.
#ifndef HWYATTN_SRC_OPS_MERGE_STATES_H_
#define HWYATTN_SRC_OPS_MERGE_STATES_H_

#include <stddef.h>
#include <stdint.h>

#include "include/hwyattn.h"
#include "src/tensor.h"

namespace hwyattn {

// Rows merged together: each partial's descriptor is turned into a view once
// per block, and the block's output rows (32 x Dv floats: 16 KiB at Dv = 128)
// stay in L1/L2 while the partials stream through them.
constexpr int64_t kMergeBlockRows = 32;

// A validated hwyattn_merge_states call. The partials stay the caller's
// descriptors (n may be large, and the call allocates nothing); the kernel
// views them with MergeView, which validation has already checked each one
// against.
struct MergeProblem {
  int64_t count = 0;                           // n >= 1
  const hwyattn_tensor* const* outs = nullptr;  // [count]: F32 [B, H, L, Dv]
  const hwyattn_tensor* const* lses = nullptr;  // [count]: F32 [B, H, L] (view [1, B, H, L])
  const float* sinks = nullptr;                // [H], or nullptr
  TensorView out;                              // [B, H, L, Dv]
  bool has_lse = false;
  TensorView lse;                              // [1, B, H, L]
  int64_t batch = 0, heads = 0, length = 0, value_dim = 0;
};

// The rank-4 view of a descriptor that validation accepted: shapes
// right-aligned, size-1 dimensions with stride 0 (the rule of capi's Check,
// which built and checked the same view).
inline TensorView MergeView(const hwyattn_tensor& t) {
  TensorView v;
  v.data = t.data;
  v.dtype = t.dtype;
  const int lead = 4 - t.rank;
  for (int i = 0; i < t.rank; ++i) {
    v.shape[lead + i] = t.shape[i];
    v.stride[lead + i] = t.shape[i] == 1 ? 0 : t.stride[i];
  }
  return v;
}

// One target's merge kernel. `target` comes first (see PickKernels).
struct MergeKernels {
  int64_t target;
  void (*merge)(const MergeProblem& p);
};

const MergeKernels& GetMergeKernels();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MERGE_STATES_H_
