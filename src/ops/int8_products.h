// SPDX-License-Identifier: Apache-2.0
//
// Integer products (precision = INT8, hwyattn.h's rule): Q K^T on the
// integers of a quantized K (HasIntegerNumbers: I8, I4, ggml's block
// formats) against the query quantized per block of kBlockElems head dims as
// ggml's quantize_row_q8_0 quantizes it. The one home of the rule:
//   QuantizeQueryRow  a query row's int8 blocks, their scales d and d * sum(q);
//   IntegerRows       K rows' integers and, per block, their scale e and
//                     offset m (blocks.h's formats, read per target in
//                     block_rows.cc; 1 and 0 for I8 and I4, whose scales
//                     the kernels apply as for F32): the staging of the
//                     formats the kernels do not read in place
//                     (Int8InPlace);
//   Int8Kernels       the decode kernel's scores from them, per target
//                     (int8_scores.cc): each block's exact int32 sum, then
//                     d * e * sum + m * d * sum(q) in fp32.
// The prefill kernel multiplies the dequantized query (DequantizedQueryRow)
// by its fp32 panels instead: the same scores within fp32 rounding.
#ifndef HWYATTN_SRC_OPS_INT8_PRODUCTS_H_
#define HWYATTN_SRC_OPS_INT8_PRODUCTS_H_

#include <stddef.h>
#include <stdint.h>

#include "src/tensor.h"

