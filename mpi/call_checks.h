// SPDX-License-Identifier: Apache-2.0
//
// The local checks of an hwyattn_mpi_* call, made before the agreement
// collective: each rank checks its own arguments and fills the CallShape it
// publishes (its verdict and message, the sizes and options every rank must
// share). Nothing here talks to other ranks.
#ifndef HWYATTN_MPI_CALL_CHECKS_H_
#define HWYATTN_MPI_CALL_CHECKS_H_

#include <stdint.h>

#include "include/hwyattn.h"
#include "mpi/agreement.h"

namespace hwyattn_mpi {

enum class Mode {
  kSharded = 1,  // q the same on every rank, k/v a shard of the keys
  kRing = 2,     // q, k, v, out all this rank's slice of one sequence
};

// This rank's sizes. In the sharded mode key_len is the rank's shard; in the
// ring mode q_len == key_len is the rank's slice of the sequence.
struct Sizes {
  int64_t batch, q_heads, kv_heads, q_len, head_dim, value_dim, key_len;
};

// Checks this rank's arguments for `mode`: fills *shape (its status and
// message on failure), *opts (the caller's options, or the defaults, at this
// header's struct_size) and *sizes. Returns the verdict (also in
// shape->status).
hwyattn_status Describe(Mode mode, const hwyattn_tensor* q, const hwyattn_tensor* k,
                        const hwyattn_tensor* v, const hwyattn_tensor* out,
                        const hwyattn_sdpa_options* user, CallShape* shape,
                        hwyattn_sdpa_options* opts, Sizes* sizes);

// Records a failure of this rank's preparations after Describe (running out
// of memory for its buffers) in *shape, with this thread's message, so that
// the agreement makes it every rank's verdict.
void RecordFailure(CallShape* shape, hwyattn_status status);

// After the agreement: opts->kv_len (the whole sequence's valid lengths,
// `batch` values, the same on every rank) within [0, total], total being
// the keys of all ranks; `whole` names them in the message.
hwyattn_status CheckKvLen(const hwyattn_sdpa_options& opts, int64_t batch, int64_t total,
                          const char* whole);

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_CALL_CHECKS_H_
