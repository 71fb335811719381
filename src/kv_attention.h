// SPDX-License-Identifier: Apache-2.0
//
// The KV-cache entry points after validation: attention of a varlen batch
// over a paged cache (kv_attention.cc) and the write of new keys and values
// into cache slots (the planner here, the kernel in ops/kv_cache_write.cc).
#ifndef HWYATTN_SRC_KV_ATTENTION_H_
#define HWYATTN_SRC_KV_ATTENTION_H_

#include "include/hwyattn.h"
#include "src/kv_cache.h"

namespace hwyattn {

// Runs hwyattn_kv_attention. HWYATTN_OK or HWYATTN_OUT_OF_MEMORY (scratch).
hwyattn_status RunKvAttention(const KvAttentionProblem& p);

// Runs hwyattn_kv_cache_write. HWYATTN_OK or HWYATTN_OUT_OF_MEMORY.
hwyattn_status RunKvCacheWrite(const KvWriteProblem& p);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_KV_ATTENTION_H_
