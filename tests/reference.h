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
// An OCP FP8 number (HWYATTN_F8E4M3 or HWYATTN_F8E5M2) from its fields.
double Fp8ToDouble(hwyattn_dtype dtype, uint8_t bits);
// The header's FP8 write rule by search over the format's numbers: the
// nearest one (a tie to the even bit pattern), saturating finite values at
// the largest, infinities E5M2's own and E4M3's largest, NaN a NaN.
uint8_t NearestFp8(hwyattn_dtype dtype, double x);

// The dtype's name as the header spells it after HWYATTN_ ("BOOL", "F8E4M3").
const char* DtypeName(hwyattn_dtype dtype);
// Size in bytes of one element of `dtype` (0 for an unknown dtype or a
// block format).
size_t DtypeSize(hwyattn_dtype dtype);
// Bytes of one 32-element block of a block format (HWYATTN_Q8_0 ...
// HWYATTN_IQ4_NL: the header's table), 0 for any other dtype.
size_t BlockBytes(hwyattn_dtype dtype);
// Bytes of `elements` elements of `dtype` (a block format's: whole blocks).
size_t StorageBytes(hwyattn_dtype dtype, int64_t elements);
// The value of element i (0..31) of a block of a block format, from the
// header's formulas, in double.
double BlockElement(hwyattn_dtype dtype, const unsigned char* block, int i);

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
  std::vector<double> out;  // [B, Hq, Lq, Dv]
  // [B, Hq, Lq, Lk]: exp(s_j - lse) for an allowed key, exactly 0 for a
  // blocked one. With sinks a row sums to less than 1 (1 - exp(sink - lse)).
  std::vector<double> weights;
  // [B, Hq, Lq]: log of the whole softmax denominator, the sink's exp(sink)
  // included. A fully blocked row: the sink's logit, or -INFINITY without
  // sinks (or with a sink of -INFINITY).
  std::vector<double> lse;
  // [B, Hq, Lq]: every key of the row is blocked (by causal, mask, kv_len or
  // a window). A sink does not count as a key: such a row is still blocked,
  // and its out and weights are exactly 0 whatever the sink.
  std::vector<bool> row_blocked;
  // [B, Hq, Lq, Lk]: key j is allowed for the row (row-major like weights).
  // A blocked key's weight must be exactly 0, not merely small.
  std::vector<bool> key_allowed;
  // The largest score magnitude of the call: over the allowed scores,
  // |scale| * sum_d |q_d k_d| + |ALiBi bias| + |additive mask|, the size of
  // the terms a score is summed from. A float32 score carries roundings of
  // that size (2^-24 of it each): what a tolerance scales with when scores
  // are large (ScoreTolerance).
  double score_magnitude = 0.0;

  int64_t RowIndex(int64_t b, int64_t h, int64_t i) const { return (b * q_heads + h) * q_len + i; }
};

