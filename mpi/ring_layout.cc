// SPDX-License-Identifier: Apache-2.0

#include "mpi/ring_layout.h"

#include <inttypes.h>

#include "include/hwyattn_mpi.h"
#include "mpi/error.h"

namespace hwyattn_mpi {
namespace {

// floor(c * L / chunks), without overflow (c <= chunks).
int64_t ChunkStart(int64_t c, int64_t chunks, int64_t seq_len) {
  return static_cast<int64_t>(static_cast<__int128>(c) * seq_len / chunks);
}

}  // namespace

RingChunks RingSlice(int64_t rank, int64_t size, int64_t seq_len) {
  const int64_t chunks = 2 * size;
  const int64_t c[2] = {rank, chunks - 1 - rank};
  RingChunks out;
  for (int i = 0; i < 2; ++i) {
    out.first[i] = ChunkStart(c[i], chunks, seq_len);
    out.len[i] = ChunkStart(c[i] + 1, chunks, seq_len) - out.first[i];
  }
  return out;
}

}  // namespace hwyattn_mpi

extern "C" HWYATTN_MPI_API hwyattn_status hwyattn_mpi_ring_slice(int32_t rank, int32_t size,
                                                                 int64_t seq_len, int64_t* first0,
                                                                 int64_t* len0, int64_t* first1,
                                                                 int64_t* len1) {
  using hwyattn_mpi::Fail;
  hwyattn_mpi::ClearError();
  if (first0 == nullptr || len0 == nullptr || first1 == nullptr || len1 == nullptr) {
    return Fail(HWYATTN_INVALID_ARGUMENT, "first0, len0, first1 and len1 must not be NULL");
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return Fail(HWYATTN_INVALID_ARGUMENT, "rank is %d and size %d; need 0 <= rank < size",
                static_cast<int>(rank), static_cast<int>(size));
  }
  if (seq_len < 2 * static_cast<int64_t>(size)) {
    return Fail(HWYATTN_INVALID_ARGUMENT,
                "seq_len is %" PRId64 "; the ring needs at least 2 * size = %" PRId64
                " tokens (two chunks per rank)",
                seq_len, 2 * static_cast<int64_t>(size));
  }
  const hwyattn_mpi::RingChunks s = hwyattn_mpi::RingSlice(rank, size, seq_len);
  *first0 = s.first[0];
  *len0 = s.len[0];
  *first1 = s.first[1];
  *len1 = s.len[1];
  return HWYATTN_OK;
}
