// SPDX-License-Identifier: Apache-2.0
//
// One hwyattn_sdpa call (or the attention inside an MHA layer) after
// validation: what every attention kernel reads, and the position rules
// (which keys a query row may see) that they all share.
#ifndef HWYATTN_SRC_SDPA_PROBLEM_H_
#define HWYATTN_SRC_SDPA_PROBLEM_H_

#include <stdint.h>

#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {

// K and V held in pages (a KV cache's block table): key j of batch b sits in
// page table[b * table_stride + j / page_size], row j % page_size, and k and
// v are [num_pages, Hkv, page_size, D] views (their dim 0 indexes pages).
// Every page id a problem can reach is validated before a kernel runs.
struct KvPages {
  const int32_t* table = nullptr;  // null: k and v are [B|1, Hkv, Lk, D]
  int64_t table_stride = 0;
  int64_t page_size = 0;
};

// How an I8 cache's scales are laid out (kNone: K/V are not I8).
enum class KvScales { kNone, kPerToken, kPerChannel };

// The scales of I8 K or V (hwyattn_kv_attention's I8 caches): element d of
// key j's row stands for x * scale, where scale is per token (one F32 per
// row: a [pages | B, Hkv, page_size | Lk, 1] view addressed as the keys are)
// or per channel (a [1, Hkv, 1, D] view).
struct KvScale {
  KvScales layout = KvScales::kNone;
  TensorView t;
};

// The causal mask: hwyattn_causal's values (capi checks that they match).
enum class Causal : int32_t { kNone = 0, kTopLeft = 1, kBottomRight = 2 };

// Precision of the products Q K^T and P V: hwyattn_precision's values (capi
// checks that they match). kBF16: their operands are rounded to bf16
// (RoundToBf16, src/ops/convert.h), the sums stay fp32. kInt8: Q K^T on
// the integers of a quantized K (HasIntegerNumbers) against the query
// quantized per block of 32 (src/ops/int8_products.h); F32 otherwise.
enum class Precision : int32_t { kF32 = 0, kBF16 = 1, kInt8 = 2 };

// One hwyattn_sdpa call after validation: every view is rank 4 and
// broadcastable as documented, sizes are consistent and overflow-free.
struct SdpaProblem {
  TensorView q;    // [B, Hq, Lq, D]
  TensorView k;    // [B|1, Hkv, Lk, D]
  TensorView v;    // [B|1, Hkv, Lk, Dv]
  TensorView out;  // [B, Hq, Lq, Dv], F32, F16 or BF16 (StoreOutputRow)
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;
  int64_t head_dim = 0, value_dim = 0;
  float scale = 0.0f;  // resolved: never 0
  Causal causal = Causal::kNone;
  bool has_mask = false;
  TensorView mask;                       // broadcast to [B, Hq, Lq, Lk]; BOOL, F32 or F16
  const int32_t* key_lengths = nullptr;  // [B] or null
  bool has_weights = false;
  TensorView weights;  // [B, Hq, Lq, Lk], F32
  bool has_lse = false;
  TensorView lse;  // [1, B, Hq, Lq], F32
  // Score modifiers, as validated (0 / null = off).
  int64_t window_left = 0, window_right = 0;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;  // [Hq]
  const float* sinks = nullptr;         // [Hq]
  Precision precision = Precision::kF32;
  // Who runs the parallel phases: opts->parallel as validated, or OpenMP.
  Executor executor;
  // Paged K/V, or none (table null).
  KvPages pages;
  // I8 K/V: their scales (layout kNone otherwise).
  KvScale k_scale, v_scale;
  // hwyattn_kv_attention's explicit positions: query row i has position
  // i + position_offset whatever `causal` is (hwyattn_sdpa never sets it).
  bool has_position_offset = false;
  int64_t position_offset = 0;

