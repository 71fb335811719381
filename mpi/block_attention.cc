// SPDX-License-Identifier: Apache-2.0

#include "mpi/block_attention.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "mpi/error.h"
#include "mpi/tensor_view.h"

namespace hwyattn_mpi {

// The rules of hwyattn.h (and of the library's VisibleKeys), with key
// positions >= 0 and windows compared without forming p +- W.
void PositionRules::Visible(int64_t p, int64_t* lo, int64_t* hi) const {
  int64_t h = INT64_MAX;
  if (causal) h = p + 1;
  if (window_right > 0 && window_right < h - p) h = p + window_right;
  *lo = window_left > 0 && window_left <= p ? p - window_left + 1 : 0;
  *hi = h;
}

PositionRules PositionRules::From(const hwyattn_sdpa_options& opts) {
  PositionRules rules;
  rules.causal = opts.causal != HWYATTN_CAUSAL_NONE;
  rules.window_left = opts.window_left;
  rules.window_right = opts.window_right;
  return rules;
}

hwyattn_status WriteResult(float* out, float* lse, const int64_t shape[4], const float* sinks,
                           hwyattn_tensor* dst, hwyattn_tensor* dst_lse, int rank) {
  hwyattn_tensor merged_out, merged_lse;
  hwyattn_tensor_contiguous(&merged_out, out, HWYATTN_F32, 4, shape);
  hwyattn_tensor_contiguous(&merged_lse, lse, HWYATTN_F32, 3, shape);
  const hwyattn_tensor* outs[1] = {&merged_out};
  const hwyattn_tensor* lses[1] = {&merged_lse};
  const hwyattn_status s = hwyattn_merge_states(1, outs, lses, sinks, dst, dst_lse);
  if (s != HWYATTN_OK) {
    return Fail(s, "rank %d: writing out: hwyattn_merge_states: %s", rank, hwyattn_last_error());
  }
  return HWYATTN_OK;
}

namespace {

void FillEmpty(const Block& b, float* out, float* lse) {
  const int64_t rows = b.batch * b.q_heads * b.q_len;
  std::fill(out, out + rows * b.value_dim, 0.0f);
  std::fill(lse, lse + rows, -INFINITY);
}

// The user's mask (broadcastable to [B, Hq, Lq, key_len]) combined with the
// position rules for the block's keys [t0, t0 + n): [mB, mH, Lq, n], dense.
// Rows broadcast over batch or heads where the user's mask does.
template <typename T>
void BuildMask(const Block& b, const PositionRules& rules, int64_t t0, int64_t n, const Dims4* user,
               int64_t mb, int64_t mh, T blocked, std::vector<T>* mask) {
  const int64_t kp = b.k_pos + t0;
  for (int64_t bb = 0; bb < mb; ++bb) {
    for (int64_t h = 0; h < mh; ++h) {
      for (int64_t i = 0; i < b.q_len; ++i) {
        int64_t lo, hi;
        rules.Visible(b.q_pos + i, &lo, &hi);
        T* row = mask->data() + ((bb * mh + h) * b.q_len + i) * n;
        const char* user_row = nullptr;
        int64_t user_step = 0;
        if (user != nullptr) {
          const int64_t idx[3] = {user->shape[0] > 1 ? bb : 0, user->shape[1] > 1 ? h : 0,
                                  user->shape[2] > 1 ? i : 0};
          const int64_t key0 = user->shape[3] > 1 ? t0 : 0;
          user_row = static_cast<const char*>(b.mask->data) +
                     static_cast<int64_t>(sizeof(T)) *
                         (idx[0] * user->stride[0] + idx[1] * user->stride[1] +
                          idx[2] * user->stride[2] + key0 * user->stride[3]);
          user_step = user->shape[3] > 1 ? user->stride[3] * static_cast<int64_t>(sizeof(T)) : 0;
        }
        for (int64_t j = 0; j < n; ++j) {
          const bool visible = kp + j >= lo && kp + j < hi;
          if (!visible) {
            row[j] = blocked;
          } else if (user_row == nullptr) {
            row[j] = T(1);
          } else {
            memcpy(&row[j], user_row + j * user_step, sizeof(T));
          }
        }
      }
    }
  }
}

}  // namespace

hwyattn_status ComputeBlock(const Block& b, const PositionRules& rules,
                            const hwyattn_sdpa_options& base, float* out, float* lse) {
  if (b.key_len == 0) {
    FillEmpty(b, out, lse);
    return HWYATTN_OK;
  }
  // Keys that some row may see: rows' visible ranges grow with the position,
  // so the first row bounds them below and the last row above.
  const int64_t p_first = b.q_pos, p_last = b.q_pos + b.q_len - 1;
  int64_t lo_first, hi_first, lo_last, hi_last;
  rules.Visible(p_first, &lo_first, &hi_first);
  rules.Visible(p_last, &lo_last, &hi_last);
  int64_t t0 = std::clamp(lo_first - b.k_pos, int64_t{0}, b.key_len);
  int64_t t1 = hi_last - b.k_pos < b.key_len ? std::max(hi_last - b.k_pos, int64_t{0}) : b.key_len;
  if (b.kv_len != nullptr) {
    int64_t longest = 0;
    for (int64_t i = 0; i < b.batch; ++i) {
      longest = std::max(longest, std::clamp(b.kv_len[i] - b.k_pos, int64_t{0}, b.key_len));
    }
    t1 = std::min(t1, longest);
  }
  if (t1 <= t0) {
    FillEmpty(b, out, lse);
    return HWYATTN_OK;
  }
  const int64_t n = t1 - t0, kp = b.k_pos + t0;

  hwyattn_sdpa_options opts = base;
  opts.causal = HWYATTN_CAUSAL_NONE;
  opts.window_left = opts.window_right = 0;
  opts.mask = nullptr;
  opts.kv_len = nullptr;
  opts.weights = nullptr;
  opts.sinks = nullptr;
  // Local query row i has position i + local_offset in the block's key
  // coordinates; the whole problem's is q_pos + i - kp.
  int64_t local_offset = 0;
  bool position_mask = false;
  const bool all_visible = lo_last <= kp && hi_first - kp >= n;
  if (!all_visible) {
    const bool windows = rules.window_left != 0 || rules.window_right != 0;
    if (b.q_pos == kp && (rules.causal || windows)) {
      opts.causal = rules.causal ? HWYATTN_CAUSAL_TOP_LEFT : HWYATTN_CAUSAL_NONE;
    } else if (rules.causal && b.q_pos - kp == n - b.q_len) {
      opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
      local_offset = n - b.q_len;
    } else {
      position_mask = true;
    }
    if (!position_mask) {
      opts.window_left = rules.window_left;
      opts.window_right = rules.window_right;
    }
  }

  // (A rank-1 k has one key, which is never trimmed: no slice then.)
  const bool trimmed = t0 != 0 || n != b.key_len;
  const hwyattn_tensor k = trimmed ? Slice(*b.k, 2, t0, n) : *b.k;
  const hwyattn_tensor v = trimmed ? Slice(*b.v, 2, t0, n) : *b.v;
  hwyattn_tensor mask;
  std::vector<uint8_t> bool_mask;
  std::vector<float> f32_mask;
  if (position_mask) {
    Dims4 user = b.mask != nullptr ? Dims4(*b.mask) : Dims4(*b.q);
    const int64_t mb = b.mask != nullptr ? user.shape[0] : 1;
    const int64_t mh = b.mask != nullptr ? user.shape[1] : 1;
    const int64_t shape[4] = {mb, mh, b.q_len, n};
    const Dims4* u = b.mask != nullptr ? &user : nullptr;
    try {
      if (b.mask != nullptr && b.mask->dtype == HWYATTN_F32) {
        f32_mask.resize(static_cast<size_t>(mb * mh * b.q_len * n));
        BuildMask<float>(b, rules, t0, n, u, mb, mh, -INFINITY, &f32_mask);
        hwyattn_tensor_contiguous(&mask, f32_mask.data(), HWYATTN_F32, 4, shape);
      } else {
        bool_mask.resize(static_cast<size_t>(mb * mh * b.q_len * n));
        BuildMask<uint8_t>(b, rules, t0, n, u, mb, mh, 0, &bool_mask);
        hwyattn_tensor_contiguous(&mask, bool_mask.data(), HWYATTN_BOOL, 4, shape);
      }
    } catch (const std::bad_alloc&) {
      return Fail(HWYATTN_OUT_OF_MEMORY, "out of memory for the position mask of %lld x %lld",
                  static_cast<long long>(b.q_len), static_cast<long long>(n));
    }
    opts.mask = &mask;
  } else if (b.mask != nullptr) {
    mask = Dims4(*b.mask).shape[3] > 1 ? Slice(*b.mask, 3, t0, n) : *b.mask;
    opts.mask = &mask;
  }
  std::vector<int32_t> kv_len;
  if (b.kv_len != nullptr) {
    try {
      kv_len.resize(static_cast<size_t>(b.batch));
    } catch (const std::bad_alloc&) {
      return Fail(HWYATTN_OUT_OF_MEMORY, "out of memory for kv_len");
    }
    for (int64_t i = 0; i < b.batch; ++i) {
      kv_len[static_cast<size_t>(i)] =
          static_cast<int32_t>(std::clamp(b.kv_len[i] - kp, int64_t{0}, n));
    }
    opts.kv_len = kv_len.data();
  }

  const int64_t out_shape[4] = {b.batch, b.q_heads, b.q_len, b.value_dim};
  const int64_t lse_shape[3] = {b.batch, b.q_heads, b.q_len};
  hwyattn_tensor out_t, lse_t;
  hwyattn_tensor_contiguous(&out_t, out, HWYATTN_F32, 4, out_shape);
  hwyattn_tensor_contiguous(&lse_t, lse, HWYATTN_F32, 3, lse_shape);
  opts.lse = &lse_t;
  const hwyattn_status s = hwyattn_sdpa(b.q, &k, &v, &out_t, &opts);
  if (s != HWYATTN_OK) return Fail(s, "hwyattn_sdpa of this rank's keys: %s", hwyattn_last_error());

  // ALiBi adds slope * (j - p): locally (j_local - p_local), in the whole
  // problem (kp + j_local) - (q_pos + i). They differ per row by the
  // constant kp - q_pos + local_offset, which the softmax cancels in out
  // but lse keeps: add it back (in double, rounded once).
  const int64_t shift = kp - b.q_pos + local_offset;
  if (base.alibi_slopes != nullptr && shift != 0) {
    for (int64_t bb = 0; bb < b.batch; ++bb) {
      for (int64_t h = 0; h < b.q_heads; ++h) {
        const double add = static_cast<double>(base.alibi_slopes[h]) * static_cast<double>(shift);
        float* row = lse + (bb * b.q_heads + h) * b.q_len;
        for (int64_t i = 0; i < b.q_len; ++i) {
          if (isfinite(row[i])) row[i] = static_cast<float>(static_cast<double>(row[i]) + add);
        }
      }
    }
  }
  return HWYATTN_OK;
}

}  // namespace hwyattn_mpi
