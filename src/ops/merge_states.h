// SPDX-License-Identifier: Apache-2.0
//
// Merging partial attention states (hwyattn_merge_states): non-SIMD
// declarations. The kernels are in merge_states.cc.
#ifndef HWYATTN_SRC_OPS_MERGE_STATES_H_
#define HWYATTN_SRC_OPS_MERGE_STATES_H_

#include <stddef.h>
#include <stdint.h>

#include "src/merge_problem.h"

namespace hwyattn {

// Rows merged together: each partial's view is built once per block, and
// the block's output rows (32 x Dv floats: 16 KiB at Dv = 128) stay in L1/L2
// while the partials stream through them.
constexpr int64_t kMergeBlockRows = 32;

// One target's merge kernel. `target` comes first (see PickKernels).
struct MergeKernels {
  int64_t target;
  void (*merge)(const MergeProblem& p);
};

const MergeKernels& GetMergeKernels();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MERGE_STATES_H_
