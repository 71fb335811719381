// SPDX-License-Identifier: Apache-2.0
//
// The bf16 dot-product register tiles of the prefill kernel under bf16
// products (precision = BF16), on CPUs that have such instructions:
// AVX512_BF16's vdpbf16ps (x86-64, flash_bf16.cc), Armv8.6 BF16's BFDOT on
// NEON (flash_bf16_neon.cc) and on SVE (flash_bf16_sve.cc). Each does, per
// 32-bit lane, 2 bf16 multiply-adds into an fp32 sum, so both products take
// their operands as (k, k+1) pairs of bf16 in one 32-bit lane:
//   S^T = K . Q^T   pairs along the head dim: K panels [D/2][MR] (a pair of
//                   key r broadcast), Q^T [D/2][Bq] (a pair per query lane);
//   O^T += V^T P^T  pairs along the keys: V [Lk/2][Dv] (the pair of keys
//                   (2i, 2i+1) of a value dim, broadcast), P^T [keys/2][Bq].
// The same kTileRows x 3-vector tile as the fp32 kernel of the target they
// serve (AVX3 and SVE: 8 x 3, NEON: 6 x 3), each instruction covering two
// steps of the sum.
//
// One namespace per instruction set, with the same three functions;
// flash_tiles-inl.h picks the namespace of the target the prefill is compiled
// for; flash_bf16_shapes-inl.h defines ScoreTile and ValueTile in each.
// Each file compiled for its architecture only (HWYATTN_BF16_DOT_COMPILED,
// src/targets.h), every function under a target attribute, and called only
// where Bf16DotFor (src/targets.h) says the CPU has the instructions and
// HWYATTN_TARGET allows them.
//
// The functions, with R = kTileRows and L the lanes of a vector:
//
// ScoreTile: s[r][c*L + lane] = scale * sum_i dot(k_pairs[i][r],
//   q_pairs[i][c*L + lane]) for r < R and the first `vectors` (1..3) query
//   vectors; k_pairs [pairs][R], q_pairs rows ldq lanes apart, s rows lds
//   floats apart.
//
// ValueTile: o[r][c*L + lane] = o[r][..] * alpha[c*L + lane] +
//   sum_i dot(v_pairs[i * ldv + r], p_pairs[i][c*L + lane]) for r < rows
//   (1..R) value dims and the first `vectors` (1..3) query vectors; p_pairs
//   rows ldp lanes apart, o rows ldo floats apart.
//
// ValueSkippingZeros (arm64): ValueTile over `dims` value dims for a V tile
// that holds a NaN or an infinity while some rows block some of its keys,
// the value half of a pair whose probability is exactly 0 taken as 0, so
// that 0 * inf makes no NaN and the rows that do not see the value get the
// tile's bits (BFDOT rounds a pair's sum to odd, which no other instruction
// sequence reproduces; x86's vdpbf16ps is emulated in flash_attention.cc).
#ifndef HWYATTN_SRC_OPS_FLASH_BF16_H_
#define HWYATTN_SRC_OPS_FLASH_BF16_H_

#include <stddef.h>
#include <stdint.h>

namespace hwyattn {

// A pair of floats that are bf16 values (low 16 bits zero) as one 32-bit
// lane: `lo` in the low half (the first of the pair), `hi` in the high half.
inline uint32_t Bf16Pair(uint32_t lo_bits, uint32_t hi_bits) {
  return (hi_bits & 0xFFFF0000u) | (lo_bits >> 16);
}

// Query vectors per tile, on every instruction set.
constexpr size_t kBf16TileVectors = 3;

#if defined(__x86_64__)
namespace avx512_bf16 {
constexpr size_t kTileRows = 8;  // MR of the AVX3 kernels
constexpr size_t kLanes = 16;
void ScoreTile(size_t vectors, size_t pairs, const uint32_t* k_pairs, const uint32_t* q_pairs,
               size_t ldq, float scale, float* s, size_t lds);
void ValueTile(size_t rows, size_t vectors, size_t pairs, const uint32_t* v_pairs, size_t ldv,
               const uint32_t* p_pairs, size_t ldp, const float* alpha, float* o, size_t ldo);
}  // namespace avx512_bf16
#endif

#if defined(__aarch64__)
namespace neon_bf16 {
constexpr size_t kTileRows = 6;  // MR of the NEON kernels
constexpr size_t kLanes = 4;
void ScoreTile(size_t vectors, size_t pairs, const uint32_t* k_pairs, const uint32_t* q_pairs,
               size_t ldq, float scale, float* s, size_t lds);
void ValueTile(size_t rows, size_t vectors, size_t pairs, const uint32_t* v_pairs, size_t ldv,
               const uint32_t* p_pairs, size_t ldp, const float* alpha, float* o, size_t ldo);
void ValueSkippingZeros(size_t dims, size_t vectors, size_t pairs, const uint32_t* v_pairs,
                        size_t ldv, const uint32_t* p_pairs, size_t ldp, const float* alpha,
                        float* o, size_t ldo);
}  // namespace neon_bf16

// L is the hardware's vector length (svcntw() floats): the SVE target that
// calls these is the one built for that length (vectors-inl.h).
namespace sve_bf16 {
constexpr size_t kTileRows = 8;  // MR of the SVE kernels
void ScoreTile(size_t vectors, size_t pairs, const uint32_t* k_pairs, const uint32_t* q_pairs,
               size_t ldq, float scale, float* s, size_t lds);
void ValueTile(size_t rows, size_t vectors, size_t pairs, const uint32_t* v_pairs, size_t ldv,
               const uint32_t* p_pairs, size_t ldp, const float* alpha, float* o, size_t ldo);
void ValueSkippingZeros(size_t dims, size_t vectors, size_t pairs, const uint32_t* v_pairs,
                        size_t ldv, const uint32_t* p_pairs, size_t ldp, const float* alpha,
                        float* o, size_t ldo);
}  // namespace sve_bf16
#endif

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_FLASH_BF16_H_
