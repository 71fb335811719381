// SPDX-License-Identifier: Apache-2.0
//
// The one small collective before any work: every rank publishes what it was
// called with (its local checks' verdict, the sizes and options all ranks
// must share, its own key count), and every rank reaches the same verdict
// from the same gathered table, so a bad argument anywhere is the same error
// everywhere and nobody is left waiting in a later collective.
#ifndef HWYATTN_MPI_AGREEMENT_H_
#define HWYATTN_MPI_AGREEMENT_H_

#include <mpi.h>
#include <stdint.h>

#include <vector>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// Values every rank must have equal, by index into CallShape::agreed.
enum AgreedField {
  kFunction,  // which hwyattn_mpi_* call (a rank calling another: an error)
  kBatch,
  kQueryHeads,
  kKvHeads,
  kQueryLen,
  kHeadDim,
  kValueDim,
  kQueryDtype,
  kScaleBits,
  kCausal,
  kWindowLeft,
  kWindowRight,
  kSoftcapBits,
  kPrecision,
  kHasMask,
  kHasLse,
  kKvLenHash,  // 0 = no kv_len, else a hash of the B values
  kAlibiHash,  // 0 = no alibi_slopes, else a hash of the Hq slopes
  kSinksHash,  // 0 = no sinks, else a hash of the Hq sinks
  // Ring mode only (0 in the sharded mode, whose shards may differ): the
  // K/V slices travel between ranks, so their layout must match.
  kKeyBatch,
  kValueBatch,
  kKeyDtype,
  kValueDtype,
  kNumAgreedFields
};

// What one rank was called with. Fixed size, exchanged as bytes.
struct CallShape {
  int32_t status = HWYATTN_OK;  // the local checks' verdict
  int32_t reserved = 0;
  int64_t agreed[kNumAgreedFields] = {};
  int64_t key_len = 0;     // this rank's own keys (may differ between ranks)
  char message[384] = "";  // the local checks' message when status != OK
};

// A hash of n bytes for kKvLenHash and friends: never 0, so 0 means absent.
int64_t HashBytes(const void* data, size_t n);

// Collective over comm: gathers every rank's CallShape (after one
// MPI_Allreduce of an integer that tells every rank whether all could
// allocate the gathered table). Returns HWYATTN_OK on
// every rank, with key_lens[r] = rank r's key_len, or the same error on every
// rank: the first rank (lowest) whose local checks failed, with its message;
// else the first field in which a rank differs from rank 0. Messages start
// with "rank r: ".
hwyattn_status Agree(MPI_Comm comm, const CallShape& mine, std::vector<int64_t>* key_lens);

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_AGREEMENT_H_
