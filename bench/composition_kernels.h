// SPDX-License-Identifier: Apache-2.0
//
// composition_kernels.h: the non-matmul steps of the unfused ("composed")
// attention that bench_composition compares with the fused kernel: a row
// softmax over a whole score matrix and a transpose. Highway, compiled for the
// library's targets and dispatched at run time (composition_kernels.cc).

#ifndef HWYATTN_BENCH_COMPOSITION_KERNELS_H_
#define HWYATTN_BENCH_COMPOSITION_KERNELS_H_

#include <stdint.h>

namespace hwyattn_bench {

// For each of `rows` rows of s (row stride ld): s[i][j] = exp(scale * s[i][j]
// - max_j) / sum over the row's visible keys j < visible(i), and 0 for the
// others; visible(i) = cols, or i + 1 if causal (top-left, Lq == Lk).
// Three vector passes per row: max, exp and sum, scale by 1/sum. scale > 0.
void SoftmaxRows(float* s, int64_t rows, int64_t cols, int64_t ld, float scale, bool causal);

// dst[c][r] = src[r][c] for a dense [rows][cols] src; dst is [cols][rows].
void Transpose(const float* src, int64_t rows, int64_t cols, float* dst);

// The Highway target SoftmaxRows runs on, e.g. "AVX3". Static storage.
const char* CompositionTargetName();

}  // namespace hwyattn_bench

#endif  // HWYATTN_BENCH_COMPOSITION_KERNELS_H_
