// SPDX-License-Identifier: Apache-2.0
//
// Linear layers on the packed matmul (src/ops/matmul.h): the weights packed
// once into memory the engine owns (PackedWeights), and Linear, which plans
// a call's work items, scratch and workers and runs the kernels.
#ifndef HWYATTN_SRC_LINEAR_H_
#define HWYATTN_SRC_LINEAR_H_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <memory>

#include "include/hwyattn.h"
#include "src/ops/matmul.h"
#include "src/scratch.h"
#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {

struct AlignedFree {
  void operator()(float* p) const { FreeAligned(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
// 64-byte aligned, zero-filled; null if the allocation failed.
AlignedFloats AllocateFloats(size_t n);

// W [n, k] and its optional bias [n], copied and packed for the current
// target (see PackedMatrix), in F32 storage or, with bf16, rounded to bf16
// pairs (half the memory). A LinearOutput points at it as its PackedMatrix.
class PackedWeights : public PackedMatrix {
 public:
  // False if memory could not be allocated.
  bool Pack(const float* w, const float* bias, int64_t n, int64_t k, bool bf16 = false);

 private:
  AlignedFloats panels_memory_;  // F32 panels, or the BF16 pairs' 32-bit lanes
  AlignedFloats bias_memory_;
};

// Computes every output from one packing of x (so a self-attention layer
// packs its input once for Q, K and V). x.cols must equal each w->k.
// Workers: up to executor.MaxWorkers() (the caller's pool, or the library's
// threads: the default), fewer for small products (WorkersFor); the rows are
// split into items of MC rows whatever the count, so the bits do not depend
// on it. precision kBf16: bf16 products (see MatmulKernels::multiply_rows).
// Returns HWYATTN_OUT_OF_MEMORY if scratch cannot be allocated.
hwyattn_status Linear(const RowsView& x, const LinearOutput* outputs, size_t num_outputs,
                      const Executor& executor = Executor(),
                      MatmulPrecision precision = MatmulPrecision::kF32);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_LINEAR_H_
