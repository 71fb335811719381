// SPDX-License-Identifier: Apache-2.0
//
// Decode attention (few query rows per kv head, long caches): non-SIMD
// declarations. The kernels are in decode_attention.cc.
#ifndef HWYATTN_SRC_OPS_DECODE_ATTENTION_H_
#define HWYATTN_SRC_OPS_DECODE_ATTENTION_H_

#include <stddef.h>
#include <stdint.h>

#include "src/ops/decode_bf16.h"
#include "src/ops/int8_products.h"
#include "src/sdpa_problem.h"
#include "src/scratch.h"
#include "src/targets.h"

namespace hwyattn {

// Keys per chunk. Fixed by the problem, never by the thread count, so that
// the chunk-and-merge arithmetic (and hence every bit of the result) is the
// same however many threads run it. 512 keys of V with Dv = 128 are 256 KiB:
// the second pass over a chunk's V (one per block of value dims) hits L2.
constexpr int64_t kDecodeChunk = 512;

// Consecutive chunks of one kv head that a work item may take as a run (when
// there are enough items to keep every thread busy): phase by phase, so that
// their K and then their V are read as one stream each. The arithmetic of
// every chunk is the same as alone, so the result does not change. On D1
// (32 MiB of K/V, 2 threads) runs of 2 gain 3.5% over single chunks (4:
// within 0.6% of 2); 1024-key chunks gained ~2% more, but a single kv head
// with 1024 keys would then be one work item and leave a thread idle (-42%).
constexpr int64_t kDecodeRun = 2;

// Rows per work unit (Lq times its query heads) up to which the decode
// kernel is used.
constexpr int64_t kDecodeMaxRows = 8;

// A GQA group of more rows is split into equal parts of its heads, each
// part a unit of its own that reads the kv head's K and V in place again
// (decode steps of models with 16 query heads per kv head), for up to 4
// query positions in up to 4 parts; beyond, the prefill kernel, which packs
// K and V once, is used.
constexpr int64_t kDecodeMaxParts = 4;

// Parts per GQA group for the decode kernel: the fewest equal parts of at
// most kDecodeMaxRows rows each; 0 when the decode kernel does not apply by
// its rows. The one home of the rule (every caller, ggml's included).
inline int64_t DecodeParts(const SdpaProblem& p) {
  const int64_t group = p.group();
  if (p.q_len * group <= kDecodeMaxRows) return 1;
  if (p.q_len > kDecodeMaxRows / 2) return 0;
  for (int64_t parts = 2; parts <= kDecodeMaxParts; ++parts) {
    if (group % parts == 0 && p.q_len * (group / parts) <= kDecodeMaxRows) return parts;
  }
  return 0;
}

// Runs of keys (a chunk, or what of it each page holds) per batch of P . V:
// a 512-key chunk in pages of 8 or more keys is one batch (~2 KiB of runs
// on the stack).
constexpr size_t kDecodeMaxRuns = 65;

// Whether the decode kernel can run this problem: few rows, K and V of one
// dtype (F32, F16, BF16 or a quantized cache's; staged: block formats, with
// K and V of any such pair) with contiguous head dims (read in place,
// unpacked), no weights output; fp32 or bf16 products. Everything else takes
// the prefill kernel.
// K or V packed: the decode kernel reads it kStageKeys rows at a time, ggml's
// blocks under fp32 products through BlockScores and BlockValues (blocks.h:
// its F32 loops' tiles, each block dequantized in registers), the rest
// staged: dequantized (a float partner converted) into fp32 rows of a
// per-worker buffer that its F32 loops run on. No instance of the decode
// loops per format, and K and V may differ (a block format and a float one
// too).
inline bool DecodeStaged(const SdpaProblem& p) {
  return IsPackedDtype(p.k.dtype) || IsPackedDtype(p.v.dtype);
}
constexpr int64_t kStageKeys = 32;
// Floats between staged rows: the longer of D and Dv, in whole lines.
inline size_t StageStride(const SdpaProblem& p) {
  const int64_t dim = p.head_dim > p.value_dim ? p.head_dim : p.value_dim;
  return (static_cast<size_t>(dim) + 15) / 16 * 16;
}

inline bool DecodeApplies(const SdpaProblem& p) {
  return DecodeParts(p) > 0 && (p.k.dtype == p.v.dtype || DecodeStaged(p)) &&
         (p.k.stride[3] == 1 || p.head_dim == 1) && (p.v.stride[3] == 1 || p.value_dim == 1) &&
         !p.has_weights;
}

// Whether the problem's bf16 products may run on the AVX512_BF16 dot
// products (decode_bf16.h) where the target has them: K's scales must
// multiply the dot products, not the rounded queries, so none, per token, or
// one per kv head (per tensor or per head: a per-channel view constant along
// the head dims).
inline bool Bf16DotApplies(const SdpaProblem& p) {
  return p.Bf16Products() && !DecodeStaged(p) &&
         (p.k_scale.layout != KvScales::kPerChannel || p.k_scale.t.stride[3] == 0);
}

// The kernel whose dot products Bf16DotFor is asked about: an I8 cache's
// (kDecodeI8: on them only where CpuTuning says they win) or the others'.
inline Bf16DotKernel DecodeBf16DotKernel(const SdpaProblem& p) {
  return p.k.dtype == Dtype::kI8 ? Bf16DotKernel::kDecodeI8 : Bf16DotKernel::kDecode;
}

// Everything a decode work item needs, fixed for the whole call. Work items
// are (batch b, unit, run of `run` key chunks), a unit being a kv head's
// GQA group or one of its `parts` (DecodeParts): `heads` consecutive query
// heads, unit u's from u * heads; each chunk's unnormalised output and its
// (max, sum) per row are written apart, and a merge per (b, unit) combines
// the chunks in order.
struct DecodePlan {
  const SdpaProblem* problem;
  int64_t heads;          // query heads per unit: G / parts
  int64_t parts;          // units per kv head
  int64_t rows;           // query rows per unit: Lq * heads, position-major
  int64_t chunks;         // ceil(Lk / kDecodeChunk)
  int64_t run;            // chunks per work item: 1 .. kDecodeRun
  float q_scale;          // scale * log2(e)
  bool prefetch_l2;       // StreamPrefetchLevel() == kL2
  bool bf16;              // bf16 products: q, K, V and P rounded (RoundToBf16)
  bool bf16_dot;          // bf16 on the AVX512_BF16 dot products (decode_bf16.h)
  bool staged;            // DecodeStaged: rows staged as fp32 (rounded under bf16)
  bool int8;              // integer products: K's scores on Int8Kernels
  float* partial_out;     // [B * units][chunks][rows][Dv]
  float* partial_stats;   // [B * units][chunks][rows][2]: running max (log2), sum
  size_t scratch_floats;  // per worker thread

