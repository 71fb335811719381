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

// Runs the problem. Returns HWYATTN_OK or HWYATTN_OUT_OF_MEMORY (scratch).
hwyattn_status RunSdpa(const SdpaProblem& p);

// Merges the partial states on the calling thread. Allocates nothing.
void RunMerge(const MergeProblem& p);

// Highway's name of the SIMD target the kernels run on (e.g. "AVX3"), after
// the HWYATTN_TARGET cap.
const char* KernelTargetName();

// Grows this thread's attention scratch to what RunSdpa(p) needs, without
// running it (p's data pointers are not read): a caller that runs several
// problems back to back reserves for all of them first, so that an
// allocation failure happens before any output is written. HWYATTN_OK or
// HWYATTN_OUT_OF_MEMORY.
hwyattn_status ReserveSdpaScratch(const SdpaProblem& p);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_ATTENTION_H_
