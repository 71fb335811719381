// SPDX-License-Identifier: Apache-2.0
//
// Small helpers on hwyattn_tensor descriptors for the MPI component: the
// right-aligned four logical dimensions (hwyattn.h's convention), element
// sizes, and sub-views along the key axis. Descriptors only; no data is read.
#ifndef HWYATTN_MPI_TENSOR_VIEW_H_
#define HWYATTN_MPI_TENSOR_VIEW_H_

#include <stddef.h>
#include <stdint.h>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// The descriptor's four logical dimensions: the leading 4 - rank ones have
// size 1 and stride 0. The caller has checked that rank is in 1..4.
struct Dims4 {
  int64_t shape[4];
  int64_t stride[4];
  explicit Dims4(const hwyattn_tensor& t) {
    const int lead = 4 - t.rank;
    for (int i = 0; i < 4; ++i) {
      shape[i] = i < lead ? 1 : t.shape[i - lead];
      stride[i] = i < lead ? 0 : t.stride[i - lead];
    }
  }
};

// Bytes per element of a dtype hwyattn knows (0 for any other value).
inline size_t DtypeSize(hwyattn_dtype dtype) {
  switch (dtype) {
    case HWYATTN_F32: return 4;
    case HWYATTN_F16:
    case HWYATTN_BF16: return 2;
    case HWYATTN_BOOL:
    case HWYATTN_I8:
    case HWYATTN_F8E4M3:
    case HWYATTN_F8E5M2: return 1;
    default: return 0;  // a packed format (blocks, I4: not accepted by libhwyattn_mpi) or unknown
  }
}

// t restricted to [begin, begin + count) along logical dimension `dim`
// (0..3; a dimension the descriptor does not have is size 1 and must not be
// sliced). count >= 1; t's data must be valid.
inline hwyattn_tensor Slice(const hwyattn_tensor& t, int dim, int64_t begin, int64_t count) {
  hwyattn_tensor s = t;
  const int axis = dim - (4 - t.rank);
  s.data = static_cast<char*>(t.data) +
           begin * t.stride[axis] * static_cast<int64_t>(DtypeSize(t.dtype));
  s.shape[axis] = count;
  return s;
}

// Whether no two elements of the dims share an offset: ordering the
// dimensions of size > 1 by stride, each stride steps over all that the
// smaller ones span (hwyattn.h's rule for outputs). A span that overflows
// int64 counts as overlapping.
bool NoSelfOverlap(const Dims4& d);

// Whether the byte offset of the last element (sizes >= 1, strides >= 0)
// fits int64, so that pointers into the tensor can be formed without
// overflow.
bool SpanFits(const Dims4& d, size_t elem);

}  // namespace hwyattn_mpi

#endif  // HWYATTN_MPI_TENSOR_VIEW_H_
