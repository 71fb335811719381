// SPDX-License-Identifier: Apache-2.0
//
// The score modifiers (sliding windows, softcap, ALiBi, sinks) of
// hwyattn_sdpa against the double oracle (tests/reference.h), in every
// kernel (small, decode, prefill) and with every other option (causal
// top-left and bottom-right, BOOL and additive masks, kv_len, GQA, weights,
// lse). Run once per SIMD target by ctest (HWYATTN_TARGET). Bit-identity for
// any thread count is in threads_test; the MHA module's modifiers in
// mha_test.

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

// Which modifiers a case turns on.
enum class Mods { kWindowLeft, kWindowBoth, kWindowRightOnly, kSoftcap, kAlibi, kSinks, kAll };

const char* ModsName(Mods m) {
  switch (m) {
    case Mods::kWindowLeft: return "WindowLeft";
    case Mods::kWindowBoth: return "WindowBoth";
    case Mods::kWindowRightOnly: return "WindowRight";
    case Mods::kSoftcap: return "Softcap";
    case Mods::kAlibi: return "Alibi";
    case Mods::kSinks: return "Sinks";
    case Mods::kAll: return "All";
  }
  return "Bad";
}

// The shapes that reach each kernel: the small kernel (a few hundred FLOPs),
// decode (few rows per kv head, several 512-key chunks), prefill (query
// tiles over key tiles, windows narrower than a tile and wider), and
// cross-attention with Lq > Lk (negative bottom-right positions).
struct Shape {
  const char* name;
  int64_t batch, q_heads, kv_heads, q_len, k_len, dim;
};
const Shape kShapes[] = {
    {"Small", 1, 2, 1, 3, 5, 2},           {"Decode", 2, 8, 2, 1, 1300, 64},
    {"DecodeParts", 1, 12, 1, 2, 700, 32},  // a GQA group of 24 rows: 3 decode units of 8
    {"Prefill", 2, 4, 2, 130, 300, 40},    {"PrefillLong", 1, 2, 2, 200, 700, 64},
    {"CrossLqGtLk", 1, 3, 1, 40, 20, 16},
};

// Sets p's modifiers for `m`: windows of a few keys and of more than a key
// tile, a softcap that bends the scores (|s| reaches a few times it), ALiBi
// slopes whose biases stay within fp32's comfortable range for this Lk (the
// kernels' error grows with |score|, as in LargeLogitsTest), sinks of both
// signs and one -inf (off).
void SetMods(Mods m, Problem* p) {
  const bool all = m == Mods::kAll;
  if (m == Mods::kWindowLeft || m == Mods::kWindowBoth || all) {
    p->window_left = p->k_len > 100 ? 97 : 3;
  }
  if (m == Mods::kWindowBoth || all) p->window_right = p->k_len > 100 ? 70 : 2;
  if (m == Mods::kWindowRightOnly) p->window_right = p->k_len > 100 ? 129 : 2;
  if (m == Mods::kSoftcap || all) p->softcap = 0.75f;
  if (m == Mods::kAlibi || all) {
    p->alibi_slopes = StandardAlibiSlopes(p->q_heads);
    const float shrink = p->k_len > 100 ? 40.0f / static_cast<float>(p->k_len) : 1.0f;
    for (float& s : p->alibi_slopes) s *= shrink;
  }
  if (m == Mods::kSinks || all) {
    p->sinks.resize(static_cast<size_t>(p->q_heads));
    for (int64_t h = 0; h < p->q_heads; ++h) p->sinks[h] = 0.5f * static_cast<float>(h) - 1.0f;
    p->sinks.back() = -std::numeric_limits<float>::infinity();
  }
}

class ModifiersTest : public ::testing::TestWithParam<std::tuple<Mods, hwyattn_causal, int, bool>> {
};

