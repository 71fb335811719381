// SPDX-License-Identifier: Apache-2.0
//
// Packed matmul for linear layers: Y = X W^T + b with W in the torch
// nn.Linear layout [out_features, in_features], packed once into column
// panels of NR = kTileVectors vectors, and X packed per call into row panels
// of MR rows that every panel of W reuses (BLIS: B packed at creation, A per
// call, an MR x NR register tile). Non-SIMD declarations; the kernels are in
// matmul.cc (per target) and ops/matmul-inl.h (the micro-kernel). The engine
// owns the packed memory and runs the work items (src/linear.h: Linear).
#ifndef HWYATTN_SRC_OPS_MATMUL_H_
#define HWYATTN_SRC_OPS_MATMUL_H_

#include <stddef.h>
#include <stdint.h>

#include "src/tensor.h"

namespace hwyattn {

// W [n, k] and its bias packed for the current target's kernels:
// [ceil(n / NR)][k][NR] panels (zero past n; panel p's depth block
// [k0, k0 + kc) is the contiguous kc x NR slice at (p * k + k0) * NR) and a
// bias zero-padded to whole panels. The memory is the engine's.
struct PackedMatrix {
  int64_t n = 0, k = 0;
  const float* panels = nullptr;
  const float* bias = nullptr;
};

// One product of a Linear call: y = x w^T + b.
struct LinearOutput {
  const PackedMatrix* w;
  RowsView y;  // [x.rows, w->n]
};

// One target's matmul kernels. `target` comes first (see PickKernels).
struct MatmulKernels {
  int64_t target;
  size_t tile_rows;  // MR
  size_t tile_cols;  // NR = kTileVectors * lanes
  // dst[(p * k + kk) * NR + c] = w[(p * NR + c) * k + kk], zero past n.
  void (*pack_weights)(const float* w, int64_t n, int64_t k, float* dst);
  size_t row_panels;  // MR-row panels per work item (MC = row_panels * MR)
  // Rows [m0, m0 + MC) of every output, using row_panels * k floats of
  // panels (each start padded to a cache line).
  void (*multiply_rows)(const RowsView& x, int64_t m0, const LinearOutput* outputs,
                        size_t num_outputs, float* a_panels);
};

const MatmulKernels& GetMatmulKernels();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MATMUL_H_
