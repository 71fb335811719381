// SPDX-License-Identifier: Apache-2.0
//
// Internal views of caller memory: TensorView (a validated hwyattn_tensor
// normalised to rank 4) and RowsView (the rows of a matrix, for the packed
// matmul). Neither uses a type of the public header, so that kernels need
// none: capi converts (validate.cc).
#ifndef HWYATTN_SRC_TENSOR_H_
#define HWYATTN_SRC_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

namespace hwyattn {

// Element types: hwyattn_dtype's values (capi checks that they match).
enum class Dtype : int32_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kBool = 3,
  kI8 = 4,
  kF8E4M3 = 5,
  kF8E5M2 = 6,
  // ggml's block formats (src/ops/blocks.h): blocks of kBlockElems
  // consecutive elements of the last dimension, each with its own scale.
  kQ8_0 = 7,
  kQ4_0 = 8,
  kQ4_1 = 9,
  kQ5_0 = 10,
  kQ5_1 = 11,
  kIQ4_NL = 12,
  // Signed int4 (x * the cache's scale, as kI8), two per byte: element 2i
  // of a row the low nibble of byte i, 2i + 1 the high one.
  kI4 = 13
};

// Elements of one block of a block format.
constexpr int64_t kBlockElems = 32;

inline bool IsBlockDtype(Dtype t) { return t >= Dtype::kQ8_0 && t <= Dtype::kIQ4_NL; }

// Dtypes whose elements are no C type (a block format, I4's nibbles): the
// kernels read their rows only through src/ops/blocks.h, as fp32.
inline bool IsPackedDtype(Dtype t) { return IsBlockDtype(t) || t == Dtype::kI4; }

// Dtypes whose elements are integers times scales (I8, I4, the block
// formats): the K that precision = INT8 multiplies with integer products.
inline bool HasIntegerNumbers(Dtype t) { return IsPackedDtype(t) || t == Dtype::kI8; }

// Bytes of one block of the block format `t` (ggml-common.h's sizes).
constexpr size_t BlockBytes(Dtype t) {
  switch (t) {
    case Dtype::kQ8_0: return 34;
    case Dtype::kQ4_0:
    case Dtype::kIQ4_NL: return 18;
    case Dtype::kQ4_1: return 20;
    case Dtype::kQ5_0: return 22;
    case Dtype::kQ5_1: return 24;
    default: return 0;
  }
}

// Bytes of one element of `t`; a block format's are BlockBytes per
// kBlockElems elements (ByteOffset, ElementBytes).
inline size_t DtypeSize(Dtype t) {
  switch (t) {
    case Dtype::kF32: return 4;
    case Dtype::kF16:
    case Dtype::kBF16: return 2;
    default: return 1;
  }
}

// The byte offset of element `offset` of a tensor of dtype `t`: the one
// home of the addressing of packed formats, whose element offsets (rows,
// heads, pages) are multiples of kBlockElems, or even for I4 (validation).
inline int64_t ByteOffset(Dtype t, int64_t offset) {
  if (IsBlockDtype(t)) return offset / kBlockElems * static_cast<int64_t>(BlockBytes(t));
  if (t == Dtype::kI4) return offset / 2;
  return offset * static_cast<int64_t>(DtypeSize(t));
}

// Bytes per element on average (a block format's scales included).
inline double ElementBytes(Dtype t) {
  if (IsBlockDtype(t)) return static_cast<double>(BlockBytes(t)) / kBlockElems;
  if (t == Dtype::kI4) return 0.5;
  return static_cast<double>(DtypeSize(t));
}

// Rank-4 view over caller memory. Shapes are right-aligned (a rank-r tensor
// fills the last r dimensions; the leading ones have size 1) and every size-1
// dimension has stride 0, so a view can be indexed at any coordinate of the
// shape it broadcasts to by clamping nothing: coordinate * stride is 0 there.
struct TensorView {
  const void* data = nullptr;
  Dtype dtype = Dtype::kF32;
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
  // The bytes from element `offset` on (any dtype; ByteOffset).
  const unsigned char* BytesAt(int64_t offset) const {
    return static_cast<const unsigned char*>(data) + ByteOffset(dtype, offset);
  }
};

// A row-major view of a [rows, cols] float matrix in caller memory, with rows
// that may come from a [groups, rows_per_group] batch: row m sits at
// (m / rows_per_group) * group_stride + (m % rows_per_group) * row_stride,
// column j at j * col_stride further.
struct RowsView {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t rows_per_group = 1, group_stride = 0, row_stride = 0, col_stride = 1;

  int64_t RowOffset(int64_t m) const {
    return (m / rows_per_group) * group_stride + (m % rows_per_group) * row_stride;
  }
  // A dense [rows, cols] matrix with row stride `ld`.
  static RowsView Dense(float* data, int64_t rows, int64_t cols, int64_t ld) {
    RowsView v;
    v.data = data;
    v.rows = rows;
    v.cols = cols;
    v.rows_per_group = rows;
    v.row_stride = ld;
    return v;
  }
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_TENSOR_H_
