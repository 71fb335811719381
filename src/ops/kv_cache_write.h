// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_kv_cache_write's kernel (non-SIMD declarations): one token's rows
// into the cache, per target (src/ops/kv_cache_write.cc). The planner is
// RunKvCacheWrite (src/kv_attention.cc).
#ifndef HWYATTN_SRC_OPS_KV_CACHE_WRITE_H_
#define HWYATTN_SRC_OPS_KV_CACHE_WRITE_H_

#include <stddef.h>
#include <stdint.h>

#include <algorithm>

#include "src/kv_cache.h"
#include "src/scratch.h"

namespace hwyattn {

// One target's write kernel: the rows of token t (slot >= 0) into the cache,
// through `buffer` (KvWriteRowFloats() * 2 floats: the row and, for
// per-channel scales, the row's scales).
struct KvWriteKernels {
  int64_t target;
  size_t lanes;  // floats per vector
  void (*write_token)(const KvWriteProblem& p, int64_t t, float* buffer);
};

// The kernels of the best allowed target (see targets.h). Thread-safe.
const KvWriteKernels& GetKvWriteKernels();

// Floats of one row buffer: the widest row, padded to whole vectors of
// `lanes` floats.
inline size_t KvWriteRowFloats(const KvWriteProblem& p, size_t lanes) {
  const size_t dim = static_cast<size_t>(std::max(p.cache.head_dim, p.cache.value_dim));
  return PadFloats((dim + lanes - 1) / lanes * lanes);
}

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_KV_CACHE_WRITE_H_
