// SPDX-License-Identifier: Apache-2.0
//
// The AVX512_BF16 register tile of the packed matmul under bf16 products
// (MatmulPrecision::kBf16 with weights in BF16 storage): vdpbf16ps
// (_mm512_dpbf16_ps) does 16 lanes x 2 bf16 multiply-adds into fp32 sums per
// instruction, so both operands come as (k, k+1) pairs of bf16 in one 32-bit
// lane: the x rows' pairs [pairs][MR] (a pair of row r broadcast) and the W
// panel's pairs [pairs][NR] (PackedMatrix::pairs). The same MR = 8 x 3-vector
// tile as the fp32 kernel on AVX-512 (24 accumulators), each instruction
// covering two depths.
//
// Compiled for x86-64 only, under a target attribute, and called only where
// Bf16DotFor(target) (src/targets.h) says the CPU has AVX512_BF16 and
// HWYATTN_TARGET allows it.
#ifndef HWYATTN_SRC_OPS_MATMUL_BF16_H_
#define HWYATTN_SRC_OPS_MATMUL_BF16_H_

#include <stddef.h>
#include <stdint.h>

namespace hwyattn {

constexpr size_t kBf16MatmulRows = 8;  // MR

// For r < 8 and the first 16 * `vectors` (vectors 1..3) columns:
//   c[r * ldc + col] = (bias ? bias[col] : c[r * ldc + col])
//                      + sum_{i < pairs} dot(a_pairs[i * 8 + r], b_pairs[i * ldb + col])
// where dot multiplies the two bf16 halves pairwise and adds both products.
// Prefetches (into L2) one cache line per pair step from `prefetch` on, the
// first `prefetch_lines` of them.
void Bf16MatmulTile(size_t vectors, size_t pairs, const uint32_t* a_pairs, const uint32_t* b_pairs,
                    size_t ldb, const float* bias, float* c, size_t ldc, const void* prefetch,
                    size_t prefetch_lines);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_MATMUL_BF16_H_
