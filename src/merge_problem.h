// SPDX-License-Identifier: Apache-2.0
//
// One hwyattn_merge_states call after validation: what the merge kernel
// reads (src/ops/merge_states.h).
#ifndef HWYATTN_SRC_MERGE_PROBLEM_H_
#define HWYATTN_SRC_MERGE_PROBLEM_H_

#include <stdint.h>

#include "src/tensor.h"

namespace hwyattn {

// A validated merge. The partials stay the caller's descriptors (count may be
// large, and the call allocates nothing): `outs` and `lses` are the caller's
// arrays, opaque here, and `view(array, i)` builds element i's rank-4 view
// (capi's rule, the one its validation checked every descriptor with).
struct MergeProblem {
  int64_t count = 0;           // n >= 1
  const void* outs = nullptr;  // [count]: F32 [B, H, L, Dv]
  const void* lses = nullptr;  // [count]: F32 [B, H, L] (view [1, B, H, L])
  TensorView (*view)(const void* array, int64_t i) = nullptr;
  const float* sinks = nullptr;  // [H], or nullptr
  TensorView out;                // [B, H, L, Dv]
  bool has_lse = false;
  TensorView lse;  // [1, B, H, L]
  int64_t batch = 0, heads = 0, length = 0, value_dim = 0;

  // What validation established (see SdpaProblem::Valid).
  bool Valid() const {
    return count >= 1 && outs != nullptr && lses != nullptr && view != nullptr &&
           out.data != nullptr && batch >= 1 && heads >= 1 && length >= 1 && value_dim >= 1 &&
           (!has_lse || lse.data != nullptr);
  }

  TensorView PartialOut(int64_t i) const { return view(outs, i); }
  TensorView PartialLse(int64_t i) const { return view(lses, i); }
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_MERGE_PROBLEM_H_
