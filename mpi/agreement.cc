// SPDX-License-Identifier: Apache-2.0

#include "mpi/agreement.h"

#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include <new>

#include "mpi/error.h"

namespace hwyattn_mpi {
namespace {

const char* const kFieldNames[kNumAgreedFields] = {
    "the function called (1 = hwyattn_mpi_sharded_sdpa, 2 = hwyattn_mpi_ring_sdpa)",
    "q: shape[0] (batch)",
    "q: shape[1] (query heads)",
    "k: shape[1] (kv heads)",
    "q: shape[2] (query length)",
    "q: shape[3] (head_dim)",
    "v: shape[3] (value_dim)",
    "q: dtype",
    "opts->scale (float bits)",
    "opts->causal",
    "opts->window_left",
    "opts->window_right",
    "opts->softcap (float bits)",
    "opts->precision",
    "opts->mask (1 = given)",
    "opts->lse (1 = given)",
    "opts->kv_len (0 = none, else a hash of its values)",
    "opts->alibi_slopes (0 = none, else a hash of its values)",
    "opts->sinks (0 = none, else a hash of its values)",
    "k: shape[0] (batch of the keys)",
    "v: shape[0] (batch of the values)",
    "k: dtype",
    "v: dtype",
};

}  // namespace

int64_t HashBytes(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  h &= 0x7fffffffffffffffull;
  return h == 0 ? 1 : static_cast<int64_t>(h);
}

hwyattn_status Agree(MPI_Comm comm, const CallShape& mine, std::vector<int64_t>* key_lens) {
  int size = 0;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
  int rank = 0;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  std::vector<CallShape> all;
  bool allocated = true;
  try {
    all.resize(static_cast<size_t>(size));
    key_lens->resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    allocated = false;
  }
  // A rank without the table (a few hundred bytes per rank) cannot take part
  // in the gather, so the ranks first agree, with one integer, that every
  // rank has it: the lowest rank that has not (none: INT_MAX).
  const int mine_missing = allocated ? INT_MAX : rank;
  int first_missing = INT_MAX;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(
      MPI_Allreduce(&mine_missing, &first_missing, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce"));
  if (first_missing != INT_MAX) {
    return Fail(HWYATTN_OUT_OF_MEMORY, "rank %d: out of memory for the %d ranks' call shapes",
                first_missing, size);
  }
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Allgather(&mine, sizeof(CallShape), MPI_BYTE, all.data(),
                                                     sizeof(CallShape), MPI_BYTE, comm),
                                       "MPI_Allgather"));
  for (int r = 0; r < size; ++r) {
    const CallShape& s = all[static_cast<size_t>(r)];
    if (s.status != HWYATTN_OK) {
      char text[sizeof(s.message) + 1];
      memcpy(text, s.message, sizeof(s.message));
      text[sizeof(s.message)] = '\0';
      return Fail(static_cast<hwyattn_status>(s.status), "rank %d: %s", r, text);
    }
  }
  for (int r = 1; r < size; ++r) {
    const CallShape& s = all[static_cast<size_t>(r)];
    for (int f = 0; f < kNumAgreedFields; ++f) {
      if (s.agreed[f] != all[0].agreed[f]) {
        return Fail(HWYATTN_INVALID_ARGUMENT,
                    "rank %d: %s is %" PRId64 " but rank 0 has %" PRId64
                    " (every rank must pass the same)",
                    r, kFieldNames[f], s.agreed[f], all[0].agreed[f]);
      }
    }
  }
  for (int r = 0; r < size; ++r)
    (*key_lens)[static_cast<size_t>(r)] = all[static_cast<size_t>(r)].key_len;
  return HWYATTN_OK;
}

}  // namespace hwyattn_mpi
