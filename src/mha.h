// SPDX-License-Identifier: Apache-2.0
//
// The multi-head attention layer: Q/K/V projections through the packed
// matmul, fused attention over per-head strided views of the projections (no
// reshuffling copies), and the output projection.
#ifndef HWYATTN_SRC_MHA_H_
#define HWYATTN_SRC_MHA_H_

#include <stdint.h>

#include "include/hwyattn.h"
#include "src/attention.h"
#include "src/linear.h"
#include "src/tensor.h"

namespace hwyattn {

// hwyattn_mha_config with every default resolved.
struct MhaConfig {
  int64_t embed_dim = 0, num_heads = 0, head_dim = 0, num_kv_heads = 0, kdim = 0, vdim = 0;
  bool has_bias = false;
  bool bf16_weights = false;  // weight_dtype BF16: weights packed as bf16 pairs
};

// One validated forward call.
struct MhaCall {
  bool self_attention = true;  // key = value = query
  RowsView query, key, value;  // [B * L, width] rows of the caller's activations
  RowsView out;                // [B * Lq, embed_dim] when out_tensor is F32
  TensorView out_tensor;       // [1, B, Lq, embed_dim]: F32, F16 or BF16
  // Sizes and options; q/k/v/out are set by Forward. attention.executor (the
  // caller's pool from opts->parallel, or OpenMP) runs the projections too.
  SdpaProblem attention;
};

class MhaLayer {
 public:
  // Copies and packs the weights. HWYATTN_OUT_OF_MEMORY if that fails.
  hwyattn_status Init(const MhaConfig& config, const hwyattn_mha_weights& w);
  // Runs the layer. Reads only immutable state: safe from many threads.
  hwyattn_status Forward(MhaCall& call) const;
  const MhaConfig& config() const { return config_; }

 private:
  MhaConfig config_;
  PackedWeights w_q_, w_k_, w_v_, w_o_;
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_MHA_H_