// Every modifier set x causal x kernel shape, with and without the other
// options (a mask with fully blocked rows, kv_len, strided weights and lse).
TEST_P(ModifiersTest, MatchesReference) {
  const Shape& s = kShapes[std::get<2>(GetParam())];
  const bool extras = std::get<3>(GetParam());
  Problem p;
  p.batch = s.batch;
  p.q_heads = s.q_heads;
  p.kv_heads = s.kv_heads;
  p.q_len = s.q_len;
  p.k_len = s.k_len;
  p.dim = s.dim;
  p.v_dim = s.dim == 2 ? 3 : s.dim;
  p.causal = std::get<1>(GetParam());
  p.q_amp = 2.0f;  // scores of a few units: the softcap bends them
  SetMods(std::get<0>(GetParam()), &p);
  p.want_lse = true;
  p.want_weights = p.q_len * p.k_len <= 20000;
  if (extras) {
    p.has_mask = true;
    p.mask.dtype = p.k_len % 2 == 0 ? HWYATTN_F32 : HWYATTN_BOOL;
    p.mask.shape = {p.batch, 1, p.q_len, p.k_len};
    p.mask.block_prob = 0.2;
    p.mask.block_rows = true;
    for (int64_t b = 0; b < p.batch; ++b) {
      p.kv_len.push_back(static_cast<int32_t>(b == 0 ? p.k_len : p.k_len * 2 / 3));
    }
    p.weights_layout.elem_step = 2;
    p.lse_layout.elem_step = 3;
    p.out_layout.order = {0, 2, 1, 3};
  }
  p.seed = 77 + static_cast<uint32_t>(std::get<2>(GetParam()));
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, ModifiersTest,
    ::testing::Combine(::testing::Values(Mods::kWindowLeft, Mods::kWindowBoth,
                                         Mods::kWindowRightOnly, Mods::kSoftcap, Mods::kAlibi,
                                         Mods::kSinks, Mods::kAll),
                       ::testing::Values(HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_TOP_LEFT,
                                         HWYATTN_CAUSAL_BOTTOM_RIGHT),
                       ::testing::Range(0, static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]))),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Mods, hwyattn_causal, int, bool>>& info) {
      std::ostringstream os;
      const hwyattn_causal c = std::get<1>(info.param);
      os << ModsName(std::get<0>(info.param)) << "_"
         << (c == HWYATTN_CAUSAL_NONE       ? "NoCausal"
             : c == HWYATTN_CAUSAL_TOP_LEFT ? "TopLeft"
                                            : "BottomRight")
         << "_" << kShapes[std::get<2>(info.param)].name
         << (std::get<3>(info.param) ? "_MaskKvLen" : "");
      return os.str();
    });

// Windows from 1 key (a row sees only itself under causal) to wider than
// every row, on the prefill kernel's tile edges (48-row query tiles, 64-key
// tiles on AVX-512; 128 and 129 keys: two tiles and one key): whole tiles
// skipped on both sides, edge panels masked per lane. (The bf16 kernel's
// 128-key steps under windows: bf16_test.cc.)
class WindowSizeTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(WindowSizeTest, MatchesReference) {
  Problem p;
  p.q_heads = 6;
  p.kv_heads = 3;
  p.q_len = 257;
  p.k_len = 257;
  p.dim = 32;
  p.v_dim = 24;
  p.causal = HWYATTN_CAUSAL_TOP_LEFT;
  std::tie(p.window_left, p.window_right) = GetParam();
  if (p.window_right != 0) p.causal = HWYATTN_CAUSAL_NONE;
  p.want_lse = true;
  p.want_weights = true;
  p.seed = 5;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, WindowSizeTest,
    ::testing::Values(std::make_tuple(1, 0), std::make_tuple(2, 0), std::make_tuple(7, 0),
                      std::make_tuple(8, 0), std::make_tuple(9, 0), std::make_tuple(48, 0),
                      std::make_tuple(64, 0), std::make_tuple(65, 0), std::make_tuple(128, 0),
                      std::make_tuple(129, 0), std::make_tuple(200, 0), std::make_tuple(256, 0),
                      std::make_tuple(257, 0), std::make_tuple(10000, 0),
                      std::make_tuple(int64_t{1} << 62, 0), std::make_tuple(0, 1),
                      std::make_tuple(0, 33), std::make_tuple(5, 5), std::make_tuple(1, 1),
                      std::make_tuple(0, int64_t{1} << 62)),
    [](const ::testing::TestParamInfo<std::tuple<int64_t, int64_t>>& info) {
      std::ostringstream os;
      const int64_t l = std::get<0>(info.param);
      const int64_t r = std::get<1>(info.param);
      os << "Left" << (l > 100000 ? std::string("Huge") : std::to_string(l)) << "_Right"
         << (r > 100000 ? std::string("Huge") : std::to_string(r));
      return os.str();
    });

