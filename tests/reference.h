// SPDX-License-Identifier: Apache-2.0
//
// A double-precision oracle for hwyattn_sdpa, written as plainly as possible:
// no SIMD, no blocking, no online softmax and no code shared with src/ or
// capi/. Its only inputs are the same hwyattn_tensor descriptors and
// hwyattn_sdpa_options the library receives, so the tests exercise the
// library's interpretation of strides, broadcasting and masks against an
// independent one. The header's comments are the normative specification.

#ifndef HWYATTN_TESTS_REFERENCE_H_
#define HWYATTN_TESTS_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hwyattn.h"

namespace hwyattn_test {

// Rounds a float to the nearest IEEE binary16, ties to even (NaN stays NaN,
// overflow becomes infinity). Used to build F16 test inputs.
uint16_t FloatToF16(float f);
// Rounds a float to the nearest bfloat16, ties to even.
uint16_t FloatToBf16(float f);
// Exact conversions of the 16-bit formats to double.
double F16ToDouble(uint16_t h);
double Bf16ToDouble(uint16_t b);

// Size in bytes of one element of `dtype` (0 for an unknown dtype).
size_t DtypeSize(hwyattn_dtype dtype);

// Expands a descriptor of rank r <= 4 to the four logical dimensions: the
// leading 4 - r dimensions get size 1 (and stride 0, since only index 0 is
// ever used). Returns false for a rank outside 1..4.
bool LogicalDims(const hwyattn_tensor& t, int64_t shape[4], int64_t stride[4]);

// Reads one element at a logical 4-d index as a double (exact for every
// dtype; BOOL gives 0 or 1).
double ReadElement(const hwyattn_tensor& t, const int64_t idx[4]);

// The oracle's results, dense and row-major in double.
struct RefResult {
  int64_t batch = 0, q_heads = 0, q_len = 0, k_len = 0, v_dim = 0;
  std::vector<double> out;      // [B, Hq, Lq, Dv]
  std::vector<double> weights;  // [B, Hq, Lq, Lk]
  std::vector<double> lse;      // [B, Hq, Lq]; -INFINITY for a fully blocked row
  std::vector<bool> row_blocked;  // [B, Hq, Lq]: every key of the row is blocked

  int64_t RowIndex(int64_t b, int64_t h, int64_t i) const {
    return (b * q_heads + h) * q_len + i;
  }
};

// Computes scaled dot-product attention exactly as the header defines it.
// `opts` may be NULL (defaults); its weights/lse pointers are ignored (the
// oracle always produces both). Returns false and sets *error if the
// descriptors are inconsistent (the oracle does not try to mirror the
// library's validation; it only refuses what it cannot compute).
bool ReferenceSdpa(const hwyattn_tensor& q, const hwyattn_tensor& k,
                   const hwyattn_tensor& v, const hwyattn_sdpa_options* opts,
                   RefResult* result, std::string* error);

}  // namespace hwyattn_test

#endif  // HWYATTN_TESTS_REFERENCE_H_
