// SPDX-License-Identifier: Apache-2.0
//
// The MPI operation receives two blocks (invec from lower ranks, inoutvec
// from higher ones, as MPI orders a non-commutative reduction) and must
// leave their merge in inoutvec. hwyattn_merge_states merges in place into
// its partial 0, so inoutvec is partial 0 and invec partial 1: the order in
// which a pair is folded is fixed, which is all that determinism needs. The
// operation learns the block's geometry from an attribute cached on the
// datatype (the only context MPI hands it).

#include "mpi/state_allreduce.h"

#include <limits.h>
#include <math.h>

#include <mutex>
#include <new>

#include "mpi/error.h"

namespace hwyattn_mpi {
namespace {

// A failure is coded as one float, rank * 8 + status (exact below 2^24), 0
// for none; the merge keeps the lowest rank's. kNoRank stands for a failure
// of the merge itself, and for ranks too large to code.
constexpr int kNoRank = (1 << 21) - 1;
float FailureCode(hwyattn_status s, int rank) {
  return static_cast<float>((rank < kNoRank ? rank : kNoRank) * 8 + static_cast<int>(s));
}

struct Geometry {
  int64_t rows, value_dim;
};

int GeometryKeyval() {
  static int keyval = MPI_KEYVAL_INVALID;
  static std::once_flag once;
  std::call_once(once, [] {
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &keyval, nullptr);
  });
  return keyval;
}

// Folds one block `in` into `inout`.
void MergeBlock(const Geometry& g, float* in, float* inout) {
  const float in_failure = in[g.rows * (g.value_dim + 1)];
  float* io_failure = inout + g.rows * (g.value_dim + 1);
  if (in_failure != 0.0f || *io_failure != 0.0f) {
    if (*io_failure == 0.0f || (in_failure != 0.0f && in_failure < *io_failure)) {
      *io_failure = in_failure;
    }
    return;
  }
  hwyattn_tensor outs[2], lses[2];
  const int64_t out_shape[2] = {g.rows, g.value_dim};
  const int64_t lse_shape[1] = {g.rows};
  float* blocks[2] = {inout, in};
  for (int i = 0; i < 2; ++i) {
    hwyattn_tensor_contiguous(&outs[i], blocks[i], HWYATTN_F32, 2, out_shape);
    hwyattn_tensor_contiguous(&lses[i], blocks[i] + g.rows * g.value_dim, HWYATTN_F32, 1,
                              lse_shape);
  }
  const hwyattn_tensor* out_ptrs[2] = {&outs[0], &outs[1]};
  const hwyattn_tensor* lse_ptrs[2] = {&lses[0], &lses[1]};
  if (hwyattn_merge_states(2, out_ptrs, lse_ptrs, nullptr, &outs[0], &lses[0]) != HWYATTN_OK) {
    // Cannot happen for these descriptors; reported as a bug if it does.
    *io_failure = FailureCode(HWYATTN_INTERNAL_ERROR, kNoRank);
  }
}

extern "C" void HwyattnMpiMergeStates(void* in, void* inout, int* len, MPI_Datatype* type) {
  Geometry* g = nullptr;
  int found = 0;
  MPI_Type_get_attr(*type, GeometryKeyval(), &g, &found);
  if (!found || g == nullptr) return;  // not our datatype: cannot happen
  const int64_t extent = g->rows * (g->value_dim + 1) + 1;
  for (int e = 0; e < *len; ++e) {
    MergeBlock(*g, static_cast<float*>(in) + e * extent, static_cast<float*>(inout) + e * extent);
  }
}

}  // namespace

bool StateBlock::Fits(int64_t rows, int64_t value_dim) {
  // rows, value_dim >= 1 and each below 2^31 (the caller checked the sizes
  // against int64 overflow): the product cannot overflow.
  return rows <= INT_MAX && value_dim <= INT_MAX && rows * (value_dim + 1) + 1 <= INT_MAX;
}

hwyattn_status StateBlock::Allocate(int64_t rows, int64_t value_dim) {
  rows_ = rows;
  value_dim_ = value_dim;
  try {
    data_.assign(static_cast<size_t>(rows * (value_dim + 1) + 1), 0.0f);
  } catch (const std::bad_alloc&) {
    data_.clear();
    return Fail(HWYATTN_OUT_OF_MEMORY, "out of memory for the partial state (%lld rows of %lld)",
                static_cast<long long>(rows), static_cast<long long>(value_dim + 1));
  }
  return HWYATTN_OK;
}

void StateBlock::SetFailed(hwyattn_status s, int rank) { *failure() = FailureCode(s, rank); }

hwyattn_status StateBlock::Allreduce(MPI_Comm comm, int my_rank) {
  const int count = static_cast<int>(rows_ * (value_dim_ + 1) + 1);
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  Geometry geometry = {rows_, value_dim_};
  hwyattn_status s = CheckMpi(MPI_Type_contiguous(count, MPI_FLOAT, &type), "MPI_Type_contiguous");
  if (s == HWYATTN_OK) s = CheckMpi(MPI_Type_commit(&type), "MPI_Type_commit");
  if (s == HWYATTN_OK) {
    s = CheckMpi(MPI_Type_set_attr(type, GeometryKeyval(), &geometry), "MPI_Type_set_attr");
  }
  if (s == HWYATTN_OK) {
    s = CheckMpi(MPI_Op_create(&HwyattnMpiMergeStates, /*commute=*/0, &op), "MPI_Op_create");
  }
  if (s == HWYATTN_OK) {
    s = CheckMpi(MPI_Allreduce(MPI_IN_PLACE, data_.data(), 1, type, op, comm), "MPI_Allreduce");
  }
  if (op != MPI_OP_NULL) MPI_Op_free(&op);
  if (type != MPI_DATATYPE_NULL) MPI_Type_free(&type);
  if (s != HWYATTN_OK) return s;
  const int coded = static_cast<int>(*failure());
  if (coded == 0) return HWYATTN_OK;
  const hwyattn_status code = static_cast<hwyattn_status>(coded % 8);
  const int rank = coded / 8;
  if (rank == my_rank) return code;  // its message is this thread's
  if (rank == kNoRank) {
    return Fail(code, "merging the partial states failed (hwyattn_merge_states rejected them)");
  }
  return Fail(code, "rank %d failed with %s (its hwyattn_mpi_last_error() has the detail)", rank,
              hwyattn_status_string(code));
}

}  // namespace hwyattn_mpi
