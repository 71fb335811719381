// SPDX-License-Identifier: Apache-2.0
//
// Fused attention kernels (non-SIMD declarations): the per-call plan shared by
// all work items, and the per-target kernel table that flash_attention.cc
// exports. The planner (src/attention.cc) owns threading and memory.
#ifndef HWYATTN_SRC_OPS_FLASH_ATTENTION_H_
#define HWYATTN_SRC_OPS_FLASH_ATTENTION_H_

#include <stddef.h>
#include <stdint.h>

#include "src/sdpa_problem.h"
#include "src/scratch.h"

namespace hwyattn {

// Tile shape of one target's kernels.
struct FlashGeometry {
  size_t lanes;          // floats per vector
  size_t tile_rows;      // MR: keys (or value dims) per register tile
  size_t query_tile;     // Bq: queries per work item (a multiple of lanes)
  size_t key_tile;       // Bk: keys per online-softmax step (a multiple of MR)
  size_t bf16_key_tile;  // Bk under bf16_dot (the planner puts it in key_tile)
};

// Everything a work item needs, fixed for the whole call.
//
// Work items are (batch b, kv head, block of query_tile rows). The rows of a
// kv head are its G = Hq/Hkv query heads times Lq positions, position-major:
// row r is position r / G of query head kvh * G + r % G. Mixing the heads of a
// GQA group in one tile means K and V are read once for all of them, and a
// decode step (Lq = 1) still fills G lanes.
struct FlashPlan {
  const SdpaProblem* problem;
  FlashGeometry geometry;
  int64_t key_panels;      // ceil(Lk / MR): K panels per kv head
  bool keys_in_place;      // K rows are read where the caller put them (F32,
                           // contiguous head dim); else packed as panels
  int64_t value_dim_pad;   // Dv rounded up to whole vectors (rows of O^T)
  bool values_in_place;    // V is read where the caller put it (F32, contiguous
                           // value dims)
  size_t packed_k_floats;  // per (b, kv head): key_panels * MR * D, or 0 in place
  size_t packed_v_floats;  // per (b, kv head): Lk * Dv, or 0 in place
  float* packed;           // [B][Hkv] x (K then V), each head's block aligned
  // With masking (causal or a mask tensor), [B][Hkv][key tiles] flags set by
  // pack_kv: the key tile's V rows hold a NaN or an infinity. Null without
  // masking (no row then has a zero probability that could meet one).
  uint8_t* nonfinite_values;
  int64_t key_tiles;  // ceil(Lk / key_tile)
  size_t packed_head_floats;
  size_t scratch_floats;  // per worker thread
  float q_scale;          // scale * log2(e): scores are computed in log2 units
  // bf16 products on the dot-product tiles (flash_bf16.h; AVX3, NEON, SVE):
  // K packed as [panel][ceil(D/2)][MR] and V as [ceil(Lk/2)][Dv] pairs of
  // bf16 (uint32), in the space of their fp32 packing; Q^T and P^T paired in
  // scratch.
  bool bf16_dot = false;

