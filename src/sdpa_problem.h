// SPDX-License-Identifier: Apache-2.0
//
// One hwyattn_sdpa call (or the attention inside an MHA layer) after
// validation: what every attention kernel reads, and the position rules
// (which keys a query row may see) that they all share.
#ifndef HWYATTN_SRC_SDPA_PROBLEM_H_
#define HWYATTN_SRC_SDPA_PROBLEM_H_

#include <stdint.h>

#include "include/hwyattn.h"
#include "src/tensor.h"
#include "src/threading.h"

namespace hwyattn {

// One hwyattn_sdpa call after validation: every view is rank 4 and
// broadcastable as documented, sizes are consistent and overflow-free.
struct SdpaProblem {
  TensorView q;    // [B, Hq, Lq, D]
  TensorView k;    // [B|1, Hkv, Lk, D]
  TensorView v;    // [B|1, Hkv, Lk, Dv]
  TensorView out;  // [B, Hq, Lq, Dv], F32
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;
  int64_t head_dim = 0, value_dim = 0;
  float scale = 0.0f;  // resolved: never 0
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  bool has_mask = false;
  TensorView mask;  // broadcast to [B, Hq, Lq, Lk]; BOOL or F32
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
  // Who runs the parallel phases: opts->parallel as validated, or OpenMP.
  Executor executor;
  // hwyattn_kv_attention's explicit positions: query row i has position
  // i + position_offset whatever `causal` is (hwyattn_sdpa never sets it).
  bool has_position_offset = false;
  int64_t position_offset = 0;

  int64_t group() const { return q_heads / kv_heads; }
  // Element offset, in a [B, Hq, Lq, *] tensor (q, out, weights), of row r of
  // kv head kvh's G * Lq query rows, which are position-major: position r / G
  // of query head kvh * G + r % G.
  int64_t RowOffset(const TensorView& t, int64_t b, int64_t kvh, int64_t r) const {
    const int64_t g = group();
    return t.Offset(b, kvh * g + r % g, r / g, 0);
  }
  // Keys that batch b may attend to at all (kv_len, or Lk).
  int64_t KeyEnd(int64_t b) const { return key_lengths ? key_lengths[b] : kv_len; }
  // Query row i has position i + PositionOffset() (key j has position j):
  // kv_len - q_len under bottom-right causal, 0 otherwise, or the explicit
  // offset of a kv_attention sequence.
  // the causal mask and the windows compare positions.
  int64_t PositionOffset() const {
    if (has_position_offset) return position_offset;
    return causal == HWYATTN_CAUSAL_BOTTOM_RIGHT ? kv_len - q_len : 0;
  }
  // Whether any score modifier is on (windows, softcap, ALiBi, sinks).
  bool HasModifiers() const {
    return window_left != 0 || window_right != 0 || softcap != 0.0f || alibi_slopes != nullptr ||
           sinks != nullptr;
  }
  // Whether some rows may block keys that other rows of the same kv head
  // see (causal, windows, a mask tensor): their probabilities there are
  // exactly 0, and P . V must not let 0 * NaN (a non-finite V) reach them.
  bool MayBlockPerRow() const {
    return causal != HWYATTN_CAUSAL_NONE || has_mask || window_left != 0 || window_right != 0;
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
    if (causal != HWYATTN_CAUSAL_NONE && pos + 1 < hi) hi = pos + 1;
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