// Computes scaled dot-product attention exactly as the header defines it.
// `opts` may be NULL (defaults); its weights/lse pointers are ignored (the
// oracle always produces both). Returns false and sets *error if the
// descriptors are inconsistent (the oracle does not try to mirror the
// library's validation; it only refuses what it cannot compute, and
// modifier values the header gives no meaning: a negative window, a softcap
// that is negative or not finite, a slope that is not finite, a sink that is
// NaN or +INFINITY).
//
// The rules, for batch b, query head h (which reads key/value head
// h / (Hq / Hkv)), query row i and key j, all in double:
//
//   Positions. The query has position p = i + (Lk - Lq) under
//   HWYATTN_CAUSAL_BOTTOM_RIGHT and p = i otherwise; key j has position j.
//   Lk is the tensors' length: kv_len does not move any position.
//
//   Key j is allowed when every one of these that applies says so:
//     causal TOP_LEFT        j <= i
//     causal BOTTOM_RIGHT    j <= p
//     kv_len                 j < kv_len[b]
//     BOOL mask              the element is nonzero
//     F32 mask               the element is not -INFINITY
//     window_left  W > 0     j > p - W     (0 = unbounded)
//     window_right W > 0     j < p + W     (0 = unbounded)
//   so window_left = 2 on a causal row keeps keys p - 1 and p, and
//   window_right = 1 alone is a causal mask on positions.
//
//   The score of an allowed key, in this order:
//     s = scale * dot(q[b,h,i,:], k[b,hk,j,:])   scale 0 means 1/sqrt(D)
//     s = c * tanh(s / c)                        if softcap c > 0
//     s = s + slope[h] * (j - p)                 if alibi_slopes
//     s = s + mask[b,h,i,j]                      if the mask is F32
//   (the cap applies to the scaled score only: the bias and the additive
//   mask are added after it, uncapped).
//
//   The sink: z = sinks[h] if sinks is given, else -INFINITY; a sink of
//   -INFINITY is a sink that is off. It is a logit as given: not scaled, not
//   capped, not biased, not masked, and it has no value vector.
//     lse        = log(exp(z) + sum over allowed j of exp(s_j))
//     weights_j  = exp(s_j - lse) for allowed j, 0 for blocked j
//     out        = sum over allowed j of weights_j * v[b,hk,j,:]
//   A row with no allowed key: out = 0, weights = 0, lse = z (so -INFINITY
//   without sinks), row_blocked = true.
//
// The 0.2 fields (window_left .. sinks) are read only when opts->struct_size
// covers them: a struct of the 0.1 size has no modifiers, as the header
// says. opts->parallel is ignored (results never depend on it), and so is
// opts->precision: the oracle always computes in double from the inputs as
// they are stored.
bool ReferenceSdpa(const hwyattn_tensor& q, const hwyattn_tensor& k, const hwyattn_tensor& v,
                   const hwyattn_sdpa_options* opts, RefResult* result, std::string* error);

// hwyattn_kv_attention's results, dense and row-major in double.
struct KvRefResult {
  int64_t tokens = 0, q_heads = 0, v_dim = 0;
  std::vector<double> out;       // [T, Hq, Dv]
  std::vector<double> lse;       // [T, Hq]; a row without keys: the sink or -INFINITY
  double score_magnitude = 0.0;  // as RefResult's
};

// What float32 arithmetic may add to an attention output's error beyond a
// small-score tolerance, relative to max|v|: each score of a `dim`-term dot
// product carries at most dim + 4 roundings of `score_magnitude` (one per
// product-add in a lane, the lanes' reduction, the scale and the
// exponent's argument), and the softmax-weighted mean moves by at most
// twice max|v| times its largest exponent error. Weights (in [0, 1]) move by
// as much in absolute terms, lse by half as much.
double ScoreTolerance(double score_magnitude, int64_t dim);

// The value of element d of kv head `head` at (page, offset) of the cache's
// k (values = false) or v, dequantized for I8 caches (int8 * scale, in
// double; the scale per token when the scale tensor is [P, Hkv, S, 1], else
// per channel [1, Hkv, 1, D]).
double ReadCacheValue(const hwyattn_kv_cache& cache, bool values, int64_t page, int64_t head,
                      int64_t offset, int64_t d);

// hwyattn_kv_attention as the header defines it, plainly: for each sequence
// s, its keys t < kv_len[s] are read through the block table (page
// block_table[s][t / page_size], or page s without a table), dequantized;
// query token i of the sequence has position q_pos[s] + i (default kv_len -
// q_len), key t position t, and the rules of ReferenceSdpa apply with these
// positions: causal (any value but NONE) keeps t <= position, window_left W
// keeps t > position - W, window_right W keeps t < position + W, score =
// scale * dot, softcap, + slope[h] * (t - position), sinks join the
// denominator. mask, kv_len, weights and lse of opts are ignored.
bool ReferenceKvAttention(const hwyattn_tensor& q, const hwyattn_kv_cache& cache,
                          const hwyattn_kv_batch& batch, const hwyattn_sdpa_options* opts,
                          KvRefResult* result, std::string* error);

}  // namespace hwyattn_test

#endif  // HWYATTN_TESTS_REFERENCE_H_
