// SPDX-License-Identifier: Apache-2.0
//
// The oracle itself (reference.h) against values worked out by hand: the
// score modifiers of 0.2 (windows, softcap, ALiBi, sinks), alone and
// together. The kernels are tested against the oracle, so the oracle is
// tested against arithmetic: every case is small (1-2 heads, 1-4 queries,
// 1-4 keys, head dim 1) and its comments derive the expected numbers. Inputs
// are small integers, exact in float; scale is 1 unless a case says
// otherwise, so a score is the plain product q * k.
//
// Nothing here calls a kernel: ctest runs this binary once, not per target.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
// The values are computed in double from exact inputs: only the last bits of
// exp/log/tanh may differ between the oracle's order of operations and the
// expressions below.
constexpr double kTol = 1e-12;

// A dense row-major F32 descriptor written by hand (not through the library's
// hwyattn_tensor_contiguous: the oracle's tests use none of the library).
hwyattn_tensor Dense4(void* data, hwyattn_dtype dtype, int64_t d0, int64_t d1, int64_t d2,
                      int64_t d3) {
  hwyattn_tensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = 4;
  const int64_t shape[4] = {d0, d1, d2, d3};
  const int64_t stride[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
  for (int d = 0; d < 4; ++d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride[d];
  }
  return t;
}

// One small problem: q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv],
// dense, and options that start as "all off" with scale 1.
struct Tiny {
  Tiny(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t k_len)
      : b(batch), hq(q_heads), hkv(kv_heads), lq(q_len), lk(k_len) {
    q.assign(static_cast<size_t>(b * hq * lq * d), 0.0f);
    k.assign(static_cast<size_t>(b * hkv * lk * d), 0.0f);
    v.assign(static_cast<size_t>(b * hkv * lk * dv), 0.0f);
    std::memset(&opts, 0, sizeof(opts));
    opts.struct_size = sizeof(opts);
    opts.scale = 1.0f;
  }

  // Runs the oracle; the test fails if it refuses.
  RefResult Run() {
    tq = Dense4(q.data(), HWYATTN_F32, b, hq, lq, d);
    tk = Dense4(k.data(), HWYATTN_F32, b, hkv, lk, d);
    tv = Dense4(v.data(), HWYATTN_F32, b, hkv, lk, dv);
    RefResult r;
    std::string error;
    EXPECT_TRUE(ReferenceSdpa(tq, tk, tv, &opts, &r, &error)) << error;
    return r;
  }

  // Whether the oracle accepts the options (for the refusal tests).
  bool Accepts() {
    tq = Dense4(q.data(), HWYATTN_F32, b, hq, lq, d);
    tk = Dense4(k.data(), HWYATTN_F32, b, hkv, lk, d);
    tv = Dense4(v.data(), HWYATTN_F32, b, hkv, lk, dv);
    RefResult r;
    std::string error;
    const bool ok = ReferenceSdpa(tq, tk, tv, &opts, &r, &error);
    if (!ok) {
      EXPECT_FALSE(error.empty()) << "a refusal must say why";
    }
    return ok;
  }

  int64_t b, hq, hkv, lq, lk, d = 1, dv = 1;
  std::vector<float> q, k, v;
  hwyattn_sdpa_options opts;
  hwyattn_tensor tq, tk, tv;
};

bool Near(double got, double want) {
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= kTol * std::max(1.0, std::fabs(want));
}

// Checks one row (b, h, i) of a result with Dv = 1: its weights over the
// keys, its output and its lse. A weight expected to be 0 must be exactly 0.
void ExpectRow(const RefResult& r, int64_t b, int64_t h, int64_t i,
               const std::vector<double>& weights, double out, double lse) {
  SCOPED_TRACE(::testing::Message() << "row b=" << b << " h=" << h << " i=" << i);
  ASSERT_EQ(static_cast<int64_t>(weights.size()), r.k_len);
  ASSERT_EQ(r.v_dim, 1);
  const size_t row = static_cast<size_t>(r.RowIndex(b, h, i));
  for (int64_t j = 0; j < r.k_len; ++j) {
    const double got = r.weights[row * static_cast<size_t>(r.k_len) + static_cast<size_t>(j)];
    const double want = weights[static_cast<size_t>(j)];
    if (want == 0.0) {
      EXPECT_EQ(got, 0.0) << "weight of key " << j;
    } else {
      EXPECT_TRUE(Near(got, want)) << "weight of key " << j << ": got " << got << ", want " << want;
    }
  }
  EXPECT_TRUE(Near(r.out[row], out)) << "out: got " << r.out[row] << ", want " << out;
  EXPECT_TRUE(Near(r.lse[row], lse)) << "lse: got " << r.lse[row] << ", want " << lse;
}

// A row none of whose keys is allowed: zeros, lse as given, row_blocked.
void ExpectBlockedRow(const RefResult& r, int64_t b, int64_t h, int64_t i, double lse) {
  ExpectRow(r, b, h, i, std::vector<double>(static_cast<size_t>(r.k_len), 0.0), 0.0, lse);
  EXPECT_TRUE(r.row_blocked[static_cast<size_t>(r.RowIndex(b, h, i))])
      << "row b=" << b << " h=" << h << " i=" << i;
}

const double kLn2 = std::log(2.0), kLn3 = std::log(3.0), kLn4 = std::log(4.0);

// --------------------------------------------------------------------------
// Windows
// --------------------------------------------------------------------------

// All scores are 0 (q = k = 0), so a row's weights are uniform over the keys
// its window keeps: 1/n each, lse = ln n, out = the mean of those keys'
// values. v = 1, 2, 4, 8 makes every subset's mean distinct.
TEST(ReferenceWindowTest, LeftWithCausalTopLeft) {
  Tiny t(1, 1, 1, 4, 4);
  t.v = {1, 2, 4, 8};
  t.opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
  t.opts.window_left = 2;
  // p = i; keys with j <= i (causal) and j > i - 2 (window): {i - 1, i}.
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {1, 0, 0, 0}, 1.0, 0.0);                 // {0}: out 1, lse ln 1
  ExpectRow(r, 0, 0, 1, {0.5, 0.5, 0, 0}, (1 + 2) / 2.0, kLn2);  // {0, 1}
  ExpectRow(r, 0, 0, 2, {0, 0.5, 0.5, 0}, (2 + 4) / 2.0, kLn2);  // {1, 2}
  ExpectRow(r, 0, 0, 3, {0, 0, 0.5, 0.5}, (4 + 8) / 2.0, kLn2);  // {2, 3}
  // The blocked keys are reported as such; none of the rows is fully blocked.
  const std::vector<bool> row3 = {false, false, true, true};
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(r.key_allowed[static_cast<size_t>(3 * 4 + j)], row3[static_cast<size_t>(j)]) << j;
  }
  for (int64_t i = 0; i < 4; ++i) EXPECT_FALSE(r.row_blocked[static_cast<size_t>(i)]);

  // window_left = 1 keeps only j > i - 1, i.e. the diagonal: out = v[i].
  t.opts.window_left = 1;
  const RefResult d = t.Run();
  ExpectRow(d, 0, 0, 0, {1, 0, 0, 0}, 1.0, 0.0);
  ExpectRow(d, 0, 0, 1, {0, 1, 0, 0}, 2.0, 0.0);
  ExpectRow(d, 0, 0, 2, {0, 0, 1, 0}, 4.0, 0.0);
  ExpectRow(d, 0, 0, 3, {0, 0, 0, 1}, 8.0, 0.0);
}

