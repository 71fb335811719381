// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_kv_attention: sequence by sequence, the hwyattn_sdpa planner
// (src/attention.cc: the decode or prefill kernel, with its own parallel
// regions) runs on an SdpaProblem describing that sequence alone, with its
// explicit query position (SdpaProblem::position_offset):
//   - F32, F16 and BF16 caches are read where they are: the problem's K/V
//     are the cache's page views and its block-table row (SdpaProblem::pages;
//     the decode kernel reads the pages in place, the prefill kernel gathers
//     them into the panels it packs anyway);
//   - I8 caches are still gathered (copied) into contiguous scratch,
//     dequantized to F32 with their scales, until the kernels apply scales.
//
// Batch invariance follows: a sequence's problem (its sizes, its keys, its
// positions) is the same whatever else is in the batch and wherever its
// pages are, and the kernels split keys into chunks fixed by the problem
// alone, never by the thread count (pages of a multiple of 16 keys give the
// bits of a contiguous cache: tests/paged_test.cc).
//
// NOT YET the design issue 15 asks for: the sequences run one after the
// other, each with its own parallel regions (not one balanced region per
// call over all sequences' work items), so a batch of short decodes pays a
// fork/join per sequence; and I8 is gathered.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>

#include "src/attention.h"
#include "src/kv_attention.h"
#include "src/scratch.h"
#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {
namespace {

// Bytes of gathered rows a worker must get to be worth waking.
constexpr double kMinGatherBytesPerThread = 512 * 1024;

// Rows [0, len) of kv head h of sequence s from `src` (k or v of the cache)
// into dst [len][dim] (element size `size`; I8 is dequantized to F32 with
// `scale`, per token or per channel).
void GatherHead(const KvCacheView& c, const TensorView& src, KvScales layout,
                const TensorView& scale, int64_t s, int64_t h, int64_t len, int64_t dim,
                size_t size, unsigned char* dst) {
  const int64_t stride = src.stride[3];
  const unsigned char* base = static_cast<const unsigned char*>(src.data);
  for (int64_t t = 0; t < len; ++t) {
    const int64_t page = c.Page(s, t), offset = t % c.page_size;
    const int64_t at = src.Offset(page, h, offset, 0);
    unsigned char* row = dst + static_cast<size_t>(t * dim) * size;
    if (src.dtype == Dtype::kI8) {
      const int8_t* x = reinterpret_cast<const int8_t*>(base) + at;
      float* out = reinterpret_cast<float*>(row);
      const float* sc = scale.As<float>();
      if (layout == KvScales::kPerToken) {
        const float k = sc[scale.Offset(page, h, offset, 0)];
        for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<float>(x[d * stride]) * k;
      } else {
        const float* ch = sc + scale.Offset(0, h, 0, 0);
        const int64_t cs = scale.stride[3];
        for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<float>(x[d * stride]) * ch[d * cs];
      }
    } else if (stride == 1 || dim == 1) {
      memcpy(row, base + static_cast<size_t>(at) * size, static_cast<size_t>(dim) * size);
    } else {
      for (int64_t d = 0; d < dim; ++d) {
        memcpy(row + static_cast<size_t>(d) * size,
               base + static_cast<size_t>(at + d * stride) * size, size);
      }
    }
  }
}

// A dense [1, heads, len, dim] view of contiguous memory (size-1 dims get
// stride 0, as every TensorView).
TensorView Dense(const void* data, Dtype dtype, int64_t heads, int64_t len, int64_t dim) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.shape[1] = heads, v.shape[2] = len, v.shape[3] = dim;
  v.stride[1] = heads > 1 ? len * dim : 0;
  v.stride[2] = len > 1 ? dim : 0;
  v.stride[3] = dim > 1 ? 1 : 0;
  return v;
}

