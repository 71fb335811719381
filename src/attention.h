// SPDX-License-Identifier: Apache-2.0
//
// The attention entry points of the engine: scaled dot-product attention
// (the planner that runs a validated problem: packing, work split over
// threads, kernel choice), the merge of partial states, and which SIMD
// target the kernels run on.
#ifndef HWYATTN_SRC_ATTENTION_H_
#define HWYATTN_SRC_ATTENTION_H_

#include <stdint.h>

#include "include/hwyattn.h"
#include "src/merge_problem.h"
#include "src/sdpa_problem.h"

namespace hwyattn {

// Runs the problem. Returns HWYATTN_OK or HWYATTN_OUT_OF_MEMORY (scratch;
// then nothing is written).
hwyattn_status RunSdpa(const SdpaProblem& p);

// Runs n problems (each as RunSdpa would, bit for bit) as one call on
// `executor`: their work items share the call's parallel regions (two at
// most: K/V packing, decode chunks and small problems, then prefill query
// tiles), balanced by cost over the workers, so that a batch of short
// problems pays one fork/join and a long one does not leave a worker idle.
// Every allocation comes first: on HWYATTN_OUT_OF_MEMORY nothing is written.
hwyattn_status RunSdpaBatch(const SdpaProblem* problems, int64_t n, const Executor& executor);

// Merges the partial states on the calling thread. Allocates nothing.
void RunMerge(const MergeProblem& p);

// Highway's name of the SIMD target the kernels run on (e.g. "AVX3"), after
// the HWYATTN_TARGET cap.
const char* KernelTargetName();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_ATTENTION_H_
