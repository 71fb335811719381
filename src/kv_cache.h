// SPDX-License-Identifier: Apache-2.0
//
// A KV cache and a varlen batch after validation (hwyattn_kv_cache,
// hwyattn_kv_batch): what hwyattn_kv_attention and hwyattn_kv_cache_write
// compute from. Every index they hold (page ids of the pages a sequence
// needs, slots) has been checked against the pool.
#ifndef HWYATTN_SRC_KV_CACHE_H_
#define HWYATTN_SRC_KV_CACHE_H_

#include <stdint.h>

#include "src/sdpa_problem.h"
#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {

struct KvCacheView {
  TensorView k, v;  // [num_pages, Hkv, page_size, D], [.., Dv]; one dtype
  KvScales k_scales = KvScales::kNone, v_scales = KvScales::kNone;
  // F32: per token [num_pages, Hkv, page_size, 1], per channel [1, Hkv, 1, D].
  TensorView k_scale, v_scale;
  const int32_t* block_table = nullptr;  // [num_seqs, block_table_stride] or null
  int64_t block_table_stride = 0;
  int64_t num_pages = 0, page_size = 0, kv_heads = 0, head_dim = 0, value_dim = 0;
};

// hwyattn_kv_attention after validation.
struct KvAttentionProblem {
  KvCacheView cache;
  TensorView q;    // [1, T, Hq, D]
  TensorView out;  // [1, T, Hq, Dv], F32
  bool has_lse = false;
  TensorView lse;  // [1, 1, T, Hq], F32
  int64_t tokens = 0, q_heads = 0;
  int32_t num_seqs = 0;
  const int32_t* q_start = nullptr;  // [num_seqs + 1]
  const int32_t* kv_len = nullptr;   // [num_seqs]
  const int32_t* q_pos = nullptr;    // [num_seqs] or null
  // The options as an hwyattn_sdpa problem would hold them (scale resolved,
  // causal, modifiers, executor); its tensors and sizes are unset.
  SdpaProblem rules;

  int64_t QueryLength(int64_t s) const { return q_start[s + 1] - q_start[s]; }
  // Position of the sequence's first query token.
  int64_t QueryPosition(int64_t s) const {
    return q_pos != nullptr ? q_pos[s] : kv_len[s] - QueryLength(s);
  }
};

// hwyattn_kv_cache_write after validation.
struct KvWriteProblem {
  KvCacheView cache;
  TensorView k_new;               // [1, T, Hkv, D], F32/F16/BF16
  TensorView v_new;               // [1, T, Hkv, Dv]
  const int64_t* slot = nullptr;  // [T]: in [0, num_pages * page_size) or negative (skip)
  int64_t tokens = 0;
  Executor executor;
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_KV_CACHE_H_
