// SPDX-License-Identifier: Apache-2.0
//
// The AVX512_BF16 loops of the decode kernel under bf16 products (precision
// = BF16; decode_attention.cc keeps everything else: masks, softmax, merge).
// vdpbf16ps (_mm512_dpbf16_ps) multiplies 16 lanes x 2 bf16 into fp32 sums,
// so both products take (x, x+1) pairs of bf16 in one 32-bit lane, read from
// the cache in place (a BF16 cache's own bits; F16 and F32 elements
// converted to bf16 in registers by vcvtne2ps2bf16, round to nearest even;
// FP8 numbers, which are all bf16 numbers, exactly, by vpermt2b lookups of
// the low and high bytes of their bits (AVX512_VBMI) plus the sign: 6
// operations per 64, against 32 to widen them to fp32; a pair of V rows'
// 64 dims in 12):
//   scores  pairs along the head dim: one 64-byte load of a key row is 16
//           pairs, against the query row's pairs (kept in registers); one
//           accumulator per (row, key) and the transpose-reduce of the fp32
//           kernel, so a key's score does not depend on its neighbours;
//   P . V   pairs along the keys: the 64-byte loads of V rows j and j+1
//           interleaved (vpunpcklwd / vpunpckhwd: value dims in a permuted
//           order, undone once per run of keys; FP8 rows' bytes
//           interleaved before the lookups, 128-bit lanes transposed
//           once per tile; I8 rows paired from their
//           fp32 values by vpermt2w, in the dims' order), times the
//           broadcast pair (p_j, p_j+1) of each query row.
// vdpbf16ps adds, per lane, the odd element's product and then the even
// one's to the sum, each an exact product rounded once (an FMA); it treats
// bf16 denormals (below 2^-126) as zeros and flushes denormal sums, which
// the portable kernels do not: results differ there only by amounts below
// 2^-126 per product.
//
// Compiled for x86-64 only, each function under a target attribute, and called
// only from the AVX3 kernels when the planner set DecodePlan::bf16_dot
// (Bf16DotFor, src/targets.h). I8 numbers are paired from their exact fp32
// values (vpmovsxbd, vcvtdq2ps, then one vpermt2w of the upper halves: 5
// operations per 32), which pays only where the halved multiply-adds save more:
// on Zen 4, whose 512-bit FMAs run as two halves (D1qb -8 to -11% time), not on Zen 5
// (+11 to +19%, before the P . V pairing of 2026-11-28); CpuTuning
// (src/targets.h) decides, per CPU (docs/PERFORMANCE.md). A quantized cache's
// scales stay fp32 factors outside these loops (decode_attention.cc): per token
// on the scores and on the probabilities (p_j s_j rounded to bf16 as P), one
// per kv head folded into the score scale, per channel on the outputs;
// per-channel K scales, which would multiply the rounded queries, keep the
// portable loops (Bf16DotApplies, decode_attention.h).
#ifndef HWYATTN_SRC_OPS_DECODE_BF16_H_
#define HWYATTN_SRC_OPS_DECODE_BF16_H_

#include <stddef.h>
#include <stdint.h>

#include "src/tensor.h"

namespace hwyattn {

constexpr size_t kBf16DecodeLanes = 16;  // pairs per vector
constexpr size_t kBf16DecodeDims = 32;   // elements per vector

// uint32 pairs of one query row (ceil(dim / 32) vectors, zero-padded).
inline size_t Bf16DecodeQueryPairs(int64_t dim) {
  return (static_cast<size_t>(dim) + kBf16DecodeDims - 1) / kBf16DecodeDims * kBf16DecodeLanes;
}

// Room for one row's P pairs of a batch of runs (Bf16DecodeValues): half the
// chunk's keys, one more per run, and a vector of slack for the last stores.
inline size_t Bf16DecodeRowPairs(int64_t chunk_keys, size_t max_runs) {
  return static_cast<size_t>(chunk_keys) / 2 + max_runs + kBf16DecodeLanes;
}

// Scratch of Bf16DecodeValues, in uint32 words: the P pairs and their
// nonzero masks of 8 rows, then two pointers and a flag per pair.
inline size_t Bf16DecodeScratchWords(int64_t chunk_keys, size_t max_runs) {
  return (2 * 8 + 6) * Bf16DecodeRowPairs(chunk_keys, max_runs);
}

// s[r * lds + j] = scale * sum_d q[r][d] k_j[d] for r < rows, j < keys
// (keys rows ldk elements apart from k, of `dtype` F32, F16, BF16 or FP8), then
// -inf for j in [keys, pad). q_pairs: group_rows (a power of two, 1..8, >=
// rows) rows of Bf16DecodeQueryPairs(dim) pairs, rows past `rows` zeros.
// `ahead`: the prefetch distance in elements (l2: into L2, else L1).
void Bf16DecodeScores(Dtype dtype, bool l2, size_t rows, size_t group_rows, const uint32_t* q_pairs,
                      size_t dim, const void* k, int64_t ldk, int64_t ahead, size_t keys,
                      size_t pad, float scale, float* s, size_t lds);

// A run of keys whose V rows follow each other ldv elements apart: `rows`
// the first key's row, `first` its index among the probabilities.
struct Bf16ValueRun {
  const void* rows;
  int64_t ahead;
  size_t first, count;
};

// out[r * value_dim + dv] = (accumulate ? out[..] : 0) + sum over the runs'
// keys j of p[r * ldp + first + j] v_j[dv] for r < rows (<= 8), p holding
// bf16 values (RoundToBf16). skip_zeros: keys whose p is 0 add nothing for
// that row (a NaN or infinite v_j never reaches a row that does not see
// it), with the same bits as without for every row whose skipped values are
// finite. scratch: Bf16DecodeScratchWords(kDecodeChunk, num_runs) uint32,
// 64-byte aligned.
void Bf16DecodeValues(Dtype dtype, bool l2, size_t rows, const float* p, size_t ldp,
                      const Bf16ValueRun* runs, size_t num_runs, size_t value_dim, int64_t ldv,
                      bool accumulate, bool skip_zeros, float* out, uint32_t* scratch);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_DECODE_BF16_H_
