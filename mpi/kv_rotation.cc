// SPDX-License-Identifier: Apache-2.0

#include "mpi/kv_rotation.h"

#include <limits.h>
#include <string.h>

#include <new>

#include "mpi/error.h"
#include "mpi/tensor_view.h"

namespace hwyattn_mpi {
namespace {

// A row of row_bytes bytes as one MPI element, for counts of rows.
hwyattn_status RowType(int64_t row_bytes, MPI_Datatype* type) {
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(
      MPI_Type_contiguous(static_cast<int>(row_bytes), MPI_BYTE, type), "MPI_Type_contiguous"));
  return CheckMpi(MPI_Type_commit(type), "MPI_Type_commit");
}

}  // namespace

hwyattn_status SliceStream::Allocate(int64_t batch, int64_t heads, int64_t dim, hwyattn_dtype dtype,
                                     int64_t max_len) {
  batch_ = batch;
  heads_ = heads;
  dim_ = dim;
  dtype_ = dtype;
  int64_t bytes;
  if (__builtin_mul_overflow(dim, static_cast<int64_t>(DtypeSize(dtype)), &row_bytes_) ||
      __builtin_mul_overflow(batch, heads, &rows_per_token_) ||
      __builtin_mul_overflow(rows_per_token_, max_len, &bytes) ||
      __builtin_mul_overflow(bytes, row_bytes_, &bytes)) {
    return Fail(HWYATTN_INVALID_ARGUMENT,
                "k/v: a slice of %lld tokens of %lld x %lld x %lld elements overflows int64",
                static_cast<long long>(max_len), static_cast<long long>(batch),
                static_cast<long long>(heads), static_cast<long long>(dim));
  }
  try {
    for (std::vector<char>& b : buffers_) b.resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    for (std::vector<char>& b : buffers_) std::vector<char>().swap(b);
    return Fail(HWYATTN_OUT_OF_MEMORY, "out of memory for two K/V slice buffers of %lld bytes",
                static_cast<long long>(bytes));
  }
  return HWYATTN_OK;
}

bool SliceStream::Fits(int64_t len) const {
  return row_bytes_ <= INT_MAX && len <= INT_MAX / rows_per_token_;
}

void SliceStream::Begin(const hwyattn_tensor& own) {
  const Dims4 d(own);
  const int64_t esize = static_cast<int64_t>(DtypeSize(own.dtype));
  // Dense row-major, whatever the strides of size-1 dimensions.
  bool dense = true;
  int64_t span = 1;
  for (int i = 3; i >= 0; --i) {
    if (d.shape[i] != 1 && d.stride[i] != span) dense = false;
    span *= d.shape[i];
  }
  receiving_ = 0;
  if (dense) {
    current_ = own.data;
    return;
  }
  // Pack into the buffer not receiving first (its first send ends before
  // it receives anything).
  char* dst = buffers_[1].data();
  const char* src = static_cast<const char*>(own.data);
  for (int64_t b = 0; b < d.shape[0]; ++b) {
    for (int64_t h = 0; h < d.shape[1]; ++h) {
      for (int64_t t = 0; t < d.shape[2]; ++t) {
        const char* row = src + (b * d.stride[0] + h * d.stride[1] + t * d.stride[2]) * esize;
        if (d.stride[3] == 1) {
          memcpy(dst, row, static_cast<size_t>(row_bytes_));
        } else {
          for (int64_t i = 0; i < d.shape[3]; ++i) {
            memcpy(dst + i * esize, row + i * d.stride[3] * esize, static_cast<size_t>(esize));
          }
        }
        dst += row_bytes_;
      }
    }
  }
  current_ = buffers_[1].data();
}

hwyattn_status SliceStream::Post(MPI_Comm comm, int tag, int to, int64_t len, int from,
                                 int64_t next_len) {
  MPI_Datatype row = MPI_DATATYPE_NULL;
  HWYATTN_MPI_RETURN_IF_ERROR(RowType(row_bytes_, &row));
  // MPI keeps what a pending request needs of a freed datatype.
  hwyattn_status s =
      CheckMpi(MPI_Irecv(buffers_[receiving_].data(), static_cast<int>(rows_per_token_ * next_len),
                         row, from, tag, comm, &requests_[0]),
               "MPI_Irecv");
  if (s == HWYATTN_OK) {
    s = CheckMpi(MPI_Isend(current_, static_cast<int>(rows_per_token_ * len), row, to, tag, comm,
                           &requests_[1]),
                 "MPI_Isend");
  }
  MPI_Type_free(&row);
  return s;
}

hwyattn_status SliceStream::Wait() {
  HWYATTN_MPI_RETURN_IF_ERROR(
      CheckMpi(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), "MPI_Waitall"));
  current_ = buffers_[receiving_].data();
  receiving_ = 1 - receiving_;
  return HWYATTN_OK;
}

void SliceStream::Progress() {
  int done = 0;
  MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE);
}

hwyattn_tensor SliceStream::Current(int64_t len) const {
  hwyattn_tensor t;
  const int64_t dims[4] = {batch_, heads_, len, dim_};
  hwyattn_tensor_contiguous(&t, const_cast<void*>(current_), dtype_, 4, dims);
  return t;
}

}  // namespace hwyattn_mpi