// A NaN or an infinity in V at a key that some rows block by their window
// only reaches the rows that see it (the zero-skipping P . V of every kernel).
TEST(WindowTest, NonFiniteValueOutsideAWindowStaysOutside) {
  for (const int64_t lq : {int64_t{1}, int64_t{3}, int64_t{100}}) {
    Problem p;
    p.q_heads = 2;
    p.kv_heads = 1;
    p.q_len = lq;
    p.k_len = 600;
    p.dim = 16;
    p.v_dim = 16;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    p.window_left = 50;
    p.want_lse = true;
    p.seed = 9;
    Call call(p);
    // Key 10 is far left of every row's window (rows sit at positions >= 500).
    const int64_t idx[4] = {0, 0, 10, 3};
    call.v.SetF32(idx, std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
    CheckAgainstReference(call);
  }
}

// ALiBi's bias slope (j - p) reaches 8e3 on a 16k-key row with a negative
// slope (vLLM draws slopes from randn) or with a positive one looking ahead
// (no causal rule); the kernels measure it from the row's largest-bias key
// and give the constant back to lse, so out and lse keep fp32's accuracy:
// 2e-6 of the float64 oracle for decode rows (split into 512-key chunks),
// a small prefill tile and the small kernel, with and without sinks.
TEST(AlibiTest, LongRowsAnySlopeSign) {
  struct Case {
    int64_t q_len, k_len, dim;
    hwyattn_causal causal;
    float slope;
    bool sinks;
  };
  const Case cases[] = {
      {1, 16384, 64, HWYATTN_CAUSAL_BOTTOM_RIGHT, -0.5f, false},
      {1, 16384, 64, HWYATTN_CAUSAL_BOTTOM_RIGHT, -0.5f, true},
      {2, 16384, 64, HWYATTN_CAUSAL_NONE, 0.5f, false},
      {60, 4000, 32, HWYATTN_CAUSAL_BOTTOM_RIGHT, -0.5f, true},
      {60, 4000, 32, HWYATTN_CAUSAL_NONE, 0.25f, false},
      {3, 40, 4, HWYATTN_CAUSAL_NONE, -3.0f, true},  // the small kernel
  };
  for (const Case& c : cases) {
    Problem p;
    p.q_heads = 2;
    p.kv_heads = 1;
    p.q_len = c.q_len;
    p.k_len = c.k_len;
    p.dim = c.dim;
    p.v_dim = c.dim;
    p.causal = c.causal;
    p.alibi_slopes = {c.slope, c.slope * 0.5f};
    if (c.sinks) p.sinks = {1.0f, -2.0f};
    p.want_lse = true;
    p.seed = 31;
    Call call(p);
    ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
    RefResult ref;
    std::string error;
    ASSERT_TRUE(
        ReferenceSdpa(call.q.tensor(), call.k.tensor(), call.v.tensor(), &call.opts, &ref, &error))
        << error;
    SCOPED_TRACE(::testing::Message() << "Lq " << c.q_len << " Lk " << c.k_len << " slope "
                                      << c.slope << (c.sinks ? " sinks" : ""));
    EXPECT_TRUE(CompareRelative("out", call.out, ref.out, 2e-6));
    EXPECT_TRUE(CompareRelative("lse", call.lse, ref.lse, 2e-6));
  }
}

// Sinks make lse and out a consistent pair: out * exp(lse) is the same
// unnormalised sum with or without the sink, and a row with every key
// blocked has lse = the sink and zeros (checked against hand values).
TEST(SinkTest, FullyBlockedRowGivesTheSink) {
  Problem p;
  p.q_heads = 2;
  p.q_len = 2;
  p.k_len = 3;
  p.dim = 2;
  p.v_dim = 2;
  p.kv_len = {0};  // every key is padding
  p.sinks = {0.25f, -2.0f};
  p.want_lse = true;
  p.want_weights = true;
  Call call(p);
  ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(call);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      const int64_t lse_idx[4] = {0, 0, h, i};  // lse is [1, B, Hq, Lq] logically
      EXPECT_EQ(call.lse.GetF32(lse_idx), p.sinks[static_cast<size_t>(h)]);
      for (int64_t d = 0; d < 2; ++d) {
        const int64_t o[4] = {0, h, i, d};
        EXPECT_EQ(call.out.GetF32(o), 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace hwyattn_test
