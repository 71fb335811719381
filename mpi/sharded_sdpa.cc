// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_sharded_sdpa: the keys split into contiguous shards, one per
// rank, the queries on every rank. Local checks (call_checks), one
// MPI_Allgather to agree on the problem, the rank's partial
// (block_attention), one MPI_Allreduce that merges the partials
// (state_allreduce), then the sinks, once.

#include <stddef.h>

#include <vector>

#include "include/hwyattn_mpi.h"
#include "mpi/agreement.h"
#include "mpi/block_attention.h"
#include "mpi/call_checks.h"
#include "mpi/error.h"
#include "mpi/state_allreduce.h"
#include "mpi/tensor_view.h"

namespace hwyattn_mpi {

hwyattn_status ShardedSdpa(MPI_Comm comm, const hwyattn_tensor* q, const hwyattn_tensor* k,
                           const hwyattn_tensor* v, hwyattn_tensor* out,
                           const hwyattn_sdpa_options* user_opts) {
  ClearError();
  if (comm == MPI_COMM_NULL) {
    return Fail(HWYATTN_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  }
  int rank = 0;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));

  CallShape shape;
  hwyattn_sdpa_options opts;
  Sizes sizes = {};
  StateBlock state;
  if (Describe(Mode::kSharded, q, k, v, out, user_opts, &shape, &opts, &sizes) == HWYATTN_OK) {
    const hwyattn_status s =
        state.Allocate(sizes.batch * sizes.q_heads * sizes.q_len, sizes.value_dim);
    if (s != HWYATTN_OK) RecordFailure(&shape, s);
  }
  std::vector<int64_t> key_lens;
  HWYATTN_MPI_RETURN_IF_ERROR(Agree(comm, shape, &key_lens));

  // From here on every rank holds the same sizes and options: the checks
  // below give the same verdict everywhere without another message.
  int64_t total = 0, offset = 0;
  for (size_t r = 0; r < key_lens.size(); ++r) {
    if (static_cast<int>(r) < rank) offset += key_lens[r];
    total += key_lens[r];
  }
  if (total == 0) {
    return Fail(HWYATTN_INVALID_ARGUMENT,
                "k: every rank's shard is empty (shape[2] = 0 on all %zu ranks)", key_lens.size());
  }
  HWYATTN_MPI_RETURN_IF_ERROR(CheckKvLen(opts, sizes.batch, total, "the keys of all ranks"));

  const PositionRules rules = PositionRules::From(opts);
  Block block;
  block.q = q;
  block.k = k;
  block.v = v;
  block.key_len = sizes.key_len;
  block.q_pos = opts.causal == HWYATTN_CAUSAL_BOTTOM_RIGHT ? total - sizes.q_len : 0;
  block.k_pos = offset;
  block.mask = opts.mask;
  block.kv_len = opts.kv_len;
  block.batch = sizes.batch;
  block.q_heads = sizes.q_heads;
  block.q_len = sizes.q_len;
  block.value_dim = sizes.value_dim;
  const hwyattn_status computed = ComputeBlock(block, rules, opts, state.out(), state.lse());
  if (computed != HWYATTN_OK) {
    PrefixRank(rank);
    state.SetFailed(computed, rank);
  }
  HWYATTN_MPI_RETURN_IF_ERROR(state.Allreduce(comm, rank));

  // The merged state is the same bits on every rank; the sinks join it here,
  // once, and it is copied to the caller's out (and lse).
  const int64_t out_shape[4] = {sizes.batch, sizes.q_heads, sizes.q_len, sizes.value_dim};
  return WriteResult(state.out(), state.lse(), out_shape, opts.sinks, out, opts.lse, rank);
}

}  // namespace hwyattn_mpi

extern "C" HWYATTN_MPI_API hwyattn_status hwyattn_mpi_sharded_sdpa(
    MPI_Comm comm, const hwyattn_tensor* q, const hwyattn_tensor* k, const hwyattn_tensor* v,
    hwyattn_tensor* out, const hwyattn_sdpa_options* opts) {
  return hwyattn_mpi::ShardedSdpa(comm, q, k, v, out, opts);
}
