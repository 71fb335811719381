// SPDX-License-Identifier: Apache-2.0
//
// One block of a distributed attention problem: a run of query rows and a
// run of keys, each at known positions of the whole sequence, computed with
// hwyattn_sdpa into a partial (out, lse) that hwyattn_merge_states can
// combine with the other blocks' partials. The whole problem's position
// rules (causal, windows, ALiBi's j - p, kv_len) are expressed in the
// block's own terms: keys no row can see are skipped, a block every row sees
// whole runs without position rules, a block whose diagonal is hwyattn_sdpa's
// own (top-left or bottom-right) runs with it, and any other block gets a
// BOOL (or F32, with an F32 user mask) mask of its rows x keys.
#ifndef HWYATTN_MPI_BLOCK_ATTENTION_H_
#define HWYATTN_MPI_BLOCK_ATTENTION_H_

#include <stdint.h>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// The whole problem's position rules, over whole-sequence positions: a query
// at position p sees key position j iff lo(p) <= j < hi(p) (kv_len and masks
// come on top).
struct PositionRules {
  bool causal = false;
  int64_t window_left = 0, window_right = 0;
  // The rules of a call's (checked) options.
  static PositionRules From(const hwyattn_sdpa_options& opts);
  void Visible(int64_t p, int64_t* lo, int64_t* hi) const;
};

struct Block {
  const hwyattn_tensor* q;  // [B, Hq, Lq, D]: rows at positions q_pos + i
  const hwyattn_tensor* k;  // [Bk, Hkv, key_len, D]: keys at positions k_pos + j
  const hwyattn_tensor* v;  // [Bk, Hkv, key_len, Dv]
  int64_t key_len = 0;      // may be 0 (k, v not read)
  int64_t q_pos = 0, k_pos = 0;
  // Optional: broadcastable to [B, Hq, Lq, key_len], BOOL or F32, already
  // checked (rank, dtype, sizes, data) by the caller.
  const hwyattn_tensor* mask = nullptr;
  // Optional [B]: batch b's keys at positions >= kv_len[b] are padding.
  const int32_t* kv_len = nullptr;
  int64_t batch = 0, q_heads = 0, q_len = 0, value_dim = 0;
};

// Writes the block's partial: out [B, Hq, Lq, Dv] and lse [B, Hq, Lq], dense,
// with lse in the whole problem's terms (ALiBi's slope * (j - p) over
// whole-sequence positions), no sinks. A row that sees no key of the block
// gets zeros and -INFINITY. base: the call's options (scale, softcap,
// alibi_slopes, precision, parallel); its position fields, mask, kv_len,
// sinks and outputs are ignored. Errors: what hwyattn_sdpa returns (its
// message copied), HWYATTN_OUT_OF_MEMORY for the mask.
hwyattn_status ComputeBlock(const Block& block, const PositionRules& rules,
                            const hwyattn_sdpa_options& base, float* out, float* lse);

// The last step of both modes: a merged state (dense F32 out [B, Hq, L, Dv]
// and lse [B, Hq, L], shape = {B, Hq, L, Dv}) joins the sinks (may be null)
// once on its way to the caller's out and lse (may be null), through
// hwyattn_merge_states (which allocates nothing). `rank` names this rank in
// the message of a failure.
hwyattn_status WriteResult(float* out, float* lse, const int64_t shape[4], const float* sinks,
                           hwyattn_tensor* dst, hwyattn_tensor* dst_lse, int rank);

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_BLOCK_ATTENTION_H_