// Lq = 2 < Lk = 4: the window follows the query's position, which
// bottom-right puts at p = i + (Lk - Lq) = i + 2.
TEST(ReferenceWindowTest, LeftWithCausalBottomRight) {
  Tiny t(1, 1, 1, 2, 4);
  t.v = {1, 2, 4, 8};
  t.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  t.opts.window_left = 2;
  const RefResult r = t.Run();
  // Row 0, p = 2: j <= 2 and j > 0: {1, 2}: out (2 + 4) / 2 = 3.
  ExpectRow(r, 0, 0, 0, {0, 0.5, 0.5, 0}, 3.0, kLn2);
  // Row 1, p = 3: j <= 3 and j > 1: {2, 3}: out (4 + 8) / 2 = 6.
  ExpectRow(r, 0, 0, 1, {0, 0, 0.5, 0.5}, 6.0, kLn2);

  // The same window under top-left puts the queries at p = i instead.
  t.opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
  const RefResult tl = t.Run();
  ExpectRow(tl, 0, 0, 0, {1, 0, 0, 0}, 1.0, 0.0);       // p = 0: {0}
  ExpectRow(tl, 0, 0, 1, {0.5, 0.5, 0, 0}, 1.5, kLn2);  // p = 1: {0, 1}
}

// Lq = 4 > Lk = 2 under bottom-right: p = i - 2, so the first two rows see no
// key at all (causal alone blocks them), and the window narrows the others.
TEST(ReferenceWindowTest, BottomRightMoreQueriesThanKeys) {
  Tiny t(1, 1, 1, 4, 2);
  t.v = {1, 2};
  t.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  t.opts.window_left = 1;
  const RefResult r = t.Run();
  ExpectBlockedRow(r, 0, 0, 0, -kInf);      // p = -2: j <= -2: none
  ExpectBlockedRow(r, 0, 0, 1, -kInf);      // p = -1: none
  ExpectRow(r, 0, 0, 2, {1, 0}, 1.0, 0.0);  // p = 0: j <= 0 and j > -1: {0}
  ExpectRow(r, 0, 0, 3, {0, 1}, 2.0, 0.0);  // p = 1: j <= 1 and j > 0: {1} (not {0, 1})
}

