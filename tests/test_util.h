// SPDX-License-Identifier: Apache-2.0
//
// Test scaffolding shared by sdpa_test and threads_test: tensors laid out in
// memory in every way a caller may describe them (permuted, strided with
// gaps, broadcast with stride 0, misaligned, with guard zones before and
// after), a description of one attention problem, and the comparison of a
// library call against the double-precision oracle in reference.h.

#ifndef HWYATTN_TESTS_TEST_UTIL_H_
#define HWYATTN_TESTS_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"

namespace hwyattn_test {

using Shape4 = std::array<int64_t, 4>;

// How a tensor's logical dimensions are placed in memory.
struct Layout {
  // The descriptor's rank: it describes the last `rank` logical dimensions
  // (the leading ones must then have size 1).
  int rank = 4;
  // Logical dimensions from outermost to innermost in memory. {0, 2, 1, 3}
  // stores a logical [B, H, L, D] tensor as [B, L, H, D] (batch_first).
  std::array<int, 4> order = {0, 1, 2, 3};
  // A broadcast dimension is stored once and described with stride 0.
  std::array<bool, 4> broadcast = {false, false, false, false};
  // Stride of the innermost memory dimension; > 1 leaves gaps between
  // elements that an output must not touch.
  int64_t elem_step = 1;
  // Extra elements after each innermost row (more gaps).
  int64_t row_pad = 0;
  // Elements by which `data` is shifted from the allocation's aligned start
  // (1 with F32 misaligns every row by one float).
  int64_t offset = 0;
};

// Owns the memory of one tensor and its descriptor. The storage has guard
// zones before and after the described span, so writes out of bounds show up
// in UntouchedOutside(). Movable (the data pointer survives a vector move),
// not copyable.
class TensorBuf {
 public:
  TensorBuf() = default;
  TensorBuf(hwyattn_dtype dtype, const Shape4& shape, const Layout& layout);
  TensorBuf(TensorBuf&&) = default;
  TensorBuf& operator=(TensorBuf&&) = default;
  TensorBuf(const TensorBuf&) = delete;
  TensorBuf& operator=(const TensorBuf&) = delete;

  bool empty() const { return storage_.empty(); }
  hwyattn_tensor* desc() { return &desc_; }
  const hwyattn_tensor& tensor() const { return desc_; }
  const Shape4& shape() const { return shape_; }
  const Layout& layout() const { return layout_; }
  int64_t NumElements() const { return shape_[0] * shape_[1] * shape_[2] * shape_[3]; }

  // Byte offset of a logical element from the start of the storage.
  size_t ByteOffset(const int64_t idx[4]) const;

  // Fills every byte of the storage (gaps and guards too) with values drawn
  // uniformly from [lo, hi] and rounded to the dtype. F32/F16/BF16 only.
  void FillRandom(std::mt19937* rng, float lo, float hi);
  // Fills every byte with the 32-bit pattern (an output's "not yet written").
  void FillPattern(uint32_t pattern);

  float GetF32(const int64_t idx[4]) const;  // F32 tensors only.
  void SetF32(const int64_t idx[4], float value);
  void SetF16Bits(const int64_t idx[4], uint16_t bits);
  // value rounded to the tensor's dtype (F32, F16 or BF16; NaN and +-Inf kept).
  void SetValue(const int64_t idx[4], float value);
  void SetU8(const int64_t idx[4], uint8_t value);

  // Calls fn(idx, linear) for every logical element, where linear is the
  // element's position in a dense row-major array of shape(). Broadcast
  // dimensions are visited in full (all positions alias one element).
  void ForEach(const std::function<void(const int64_t*, int64_t)>& fn) const;
  // Like ForEach but visits each stored element once (index 0 of broadcast
  // dimensions only).
  void ForEachStored(const std::function<void(const int64_t*)>& fn) const;

  std::vector<unsigned char> Snapshot() const { return storage_; }
  // True if every byte that is not part of a logical element equals the same
  // byte of `before`; *detail says where it differs otherwise.
  bool UntouchedOutside(const std::vector<unsigned char>& before, std::string* detail) const;

