// SPDX-License-Identifier: Apache-2.0
//
// Linear: the engine side of the packed matmul. The weights are packed once
// into memory allocated here; a call splits x into work items of MC rows (a
// fixed split: the bits do not depend on the worker count), gives each
// worker its A panels from this thread's matmul scratch, and runs the items
// as one parallel region.
#include "src/linear.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>

#include "src/scratch.h"

namespace hwyattn {

AlignedFloats AllocateFloats(size_t n) {
  if (n > (SIZE_MAX - kScratchAlign) / sizeof(float)) return AlignedFloats(nullptr);
  const size_t bytes =
      (std::max<size_t>(n, 1) * sizeof(float) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  float* p = static_cast<float*>(AlignedAlloc(bytes));  // src/scratch.h (test hook)
  if (p != nullptr) memset(p, 0, bytes);
  return AlignedFloats(p);
}

bool PackedWeights::Pack(const float* w, const float* bias, int64_t n, int64_t k, bool bf16) {
  const MatmulKernels& kernels = GetMatmulKernels();
  const size_t nr = kernels.tile_cols;
  const size_t padded_n = (static_cast<size_t>(n) + nr - 1) / nr * nr;
  // BF16: one 32-bit lane per pair of depths.
  const size_t depth_words = bf16 ? (static_cast<size_t>(k) + 1) / 2 : static_cast<size_t>(k);
  panels_memory_ = AllocateFloats(padded_n * depth_words);
  bias_memory_ = AllocateFloats(padded_n);
  if (!panels_memory_ || !bias_memory_) return false;
  if (bf16) {
    uint32_t* lanes = reinterpret_cast<uint32_t*>(panels_memory_.get());
    kernels.pack_weights_bf16(w, n, k, lanes);
    pairs = lanes;
    panels = nullptr;
  } else {
    kernels.pack_weights(w, n, k, panels_memory_.get());
    panels = panels_memory_.get();
    pairs = nullptr;
  }
  if (bias != nullptr) memcpy(bias_memory_.get(), bias, static_cast<size_t>(n) * sizeof(float));
  this->n = n;
  this->k = k;
  this->bias = bias_memory_.get();
  return true;
}

hwyattn_status Linear(const RowsView& x, const LinearOutput* outputs, size_t num_outputs,
                      const Executor& executor, MatmulPrecision precision) {
  const MatmulKernels& kernels = GetMatmulKernels();
  const int64_t rows_per_item = static_cast<int64_t>(kernels.tile_rows * kernels.row_panels);
  const int64_t items = (x.rows + rows_per_item - 1) / rows_per_item;
  double flops = 0.0;
  for (size_t o = 0; o < num_outputs; ++o) {
    flops += 2.0 * static_cast<double>(x.rows) * static_cast<double>(x.cols) *
             static_cast<double>(outputs[o].w->n);
  }
  const int64_t threads = WorkersFor(executor, flops, items);
  // Per worker: its A panels; before them, the workers' item shares.
  const size_t item_floats = PanelFloats(x.cols, kernels.tile_rows) * kernels.row_panels;
  const size_t share_floats = ShareFloats(threads);
  float* scratch = static_cast<float*>(
      ThreadScratch(ScratchSlot::kMatmul,
                    (share_floats + item_floats * static_cast<size_t>(threads)) * sizeof(float)));
  if (scratch == nullptr) return HWYATTN_OUT_OF_MEMORY;
  float* panels = scratch + share_floats;
  if (threads == 1) {
    for (int64_t i = 0; i < items; ++i) {
      kernels.multiply_rows(x, i * rows_per_item, outputs, num_outputs, precision, panels);
    }
    return HWYATTN_OK;
  }
  // Contiguous shares of rows: in a layer, the rows a worker projects are
  // then those of the batches whose attention heads it owns (the prefill
  // query tiles' shares, src/attention.cc), still in its L2 (M1 on 2 threads: +1.7-2.2% over
  // handing out items one by one).
  ItemShare* shares = InitShares(scratch, threads, items);
  ParallelRegion(executor, threads, [&](int64_t me) {
    float* mine = panels + static_cast<size_t>(me) * item_floats;
    RunShares(shares, threads, me, [&](int64_t i, int64_t /*next*/) {
      kernels.multiply_rows(x, i * rows_per_item, outputs, num_outputs, precision, mine);
    });
  });
  return HWYATTN_OK;
}

}  // namespace hwyattn
