// SPDX-License-Identifier: Apache-2.0
//
// Internal tensor view: a validated hwyattn_tensor normalised to rank 4.
#ifndef HWYATTN_SRC_TENSOR_H_
#define HWYATTN_SRC_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "include/hwyattn.h"

namespace hwyattn {

// Bytes of one element of `t`.
inline size_t DtypeSize(hwyattn_dtype t) {
  switch (t) {
    case HWYATTN_F32: return 4;
    case HWYATTN_F16:
    case HWYATTN_BF16: return 2;
    case HWYATTN_BOOL:
    case HWYATTN_I8: return 1;
  }
  return 1;
}

// Rank-4 view over caller memory. Shapes are right-aligned (a rank-r tensor
// fills the last r dimensions; the leading ones have size 1) and every size-1
// dimension has stride 0, so a view can be indexed at any coordinate of the
// shape it broadcasts to by clamping nothing: coordinate * stride is 0 there.
struct TensorView {
  const void* data = nullptr;
  hwyattn_dtype dtype = HWYATTN_F32;
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};

  int64_t Offset(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }
  template <typename T>
  const T* As() const {
    return static_cast<const T*>(data);
  }
  template <typename T>
  T* AsMutable() const {
    return static_cast<T*>(const_cast<void*>(data));
  }
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_TENSOR_H_