// Without causal, p = i and only the windows limit the keys.
TEST(ReferenceWindowTest, RightWithoutCausal) {
  Tiny t(1, 1, 1, 3, 4);
  t.v = {1, 2, 4, 8};
  t.opts.window_right = 2;
  // Keys j < i + 2.
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {0.5, 0.5, 0, 0}, 3 / 2.0, kLn2);                // {0, 1}
  ExpectRow(r, 0, 0, 1, {1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, 7 / 3.0, kLn3);  // {0, 1, 2}
  ExpectRow(r, 0, 0, 2, {0.25, 0.25, 0.25, 0.25}, 15 / 4.0, kLn4);       // all four

  // Both sides: i - 2 < j < i + 2, a local band {i - 1, i, i + 1}.
  t.opts.window_left = 2;
  const RefResult band = t.Run();
  ExpectRow(band, 0, 0, 0, {0.5, 0.5, 0, 0}, 3 / 2.0, kLn2);                 // {0, 1}
  ExpectRow(band, 0, 0, 1, {1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, 7 / 3.0, kLn3);   // {0, 1, 2}
  ExpectRow(band, 0, 0, 2, {0, 1 / 3.0, 1 / 3.0, 1 / 3.0}, 14 / 3.0, kLn3);  // {1, 2, 3}

  // window_right = 1 alone is a causal mask on positions: j < i + 1.
  t.opts.window_left = 0;
  t.opts.window_right = 1;
  const RefResult causal = t.Run();
  ExpectRow(causal, 0, 0, 0, {1, 0, 0, 0}, 1.0, 0.0);
  ExpectRow(causal, 0, 0, 1, {0.5, 0.5, 0, 0}, 1.5, kLn2);
  ExpectRow(causal, 0, 0, 2, {1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, 7 / 3.0, kLn3);
}

// kv_len removes keys but does not move positions: p stays i + (Lk - Lq)
// with Lk the tensor's length, so a short batch can lose a whole row.
TEST(ReferenceWindowTest, WithKvLen) {
  Tiny t(2, 1, 1, 2, 4);
  t.v = {1, 2, 4, 8, 10, 20, 40, 80};  // batch 0, then batch 1
  const int32_t kv_len[2] = {4, 2};
  t.opts.kv_len = kv_len;
  t.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  t.opts.window_left = 2;
  const RefResult r = t.Run();
  // Batch 0 (all 4 keys): row 0 p = 2: {1, 2}; row 1 p = 3: {2, 3}.
  ExpectRow(r, 0, 0, 0, {0, 0.5, 0.5, 0}, 3.0, kLn2);
  ExpectRow(r, 0, 0, 1, {0, 0, 0.5, 0.5}, 6.0, kLn2);
  // Batch 1 (keys 0, 1): row 0 p = 2: {1, 2} and j < 2: {1}: out 20.
  ExpectRow(r, 1, 0, 0, {0, 1, 0, 0}, 20.0, 0.0);
  // Row 1 p = 3: {2, 3} and j < 2: nothing (had kv_len moved the diagonal
  // to p = 1, the row would see {0, 1}).
  ExpectBlockedRow(r, 1, 0, 1, -kInf);
}

// window_left = window_right = 1 keeps only j = p. With Lq = 3 > Lk = 2 and
// no causal, row 2 (p = 2) has no key 2: the window alone empties it.
TEST(ReferenceWindowTest, RowEmptiedByWindowGivesZerosAndSink) {
  Tiny t(1, 1, 1, 3, 2);
  t.v = {1, 2};
  t.opts.window_left = 1;
  t.opts.window_right = 1;
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {1, 0}, 1.0, 0.0);
  ExpectRow(r, 0, 0, 1, {0, 1}, 2.0, 0.0);
  ExpectBlockedRow(r, 0, 0, 2, -kInf);  // no sinks: lse = -inf

  // With a sink z = ln 3 (rounded to float): each kept key has score 0, so
  // the denominator is e^z + e^0 = 3 + 1 = 4; its weight is 1/4, out = v/4
  // and lse = ln 4. The empty row still gives zeros, but lse = z.
  const float sink[1] = {static_cast<float>(kLn3)};
  t.opts.sinks = sink;
  const double z = static_cast<double>(sink[0]);
  const double den = std::exp(z) + 1.0;  // = 4 up to the rounding of ln 3
  const RefResult s = t.Run();
  ExpectRow(s, 0, 0, 0, {1 / den, 0}, 1 / den, std::log(den));
  ExpectRow(s, 0, 0, 1, {0, 1 / den}, 2 / den, std::log(den));
  ExpectBlockedRow(s, 0, 0, 2, z);
  EXPECT_NEAR(s.weights[0], 0.25, 1e-7);
  EXPECT_NEAR(s.lse[0], kLn4, 1e-7);
}

// --------------------------------------------------------------------------
// Softcap
// --------------------------------------------------------------------------

// The cap applies to the scaled score: q = 4, k = 1, scale 0.5 gives
// s = 2, and softcap 1 makes it 1 * tanh(2 / 1) = tanh(2) = 0.96402758...
// With one key, lse is that score itself.
TEST(ReferenceSoftcapTest, OnTheScaledScore) {
  Tiny one(1, 1, 1, 1, 1);
  one.q = {4};
  one.k = {1};
  one.v = {5};
  one.opts.scale = 0.5f;
  one.opts.softcap = 1.0f;
  const RefResult r1 = one.Run();
  // Capping before scaling would give 0.5 * tanh(4) = 0.4997; no cap, 2.
  ExpectRow(r1, 0, 0, 0, {1}, 5.0, std::tanh(2.0));
  EXPECT_NEAR(r1.lse[0], 0.9640275800758169, 1e-15);
  // softcap 30 on the same score: 30 * tanh(2 / 30) = 1.99705...
  one.opts.softcap = 30.0f;
  ExpectRow(one.Run(), 0, 0, 0, {1}, 5.0, 30.0 * std::tanh(2.0 / 30.0));

  // Two keys, k = 1 and 0: scores 2 and 0, capped to t = tanh(2) and 0.
  Tiny two(1, 1, 1, 1, 2);
  two.q = {4};
  two.k = {1, 0};
  two.v = {1, 2};
  two.opts.scale = 0.5f;
  two.opts.softcap = 1.0f;
  const double t = std::tanh(2.0);
  const double den = std::exp(t) + 1.0;  // e^t + e^0
  ExpectRow(two.Run(), 0, 0, 0, {std::exp(t) / den, 1 / den}, (std::exp(t) * 1 + 1 * 2) / den,
            std::log(den));
}

// The additive mask is added after the cap, uncapped, and a -inf mask
// element still blocks its key.
TEST(ReferenceSoftcapTest, BeforeTheAdditiveMask) {
  Tiny t(1, 1, 1, 1, 3);
  t.q = {4};
  t.k = {1, 0, 1};
  t.v = {1, 2, 4};
  t.opts.scale = 0.5f;
  t.opts.softcap = 1.0f;
  float m[3] = {0.0f, 3.0f, -kInfF};
  const hwyattn_tensor mask = Dense4(m, HWYATTN_F32, 1, 1, 1, 3);
  t.opts.mask = &mask;
  // Scaled scores 2, 0, 2; capped tanh(2), 0, tanh(2); plus the mask:
  // s = tanh(2), 3, blocked. (Capping after the mask would make key 1's
  // score tanh(3) = 0.995, and key 2's -1 instead of blocked.)
  const double s0 = std::tanh(2.0), s1 = 3.0;
  const double den = std::exp(s0) + std::exp(s1);
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {std::exp(s0) / den, std::exp(s1) / den, 0},
            (std::exp(s0) * 1 + std::exp(s1) * 2) / den, std::log(den));
  EXPECT_FALSE(r.key_allowed[2]);
}

