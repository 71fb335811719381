// SPDX-License-Identifier: Apache-2.0
//
// The zigzag slice layout of hwyattn_mpi_ring_sdpa (hwyattn_mpi.h): a
// sequence of L tokens cut into 2N chunks, chunk c = tokens
// [floor(c L / 2N), floor((c + 1) L / 2N)); rank r of N holds chunks r and
// 2N - 1 - r. Under a causal mask the early chunk's rows see few keys and
// the late chunk's many, so every rank gets the same share of the triangle.
#ifndef HWYATTN_MPI_RING_LAYOUT_H_
#define HWYATTN_MPI_RING_LAYOUT_H_

#include <stdint.h>

namespace hwyattn_mpi {

// Rank `rank`'s two chunks: first[i] is the chunk's first token, len[i] its
// length (slice order: chunk rank, then chunk 2N - 1 - rank). Needs
// 0 <= rank < size and seq_len >= 0; a chunk is empty only if seq_len < 2N.
struct RingChunks {
  int64_t first[2], len[2];
  int64_t total() const { return len[0] + len[1]; }
};
RingChunks RingSlice(int64_t rank, int64_t size, int64_t seq_len);

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_RING_LAYOUT_H_
