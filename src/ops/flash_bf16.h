// SPDX-License-Identifier: Apache-2.0
//
// The AVX512_BF16 register tiles of the prefill kernel under bf16 products
// (precision = BF16): vdpbf16ps (_mm512_dpbf16_ps) does 16 lanes x 2 bf16
// multiply-adds into fp32 sums per instruction, so both products take their
// operands as (k, k+1) pairs of bf16 in one 32-bit lane:
//   S^T = K . Q^T   pairs along the head dim: K panels [D/2][MR] (a pair of
//                   key r broadcast), Q^T [D/2][Bq] (a pair per query lane);
//   O^T += V^T P^T  pairs along the keys: V [Lk/2][Dv] (the pair of keys
//                   (2i, 2i+1) of a value dim, broadcast), P^T [keys/2][Bq].
// The same MR = 8 x 3-vector tile as the fp32 kernel (24 accumulators), each
// instruction covering two steps of the sum.
//
// Compiled for x86-64 only, each function under a target attribute, and
// called only where Bf16DotAvailable() (src/targets.h) says the CPU has
// AVX512_BF16 and HWYATTN_TARGET allows it.
#ifndef HWYATTN_SRC_OPS_FLASH_BF16_H_
#define HWYATTN_SRC_OPS_FLASH_BF16_H_

#include <stddef.h>
#include <stdint.h>

namespace hwyattn {

constexpr size_t kBf16TileRows = 8;     // MR
constexpr size_t kBf16TileVectors = 3;  // query vectors of 16 lanes
constexpr size_t kBf16Lanes = 16;

// A pair of floats that are bf16 values (low 16 bits zero) as one 32-bit
// lane: `lo` in the low half (the first of the pair), `hi` in the high half.
inline uint32_t Bf16Pair(uint32_t lo_bits, uint32_t hi_bits) {
  return (hi_bits & 0xFFFF0000u) | (lo_bits >> 16);
}

// s[r][c * 16 + lane] = scale * sum_i dot(k_pairs[i][r], q_pairs[i][c*16+lane])
// for r < 8 and the first `vectors` (1..3) query vectors; k_pairs [pairs][8],
// q_pairs rows ldq lanes apart, s rows lds floats apart.
void Bf16ScoreTile(size_t vectors, size_t pairs, const uint32_t* k_pairs, const uint32_t* q_pairs,
                   size_t ldq, float scale, float* s, size_t lds);

// o[r][c*16+lane] = o[r][..] * alpha[c*16+lane] +
//   sum_i dot(v_pairs[i * ldv + r], p_pairs[i][c*16+lane])
// for r < rows (1..8) value dims and the first `vectors` (1..3) query
// vectors; p_pairs rows ldp lanes apart, o rows ldo floats apart.
void Bf16ValueTile(size_t rows, size_t vectors, size_t pairs, const uint32_t* v_pairs, size_t ldv,
                   const uint32_t* p_pairs, size_t ldp, const float* alpha, float* o, size_t ldo);

// p_pairs[i][lane] = the pair (p[2i][lane], p[2i+1][lane]) for i < pairs and
// the first `lanes` (a multiple of 16) lanes; p rows ldp floats apart, holding
// bf16 values (RoundToBf16); a row 2i+1 >= rows is taken as zeros.
void Bf16PairRows(size_t rows, size_t lanes, const float* p, size_t ldp, uint32_t* p_pairs,
                  size_t ld_pairs);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_FLASH_BF16_H_