// --------------------------------------------------------------------------
// ALiBi
// --------------------------------------------------------------------------

// Two query heads share one key/value head (GQA); each query head has its
// own slope. All dot products are 0, so s = slope[h] * (j - p) with p = i.
TEST(ReferenceAlibiTest, SlopePerQueryHeadWithGqa) {
  Tiny t(1, 2, 1, 2, 3);
  t.v = {1, 2, 4};
  const float slopes[2] = {1.0f, 0.5f};
  t.opts.alibi_slopes = slopes;
  const RefResult r = t.Run();
  const double e = std::exp(1.0), rt = std::exp(0.5);
  // Head 0, row 0: biases 1 * (0, 1, 2); den = 1 + e + e^2.
  const double d0 = 1 + e + e * e;
  const std::vector<double> w0 = {1 / d0, e / d0, e * e / d0};
  const double out0 = (1 + 2 * e + 4 * e * e) / d0;
  ExpectRow(r, 0, 0, 0, w0, out0, std::log(d0));
  // Head 0, row 1: biases (-1, 0, 1): the same weights (a per-row constant
  // cancels), but lse = log(e^-1 + 1 + e) = log(d0) - 1.
  ExpectRow(r, 0, 0, 1, w0, out0, std::log(d0) - 1);
  // Head 1, row 0: biases 0.5 * (0, 1, 2); den = 1 + e^0.5 + e. (A slope
  // taken per key/value head would give head 1 head 0's numbers.)
  const double d1 = 1 + rt + e;
  const std::vector<double> w1 = {1 / d1, rt / d1, e / d1};
  const double out1 = (1 + 2 * rt + 4 * e) / d1;
  ExpectRow(r, 0, 1, 0, w1, out1, std::log(d1));
  // Head 1, row 1: biases (-0.5, 0, 0.5): lse = log(d1) - 0.5.
  ExpectRow(r, 0, 1, 1, w1, out1, std::log(d1) - 0.5);
}