  const float* PackedK(int64_t b, int64_t kvh) const {
    return packed + (b * problem->kv_heads + kvh) * packed_head_floats;
  }
  // The caller's key rows of (b, kvh) (keys_in_place only), `ldk` apart.
  const float* KeyRows(int64_t b, int64_t kvh, int64_t* ldk) const {
    *ldk = problem->k.stride[2];
    return problem->k.As<float>() + problem->k.Offset(b, kvh, 0, 0);
  }
  // The value rows of (b, kvh) and the floats between consecutive rows.
  const float* ValueRows(int64_t b, int64_t kvh, int64_t* row_stride) const {
    if (values_in_place) {
      *row_stride = problem->v.stride[2];
      return problem->v.As<float>() + problem->v.Offset(b, kvh, 0, 0);
    }
    *row_stride = problem->value_dim;
    return PackedK(b, kvh) + packed_k_floats;
  }
};

// A work item: query rows [row0, row0 + rows) of (batch b, kv head kvh);
// row0 a multiple of the vector, rows <= query_tile.
struct FlashItem {
  int64_t b;
  int64_t kvh;
  int64_t row0;
  int64_t rows;
};

// One target's kernels. `target` comes first (see PickKernels).
struct FlashKernels {
  int64_t target;
  FlashGeometry geometry;
  // Packs, unless they are read in place, K as [panel][D][MR] (zero padded)
  // and V as [Lk][Dv], for keys below the batch's key end,
  // converting F16/BF16 to float; then flags the key tiles whose V is not
  // finite (when nonfinite_values is set).
  void (*pack_kv)(const FlashPlan& plan, int64_t b, int64_t kvh);
  // Computes the outputs (and lse, weights) of `item`'s query rows, using
  // `scratch_floats` of scratch. `next` (or null) is the item the worker
  // expects to run next: its query rows are prefetched along the way.
  void (*attend)(const FlashPlan& plan, const FlashItem& item, const FlashItem* next,
                 float* scratch);
};

// The kernels of the best allowed target (see targets.h). Thread-safe.
const FlashKernels& GetFlashKernels();

// A worker's scratch for one work item, in floats from a 64-byte aligned base;
// every array starts on a cache line.
struct FlashScratchLayout {
  size_t q_t;         // [D][Bq]: scaled queries, transposed (lanes = queries)
  size_t s_t;         // [Bk][Bq]: scores, then probabilities, transposed
  size_t o_t;         // [value_dim_pad][Bq]: unnormalised outputs, transposed
  size_t row_max;     // [Bq]: running max m (log2 units)
  size_t tile_max;    // [Bq]: the max once the current key tile's scores count
  size_t row_sum;     // [Bq]: running denominator l
  size_t rescale;     // [Bq]: 2^(m_old - m_new) of the last step
  size_t alpha_once;  // [Bq]: rescale, or 1 where P . V applied it already
  size_t k_edge;      // [MR][D]: the last, partial panel of in-place keys
  size_t key_lo;      // [Bq] int32: first key visible by position (windows)
  size_t key_last;    // [Bq] int32: last key visible by position
  size_t lane_pos;    // [Bq] int32: the lane's query position (ALiBi)
  size_t lane_slope;  // [Bq]: the lane's ALiBi slope, log2 units
  size_t mask_row;    // [Bq] int64: offset of each row in the mask tensor
  size_t mask_bias;   // [Bk][Bq]: the mask's biases, transposed (with a mask)
  size_t q_pairs;     // [ceil(D/2)][Bq] uint32: Q^T as bf16 pairs (bf16_dot)
  size_t p_pairs;     // [Bk/2][Bq] uint32: P^T as bf16 pairs (bf16_dot)
  size_t total;

  FlashScratchLayout(const SdpaProblem& p, const FlashGeometry& g, int64_t value_dim_pad) {
    const size_t bq = g.query_tile;
    size_t at = 0;
    auto take = [&at](size_t floats) {
      const size_t here = at;
      at += PadFloats(floats);
      return here;
    };
    q_t = take(static_cast<size_t>(p.head_dim) * bq);
    s_t = take(g.key_tile * bq);
    o_t = take(static_cast<size_t>(value_dim_pad) * bq);
    row_max = take(bq);
    tile_max = take(bq);
    row_sum = take(bq);
    rescale = take(bq);
    alpha_once = take(bq);
    k_edge = take(g.tile_rows * static_cast<size_t>(p.head_dim));
    key_lo = take(bq);
    key_last = take(bq);
    lane_pos = take(bq);
    lane_slope = take(bq);
    mask_row = take(2 * bq);
    mask_bias = take(p.has_mask ? g.key_tile * bq : 0);
    q_pairs = take((static_cast<size_t>(p.head_dim) + 1) / 2 * bq);
    p_pairs = take(g.key_tile / 2 * bq);
    total = at;
  }
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_FLASH_ATTENTION_H_