  int64_t units() const { return problem->kv_heads * parts; }
  // The kv head of unit u, and the query head and position of its row r.
  int64_t KvHead(int64_t unit) const { return unit / parts; }
  int64_t Head(int64_t unit, int64_t r) const { return unit * heads + r % heads; }
  int64_t Position(int64_t r) const { return r / heads; }

  size_t PartialIndex(int64_t b, int64_t unit, int64_t chunk) const {
    return static_cast<size_t>(((b * units() + unit) * chunks + chunk) * rows);
  }
  // Keys [first, first + count) of `chunk` that some row of batch b may see
  // by position (SdpaProblem::VisibleKeys of the first and the last row, whose
  // ranges bound everyone's). count may be 0.
  int64_t ChunkKeys(int64_t b, int64_t chunk, int64_t* first) const {
    const SdpaProblem& p = *problem;
    int64_t lo, unused, hi;
    p.VisibleKeys(b, p.PositionOffset(), &lo, &unused);
    p.VisibleKeys(b, Position(rows - 1) + p.PositionOffset(), &unused, &hi);
    const int64_t c0 = chunk * kDecodeChunk;
    const int64_t c1 = c0 + kDecodeChunk < hi ? c0 + kDecodeChunk : hi;
    *first = c0 > lo ? c0 : lo;
    return c1 > *first ? c1 - *first : 0;
  }
};

// One target's decode kernels. `target` comes first (see PickKernels).
struct DecodeKernels {
  int64_t target;
  size_t lanes;
  // Chunks [chunk0, chunk0 + count) of (b, unit), count <= kDecodeRun.
  void (*attend_chunks)(const DecodePlan& plan, int64_t b, int64_t unit, int64_t chunk0,
                        int64_t count, float* scratch);
  void (*merge)(const DecodePlan& plan, int64_t b, int64_t unit);
};

const DecodeKernels& GetDecodeKernels();

// Floats between consecutive rows of a chunk's scores: a vector past the
// chunk, because the last vector store of a row may start at any key.
inline size_t DecodeScoreStride(size_t lanes) { return static_cast<size_t>(kDecodeChunk) + lanes; }

// Integer products (DecodePlan::int8): the scratch of the rows' quantized
// queries and of kStageKeys keys' integers (int8_products.h), carved out of
// a worker's floats in this order.
struct Int8DecodeScratch {
  int16_t* q;           // [kDecodeMaxRows][blocks * 32]
  float* d;             // [kDecodeMaxRows][blocks]
  float* dsum;          // [kDecodeMaxRows][blocks]
  int8_t* s;            // [kDecodeMaxRows][blocks * 32]: q (offset_keys)
  int32_t* start;       // [kDecodeMaxRows][blocks] (offset_keys)
  int8_t* keys;         // [kStageKeys][blocks * 32]: staged integers
  float* e;             // [kStageKeys][blocks]
  float* m;             // [kStageKeys][blocks]
  const int8_t** rows;  // [kStageKeys]: each key's integers (staged or in place)