// The bias uses the query's position: bottom-right puts the one query of a
// 3-key row at p = 0 + (3 - 1) = 2.
TEST(ReferenceAlibiTest, UsesTheQueryPosition) {
  Tiny t(1, 1, 1, 1, 3);
  t.v = {1, 2, 4};
  const float slope[1] = {1.0f};
  t.opts.alibi_slopes = slope;
  t.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  // Biases j - 2 = (-2, -1, 0); den = e^-2 + e^-1 + 1.
  const double a = std::exp(-2.0), b = std::exp(-1.0);
  const double den = a + b + 1;
  const std::vector<double> w = {a / den, b / den, 1 / den};
  const double out = (a * 1 + b * 2 + 1 * 4) / den;
  ExpectRow(t.Run(), 0, 0, 0, w, out, std::log(den));
  // Without causal p = 0: biases (0, 1, 2), the same weights, and
  // lse = log(1 + e + e^2) = log(den) + 2.
  t.opts.causal = HWYATTN_CAUSAL_NONE;
  ExpectRow(t.Run(), 0, 0, 0, w, out, std::log(den) + 2);
}

// The bias is added after the cap: q = 4, k = 1, 1, scale 0.5 give scaled
// scores 2, 2, capped to t = tanh(2) each, then + 1 * (j - 0): t, t + 1.
// den = e^t + e^(t+1) = e^t (1 + e), lse = t + log(1 + e). (Biasing before
// the cap would give tanh(2), tanh(3) and lse 2.28...)
TEST(ReferenceAlibiTest, AfterSoftcap) {
  Tiny t(1, 1, 1, 1, 2);
  t.q = {4};
  t.k = {1, 1};
  t.v = {1, 2};
  t.opts.scale = 0.5f;
  t.opts.softcap = 1.0f;
  const float slope[1] = {1.0f};
  t.opts.alibi_slopes = slope;
  const double e = std::exp(1.0);
  ExpectRow(t.Run(), 0, 0, 0, {1 / (1 + e), e / (1 + e)}, (1 + 2 * e) / (1 + e),
            std::tanh(2.0) + std::log(1 + e));
}

// --------------------------------------------------------------------------
// Sinks
// --------------------------------------------------------------------------

// Two equal scores of 0 and a sink z = ln 2: den = e^z + 1 + 1 = 4, each
// weight 1/4 (the sink's 2/4 has no value), out = (1 + 3) / 4 = 1,
// lse = ln 4. z is ln 2 rounded to float, so the exact expectations use it.
TEST(ReferenceSinkTest, QuarterWeights) {
  Tiny t(1, 1, 1, 1, 2);
  t.v = {1, 3};
  const float sink[1] = {static_cast<float>(kLn2)};
  t.opts.sinks = sink;
  const double den = std::exp(static_cast<double>(sink[0])) + 2.0;
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {1 / den, 1 / den}, 4 / den, std::log(den));
  EXPECT_NEAR(r.weights[0], 0.25, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.25, 1e-7);
  EXPECT_NEAR(r.out[0], 1.0, 1e-7);
  EXPECT_NEAR(r.lse[0], kLn4, 1e-7);
  EXPECT_FALSE(r.row_blocked[0]);
}

