// SPDX-License-Identifier: Apache-2.0
//
// Packed matmul for linear layers: Y = X W^T + b with W in the torch
// nn.Linear layout [out_features, in_features], packed once into column
// panels of NR = kTileVectors vectors, and X packed per call into row panels
// of MR rows that every panel of W reuses (BLIS: B packed at creation, A per
// call, an MR x NR register tile). Non-SIMD declarations; the kernels are in
// matmul.cc (per target) and ops/matmul-inl.h (the micro-kernel).
#ifndef HWYATTN_SRC_OPS_MATMUL_H_
#define HWYATTN_SRC_OPS_MATMUL_H_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <memory>

#include "include/hwyattn.h"
#include "src/threading.h"

namespace hwyattn {

// A row-major view of a [rows, cols] matrix in caller memory, with rows that
// may come from a [groups, rows_per_group] batch: row m sits at
// (m / rows_per_group) * group_stride + (m % rows_per_group) * row_stride,
// column j at j * col_stride further.
struct RowsView {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t rows_per_group = 1, group_stride = 0, row_stride = 0, col_stride = 1;

  int64_t RowOffset(int64_t m) const {
    return (m / rows_per_group) * group_stride + (m % rows_per_group) * row_stride;
  }
  // A dense [rows, cols] matrix with row stride `ld`.
  static RowsView Dense(float* data, int64_t rows, int64_t cols, int64_t ld) {
    RowsView v;
    v.data = data;
    v.rows = rows;
    v.cols = cols;
    v.rows_per_group = rows;
    v.row_stride = ld;
    return v;
  }
};

struct AlignedFree {
  void operator()(float* p) const { free(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
// 64-byte aligned, zero-filled; null if the allocation failed.
AlignedFloats AllocateFloats(size_t n);

// W [n, k] and its optional bias [n], copied and packed for the current
// target as [ceil(n / NR)][k][NR] panels plus a zero-padded bias.
class PackedWeights {
 public:
  // False if memory could not be allocated.
  bool Pack(const float* w, const float* bias, int64_t n, int64_t k);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  const float* panels() const { return panels_.get(); }
  const float* bias() const { return bias_.get(); }  // padded to whole panels

 private:
  int64_t n_ = 0, k_ = 0;
  AlignedFloats panels_;
  AlignedFloats bias_;
};

// One product of a Linear call: y = x w^T + b.
struct LinearOutput {
  const PackedWeights* w;
  RowsView y;  // [x.rows, w->n()]
};

// Computes every output from one packing of x (so a self-attention layer
// packs its input once for Q, K and V). x.cols must equal each w->k().
// Workers: up to executor.MaxWorkers() (the caller's pool, or the library's
// threads: the default), fewer for small products; the rows are split into
// items of MC rows whatever the count, so the bits do not depend on it.
// Returns HWYATTN_OUT_OF_MEMORY if scratch cannot be allocated.
hwyattn_status Linear(const RowsView& x, const LinearOutput* outputs, size_t num_outputs,
                      const Executor& executor = Executor());

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MATMUL_H_
