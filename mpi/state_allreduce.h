// SPDX-License-Identifier: Apache-2.0
//
// Combining the ranks' partial attention states: one MPI_Allreduce whose
// user-defined, non-commutative operation merges (out, lse) pairs with
// hwyattn_merge_states, so that every rank ends with the merge of all
// partials in rank order, the same bits on every rank. The block also
// carries a status, so that a rank whose own computation failed tells every
// other rank in the same collective.
#ifndef HWYATTN_MPI_STATE_ALLREDUCE_H_
#define HWYATTN_MPI_STATE_ALLREDUCE_H_

#include <mpi.h>
#include <stdint.h>

#include <vector>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// One rank's partial state, as the collective sends it: rows = B * H * L
// rows of value_dim outputs, then their rows lses, then one float that
// codes the lowest failed rank and its status (0: none failed).
class StateBlock {
 public:
  // Whether rows and value_dim fit one MPI element (int count of floats).
  static bool Fits(int64_t rows, int64_t value_dim);
  // Allocates (HWYATTN_OUT_OF_MEMORY if it cannot). Fits() must hold.
  hwyattn_status Allocate(int64_t rows, int64_t value_dim);

  int64_t rows() const { return rows_; }
  int64_t value_dim() const { return value_dim_; }
  float* out() { return data_.data(); }                       // [rows, value_dim]
  float* lse() { return data_.data() + rows_ * value_dim_; }  // [rows]
  // Marks this rank's partial as failed with `status` (the collective still
  // runs, and every rank learns of it).
  void SetFailed(hwyattn_status status, int rank);

  // Collective over comm: replaces every rank's block by the merge of all
  // ranks' blocks (rank order). Returns HWYATTN_OK, or the failed rank's
  // status on every rank: this thread's message on the rank that failed
  // (left as its computation set it), "rank r failed ..." on the others.
  hwyattn_status Allreduce(MPI_Comm comm, int my_rank);

 private:
  int64_t rows_ = 0, value_dim_ = 0;
  std::vector<float> data_;
  float* failure() { return data_.data() + rows_ * (value_dim_ + 1); }
};

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_STATE_ALLREDUCE_H_