// A sink per query head (GQA: both heads read the same k/v); -inf is off.
TEST(ReferenceSinkTest, PerHeadAndMinusInfinityIsOff) {
  Tiny t(1, 2, 1, 1, 2);
  t.v = {1, 3};
  const float sinks[2] = {static_cast<float>(kLn2), -kInfF};
  t.opts.sinks = sinks;
  const double den = std::exp(static_cast<double>(sinks[0])) + 2.0;
  const RefResult r = t.Run();
  ExpectRow(r, 0, 0, 0, {1 / den, 1 / den}, 4 / den, std::log(den));  // as above
  ExpectRow(r, 0, 1, 0, {0.5, 0.5}, 2.0, kLn2);                       // no sink: den = 2

  // Sinks of -inf everywhere give exactly the result without sinks.
  const float off[2] = {-kInfF, -kInfF};
  t.opts.sinks = off;
  const RefResult with_off = t.Run();
  t.opts.sinks = nullptr;
  const RefResult without = t.Run();
  EXPECT_EQ(with_off.out, without.out);
  EXPECT_EQ(with_off.weights, without.weights);
  EXPECT_EQ(with_off.lse, without.lse);
  ExpectRow(without, 0, 0, 0, {0.5, 0.5}, 2.0, kLn2);
}

// A row that a BOOL mask blocks entirely: zeros for out and weights, lse =
// the sink's logit exactly, and row_blocked still says "every key blocked".
TEST(ReferenceSinkTest, FullyMaskedRow) {
  Tiny t(1, 1, 1, 2, 2);
  t.v = {1, 3};
  uint8_t m[4] = {1, 1, 0, 0};  // row 0 sees both keys, row 1 none
  const hwyattn_tensor mask = Dense4(m, HWYATTN_BOOL, 1, 1, 2, 2);
  t.opts.mask = &mask;
  const float sink[1] = {0.5f};
  t.opts.sinks = sink;
  const RefResult r = t.Run();
  // Row 0: den = e^0.5 + 1 + 1.
  const double den = std::exp(0.5) + 2.0;
  ExpectRow(r, 0, 0, 0, {1 / den, 1 / den}, 4 / den, std::log(den));
  EXPECT_FALSE(r.row_blocked[0]);
  ExpectBlockedRow(r, 0, 0, 1, 0.5);
  EXPECT_EQ(r.lse[1], 0.5);
}

// The sink is a logit as given: not scaled, not capped. One key with
// q = 4, k = 1, scale 0.5, softcap 1: s = tanh(2) (ALiBi adds 1 * (0 - 0)).
// Sink 2: den = e^2 + e^tanh(2). (Capping the sink would give e^tanh(2)
// twice; scaling it, e^1.)
TEST(ReferenceSinkTest, NotScaledCappedOrBiased) {
  Tiny t(1, 1, 1, 1, 1);
  t.q = {4};
  t.k = {1};
  t.v = {3};
  t.opts.scale = 0.5f;
  t.opts.softcap = 1.0f;
  const float slope[1] = {1.0f};
  t.opts.alibi_slopes = slope;
  const float sink[1] = {2.0f};
  t.opts.sinks = sink;
  const double s = std::tanh(2.0);
  const double den = std::exp(2.0) + std::exp(s);
  ExpectRow(t.Run(), 0, 0, 0, {std::exp(s) / den}, 3 * std::exp(s) / den, std::log(den));
}

// Logits far from 0 on either side must not overflow: a sink of 1000 with
// scores of 0 gives lse = 1000 + log(1 + 2 e^-1000) = 1000 (in double) and
// weights e^-1000 = 0 (underflow); a score of 1000 with a sink of 0 gives
// lse = 1000 and weight 1.
TEST(ReferenceSinkTest, LargeLogitsDoNotOverflow) {
  Tiny t(1, 1, 1, 1, 2);
  t.v = {1, 3};
  const float big[1] = {1000.0f};
  t.opts.sinks = big;
  const RefResult r = t.Run();
  EXPECT_EQ(r.lse[0], 1000.0);
  EXPECT_EQ(r.weights[0], 0.0);
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_FALSE(r.row_blocked[0]);

  Tiny u(1, 1, 1, 1, 1);
  u.q = {100};
  u.k = {10};
  u.v = {7};
  const float zero[1] = {0.0f};
  u.opts.sinks = zero;
  ExpectRow(u.Run(), 0, 0, 0, {1}, 7.0, 1000.0);  // 1000 + log(1 + e^-1000)
}

// --------------------------------------------------------------------------
// Everything at once
// --------------------------------------------------------------------------

