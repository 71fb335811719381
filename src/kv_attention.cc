// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_kv_attention: every sequence becomes an SdpaProblem of its own
// (its rows of the packed queries and outputs, its explicit query position:
// SdpaProblem::position_offset), over the cache where it is: the problem's
// K/V are the cache's page views and its block-table row (SdpaProblem::pages;
// the decode kernel reads the pages in place, the prefill kernel gathers them
// into the panels it packs anyway), and an I8 cache's scales go with them
// (SdpaProblem::k_scale, v_scale: the kernels apply them). All the
// sequences then run as one call (RunSdpaBatch): their work items share the
// call's parallel regions, balanced by cost.
//
// Batch invariance follows: a sequence's problem (its sizes, its keys, its
// positions) is the same whatever else is in the batch and wherever its
// pages are, its kernel is chosen from it alone, and the kernels split keys
// into chunks fixed by the problem, never by the thread count or by which
// worker runs what (pages of a multiple of 16 keys give the bits of a
// contiguous cache: tests/paged_test.cc).
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <new>

#include "src/attention.h"
#include "src/kv_attention.h"
#include "src/ops/convert.h"
#include "src/ops/kv_cache_write.h"
#include "src/scratch.h"
#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {
namespace {

// Rows [q0, q0 + len) of a packed [1, T, H, X] view as [1, H, len, X].
TensorView Rows(const TensorView& packed, int64_t q0, int64_t len) {
  TensorView v;
  v.dtype = packed.dtype;
  v.data = packed.BytesAt(packed.Offset(0, q0, 0, 0));
  v.shape[1] = packed.shape[2], v.shape[2] = len, v.shape[3] = packed.shape[3];
  v.stride[1] = packed.stride[2];
  v.stride[2] = len > 1 ? packed.stride[1] : 0;
  v.stride[3] = packed.stride[3];
  return v;
}

// The rows of a sequence without keys: zeros, lse = the sink or -inf.
void EmptyRows(const KvAttentionProblem& p, int64_t q0, int64_t len) {
  const int64_t Hq = p.q_heads, Dv = p.cache.value_dim;
  const float zero = 0.0f;
  for (int64_t t = q0; t < q0 + len; ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t d = 0; d < Dv; ++d) StoreOutputRow(p.out, p.out.Offset(0, t, h, d), &zero, 1);
      if (p.has_lse) {
        p.lse.AsMutable<float>()[p.lse.Offset(0, 0, t, h)] =
            p.rules.sinks != nullptr ? p.rules.sinks[h] : -INFINITY;
      }
    }
  }
}

// The view of sequence s's page (the cache without a block table: sequence
// s is page s) as a [1, Hkv, len, X] tensor.
TensorView OwnPage(const TensorView& t, int64_t s, int64_t len) {
  TensorView v = t;
  v.data = t.BytesAt(t.Offset(s, 0, 0, 0));
  v.shape[0] = 1;
  v.shape[2] = len;
  return v;
}

// Sequence s as an hwyattn_sdpa problem over the cache.
SdpaProblem SequenceProblem(const KvAttentionProblem& p, int64_t s) {
  const KvCacheView& c = p.cache;
  const int64_t q0 = p.q_start[s], q_len = p.QueryLength(s), len = p.kv_len[s];
  SdpaProblem sp = p.rules;  // scale, causal, modifiers, executor
  sp.q = Rows(p.q, q0, q_len);
  sp.out = Rows(p.out, q0, q_len);
  sp.k = c.k;
  sp.v = c.v;
  sp.k_scale = {c.k_scales, c.k_scale};
  sp.v_scale = {c.v_scales, c.v_scale};
  if (c.block_table != nullptr) {
    // The pages in place, through the sequence's row of the block table.
    sp.pages.table = c.block_table + s * c.block_table_stride;
    sp.pages.table_stride = 0;
    sp.pages.page_size = c.page_size;
  } else {
    sp.k = OwnPage(c.k, s, len);
    sp.v = OwnPage(c.v, s, len);
    // Per-token scales are addressed as the keys are; per-channel ones are
    // the cache's.
    if (c.k_scales == KvScales::kPerToken) sp.k_scale.t = OwnPage(c.k_scale, s, len);
    if (c.v_scales == KvScales::kPerToken) sp.v_scale.t = OwnPage(c.v_scale, s, len);
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

}  // namespace

hwyattn_status RunKvAttention(const KvAttentionProblem& p) {
  // The sequences with queries and keys, as problems (the others only get
  // zeros, once the call is known to succeed).
  size_t bytes;
  if (__builtin_mul_overflow(static_cast<size_t>(p.num_seqs), sizeof(SdpaProblem), &bytes))
    return HWYATTN_OUT_OF_MEMORY;
  SdpaProblem* problems = static_cast<SdpaProblem*>(ThreadScratch(ScratchSlot::kSequences, bytes));
  if (problems == nullptr) return HWYATTN_OUT_OF_MEMORY;
  int64_t n = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    if (p.QueryLength(s) > 0 && p.kv_len[s] > 0)
      new (&problems[n++]) SdpaProblem(SequenceProblem(p, s));
  }
  const hwyattn_status status = RunSdpaBatch(problems, n, p.rules.executor);
  if (status != HWYATTN_OK) return status;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    if (p.QueryLength(s) > 0 && p.kv_len[s] == 0) EmptyRows(p, p.q_start[s], p.QueryLength(s));
  }
  return HWYATTN_OK;
}

hwyattn_status RunKvCacheWrite(const KvWriteProblem& p) {
  const KvWriteKernels& kernels = GetKvWriteKernels();
  const KvCacheView& c = p.cache;
  const double bytes = static_cast<double>(p.tokens * c.kv_heads) *
                       static_cast<double>(c.head_dim + c.value_dim) * 4.0;
  const int64_t threads = WorkersForBytes(p.executor, bytes, p.tokens);
  // Per worker: the row and, for per-channel scales, the row's scales.
  const size_t row_floats = 2 * KvWriteRowFloats(p, kernels.lanes);
  float* memory = static_cast<float*>(ThreadScratch(
      ScratchSlot::kAttention, row_floats * static_cast<size_t>(threads) * sizeof(float)));
  if (memory == nullptr) return HWYATTN_OUT_OF_MEMORY;
  ParallelRegion(p.executor, threads, [&](int64_t me) {
    float* buffer = memory + static_cast<size_t>(me) * row_floats;
    const int64_t begin = p.tokens * me / threads, end = p.tokens * (me + 1) / threads;
    for (int64_t t = begin; t < end; ++t) {
      if (p.slot[t] >= 0) kernels.write_token(p, t, buffer);
    }
  });
  return HWYATTN_OK;
}

}  // namespace hwyattn
