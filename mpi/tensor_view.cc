// SPDX-License-Identifier: Apache-2.0

#include "mpi/tensor_view.h"

#include <utility>

namespace hwyattn_mpi {

bool NoSelfOverlap(const Dims4& d) {
  int dims[4];
  int n = 0;
  for (int i = 0; i < 4; ++i) {
    if (d.shape[i] > 1) dims[n++] = i;
  }
  for (int a = 1; a < n; ++a) {  // insertion sort by stride: n <= 4
    for (int b = a; b > 0 && d.stride[dims[b]] < d.stride[dims[b - 1]]; --b) {
      std::swap(dims[b], dims[b - 1]);
    }
  }
  int64_t span = 0;
  for (int k = 0; k < n; ++k) {
    const int i = dims[k];
    int64_t step;
    if (d.stride[i] <= span || __builtin_mul_overflow(d.shape[i] - 1, d.stride[i], &step) ||
        __builtin_add_overflow(span, step, &span)) {
      return false;
    }
  }
  return true;
}

bool SpanFits(const Dims4& d, size_t elem) {
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    int64_t step;
    if (d.shape[i] < 1) continue;  // an empty shard's keys: never addressed
    if (__builtin_mul_overflow(d.shape[i] - 1, d.stride[i], &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return false;
    }
  }
  int64_t bytes;
  return !__builtin_mul_overflow(last, static_cast<int64_t>(elem), &bytes);
}

}  // namespace hwyattn_mpi