  // The layout over `floats`, and its size (floats = null: the size alone).
  static size_t Place(int64_t head_dim, float* floats, Int8DecodeScratch* x) {
    const size_t blocks = static_cast<size_t>(IntegerBlocks(head_dim));
    const size_t rows = static_cast<size_t>(kDecodeMaxRows), keys = static_cast<size_t>(kStageKeys);
    const size_t sizes[9] = {PadFloats(rows * blocks * 16),  // int16: 2 per float
                             PadFloats(rows * blocks),
                             PadFloats(rows * blocks),
                             PadFloats(rows * blocks * 8),  // int8: 4 per float
                             PadFloats(rows * blocks),
                             PadFloats(keys * blocks * 8),  // int8: 4 per float
                             PadFloats(keys * blocks),
                             PadFloats(keys * blocks),
                             PadFloats(keys * sizeof(void*) / sizeof(float))};
    size_t at[9], total = 0;
    for (int i = 0; i < 9; ++i) {
      at[i] = total;
      total += sizes[i];
    }
    if (floats != nullptr) {
      x->q = reinterpret_cast<int16_t*>(floats + at[0]);
      x->d = floats + at[1];
      x->dsum = floats + at[2];
      x->s = reinterpret_cast<int8_t*>(floats + at[3]);
      x->start = reinterpret_cast<int32_t*>(floats + at[4]);
      x->keys = reinterpret_cast<int8_t*>(floats + at[5]);
      x->e = floats + at[6];
      x->m = floats + at[7];
      x->rows = reinterpret_cast<const int8_t**>(floats + at[8]);
    }
    return total;
  }
};

// Scratch floats per worker: the scaled queries [kDecodeMaxRows][D padded to
// lanes] (rows past the last are zeros: the score kernels work on groups of
// a power of two rows) and the scores of a run of chunks [run][rows][score
// stride].
// With bf16_dot, then the P pairs and their nonzero masks of a batch of
// runs (Bf16DecodeValues); the queries' floats hold their bf16 pairs.
// Staged (DecodeStaged), then kStageKeys staged rows. With integer
// products, then Int8DecodeScratch.
inline size_t DecodeScratchFloats(const SdpaProblem& p, int64_t rows, size_t lanes, bool bf16_dot) {
  const size_t dim = (static_cast<size_t>(p.head_dim) + lanes - 1) / lanes * lanes;
  return PadFloats(static_cast<size_t>(kDecodeMaxRows) * dim) +
         PadFloats(static_cast<size_t>(kDecodeRun * rows) * DecodeScoreStride(lanes)) +
         (bf16_dot ? PadFloats(Bf16DecodeScratchWords(kDecodeChunk, kDecodeMaxRuns)) : 0) +
         (DecodeStaged(p) ? PadFloats(static_cast<size_t>(kStageKeys) * StageStride(p)) : 0) +
         (p.Int8Products() ? Int8DecodeScratch::Place(p.head_dim, nullptr, nullptr) : 0);
}

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_DECODE_ATTENTION_H_