// GQA (2 query heads, 1 k/v head), bottom-right (Lq = 2, Lk = 4: p = i + 2),
// window_left 2 (keys p - 1 and p), softcap 2, slopes (1, 0.5), sinks (0,
// off). q: head 0 = 1, head 1 = 0; k = 0, 1, 2, 3; v = 1, 2, 4, 8; scale 1.
TEST(ReferenceCombinedTest, WindowSoftcapAlibiSinksGqa) {
  Tiny t(1, 2, 1, 2, 4);
  t.q = {1, 1, 0, 0};
  t.k = {0, 1, 2, 3};
  t.v = {1, 2, 4, 8};
  t.opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  t.opts.window_left = 2;
  t.opts.softcap = 2.0f;
  const float slopes[2] = {1.0f, 0.5f};
  const float sinks[2] = {0.0f, -kInfF};
  t.opts.alibi_slopes = slopes;
  t.opts.sinks = sinks;
  const RefResult r = t.Run();
  const double e = std::exp(1.0);
  {
    // Head 0, row 0 (p = 2), keys 1, 2: q k = 1, 2; capped 2 tanh(1/2),
    // 2 tanh(1); biased by 1 * (j - 2) = -1, 0. Sink 0 adds e^0 = 1.
    const double s1 = 2 * std::tanh(0.5) - 1, s2 = 2 * std::tanh(1.0);
    const double den = 1 + std::exp(s1) + std::exp(s2);
    ExpectRow(r, 0, 0, 0, {0, std::exp(s1) / den, std::exp(s2) / den, 0},
              (2 * std::exp(s1) + 4 * std::exp(s2)) / den, std::log(den));
  }
  {
    // Head 0, row 1 (p = 3), keys 2, 3: q k = 2, 3; capped 2 tanh(1),
    // 2 tanh(3/2); biased by -1, 0; sink 1.
    const double s2 = 2 * std::tanh(1.0) - 1, s3 = 2 * std::tanh(1.5);
    const double den = 1 + std::exp(s2) + std::exp(s3);
    ExpectRow(r, 0, 0, 1, {0, 0, std::exp(s2) / den, std::exp(s3) / den},
              (4 * std::exp(s2) + 8 * std::exp(s3)) / den, std::log(den));
  }
  // Head 1: q = 0, so every capped score is 0 and only ALiBi remains:
  // 0.5 * (j - p) = -0.5, 0 for the two kept keys; no sink.
  // den = e^-0.5 + 1 in both rows.
  const double a = 1 / std::sqrt(e);  // e^-0.5
  const double den = a + 1;
  ExpectRow(r, 0, 1, 0, {0, a / den, 1 / den, 0}, (2 * a + 4) / den, std::log(den));
  ExpectRow(r, 0, 1, 1, {0, 0, a / den, 1 / den}, (4 * a + 8) / den, std::log(den));
  for (size_t row = 0; row < 4; ++row) EXPECT_FALSE(r.row_blocked[row]);
}

// --------------------------------------------------------------------------
// What the oracle reads and refuses
// --------------------------------------------------------------------------

// A struct from the 0.1 header ends before window_left: whatever lies past
// its struct_size is not part of it, and the modifiers count as 0.
TEST(ReferenceOptionsTest, OldStructSizeHasNoModifiers) {
  Tiny t(1, 1, 1, 1, 2);
  t.v = {1, 3};
  t.opts.window_left = 1;
  t.opts.window_right = 1;
  t.opts.softcap = 1.0f;
  const float one[1] = {1.0f};
  t.opts.alibi_slopes = one;
  t.opts.sinks = one;
  t.opts.struct_size = static_cast<uint32_t>(offsetof(hwyattn_sdpa_options, window_left));
  // Plain attention over two scores of 0: weights 1/2, out 2, lse ln 2.
  ExpectRow(t.Run(), 0, 0, 0, {0.5, 0.5}, 2.0, kLn2);
}

