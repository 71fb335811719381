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

// W [n, k] and its bias packed for the current target's kernels, in one of
// two storages:
// - F32 (`panels`): [ceil(n / NR)][k][NR] floats (zero past n; panel p's
//   depth block [k0, k0 + kc) is the contiguous kc x NR slice at
//   (p * k + k0) * NR);
// - BF16 (`pairs`, half the memory): W rounded to the nearest bf16 (ties to
//   even), as [ceil(n / NR)][ceil(k / 2)][NR] 32-bit lanes, each the pair
//   (w[c][2i], w[c][2i + 1]) of column c, the first in the low 16 bits (the
//   operand layout of vdpbf16ps; zero past n and past k); panel p's depth
//   block [k0, k0 + kc), k0 even, is the slice at (p * ceil(k / 2) + k0 / 2) * NR;
// and a bias (F32 either way) zero-padded to whole panels. The memory is
// the engine's.
struct PackedMatrix {
  int64_t n = 0, k = 0;
  const float* panels = nullptr;    // F32 storage, else null
  const uint32_t* pairs = nullptr;  // BF16 storage, else null
  const float* bias = nullptr;
};

// The products a Linear call runs: fp32 (bf16 weights widened exactly), or
// bf16 products with fp32 sums (hwyattn_precision BF16: x rounded to bf16
// when packed, F32 weights rounded at each use).
enum class MatmulPrecision { kF32, kBf16 };

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
  // The BF16 storage of PackedMatrix: ceil(n / NR) * ceil(k / 2) * NR lanes.
  void (*pack_weights_bf16)(const float* w, int64_t n, int64_t k, uint32_t* dst);
  size_t row_panels;  // MR-row panels per work item (MC = row_panels * MR)
  // Rows [m0, m0 + MC) of every output, using row_panels * PanelFloats(k)
  // floats of panels. With MatmulPrecision::kBf16, on a CPU with AVX512_BF16
  // (Bf16DotFor(target)), outputs of BF16 storage run vdpbf16ps tiles;
  // elsewhere the same bf16 operands multiply in fp32 (exact products), so
  // results differ across targets only in the order of the fp32 sums.
  void (*multiply_rows)(const RowsView& x, int64_t m0, const LinearOutput* outputs,
                        size_t num_outputs, MatmulPrecision precision, float* a_panels);
};

// Floats of one packed MR-row panel of x of depth k (k rounded up to even,
// for the bf16 pairs; the start of the next one padded to a cache line).
size_t PanelFloats(int64_t k, size_t tile_rows);

const MatmulKernels& GetMatmulKernels();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MATMUL_H_
