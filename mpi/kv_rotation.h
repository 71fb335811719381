// SPDX-License-Identifier: Apache-2.0
//
// The K/V slices of hwyattn_mpi_ring_sdpa travelling around the ring: per
// tensor (keys, values) two dense buffers, one holding the slice being
// computed on (and sent to the next rank), one receiving the next slice
// from the previous rank; they swap at every step. Messages are rows of
// `dim` elements (an MPI contiguous type), so counts stay small.
#ifndef HWYATTN_MPI_KV_ROTATION_H_
#define HWYATTN_MPI_KV_ROTATION_H_

#include <mpi.h>
#include <stdint.h>

#include <vector>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// One tensor's slices ([batch, heads, len, dim] of `dtype`).
class SliceStream {
 public:
  // Sizes the two buffers for slices of up to max_len tokens
  // (HWYATTN_OUT_OF_MEMORY, or INVALID_ARGUMENT if the size overflows).
  hwyattn_status Allocate(int64_t batch, int64_t heads, int64_t dim, hwyattn_dtype dtype,
                          int64_t max_len);
  // Whether a slice of len tokens fits one MPI message of rows.
  bool Fits(int64_t len) const;
  // Step 0: the current slice is this rank's own (own: its descriptor,
  // checked; sent straight from its memory when dense, else packed).
  void Begin(const hwyattn_tensor& own);
  // Starts sending the current slice (len tokens) to rank `to` and
  // receiving the next (next_len tokens) from rank `from`.
  hwyattn_status Post(MPI_Comm comm, int tag, int to, int64_t len, int from, int64_t next_len);
  // Completes the posted messages; the received slice becomes current.
  hwyattn_status Wait();
  // Lets MPI progress the posted messages (never blocks).
  void Progress();
  // The current slice as a dense tensor of len tokens (after Wait).
  hwyattn_tensor Current(int64_t len) const;
  int64_t BytesPerToken() const { return row_bytes_ * rows_per_token_; }

 private:
  int64_t batch_ = 0, heads_ = 0, rows_per_token_ = 0, dim_ = 0, row_bytes_ = 0;
  hwyattn_dtype dtype_ = HWYATTN_F32;
  std::vector<char> buffers_[2];
  const void* current_ = nullptr;
  int receiving_ = 0;  // the buffer the next slice is received into
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_KV_ROTATION_H_