  int64_t group() const { return q_heads / kv_heads; }
  bool Bf16Products() const { return precision == Precision::kBF16; }
  // precision = INT8 where it applies (a K of integers); F32 products else.
  bool Int8Products() const { return precision == Precision::kInt8 && HasIntegerNumbers(k.dtype); }
  // What validation established, checked by the kernels' preconditions
  // (HWY_DASSERT: on in debug and sanitizer builds, free in Release): sizes
  // >= 1, Hkv divides Hq, the views agree with the sizes, every tensor a
  // kernel reads or writes is there, out is F32, F16 or BF16, the scale is resolved.
  bool Valid() const {
    return batch >= 1 && q_heads >= 1 && kv_heads >= 1 && q_heads % kv_heads == 0 && q_len >= 1 &&
           kv_len >= 1 && head_dim >= 1 && value_dim >= 1 && scale != 0.0f && q.data != nullptr &&
           k.data != nullptr && v.data != nullptr && out.data != nullptr &&
           (out.dtype == Dtype::kF32 || out.dtype == Dtype::kF16 || out.dtype == Dtype::kBF16) &&
           q.shape[1] == q_heads && q.shape[2] == q_len && q.shape[3] == head_dim &&
           k.shape[1] == kv_heads && (Paged() || k.shape[2] == kv_len) && k.shape[3] == head_dim &&
           v.shape[1] == kv_heads && (Paged() || v.shape[2] == kv_len) && v.shape[3] == value_dim &&
           out.shape[0] == batch && out.shape[1] == q_heads && out.shape[2] == q_len &&
           out.shape[3] == value_dim && (!has_mask || mask.data != nullptr) &&
           (!has_weights || weights.data != nullptr) && (!has_lse || lse.data != nullptr);
  }
  // Element offset, in a [B, Hq, Lq, *] tensor (q, out, weights), of row r of
  // kv head kvh's G * Lq query rows, which are position-major: position r / G
  // of query head kvh * G + r % G.
  int64_t RowOffset(const TensorView& t, int64_t b, int64_t kvh, int64_t r) const {
    const int64_t g = group();
    return t.Offset(b, kvh * g + r % g, r / g, 0);
  }
  bool Paged() const { return pages.table != nullptr; }
  // Element offset, in k or v (t), of the row of key j of batch b, kv head h:
  // the one home of the paging rule.
  int64_t KeyRowOffset(const TensorView& t, int64_t b, int64_t h, int64_t j) const {
    if (!Paged()) return t.Offset(b, h, j, 0);
    const int64_t page = pages.table[b * pages.table_stride + j / pages.page_size];
    return t.Offset(page, h, j % pages.page_size, 0);
  }
  // The scales of key j's row in k or v (s: k_scale or v_scale): dim d's is
  // row[d * *step] (per token: one value, *step = 0). The one home of the
  // dequantization rule's addressing.
  const float* ScaleRow(const KvScale& s, int64_t b, int64_t h, int64_t j, int64_t* step) const {
    if (s.layout == KvScales::kPerToken) {
      *step = 0;
      return s.t.As<float>() + KeyRowOffset(s.t, b, h, j);
    }
    *step = s.t.stride[3];
    return s.t.As<float>() + s.t.Offset(0, h, 0, 0);
  }
  // Keys from key j on whose rows follow each other `stride[2]` apart in k
  // and v: to the end of j's page (at most `limit`).
  int64_t KeysInRun(int64_t j, int64_t limit) const {
    if (!Paged()) return limit;
    const int64_t left = pages.page_size - j % pages.page_size;
    return left < limit ? left : limit;
  }
  // Keys that batch b may attend to at all (kv_len, or Lk).
  int64_t KeyEnd(int64_t b) const { return key_lengths ? key_lengths[b] : kv_len; }
  // Query row i has position i + PositionOffset() (key j has position j):
  // kv_len - q_len under bottom-right causal, 0 otherwise, or the explicit
  // offset of a kv_attention sequence.
  // the causal mask and the windows compare positions.
  int64_t PositionOffset() const {
    if (has_position_offset) return position_offset;
    return causal == Causal::kBottomRight ? kv_len - q_len : 0;
  }
  // Whether any score modifier is on (windows, softcap, ALiBi, sinks).
  bool HasModifiers() const {
    return window_left != 0 || window_right != 0 || softcap != 0.0f || alibi_slopes != nullptr ||
           sinks != nullptr;
  }
  // Whether some rows may block keys that other rows of the same kv head
  // see (a mask tensor; causal or windows when the rows have more than one
  // position: one position, as in a decode step, gives every row the same
  // keys): their probabilities there are exactly 0, and P . V must not let
  // 0 * NaN (a non-finite V) reach them.
  bool MayBlockPerRow() const {
    return has_mask ||
           (q_len > 1 && (causal != Causal::kNone || window_left != 0 || window_right != 0));
  }
  // The keys [*first, *end) of batch b that a query at position `pos` may
  // see by position (kv_len, causal, windows; masks come on top), with
  // 0 <= *first <= *end <= KeyEnd(b) (an empty range where *first == *end).
  // Both bounds grow with pos. The one home of these rules: every kernel
  // uses it. kWindows = false: a caller that knows there are no windows
  // (a tiny call's per-row set-up is a visible part of its time).
  template <bool kWindows = true>
  void VisibleKeys(int64_t b, int64_t pos, int64_t* first, int64_t* end) const {
    const int64_t key_end = KeyEnd(b);
    int64_t hi = key_end;
    if (causal != Causal::kNone && pos + 1 < hi) hi = pos + 1;
    int64_t lo = 0;
    if (kWindows) {
      // Windows are compared without forming pos +- W, which may overflow.
      if (window_right > 0 && window_right < hi - pos) hi = pos + window_right;
      lo = window_left > 0 && window_left <= pos ? pos - window_left + 1 : 0;
      if (lo > key_end) lo = key_end;
    }
    *first = lo;
    *end = hi > lo ? hi : lo;
  }
};

}  // namespace hwyattn

#endif  // HWYATTN_SRC_SDPA_PROBLEM_H_