namespace hwyattn {

// Blocks of a quantized row of `dim` elements (the last one zero-padded).
inline int64_t IntegerBlocks(int64_t dim) { return (dim + kBlockElems - 1) / kBlockElems; }

// x[0, dim) quantized per block b: d[b] = max|x| / 127, q = roundf(x * (1 /
// d)) (0 where d = 0), q[dim, blocks * 32) = 0, dsum[b] = d[b] * sum of the
// block's q. A block holding a NaN or an infinity gets d = NaN (its scores
// are NaN, as fp32 products would make them) and q = 0.
void QuantizeQueryRow(const float* x, int64_t dim, int8_t* q, float* d, float* dsum);

// The integers of rows i < n of `dim` elements of K in dtype t
// (HasIntegerNumbers; rows[i]) into q + i * blocks * 32 (zero-padded), and
// per block its scale e[i * blocks + b] and offset m[i * blocks + b] (e
// for ggml's block formats only, m for those with an offset: Q4_1, Q5_1):
// element j of block b is e * q[j] + m (the cache's own scales multiply I8's
// and I4's integers, as for F32). Per target, in block_rows.cc.
void IntegerRows(Dtype t, const unsigned char* const* rows, int64_t n, int64_t dim, int8_t* q,
                 float* e, float* m);

// The fp32 query row that the prefill kernel multiplies under INT8, in
// place (x[d * stride] for d < dim): times K's per-channel scales where it
// has them (channel_scale, `step` floats apart; else null), quantized as
// QuantizeQueryRow does, dequantized (d * q), divided by the channel's scale
// again (0 where it is 0), so that its fp32 products with the dequantized K
// (k s) are the integer products' d q k.
void DequantizedQueryRow(float* x, int64_t dim, int64_t stride, const float* channel_scale,
                         int64_t step);

// A query row as the integer kernels read it: each block's 32 int8 numbers
// widened to int16 (the operand of the multiply-adds), then the scales.
// Kernels that multiply unsigned by signed bytes (Int8Kernels::offset_keys:
// x86's vpdpbusd) read K's numbers plus a zero point z as the unsigned
// operand (Int8KeyZeroPoint) and the query's int8 numbers as the signed one,
// each block's int32 sum starting at -z times the sum of the query block's
// numbers.
struct Int8QueryRows {
  const int16_t* q;      // [group rows][blocks * 32]; rows past `rows` zeros (not offset_keys)
  const float* d;        // [group rows][blocks]
  const float* dsum;     // [group rows][blocks]: d * sum of the block's q
  size_t blocks;         // IntegerBlocks(head dim)
  const int8_t* s;       // offset_keys: [group rows][blocks * 32], q as int8
  const int32_t* start;  // offset_keys: [group rows][blocks], -z * sum of the block's q
};

// QueryBlockStarts: one row's sums' starts for offset_keys kernels (start)
// from its int8 numbers q (QuantizeQueryRow's, which offset_keys kernels
// read as Int8QueryRows::s), for `blocks`, against K numbers offset by
// zero_point.
void QueryBlockStarts(const int8_t* q, size_t blocks, int32_t zero_point, int32_t* start);

// The rows the integer kernel computes for `rows` <= 8 query rows: the
// smallest power of two >= rows (those past `rows` hold zeros), whatever
// the target's vector length.
inline size_t Int8GroupRows(size_t rows) {
  size_t g = 1;
  while (g < rows) g *= 2;
  return g;
}

// How an integer score kernel finds a key's blocks (a template argument of
// the kernels): integers without scales (blocks * 32 int8 a row: I8's in
// place, or IntegerRows'), the same with a scale e per block, or ggml's
// Q8_0 / Q4_0 rows in place (each block its fp16 d, then its 32 int8 or 16
// bytes of nibbles: element j < 16 the low nibble of byte j, j + 16 its
// high one, the number the nibble - 8).
enum class Int8KeyLayout { kUnscaled, kScaled, kQ8_0, kQ4_0 };

// The layout the kernels read a K of dtype t in: Q8_0 and Q4_0 in place,
// I8 without scales (in place where Int8InPlace says so), the other
// formats' integers staged by IntegerRows, with their scales. The one home
// of the rule, with Int8InPlace.
inline Int8KeyLayout Int8LayoutOf(Dtype t) {
  if (t == Dtype::kQ8_0) return Int8KeyLayout::kQ8_0;
  if (t == Dtype::kQ4_0) return Int8KeyLayout::kQ4_0;
  return IsBlockDtype(t) ? Int8KeyLayout::kScaled : Int8KeyLayout::kUnscaled;
}

// What offset_keys kernels add to K's numbers to make them unsigned bytes:
// Q4_0's nibbles are its numbers + 8; every other layout's int8 numbers
// + 128 (the sign bit flipped).
inline int32_t Int8KeyZeroPoint(Int8KeyLayout layout) {
  return layout == Int8KeyLayout::kQ4_0 ? 8 : 128;
}

// Whether the kernels read a K of dtype t with rows of `dim` elements in
// place (nothing staged): Q8_0, Q4_0 and I8 rows of whole blocks.
inline bool Int8InPlace(Dtype t, int64_t dim) {
  return t == Dtype::kQ8_0 || t == Dtype::kQ4_0 || (t == Dtype::kI8 && dim % kBlockElems == 0);
}

// Bytes of a block of the in-place layouts (kQ8_0, kQ4_0): its fp16 d, then
// its numbers.
template <Int8KeyLayout kLayout>
inline constexpr size_t kInPlaceBlockBytes = BlockBytes(kLayout == Int8KeyLayout::kQ4_0
                                                            ? Dtype::kQ4_0
                                                            : Dtype::kQ8_0);

// The K rows an integer score kernel reads, n of them (rows[j]) in
// `layout`; with kScaled, e [n][blocks] the blocks' scales; m [n][blocks]
// their offsets (Q4_1, Q5_1, staged), or null for 0.
struct Int8KeyRows {
  const int8_t* const* rows;
  const float* e;
  const float* m;
  Int8KeyLayout layout;
};

// One target's integer score kernel: for r < rows and j < n,
//   s[r * lds + j] = scale * sum over blocks b of
//       (d[r][b] * e[j][b] * sum_i q[r][32 b + i] k_j[32 b + i] + m[j][b] * dsum[r][b])
// with k_j and e, m as Int8KeyRows gives them (in place: e the block's d,
// m 0). group_rows: Int8GroupRows(rows), the rows the kernel computes
// (those past `rows` are zeros and not stored).
struct Int8Kernels {
  int64_t target;
  bool offset_keys;  // reads Int8QueryRows::s and start (else q)
  void (*scores)(size_t group_rows, size_t rows, const Int8QueryRows& q, const Int8KeyRows& k,
                 size_t n, float scale, float* s, size_t lds);
};

// For the decode kernels' target (PickKernels picks the same one): where
// Int8DotFor (src/targets.h) says so, the AVX512_VNNI kernel
// (int8_vnni.cc), else that target's portable one (int8_scores.cc).
const Int8Kernels& GetInt8Kernels();

// The AVX512_VNNI kernel (target HWY_AVX3); null where not compiled.
const Int8Kernels* Int8VnniKernels();

}  // namespace hwyattn

#endif  // HWYATTN_SRC_OPS_INT8_PRODUCTS_H_
