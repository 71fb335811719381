// SPDX-License-Identifier: Apache-2.0
//
// The thread count that calls may use (hwyattn_set_num_threads).
#ifndef HWYATTN_SRC_THREADING_H_
#define HWYATTN_SRC_THREADING_H_

namespace hwyattn {

// n >= 0; 0 = all available cores (OpenMP's default for the calling thread).
void SetNumThreads(int n);
// The resolved count, >= 1.
int NumThreads();

// This thread's index in the enclosing parallel region (0 outside one, and
// always 0 when built with HWYATTN_OPENMP=OFF): which slice of the caller's
// scratch a worker uses.
int WorkerIndex();
// The number of threads in the enclosing parallel region (1 outside one).
int WorkerCount();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_THREADING_H_