TEST(ReferenceOptionsTest, RefusesValuesWithoutMeaning) {
  Tiny t(1, 2, 1, 1, 2);
  ASSERT_TRUE(t.Accepts());
  const float nan = std::numeric_limits<float>::quiet_NaN();

  t.opts.window_left = -1;
  EXPECT_FALSE(t.Accepts());
  t.opts.window_left = 0;
  t.opts.window_right = -1;
  EXPECT_FALSE(t.Accepts());
  t.opts.window_right = 0;

  for (float cap : {-1.0f, nan, kInfF}) {
    t.opts.softcap = cap;
    EXPECT_FALSE(t.Accepts()) << "softcap " << cap;
  }
  t.opts.softcap = 0.0f;

  for (float bad : {nan, kInfF, -kInfF}) {
    const float slopes[2] = {0.5f, bad};  // the second head's is bad
    t.opts.alibi_slopes = slopes;
    EXPECT_FALSE(t.Accepts()) << "slope " << bad;
  }
  t.opts.alibi_slopes = nullptr;

  for (float bad : {nan, kInfF}) {
    const float sinks[2] = {0.5f, bad};
    t.opts.sinks = sinks;
    EXPECT_FALSE(t.Accepts()) << "sink " << bad;
  }
  const float off[2] = {-kInfF, 0.5f};
  t.opts.sinks = off;
  EXPECT_TRUE(t.Accepts()) << "a sink of -inf is off, not an error";
  // A huge window is as good as none (and must not overflow p - W).
  t.opts.window_left = std::numeric_limits<int64_t>::max();
  t.opts.window_right = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(t.Accepts());
}

// --------------------------------------------------------------------------
// The scaffolding's modifier fields (test_util.h)
// --------------------------------------------------------------------------

TEST(ReferenceScaffoldingTest, CallPassesModifiers) {
  Problem p;
  p.q_heads = 2;
  p.kv_heads = 1;
  p.q_len = 3;
  p.k_len = 5;
  p.window_left = 2;
  p.window_right = 3;
  p.softcap = 30.0f;
  p.alibi_slopes = {0.5f, 0.25f};
  p.sinks = {1.0f, -2.0f};
  Call call(p);
  p.alibi_slopes.clear();  // the Call keeps its own copies
  p.sinks.clear();
  EXPECT_EQ(call.opts.window_left, 2);
  EXPECT_EQ(call.opts.window_right, 3);
  EXPECT_EQ(call.opts.softcap, 30.0f);
  ASSERT_EQ(call.opts.alibi_slopes, call.alibi_slopes.data());
  ASSERT_EQ(call.opts.sinks, call.sinks.data());
  EXPECT_EQ(call.opts.alibi_slopes[0], 0.5f);
  EXPECT_EQ(call.opts.alibi_slopes[1], 0.25f);
  EXPECT_EQ(call.opts.sinks[0], 1.0f);
  EXPECT_EQ(call.opts.sinks[1], -2.0f);

  // Without modifiers the options are all off.
  Problem plain;
  Call none(plain);
  EXPECT_EQ(none.opts.window_left, 0);
  EXPECT_EQ(none.opts.window_right, 0);
  EXPECT_EQ(none.opts.softcap, 0.0f);
  EXPECT_EQ(none.opts.alibi_slopes, nullptr);
  EXPECT_EQ(none.opts.sinks, nullptr);
}

TEST(ReferenceScaffoldingTest, ModifierName) {
  Problem p;
  EXPECT_EQ(ModifierName(p), "nomod");
  p.window_left = 3;
  p.softcap = 30.0f;
  p.alibi_slopes = {1.0f};
  p.sinks = {0.0f};
  EXPECT_EQ(ModifierName(p), "wl3_wr0_cap30_alibi_sinks");
  Problem q;
  q.softcap = 0.5f;
  EXPECT_EQ(ModifierName(q), "cap0p5");
}

// ALiBi's slopes: for 8 heads 2^-1 .. 2^-8 (the ratio is 2^(-8/8)); for 4,
// 2^-2, 2^-4, 2^-6, 2^-8; for 12 heads the 8-head slopes, then every other
// slope of the 16-head sequence 2^(-0.5 k): 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
TEST(ReferenceScaffoldingTest, StandardAlibiSlopes) {
  const std::vector<float> s8 = StandardAlibiSlopes(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(s8[static_cast<size_t>(h)], std::ldexp(1.0f, -(h + 1)));
  EXPECT_EQ(StandardAlibiSlopes(4), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f}));
  EXPECT_EQ(StandardAlibiSlopes(1), (std::vector<float>{0.00390625f}));
  const std::vector<float> s12 = StandardAlibiSlopes(12);
  ASSERT_EQ(s12.size(), 12u);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(s12[static_cast<size_t>(h)], s8[static_cast<size_t>(h)]);
  const double half = std::sqrt(0.5);  // 2^-0.5
  EXPECT_FLOAT_EQ(s12[8], static_cast<float>(half));
  EXPECT_FLOAT_EQ(s12[9], static_cast<float>(half / 2));
  EXPECT_FLOAT_EQ(s12[10], static_cast<float>(half / 4));
  EXPECT_FLOAT_EQ(s12[11], static_cast<float>(half / 8));
}

}  // namespace
}  // namespace hwyattn_test