 private:
  hwyattn_dtype dtype_ = HWYATTN_F32;
  Shape4 shape_ = {1, 1, 1, 1};
  Layout layout_;
  int64_t strides_[4] = {0, 0, 0, 0};  // Per logical dim, in elements.
  size_t base_ = 0;                    // Byte offset of data in storage_.
  std::vector<unsigned char> storage_;
  hwyattn_tensor desc_{};
};

// How a mask is built. Each dimension of `shape` is either the full size
// [B, Hq, Lq, Lk] or 1 (then it broadcasts by size); layout.broadcast gives
// broadcasting by stride 0 with the full size instead.
struct MaskSpec {
  hwyattn_dtype dtype = HWYATTN_BOOL;
  Shape4 shape = {1, 1, 1, 1};
  Layout layout;
  // Probability that an element blocks its key.
  double block_prob = 0.25;
  // Also block every key of the rows whose mask index has
  // (b + h + i) % 4 == 1, to produce fully masked rows.
  bool block_rows = false;
  // > 0: also block, as an engine's mask does (ggml's), every key outside
  // the band of `band` keys ending at the row's bottom-right causal diagonal
  // (row i sees keys (i + Lk - Lq - band, i + Lk - Lq]): whole blocked runs
  // at both ends of each row, for the kernels' skipping of blocked tiles.
  int64_t band = 0;
  // With band: the cache is a ring, as an engine's sliding-window cache:
  // key j holds position (j + band_shift) % Lk, so a row's band may wrap
  // around the end of the keys.
  int64_t band_shift = 0;
};

// One hwyattn_sdpa call, fully described.
struct Problem {
  int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, k_len = 1, dim = 1, v_dim = 1;
  // k and v's batch size: 0 means `batch`; 1 broadcasts one K/V over every batch.
  int64_t kv_batch = 0;
  hwyattn_dtype q_dtype = HWYATTN_F32, k_dtype = HWYATTN_F32, v_dtype = HWYATTN_F32;
  float scale = 0.0f;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  Layout q_layout, k_layout, v_layout, out_layout;
  bool has_mask = false;
  MaskSpec mask;
  std::vector<int32_t> kv_len;  // Empty: no kv_len.
  bool want_weights = false, want_lse = false;
  Layout weights_layout;
  Layout lse_layout = Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0};
  // Score modifiers (0.2), passed to hwyattn_sdpa and the oracle alike; the
  // defaults are "off". See hwyattn.h and reference.h for their rules.
  int64_t window_left = 0, window_right = 0;  // 0 = unbounded
  float softcap = 0.0f;                       // 0 = off
  std::vector<float> alibi_slopes;            // Empty: none; else [q_heads]
  std::vector<float> sinks;                   // Empty: none; else [q_heads]
  // q and k values are drawn from [-amp, amp].
  float q_amp = 1.0f, k_amp = 1.0f;
  uint32_t seed = 1;
  // Passing opts = NULL (only valid when nothing above needs options).
  bool null_opts = false;
};

// The buffers of one call. Not movable: the options point into it.
struct Call {
  explicit Call(const Problem& p);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  hwyattn_status Run();

  Problem problem;
  TensorBuf q, k, v, out, mask, weights, lse;
  std::vector<int32_t> kv_len;
  // The per-head modifier arrays opts points into (copies of the problem's).
  std::vector<float> alibi_slopes, sinks;
  hwyattn_sdpa_options opts;
  // Snapshots of the outputs before the call.
  std::vector<unsigned char> out_before, weights_before, lse_before;
};

// The uniform pattern written into outputs before a call: a quiet NaN, so an
// element the library forgets to write (or accumulates into) fails.
constexpr uint32_t kOutputSentinel = 0x7FC0BEEFu;

// Runs the call, checks it returns HWYATTN_OK and compares every requested
// output with the oracle (gtest EXPECT failures on mismatch). A problem that
// requests the weights is run a second time without them.
void RunAndCheck(const Problem& p);
// Compares the outputs of a finished call with the oracle.
void CheckAgainstReference(Call& call);

// max |got - want| / max |want| over a tensor, with the worst element; NaN in
// `got` counts as an infinite error.
::testing::AssertionResult CompareRelative(const char* what, const TensorBuf& got,
                                           const std::vector<double>& want, double tol);

std::string ShapeName(const Problem& p);
// The problem's score modifiers as a test-name fragment, e.g.
// "wl3_wr0_cap30_alibi_sinks", or "nomod" when none is on.
std::string ModifierName(const Problem& p);

// ALiBi's standard slopes for `heads` heads (Press et al.; BLOOM's
// build_alibi_tensor): with n the largest power of two <= heads, head h < n
// gets 2^(-8 (h + 1) / n) and the remaining heads take every other slope of
// the 2n-head sequence, 2^(-4 (2 (h - n) + 1) / n).
std::vector<float> StandardAlibiSlopes(int64_t heads);

}  // namespace hwyattn_test

#endif  // HWYATTN_TESTS_TEST_UTIL_H_