// Rows [q0, q0 + len) of a packed [1, T, H, X] view as [1, H, len, X].
TensorView Rows(const TensorView& packed, int64_t q0, int64_t len) {
  TensorView v;
  v.dtype = packed.dtype;
  v.data = static_cast<const unsigned char*>(packed.data) +
           static_cast<size_t>(packed.Offset(0, q0, 0, 0)) * DtypeSize(packed.dtype);
  v.shape[1] = packed.shape[2], v.shape[2] = len, v.shape[3] = packed.shape[3];
  v.stride[1] = packed.stride[2];
  v.stride[2] = len > 1 ? packed.stride[1] : 0;
  v.stride[3] = packed.stride[3];
  return v;
}

// The rows of a sequence without keys: zeros, lse = the sink or -inf.
void EmptyRows(const KvAttentionProblem& p, int64_t q0, int64_t len) {
  const int64_t Hq = p.q_heads, Dv = p.cache.value_dim;
  float* out = p.out.AsMutable<float>();
  for (int64_t t = q0; t < q0 + len; ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t d = 0; d < Dv; ++d) out[p.out.Offset(0, t, h, d)] = 0.0f;
      if (p.has_lse) {
        p.lse.AsMutable<float>()[p.lse.Offset(0, 0, t, h)] =
            p.rules.sinks != nullptr ? p.rules.sinks[h] : -INFINITY;
      }
    }
  }
}

// Sequence s as an hwyattn_sdpa problem over its gathered keys and values.
SdpaProblem SequenceProblem(const KvAttentionProblem& p, int64_t s, Dtype gathered,
                            const void* keys, const void* values) {
  const KvCacheView& c = p.cache;
  const int64_t q0 = p.q_start[s], q_len = p.QueryLength(s), len = p.kv_len[s];
  SdpaProblem sp = p.rules;  // scale, causal, modifiers, executor
  sp.q = Rows(p.q, q0, q_len);
  sp.out = Rows(p.out, q0, q_len);
  if (c.k.dtype == Dtype::kI8) {
    sp.k = Dense(keys, gathered, c.kv_heads, len, c.head_dim);
    sp.v = Dense(values, gathered, c.kv_heads, len, c.value_dim);
  } else if (c.block_table != nullptr) {
    // The pages in place, through the sequence's row of the block table.
    sp.k = c.k;
    sp.v = c.v;
    sp.pages.table = c.block_table + s * c.block_table_stride;
    sp.pages.table_stride = 0;
    sp.pages.page_size = c.page_size;
  } else {
    // No block table: sequence s is page s, its keys contiguous.
    sp.k = c.k;
    sp.v = c.v;
    sp.k.data = static_cast<const unsigned char*>(c.k.data) +
                c.k.Offset(s, 0, 0, 0) * static_cast<int64_t>(DtypeSize(c.k.dtype));
    sp.v.data = static_cast<const unsigned char*>(c.v.data) +
                c.v.Offset(s, 0, 0, 0) * static_cast<int64_t>(DtypeSize(c.v.dtype));
    sp.k.shape[0] = sp.v.shape[0] = 1;
    sp.k.shape[2] = sp.v.shape[2] = len;
  }
  sp.batch = 1;
  sp.q_heads = p.q_heads;
  sp.kv_heads = c.kv_heads;
  sp.q_len = q_len;
  sp.kv_len = len;
  sp.head_dim = c.head_dim;
  sp.value_dim = c.value_dim;
  sp.has_position_offset = true;
  sp.position_offset = p.QueryPosition(s);
  sp.has_lse = p.has_lse;
  if (p.has_lse) {
    // [1, 1, T, Hq] rows q0.. as [1, 1, Hq, q_len].
    TensorView& l = sp.lse;
    l.dtype = Dtype::kF32;
    l.data = p.lse.As<float>() + p.lse.Offset(0, 0, q0, 0);
    l.shape[2] = p.q_heads, l.shape[3] = q_len;
    l.stride[2] = p.lse.stride[3];
    l.stride[3] = q_len > 1 ? p.lse.stride[2] : 0;
  }
  return sp;
}

// Bytes of sequence s's gathered keys (padded to whole lines) and values,
// false on overflow.
bool GatherBytes(const KvAttentionProblem& p, int64_t s, size_t size, size_t* k_bytes,
                 size_t* total) {
  const KvCacheView& c = p.cache;
  const size_t rows = static_cast<size_t>(c.kv_heads * p.kv_len[s]);
  size_t k, v;
  if (__builtin_mul_overflow(rows, static_cast<size_t>(c.head_dim) * size, &k) ||
      __builtin_mul_overflow(rows, static_cast<size_t>(c.value_dim) * size, &v) ||
      k > SIZE_MAX / 2 - kScratchAlign || v > SIZE_MAX / 2) {
    return false;
  }
  *k_bytes = (k + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  *total = *k_bytes + v;
  return true;
}

}  // namespace

hwyattn_status RunKvAttention(const KvAttentionProblem& p) {
  const KvCacheView& c = p.cache;
  const int64_t Hkv = c.kv_heads, D = c.head_dim, Dv = c.value_dim;
  const Dtype gathered = c.k.dtype == Dtype::kI8 ? Dtype::kF32 : c.k.dtype;
  const size_t size = DtypeSize(gathered);
  const bool gather = c.k.dtype == Dtype::kI8;
  // Every allocation first (the largest gather, each sequence's attention
  // scratch: grow-only buffers), so that running out of memory writes no row.
  size_t most = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    if (p.QueryLength(s) == 0 || p.kv_len[s] == 0) continue;
    size_t k_bytes, total;
    if (gather) {
      if (!GatherBytes(p, s, size, &k_bytes, &total)) return HWYATTN_OUT_OF_MEMORY;
      most = std::max(most, total);
    }
    const hwyattn_status reserved =
        ReserveSdpaScratch(SequenceProblem(p, s, gathered, nullptr, nullptr));
    if (reserved != HWYATTN_OK) return reserved;
  }
  unsigned char* memory = nullptr;
  if (most > 0) {
    memory = static_cast<unsigned char*>(ThreadScratch(ScratchSlot::kKvGather, most));
    if (memory == nullptr) return HWYATTN_OUT_OF_MEMORY;
  }
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t q0 = p.q_start[s], q_len = p.QueryLength(s), len = p.kv_len[s];
    if (q_len == 0) continue;
    if (len == 0) {
      EmptyRows(p, q0, q_len);
      continue;
    }
    if (!gather) {
      const hwyattn_status status = RunSdpa(SequenceProblem(p, s, gathered, nullptr, nullptr));
      if (status != HWYATTN_OK) return status;
      continue;
    }
    size_t k_bytes = 0, total = 0;
    GatherBytes(p, s, size, &k_bytes, &total);  // checked above
    unsigned char* keys = memory;
    unsigned char* values = memory + k_bytes;
    const size_t head_k = static_cast<size_t>(len * D) * size;
    const size_t head_v = static_cast<size_t>(len * Dv) * size;
    const int64_t threads = std::max<int64_t>(
        1, std::min(
               {p.rules.executor.MaxWorkers(), Hkv,
                static_cast<int64_t>(static_cast<double>(total) / kMinGatherBytesPerThread) + 1}));
    ParallelRegion(p.rules.executor, threads, [&](int64_t me) {
      for (int64_t h = me; h < Hkv; h += threads) {
        GatherHead(c, c.k, c.k_scales, c.k_scale, s, h, len, D, size, keys + h * head_k);
        GatherHead(c, c.v, c.v_scales, c.v_scale, s, h, len, Dv, size, values + h * head_v);
      }
    });
    // The scratch was reserved above: this allocates nothing (unless another
    // thread raised the thread count in between).
    const hwyattn_status status = RunSdpa(SequenceProblem(p, s, gathered, keys, values));
    if (status != HWYATTN_OK) return status;
  }
  return HWYATTN_OK;
}

}  // namespace hwyattn
