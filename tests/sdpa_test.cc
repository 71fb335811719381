// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_sdpa through the C ABI only, against the double-precision oracle in
// reference.h. Every comparison uses max|err| / max|ref| < 1e-5 for out and
// weights, |err| <= 1e-5 * max(1, |ref|) for lse, exact -INFINITY for the lse
// of fully blocked rows and exact zeros for their out and weights rows. Every
// output buffer starts filled with a NaN pattern and is checked to be
// untouched outside its described elements (gaps, guard zones).
//
// ctest runs this binary once per SIMD target (HWYATTN_TARGET=AVX3, AVX2,
// SSE4, EMU128), so every case below covers every kernel variant.

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <memory>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// An enum holding an arbitrary int, as a C caller can store one. In C++ a
// static_cast to an enum outside its range is undefined; copying the bytes
// is not.
template <typename E>
E EnumFromInt(int value) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized on supported ABIs");
  E e;
  std::memcpy(&e, &value, sizeof(e));
  return e;
}

std::string ScaleName(float scale) {
  if (scale == 0.0f) return "ScaleDefault";
  std::ostringstream os;
  os << "Scale" << scale;
  std::string s = os.str();
  for (char& c : s) {
    if (c == '.') c = 'p';
    if (c == '-') c = 'm';
  }
  return s;
}

const char* CausalName(hwyattn_causal c) {
  switch (c) {
    case HWYATTN_CAUSAL_NONE: return "NoCausal";
    case HWYATTN_CAUSAL_TOP_LEFT: return "TopLeft";
    case HWYATTN_CAUSAL_BOTTOM_RIGHT: return "BottomRight";
  }
  return "BadCausal";
}

// ---------------------------------------------------------------------------
// The oracle's own helpers. If these were wrong every comparison below would
// be meaningless, so they are pinned to hand-checked values first.
// ---------------------------------------------------------------------------

TEST(ConversionTest, F16KnownValues) {
  EXPECT_EQ(FloatToF16(0.0f), 0x0000);
  EXPECT_EQ(FloatToF16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToF16(1.0f), 0x3C00);
  EXPECT_EQ(FloatToF16(-2.0f), 0xC000);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToF16(65519.0f), 0x7BFF);  // Below the halfway point 65520.
  EXPECT_EQ(FloatToF16(65520.0f), 0x7C00);  // Ties to even: rounds to infinity.
  EXPECT_EQ(FloatToF16(kInf), 0x7C00);
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -24)), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -25)), 0x0000);  // Halfway to 0: even.
  EXPECT_EQ(FloatToF16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: to even 2.
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -14)), 0x0400);  // Smallest normal.
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even 1.
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_TRUE(std::isnan(F16ToDouble(FloatToF16(std::nanf("")))));
  // Exponent 13 - 15 = -2, mantissa 0x155: 0.25 * (1 + 341 / 1024).
  EXPECT_EQ(F16ToDouble(0x3555), 0.25 * (1.0 + 341.0 / 1024.0));
  EXPECT_EQ(F16ToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(F16ToDouble(0xFBFF), -65504.0);
}

TEST(ConversionTest, F16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    if ((h & 0x7C00) == 0x7C00) continue;  // Inf and NaN.
    const double d = F16ToDouble(h);
    ASSERT_EQ(FloatToF16(static_cast<float>(d)), h) << "bits " << bits;
  }
}

TEST(ConversionTest, Bf16KnownValuesAndRoundTrip) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(-1.0f), 0xBF80);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // Tie to even.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(Bf16ToDouble(0x4049), 3.140625);
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    if ((b & 0x7F80) == 0x7F80) continue;
    ASSERT_EQ(FloatToBf16(static_cast<float>(Bf16ToDouble(b))), b) << "bits " << bits;
  }
}

// The oracle on an example computed by hand: scale 1, one query q = 1 (D=1),
// keys 0 and ln 3, so the scores are 0 and ln 3, exp gives 1 and 3, the
// weights are 1/4 and 3/4 and lse = ln 4. Values v0 = 4, v1 = 8 give
// out = 1 + 6 = 7.
TEST(ReferenceTest, HandComputedExample) {
  float q[1] = {1.0f};
  float k[2] = {0.0f, static_cast<float>(std::log(3.0))};
  float v[2] = {4.0f, 8.0f};
  const int64_t qs[4] = {1, 1, 1, 1}, ks[4] = {1, 1, 2, 1};
  hwyattn_tensor tq{}, tk{}, tv{};
  tq.data = q;
  tq.dtype = HWYATTN_F32;
  tq.rank = 4;
  tk = tq;
  tk.data = k;
  tv = tq;
  tv.data = v;
  for (int d = 0; d < 4; ++d) {
    tq.shape[d] = qs[d];
    tk.shape[d] = ks[d];
    tv.shape[d] = ks[d];
  }
  const int64_t s1[4] = {1, 1, 1, 1}, s2[4] = {2, 2, 1, 1};
  std::memcpy(tq.stride, s1, sizeof(s1));
  std::memcpy(tk.stride, s2, sizeof(s2));
  std::memcpy(tv.stride, s2, sizeof(s2));
  hwyattn_sdpa_options opts{};
  opts.struct_size = sizeof(opts);
  opts.scale = 1.0f;
  RefResult ref;
  std::string error;
  ASSERT_TRUE(ReferenceSdpa(tq, tk, tv, &opts, &ref, &error)) << error;
  // k[1] is ln 3 rounded to float, so allow its rounding error (~1e-7).
  EXPECT_NEAR(ref.weights[0], 0.25, 1e-7);
  EXPECT_NEAR(ref.weights[1], 0.75, 1e-7);
  EXPECT_NEAR(ref.lse[0], std::log(4.0), 1e-7);
  EXPECT_NEAR(ref.out[0], 7.0, 1e-6);
  // A causal bottom-right mask with Lq = 1 still sees both keys; top-left
  // sees only key 0, so out = v0 and lse = 0.
  opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
  ASSERT_TRUE(ReferenceSdpa(tq, tk, tv, &opts, &ref, &error)) << error;
  EXPECT_EQ(ref.out[0], 4.0);
  EXPECT_EQ(ref.lse[0], 0.0);
  // kv_len 0 blocks everything.
  const int32_t kv_len[1] = {0};
  opts.kv_len = kv_len;
  ASSERT_TRUE(ReferenceSdpa(tq, tk, tv, &opts, &ref, &error)) << error;
  EXPECT_EQ(ref.out[0], 0.0);
  EXPECT_TRUE(ref.row_blocked[0]);
  EXPECT_EQ(ref.lse[0], -std::numeric_limits<double>::infinity());
}

// The scaffolding's layouts and its "untouched outside the tensor" check,
// which every output comparison relies on.
TEST(ScaffoldingTest, StridesAndGapDetection) {
  Layout batch_first;
  batch_first.order = {0, 2, 1, 3};
  TensorBuf t(HWYATTN_F32, {2, 3, 5, 7}, batch_first);  // [B, H, L, D] as [B, L, H, D].
  const int64_t want[4] = {5 * 3 * 7, 7, 3 * 7, 1};
  for (int d = 0; d < 4; ++d) EXPECT_EQ(t.tensor().stride[d], want[d]) << "dim " << d;

  Layout gaps;
  gaps.elem_step = 2;
  gaps.row_pad = 1;
  gaps.offset = 1;
  gaps.rank = 2;
  TensorBuf g(HWYATTN_F32, {1, 1, 3, 4}, gaps);
  EXPECT_EQ(g.tensor().stride[0], 9);
  EXPECT_EQ(g.tensor().stride[1], 2);
  g.FillPattern(kOutputSentinel);
  const std::vector<unsigned char> before = g.Snapshot();
  std::string detail;
  g.ForEach([&](const int64_t* idx, int64_t) { g.SetF32(idx, 1.0f); });
  EXPECT_TRUE(g.UntouchedOutside(before, &detail)) << detail;
  // One float past element [2, 3] is a gap; the scaffolding must notice.
  float* data = static_cast<float*>(g.desc()->data);
  data[2 * 9 + 3 * 2 + 1] = 0.0f;
  EXPECT_FALSE(g.UntouchedOutside(before, &detail));
  // So must it for a write just before the data (the front guard).
  TensorBuf h(HWYATTN_F32, {1, 1, 3, 4}, gaps);
  h.FillPattern(kOutputSentinel);
  const std::vector<unsigned char> h_before = h.Snapshot();
  static_cast<float*>(h.desc()->data)[-1] = 0.0f;
  EXPECT_FALSE(h.UntouchedOutside(h_before, &detail));
}

// ---------------------------------------------------------------------------
// Random shapes: odd sizes, Lq != Lk, Dv != D, GQA / MQA / MHA, three scales.
// ---------------------------------------------------------------------------

std::vector<Problem> RandomShapeProblems() {
  const int64_t lengths[] = {1, 7, 33, 257};
  const int64_t dims[] = {1, 3, 64, 80, 128, 256};
  const int64_t heads[3][2] = {{8, 2}, {4, 1}, {3, 3}};  // GQA, MQA, MHA.
  const float scales[] = {0.0f, 1.0f, 0.37f};
  std::vector<Problem> problems;
  // Every (Lq, Lk, D) of the 4 x 4 x 6 grid once; the other parameters cycle
  // with co-prime periods so they meet each grid point in varied company.
  int n = 0;
  for (int di = 0; di < 6; ++di) {
    for (int64_t q_len : lengths) {
      for (int64_t k_len : lengths) {
        Problem p;
        p.q_len = q_len;
        p.k_len = k_len;
        p.dim = dims[di];
        // Dv != D except every fifth case.
        p.v_dim = n % 5 == 0 ? p.dim : dims[(di + 1 + n % 5) % 6];
        const int hc = n % 3;
        p.q_heads = heads[hc][0];
        p.kv_heads = heads[hc][1];
        p.batch = 1 + (n / 3) % 3;
        p.scale = scales[(n / 2) % 3];
        // Keep the oracle (double, one multiply-add per element) and the
        // scalar target fast: the biggest problems get one batch and the
        // small head configuration.
        const int64_t work = p.batch * p.q_heads * p.q_len * p.k_len * (p.dim + p.v_dim);
        if (work > 100'000'000) {
          p.batch = 1;
          p.q_heads = 3;
          p.kv_heads = 3;
        }
        p.seed = 100 + n;
        p.want_lse = n % 2 == 0;
        p.want_weights = n % 4 == 1;
        problems.push_back(p);
        ++n;
      }
    }
  }
  return problems;
}

class RandomShapeTest : public ::testing::TestWithParam<Problem> {};

TEST_P(RandomShapeTest, MatchesReference) { RunAndCheck(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sdpa, RandomShapeTest, ::testing::ValuesIn(RandomShapeProblems()),
                         [](const ::testing::TestParamInfo<Problem>& info) {
                           return ShapeName(info.param) + "_" + ScaleName(info.param.scale);
                         });

// The row-by-row kernel for tiny problems (at most 2048 FLOPs, see
// src/ops/small_attention.h): every feature in turn on shapes below that
// limit, against the reference. Larger problems never reach it, so this
// suite is its coverage of masks, causal, key lengths, dtypes and layouts.
std::vector<Problem> SmallKernelProblems() {
  std::vector<Problem> problems;
  const hwyattn_dtype dtypes[3][3] = {{HWYATTN_F32, HWYATTN_F32, HWYATTN_F32},
                                      {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16},
                                      {HWYATTN_BF16, HWYATTN_BF16, HWYATTN_F16}};
  int n = 0;
  for (hwyattn_causal causal :
       {HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_TOP_LEFT, HWYATTN_CAUSAL_BOTTOM_RIGHT}) {
    // none, bool [B, Hq, Lq, Lk], F32 [Lq, Lk], F16 [Lq, Lk]
    for (int mask = 0; mask < 4; ++mask) {
      for (bool lengths : {false, true}) {
        for (const auto& dt : dtypes) {
          Problem p;
          p.batch = 2;
          p.q_heads = 4;
          p.kv_heads = 2;  // GQA
          p.q_len = n % 2 ? 3 : 2;
          p.k_len = n % 2 ? 2 : 5;  // Lq > Lk and Lq < Lk under causal
          p.dim = 3;
          p.v_dim = 2;
          p.q_dtype = dt[0];
          p.k_dtype = dt[1];
          p.v_dtype = dt[2];
          p.causal = causal;
          if (mask > 0) {
            p.has_mask = true;
            p.mask.dtype = mask == 1 ? HWYATTN_BOOL : mask == 2 ? HWYATTN_F32 : HWYATTN_F16;
            p.mask.shape = mask == 1 ? Shape4{p.batch, p.q_heads, p.q_len, p.k_len}
                                     : Shape4{1, 1, p.q_len, p.k_len};
            p.mask.block_prob = 0.3;
            p.mask.block_rows = n % 3 == 0;
          }
          if (lengths) p.kv_len = {static_cast<int32_t>(p.k_len), 1};
          // Strided and permuted layouts every other case.
          if (n % 2) {
            p.q_layout.order = {2, 0, 1, 3};
            p.k_layout.elem_step = 2;
            p.v_layout.order = {0, 2, 1, 3};
            p.out_layout.row_pad = 3;
          }
          p.want_weights = true;
          p.want_lse = true;
          p.seed = 300 + n;
          problems.push_back(p);
          ++n;
        }
      }
    }
  }
  return problems;
}

class SmallKernelTest : public ::testing::TestWithParam<Problem> {};

TEST_P(SmallKernelTest, MatchesReference) { RunAndCheck(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sdpa, SmallKernelTest, ::testing::ValuesIn(SmallKernelProblems()),
                         [](const ::testing::TestParamInfo<Problem>& info) {
                           return "Case" + std::to_string(info.index);
                         });

// Scale alone, including a negative one (finite, so valid).
class ScaleTest : public ::testing::TestWithParam<float> {};

TEST_P(ScaleTest, MatchesReference) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.q_len = 19;
  p.k_len = 45;
  p.dim = 80;
  p.v_dim = 24;
  p.scale = GetParam();
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 7;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(Sdpa, ScaleTest, ::testing::Values(0.0f, 1.0f, 0.37f, -0.5f, 3.0f),
                         [](const ::testing::TestParamInfo<float>& info) {
                           return ScaleName(info.param);
                         });

// ---------------------------------------------------------------------------
// Causal masks with Lq < Lk, Lq == Lk and Lq > Lk. Bottom-right with Lq > Lk
// leaves the first Lq - Lk rows with no key at all.
// ---------------------------------------------------------------------------

using LenPair = std::tuple<int64_t, int64_t>;

class CausalTest : public ::testing::TestWithParam<std::tuple<hwyattn_causal, LenPair>> {};

TEST_P(CausalTest, MatchesReference) {
  Problem p;
  p.causal = std::get<0>(GetParam());
  std::tie(p.q_len, p.k_len) = std::get<1>(GetParam());
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.dim = 64;
  p.v_dim = 48;
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 11;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, CausalTest,
    ::testing::Combine(::testing::Values(HWYATTN_CAUSAL_TOP_LEFT, HWYATTN_CAUSAL_BOTTOM_RIGHT),
                       ::testing::Values(LenPair{7, 33}, LenPair{1, 257}, LenPair{33, 33},
                                         LenPair{257, 257}, LenPair{33, 7}, LenPair{100, 37},
                                         LenPair{5, 1})),
    [](const ::testing::TestParamInfo<std::tuple<hwyattn_causal, LenPair>>& info) {
      std::ostringstream os;
      os << CausalName(std::get<0>(info.param)) << "_Lq" << std::get<0>(std::get<1>(info.param))
         << "_Lk" << std::get<1>(std::get<1>(info.param));
      return os.str();
    });

// ---------------------------------------------------------------------------
// BOOL, F32 and F16 masks, broadcast in every way the header allows.
// ---------------------------------------------------------------------------

enum class MaskForm {
  kRank2,         // [Lq, Lk], rank 2: leading dims of size 1.
  kRank3,         // [Hq, Lq, Lk], rank 3.
  kBatchNoHead,   // [B, 1, Lq, Lk].
  kHeadKeyOnly,   // [1, Hq, 1, Lk], broadcast by size 1.
  kStrideZero,    // [B, Hq, Lq, Lk] with stride 0 on B and Lq.
  kFull,          // [B, Hq, Lq, Lk], dense.
  kFullPermuted,  // [B, Hq, Lq, Lk] stored as [Lq, B, Lk, Hq] with gaps.
};

const char* MaskFormName(MaskForm f) {
  switch (f) {
    case MaskForm::kRank2: return "Rank2LqLk";
    case MaskForm::kRank3: return "Rank3HqLqLk";
    case MaskForm::kBatchNoHead: return "B1LqLk";
    case MaskForm::kHeadKeyOnly: return "OneHqOneLk";
    case MaskForm::kStrideZero: return "FullStride0BLq";
    case MaskForm::kFull: return "Full";
    case MaskForm::kFullPermuted: return "FullPermuted";
  }
  return "Bad";
}

MaskSpec MakeMask(MaskForm form, hwyattn_dtype dtype, const Problem& p) {
  MaskSpec m;
  m.dtype = dtype;
  const Shape4 full = {p.batch, p.q_heads, p.q_len, p.k_len};
  m.shape = full;
  switch (form) {
    case MaskForm::kRank2:
      m.shape = {1, 1, p.q_len, p.k_len};
      m.layout.rank = 2;
      break;
    case MaskForm::kRank3:
      m.shape = {1, p.q_heads, p.q_len, p.k_len};
      m.layout.rank = 3;
      break;
    case MaskForm::kBatchNoHead: m.shape = {p.batch, 1, p.q_len, p.k_len}; break;
    case MaskForm::kHeadKeyOnly: m.shape = {1, p.q_heads, 1, p.k_len}; break;
    case MaskForm::kStrideZero: m.layout.broadcast = {true, false, true, false}; break;
    case MaskForm::kFull: break;
    case MaskForm::kFullPermuted:
      m.layout.order = {2, 0, 3, 1};
      m.layout.elem_step = 2;
      m.layout.offset = 1;
      break;
  }
  return m;
}

class MaskTest : public ::testing::TestWithParam<std::tuple<hwyattn_dtype, MaskForm, bool>> {};

TEST_P(MaskTest, MatchesReference) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.q_len = 33;
  p.k_len = 70;
  p.dim = 64;
  p.v_dim = 32;
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 21;
  p.has_mask = true;
  p.mask = MakeMask(std::get<1>(GetParam()), std::get<0>(GetParam()), p);
  p.mask.block_rows = std::get<2>(GetParam());
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, MaskTest,
    ::testing::Combine(::testing::Values(HWYATTN_BOOL, HWYATTN_F32, HWYATTN_F16),
                       ::testing::Values(MaskForm::kRank2, MaskForm::kRank3, MaskForm::kBatchNoHead,
                                         MaskForm::kHeadKeyOnly, MaskForm::kStrideZero,
                                         MaskForm::kFull, MaskForm::kFullPermuted),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<hwyattn_dtype, MaskForm, bool>>& info) {
      return std::string(DtypeName(std::get<0>(info.param))) + "_" +
             MaskFormName(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_WholeRowsBlocked" : "_Sparse");
    });

// A mask that blocks almost everything, on a decode-like shape (long keys,
// one query), where most key blocks are entirely masked.
TEST(MaskTest, MostlyBlockedDecode) {
  for (hwyattn_dtype dtype : {HWYATTN_BOOL, HWYATTN_F32, HWYATTN_F16}) {
    SCOPED_TRACE(DtypeName(dtype));
    Problem p;
    p.batch = 2;
    p.q_heads = 8;
    p.kv_heads = 2;
    p.q_len = 1;
    p.k_len = 1500;
    p.dim = 64;
    p.v_dim = 64;
    p.want_lse = true;
    p.want_weights = true;
    p.seed = 23;
    p.has_mask = true;
    p.mask = MakeMask(MaskForm::kBatchNoHead, dtype, p);
    p.mask.block_prob = 0.995;
    RunAndCheck(p);
  }
}

// An engine's mask (ggml's: the causal triangle and a sliding window written
// into the mask, no causal or window option): each row's blocked runs at
// either end are cut off its range and whole key tiles and decode chunks
// that no row sees are skipped (MaskRowSpan, MaskBlocksTile), also when the
// window wraps around a ring cache (shift); the result must be the oracle's,
// with whole rows blocked too, on the prefill and the decode kernels, GQA,
// with the weights output (which skipped tiles must fill).
TEST(MaskTest, BandLikeAnEngine) {
  struct Shape {
    int64_t q_len, k_len, band, shift;
  };
  for (const Shape& s : {Shape{100, 300, 64, 0}, Shape{37, 1100, 200, 0}, Shape{1, 3000, 512, 0},
                         Shape{2, 2100, 700, 0}, Shape{100, 1024, 512, 700},
                         Shape{37, 1100, 200, 1000}, Shape{1, 1024, 512, 800}}) {
    for (hwyattn_dtype dtype : {HWYATTN_BOOL, HWYATTN_F32, HWYATTN_F16}) {
      SCOPED_TRACE(::testing::Message() << DtypeName(dtype) << " Lq " << s.q_len << " Lk "
                                        << s.k_len << " band " << s.band << " shift " << s.shift);
      Problem p;
      p.batch = 2;
      p.q_heads = 4;  // GQA, two rows per key head: the masks, not the heads, are tested
      p.kv_heads = 2;
      p.q_len = s.q_len;
      p.k_len = s.k_len;
      p.dim = 64;
      p.v_dim = 64;
      p.want_lse = true;
      p.seed = 29;
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kBatchNoHead, dtype, p);
      p.mask.block_prob = 0.05;
      p.mask.block_rows = true;
      p.mask.band = s.band;
      p.mask.band_shift = s.shift;
      p.want_weights = s.q_len > 1;
      RunAndCheck(p);
    }
  }
}

// ---------------------------------------------------------------------------
// kv_len, including 0 (every key is padding) and Lk (no padding).
// ---------------------------------------------------------------------------

class KvLenTest : public ::testing::TestWithParam<std::tuple<hwyattn_causal, LenPair>> {};

TEST_P(KvLenTest, MatchesReference) {
  Problem p;
  p.causal = std::get<0>(GetParam());
  std::tie(p.q_len, p.k_len) = std::get<1>(GetParam());
  p.batch = 4;
  p.q_heads = 2;
  p.kv_heads = 1;
  p.dim = 32;
  p.v_dim = 40;
  p.kv_len = {0, static_cast<int32_t>(p.k_len), 1, static_cast<int32_t>(p.k_len / 2)};
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 31;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, KvLenTest,
    ::testing::Combine(::testing::Values(HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_TOP_LEFT,
                                         HWYATTN_CAUSAL_BOTTOM_RIGHT),
                       ::testing::Values(LenPair{5, 40}, LenPair{40, 40}, LenPair{1, 700},
                                         LenPair{60, 9})),
    [](const ::testing::TestParamInfo<std::tuple<hwyattn_causal, LenPair>>& info) {
      std::ostringstream os;
      os << CausalName(std::get<0>(info.param)) << "_Lq" << std::get<0>(std::get<1>(info.param))
         << "_Lk" << std::get<1>(std::get<1>(info.param));
      return os.str();
    });

// ---------------------------------------------------------------------------
// Decode: few query rows per kv head (Lq * Hq / Hkv small) against long
// caches, no weights output. The keys are processed in fixed chunks whose
// partial results are merged, so the lengths straddle chunk-sized boundaries
// (multiples of 512 and 256 keys, +-1) and kv_len cuts inside and at them;
// with enough heads a work item takes a run of consecutive chunks.
// ---------------------------------------------------------------------------

enum class DecodeForm {
  kPlain,
  kCausalTopLeft,      // Row i sees keys 0..i only: a few keys of a long cache.
  kCausalBottomRight,  // The usual decode convention.
  kKvLen,              // Padding per batch: 0, a chunk boundary, +1, all.
  kBoolMask,
  kF32MaskRowsBlocked,
  kBatchFirstCache,  // K/V as [B, L, Hkv, D] memory.
  kBroadcastKv,      // Stride 0 on K/V's batch.
  kMisaligned,
  kLargeLogits,  // Scores ~1e4 (see LargeLogitsTest), one-hot rows.
  kEverything,
};

const char* DecodeFormName(DecodeForm f) {
  switch (f) {
    case DecodeForm::kPlain: return "Plain";
    case DecodeForm::kCausalTopLeft: return "CausalTopLeft";
    case DecodeForm::kCausalBottomRight: return "CausalBottomRight";
    case DecodeForm::kKvLen: return "KvLen";
    case DecodeForm::kBoolMask: return "BoolMask";
    case DecodeForm::kF32MaskRowsBlocked: return "F32MaskRowsBlocked";
    case DecodeForm::kBatchFirstCache: return "BatchFirstCache";
    case DecodeForm::kBroadcastKv: return "BroadcastKv";
    case DecodeForm::kMisaligned: return "Misaligned";
    case DecodeForm::kLargeLogits: return "LargeLogits";
    case DecodeForm::kEverything: return "Everything";
  }
  return "Bad";
}

struct DecodeShape {
  int64_t q_len, q_heads, kv_heads, k_len;
};

class DecodeTest : public ::testing::TestWithParam<std::tuple<DecodeForm, DecodeShape>> {};

TEST_P(DecodeTest, MatchesReference) {
  const DecodeShape& ds = std::get<1>(GetParam());
  Problem p;
  p.batch = 3;
  p.q_len = ds.q_len;
  p.q_heads = ds.q_heads;
  p.kv_heads = ds.kv_heads;
  p.k_len = ds.k_len;
  p.dim = 64;
  p.v_dim = 80;
  p.want_lse = true;
  p.seed = 37;
  const int32_t lk = static_cast<int32_t>(p.k_len);
  switch (std::get<0>(GetParam())) {
    case DecodeForm::kPlain: break;
    case DecodeForm::kCausalTopLeft: p.causal = HWYATTN_CAUSAL_TOP_LEFT; break;
    case DecodeForm::kCausalBottomRight: p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT; break;
    case DecodeForm::kKvLen: p.kv_len = {0, std::min(lk, 512), std::min(lk, 513)}; break;
    case DecodeForm::kBoolMask:
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kBatchNoHead, HWYATTN_BOOL, p);
      p.mask.block_prob = 0.5;
      break;
    case DecodeForm::kF32MaskRowsBlocked:
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kFull, HWYATTN_F32, p);
      p.mask.block_rows = true;
      break;
    case DecodeForm::kBatchFirstCache:
      p.k_layout.order = p.v_layout.order = {0, 2, 1, 3};
      p.q_layout.order = {0, 2, 1, 3};
      break;
    case DecodeForm::kBroadcastKv: p.k_layout.broadcast[0] = p.v_layout.broadcast[0] = true; break;
    case DecodeForm::kMisaligned:
      p.q_layout.offset = p.k_layout.offset = p.v_layout.offset = p.out_layout.offset = 1;
      p.lse_layout.offset = 1;
      break;
    case DecodeForm::kLargeLogits:
      // Standard deviation of the scores: 60^2 * 8 / 3 = 9600 (D = 64).
      p.scale = 1.0f;
      p.q_amp = p.k_amp = 60.0f;
      break;
    case DecodeForm::kEverything:
      p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
      p.kv_len = {lk, 0, std::max(1, lk - 513)};
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kRank3, HWYATTN_F32, p);
      p.mask.shape[1] = 1;  // [1, Lq, Lk]: broadcast over heads by size.
      p.mask.block_prob = 0.3;
      p.k_layout.order = p.v_layout.order = {0, 2, 1, 3};
      p.out_layout.elem_step = 2;
      p.lse_layout.order = {0, 3, 2, 1};
      break;
  }
  if (std::get<0>(GetParam()) == DecodeForm::kLargeLogits) {
    // The premise of the tolerance: every row one-hot (see LargeLogitsTest).
    Call call(p);
    RefResult ref;
    std::string error;
    ASSERT_TRUE(
        ReferenceSdpa(call.q.tensor(), call.k.tensor(), call.v.tensor(), &call.opts, &ref, &error))
        << error;
    for (size_t row = 0; row < ref.lse.size(); ++row) {
      double top = 0.0;
      for (int64_t j = 0; j < p.k_len; ++j) {
        top = std::max(top, ref.weights[row * static_cast<size_t>(p.k_len) + j]);
      }
      ASSERT_GT(top, 1.0 - 1e-5) << "premise: row " << row << " is not one-hot";
    }
    ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
    CheckAgainstReference(call);
    return;
  }
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, DecodeTest,
    ::testing::Combine(::testing::Values(DecodeForm::kPlain, DecodeForm::kCausalTopLeft,
                                         DecodeForm::kCausalBottomRight, DecodeForm::kKvLen,
                                         DecodeForm::kBoolMask, DecodeForm::kF32MaskRowsBlocked,
                                         DecodeForm::kBatchFirstCache, DecodeForm::kBroadcastKv,
                                         DecodeForm::kMisaligned, DecodeForm::kLargeLogits,
                                         DecodeForm::kEverything),
                       ::testing::Values(DecodeShape{1, 8, 1, 511}, DecodeShape{1, 4, 2, 513},
                                         DecodeShape{2, 4, 1, 1025}, DecodeShape{8, 2, 2, 1024},
                                         DecodeShape{3, 3, 3, 257}, DecodeShape{1, 2, 2, 2000},
                                         // GQA groups of more than 8 rows, in decode
                                         // units of 8 (DecodeParts): 2 of 8 heads, 4 of
                                         // 2 heads x 4 positions.
                                         DecodeShape{1, 16, 1, 600}, DecodeShape{4, 16, 2, 520},
                                         // 36 heads x 3 chunks: items are runs of two
                                         // chunks, the last one alone.
                                         DecodeShape{1, 12, 12, 1300})),
    [](const ::testing::TestParamInfo<std::tuple<DecodeForm, DecodeShape>>& info) {
      const DecodeShape& ds = std::get<1>(info.param);
      std::ostringstream os;
      os << DecodeFormName(std::get<0>(info.param)) << "_Lq" << ds.q_len << "_Hq" << ds.q_heads
         << "_Hkv" << ds.kv_heads << "_Lk" << ds.k_len;
      return os.str();
    });

// ---------------------------------------------------------------------------
// Every option at once: causal + mask + kv_len + GQA + weights + lse, with
// strided outputs.
// ---------------------------------------------------------------------------

class CombinedTest
    : public ::testing::TestWithParam<std::tuple<hwyattn_causal, hwyattn_dtype, LenPair>> {};

TEST_P(CombinedTest, MatchesReference) {
  Problem p;
  p.causal = std::get<0>(GetParam());
  std::tie(p.q_len, p.k_len) = std::get<2>(GetParam());
  p.batch = 3;
  p.q_heads = 6;
  p.kv_heads = 2;
  p.dim = 48;
  p.v_dim = 56;
  p.scale = 0.2f;
  p.has_mask = true;
  p.mask = MakeMask(MaskForm::kBatchNoHead, std::get<1>(GetParam()), p);
  p.mask.block_prob = 0.3;
  p.mask.block_rows = true;
  p.kv_len = {static_cast<int32_t>(p.k_len), static_cast<int32_t>(p.k_len - 5), 3};
  p.want_weights = true;
  p.want_lse = true;
  p.weights_layout.order = {0, 2, 1, 3};
  p.weights_layout.elem_step = 2;
  p.lse_layout.elem_step = 3;
  p.out_layout.order = {0, 2, 1, 3};
  p.seed = 41;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, CombinedTest,
    ::testing::Combine(::testing::Values(HWYATTN_CAUSAL_TOP_LEFT, HWYATTN_CAUSAL_BOTTOM_RIGHT),
                       ::testing::Values(HWYATTN_BOOL, HWYATTN_F32, HWYATTN_F16),
                       ::testing::Values(LenPair{65, 65}, LenPair{17, 130}, LenPair{1, 300},
                                         LenPair{40, 20})),
    [](const ::testing::TestParamInfo<std::tuple<hwyattn_causal, hwyattn_dtype, LenPair>>& info) {
      std::ostringstream os;
      os << CausalName(std::get<0>(info.param)) << "_" << DtypeName(std::get<1>(info.param))
         << "Mask_Lq" << std::get<0>(std::get<2>(info.param)) << "_Lk"
         << std::get<1>(std::get<2>(info.param));
      return os.str();
    });

// ---------------------------------------------------------------------------
// The optional outputs, alone and together, dense and strided.
// ---------------------------------------------------------------------------

enum class OutputsForm {
  kWeightsOnly,
  kLseOnly,
  kBoth,
  kStridedWeights,
  kStridedLse,
  kBothStridedMisaligned
};

const char* OutputsFormName(OutputsForm f) {
  switch (f) {
    case OutputsForm::kWeightsOnly: return "WeightsOnly";
    case OutputsForm::kLseOnly: return "LseOnly";
    case OutputsForm::kBoth: return "Both";
    case OutputsForm::kStridedWeights: return "StridedWeights";
    case OutputsForm::kStridedLse: return "StridedLse";
    case OutputsForm::kBothStridedMisaligned: return "BothStridedMisaligned";
  }
  return "Bad";
}

class OutputsTest : public ::testing::TestWithParam<std::tuple<OutputsForm, LenPair>> {};

TEST_P(OutputsTest, MatchesReference) {
  Problem p;
  std::tie(p.q_len, p.k_len) = std::get<1>(GetParam());
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.dim = 64;
  p.v_dim = 64;
  p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  p.seed = 51;
  switch (std::get<0>(GetParam())) {
    case OutputsForm::kWeightsOnly: p.want_weights = true; break;
    case OutputsForm::kLseOnly: p.want_lse = true; break;
    case OutputsForm::kBoth: p.want_weights = p.want_lse = true; break;
    case OutputsForm::kStridedWeights:
      // [B, Hq, Lq, Lk] stored as [Lq, B, Hq, Lk] with padded rows.
      p.want_weights = true;
      p.weights_layout.order = {2, 0, 1, 3};
      p.weights_layout.row_pad = 5;
      break;
    case OutputsForm::kStridedLse:
      // [B, Hq, Lq] stored as [Lq, Hq, B] with gaps.
      p.want_lse = true;
      p.lse_layout.order = {0, 3, 2, 1};
      p.lse_layout.elem_step = 2;
      break;
    case OutputsForm::kBothStridedMisaligned:
      p.want_weights = p.want_lse = true;
      p.weights_layout.elem_step = 3;
      p.weights_layout.offset = 1;
      p.lse_layout.order = {0, 2, 1, 3};
      p.lse_layout.offset = 1;
      break;
  }
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, OutputsTest,
    ::testing::Combine(::testing::Values(OutputsForm::kWeightsOnly, OutputsForm::kLseOnly,
                                         OutputsForm::kBoth, OutputsForm::kStridedWeights,
                                         OutputsForm::kStridedLse,
                                         OutputsForm::kBothStridedMisaligned),
                       ::testing::Values(LenPair{40, 257}, LenPair{1, 1000})),
    [](const ::testing::TestParamInfo<std::tuple<OutputsForm, LenPair>>& info) {
      std::ostringstream os;
      os << OutputsFormName(std::get<0>(info.param)) << "_Lq"
         << std::get<0>(std::get<1>(info.param)) << "_Lk" << std::get<1>(std::get<1>(info.param));
      return os.str();
    });

// ---------------------------------------------------------------------------
// Strided, permuted and broadcast inputs and outputs.
// ---------------------------------------------------------------------------

enum class StrideForm {
  kBatchFirstQkv,   // q/k/v as [B, L, H, D] memory (what a projection writes).
  kBatchFirstAll,   // ... and out as [B, Lq, Hq, Dv].
  kKvBatchStride0,  // k/v shared by every batch (stride 0 on B).
  kKvBatchSize1,    // k/v shared by every batch (size 1 on B).
  kKvHeadStride0,   // every kv head the same memory (stride 0 on H).
  kQHeadStride0,    // every query head the same memory.
  kQLenStride0,     // every query row the same memory.
  kOutGaps,         // out with gaps between elements and padded rows.
  kOutPermuted,     // out stored as [Lq, Dv, B, Hq].
  kInnerStride2,    // q/k/v with a non-unit innermost stride (gaps).
  kKDimStride0,     // k's head dim broadcast: every element of a key row equal.
  kAllMisaligned,   // every pointer misaligned by one element.
};

const char* StrideFormName(StrideForm f) {
  switch (f) {
    case StrideForm::kBatchFirstQkv: return "BatchFirstQkv";
    case StrideForm::kBatchFirstAll: return "BatchFirstAll";
    case StrideForm::kKvBatchStride0: return "KvBatchStride0";
    case StrideForm::kKvBatchSize1: return "KvBatchSize1";
    case StrideForm::kKvHeadStride0: return "KvHeadStride0";
    case StrideForm::kQHeadStride0: return "QHeadStride0";
    case StrideForm::kQLenStride0: return "QLenStride0";
    case StrideForm::kOutGaps: return "OutGaps";
    case StrideForm::kOutPermuted: return "OutPermuted";
    case StrideForm::kInnerStride2: return "InnerStride2";
    case StrideForm::kKDimStride0: return "KDimStride0";
    case StrideForm::kAllMisaligned: return "AllMisaligned";
  }
  return "Bad";
}

class StrideTest : public ::testing::TestWithParam<std::tuple<StrideForm, LenPair>> {};

TEST_P(StrideTest, MatchesReference) {
  Problem p;
  std::tie(p.q_len, p.k_len) = std::get<1>(GetParam());
  p.batch = 3;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.dim = 64;
  p.v_dim = 40;
  p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  p.want_lse = true;
  p.seed = 61;
  const std::array<int, 4> batch_first = {0, 2, 1, 3};
  switch (std::get<0>(GetParam())) {
    case StrideForm::kBatchFirstQkv:
      p.q_layout.order = p.k_layout.order = p.v_layout.order = batch_first;
      break;
    case StrideForm::kBatchFirstAll:
      p.q_layout.order = p.k_layout.order = p.v_layout.order = batch_first;
      p.out_layout.order = batch_first;
      break;
    case StrideForm::kKvBatchStride0:
      p.k_layout.broadcast[0] = p.v_layout.broadcast[0] = true;
      break;
    case StrideForm::kKvBatchSize1: p.kv_batch = 1; break;
    case StrideForm::kKvHeadStride0:
      p.k_layout.broadcast[1] = p.v_layout.broadcast[1] = true;
      p.k_layout.order = p.v_layout.order = batch_first;
      break;
    case StrideForm::kQHeadStride0: p.q_layout.broadcast[1] = true; break;
    case StrideForm::kQLenStride0: p.q_layout.broadcast[2] = true; break;
    case StrideForm::kOutGaps:
      p.out_layout.elem_step = 2;
      p.out_layout.row_pad = 3;
      break;
    case StrideForm::kOutPermuted: p.out_layout.order = {2, 3, 0, 1}; break;
    case StrideForm::kInnerStride2:
      p.q_layout.elem_step = p.k_layout.elem_step = p.v_layout.elem_step = 2;
      break;
    case StrideForm::kKDimStride0: p.k_layout.broadcast[3] = true; break;
    case StrideForm::kAllMisaligned:
      p.q_layout.offset = p.k_layout.offset = p.v_layout.offset = p.out_layout.offset = 1;
      p.lse_layout.offset = 1;
      p.want_weights = true;
      p.weights_layout.offset = 1;
      break;
  }
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, StrideTest,
    ::testing::Combine(::testing::Values(StrideForm::kBatchFirstQkv, StrideForm::kBatchFirstAll,
                                         StrideForm::kKvBatchStride0, StrideForm::kKvBatchSize1,
                                         StrideForm::kKvHeadStride0, StrideForm::kQHeadStride0,
                                         StrideForm::kQLenStride0, StrideForm::kOutGaps,
                                         StrideForm::kOutPermuted, StrideForm::kInnerStride2,
                                         StrideForm::kKDimStride0, StrideForm::kAllMisaligned),
                       ::testing::Values(LenPair{37, 53}, LenPair{1, 900})),
    [](const ::testing::TestParamInfo<std::tuple<StrideForm, LenPair>>& info) {
      std::ostringstream os;
      os << StrideFormName(std::get<0>(info.param)) << "_Lq" << std::get<0>(std::get<1>(info.param))
         << "_Lk" << std::get<1>(std::get<1>(info.param));
      return os.str();
    });

// Descriptors of rank < 4 (right-aligned: the missing leading dimensions
// have size 1), mixed with rank-4 ones in the same call.
struct RankCase {
  std::string name;
  int q_rank, kv_rank, out_rank, weights_rank, lse_rank;
  int64_t heads;
};

class RankTest : public ::testing::TestWithParam<RankCase> {};

TEST_P(RankTest, MatchesReference) {
  const RankCase& rc = GetParam();
  Problem p;
  p.q_heads = p.kv_heads = rc.heads;
  p.q_len = 21;
  p.k_len = 34;
  p.dim = 24;
  p.v_dim = 12;
  p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  p.q_layout.rank = rc.q_rank;
  p.k_layout.rank = p.v_layout.rank = rc.kv_rank;
  p.out_layout.rank = rc.out_rank;
  p.want_weights = rc.weights_rank > 0;
  p.weights_layout.rank = rc.weights_rank;
  p.want_lse = rc.lse_rank > 0;
  p.lse_layout.rank = rc.lse_rank;
  p.seed = 67;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(Sdpa, RankTest,
                         ::testing::Values(RankCase{"AllRank3", 3, 3, 3, 0, 0, 2},
                                           RankCase{"AllRank2", 2, 2, 2, 0, 0, 1},
                                           RankCase{"QRank4KvRank3OutRank2", 4, 3, 2, 0, 0, 1},
                                           RankCase{"WeightsRank3LseRank2", 4, 4, 4, 3, 2, 2},
                                           RankCase{"WeightsRank2LseRank1", 2, 2, 2, 2, 1, 1}),
                         [](const ::testing::TestParamInfo<RankCase>& info) {
                           return info.param.name;
                         });

// The shapes of the benchmark rows (bench/README.md), with the long sequences shortened so the
// oracle stays quick (the decode rows keep their full cache length).
struct BenchCase {
  std::string id;
  int64_t batch, q_heads, kv_heads, q_len, k_len, dim;
  hwyattn_causal causal;
};

class BenchShapeTest : public ::testing::TestWithParam<BenchCase> {};

TEST_P(BenchShapeTest, MatchesReference) {
  const BenchCase& bc = GetParam();
  Problem p;
  p.batch = bc.batch;
  p.q_heads = bc.q_heads;
  p.kv_heads = bc.kv_heads;
  p.q_len = bc.q_len;
  p.k_len = bc.k_len;
  p.dim = p.v_dim = bc.dim;
  p.causal = bc.causal;
  p.want_lse = true;
  p.seed = 69;
  RunAndCheck(p);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, BenchShapeTest,
    ::testing::Values(BenchCase{"P1_L200", 1, 8, 8, 200, 200, 64, HWYATTN_CAUSAL_NONE},
                      BenchCase{"P2_L300", 1, 8, 8, 300, 300, 64, HWYATTN_CAUSAL_TOP_LEFT},
                      BenchCase{"P3_L200", 1, 4, 4, 200, 200, 128, HWYATTN_CAUSAL_TOP_LEFT},
                      BenchCase{"D1", 1, 32, 8, 1, 4096, 128, HWYATTN_CAUSAL_NONE},
                      BenchCase{"D2", 8, 8, 8, 1, 2048, 64, HWYATTN_CAUSAL_NONE},
                      BenchCase{"X1_Lq64", 4, 8, 8, 64, 768, 64, HWYATTN_CAUSAL_NONE},
                      BenchCase{"T1", 1, 2, 2, 3, 3, 2, HWYATTN_CAUSAL_NONE}),
    [](const ::testing::TestParamInfo<BenchCase>& info) { return info.param.id; });

// ---------------------------------------------------------------------------
// F16 and BF16 inputs. The oracle reads the exactly converted values, so the
// fp32 tolerance applies unchanged: only the library's arithmetic is judged,
// not the rounding of the inputs.
// ---------------------------------------------------------------------------

using Dtypes = std::tuple<hwyattn_dtype, hwyattn_dtype, hwyattn_dtype>;

class DtypeTest : public ::testing::TestWithParam<std::tuple<Dtypes, LenPair>> {};

TEST_P(DtypeTest, MatchesReference) {
  Problem p;
  std::tie(p.q_dtype, p.k_dtype, p.v_dtype) = std::get<0>(GetParam());
  std::tie(p.q_len, p.k_len) = std::get<1>(GetParam());
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.dim = 64;
  p.v_dim = 80;
  p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  p.want_lse = true;
  p.want_weights = true;
  p.k_layout.order = {0, 2, 1, 3};  // A KV cache in [B, L, H, D] order.
  p.seed = 71;
  Call call(p);
  const hwyattn_status status = call.Run();
  // Mixed combinations are valid requests; the header lets a build decline
  // one with HWYATTN_UNSUPPORTED. Uniform F16 and BF16 must work.
  const bool uniform = p.q_dtype == p.k_dtype && p.k_dtype == p.v_dtype;
  if (status == HWYATTN_UNSUPPORTED && !uniform) {
    GTEST_SKIP() << "this build reports UNSUPPORTED: " << hwyattn_last_error();
  }
  ASSERT_EQ(status, HWYATTN_OK) << hwyattn_status_string(status) << ": " << hwyattn_last_error();
  CheckAgainstReference(call);
}

INSTANTIATE_TEST_SUITE_P(
    Sdpa, DtypeTest,
    ::testing::Combine(::testing::Values(Dtypes{HWYATTN_F16, HWYATTN_F16, HWYATTN_F16},
                                         Dtypes{HWYATTN_BF16, HWYATTN_BF16, HWYATTN_BF16},
                                         Dtypes{HWYATTN_F32, HWYATTN_F16, HWYATTN_F16},
                                         Dtypes{HWYATTN_F32, HWYATTN_BF16, HWYATTN_BF16},
                                         Dtypes{HWYATTN_BF16, HWYATTN_F32, HWYATTN_F16}),
                       ::testing::Values(LenPair{33, 70}, LenPair{1, 600})),
    [](const ::testing::TestParamInfo<std::tuple<Dtypes, LenPair>>& info) {
      const Dtypes& d = std::get<0>(info.param);
      std::ostringstream os;
      os << "Q" << DtypeName(std::get<0>(d)) << "_K" << DtypeName(std::get<1>(d)) << "_V"
         << DtypeName(std::get<2>(d)) << "_Lq" << std::get<0>(std::get<1>(info.param)) << "_Lk"
         << std::get<1>(std::get<1>(info.param));
      return os.str();
    });

// ---------------------------------------------------------------------------
// Large logits and -INFINITY: no overflow, no NaN.
// ---------------------------------------------------------------------------

// Scores of order 1e4. The fp32 dot product of 64 terms of magnitude up to
// 3600 has a rounding error of order 1e-3 (0.2 in the worst case), and exp
// turns a score error into the same relative error in a weight: far above
// the 1e-5 tolerance if two keys of a row had close scores. With scores
// spread over ~1e4, the top key of each row wins by a wide margin, so the
// softmax is effectively one-hot and the fp32 rounding of the scores cannot
// show. The test checks this premise on the oracle's weights (the top key
// of every row holds more than 1 - 1e-5 of the weight), so a seed that breaks
// it fails loudly instead of testing something else.
// Scores that rise along the keys by about 0.2 (log2 units) per key for 200
// keys, then fall (or the reverse): the running max moves in almost every
// key tile, by more than 8 inside a tile, so every online-softmax step
// rescales the output it has so far.
TEST(EdgeTest, RunningMaxMovesInsideKeyTiles) {
  for (bool falling_first : {false, true}) {
    SCOPED_TRACE(falling_first ? "falling first" : "rising first");
    Problem p;
    p.batch = 1;
    p.q_heads = 2;
    p.kv_heads = 1;
    p.q_len = 96;
    p.k_len = 384;
    p.dim = 16;
    p.v_dim = 16;
    p.scale = 1.0f;
    p.want_lse = true;
    p.seed = 11;
    Call call(p);
    for (int64_t j = 0; j < p.k_len; ++j) {
      const int64_t t = falling_first ? p.k_len - 1 - j : j;
      const double ramp = 0.035 * static_cast<double>(std::min<int64_t>(t, 400 - t));
      for (int64_t d = 0; d < p.dim; ++d) {
        const int64_t idx[4] = {0, 0, j, d};
        call.k.SetF32(
            idx, static_cast<float>(ramp + 0.05 * std::sin(0.7 * static_cast<double>(j * 16 + d))));
      }
    }
    for (int64_t h = 0; h < p.q_heads; ++h) {
      for (int64_t i = 0; i < p.q_len; ++i) {
        for (int64_t d = 0; d < p.dim; ++d) {
          const int64_t idx[4] = {0, h, i, d};
          call.q.SetF32(
              idx, static_cast<float>(0.25 + 0.02 * std::cos(static_cast<double>(i + 3 * d + h))));
        }
      }
    }
    ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
    CheckAgainstReference(call);
  }
}

TEST(LargeLogitsTest, OneHotScoresOfOrder1e4) {
  for (hwyattn_causal causal : {HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_BOTTOM_RIGHT}) {
    for (int64_t k_len : {33, 800}) {
      SCOPED_TRACE(std::string(CausalName(causal)) + " Lk " + std::to_string(k_len));
      Problem p;
      p.batch = 2;
      p.q_heads = 4;
      p.kv_heads = 2;
      p.q_len = 16;
      p.k_len = k_len;
      p.dim = 64;
      p.v_dim = 32;
      p.scale = 1.0f;
      p.causal = causal;
      // Each product q_d k_d has standard deviation amp^2 / 3; the sum of 64
      // of them amp^2 * 8 / 3, which is 9600 for amp = 60.
      p.q_amp = 60.0f;
      p.k_amp = 60.0f;
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kFull, HWYATTN_F32, p);
      p.mask.block_prob = 0.2;
      p.mask.block_rows = true;
      p.want_weights = true;
      p.want_lse = true;
      p.seed = 81;
      Call call(p);
      RefResult ref;
      std::string error;
      ASSERT_TRUE(ReferenceSdpa(call.q.tensor(), call.k.tensor(), call.v.tensor(), &call.opts, &ref,
                                &error))
          << error;
      double max_lse = 0.0, min_top = 1.0;
      for (size_t row = 0; row < ref.lse.size(); ++row) {
        if (ref.row_blocked[row]) continue;
        double top = 0.0;
        for (int64_t j = 0; j < p.k_len; ++j) {
          top = std::max(top, ref.weights[row * static_cast<size_t>(p.k_len) + j]);
        }
        min_top = std::min(min_top, top);
        max_lse = std::max(max_lse, std::fabs(ref.lse[row]));
      }
      // All the other keys of a row share less than 1e-5 of its weight, so
      // even a score error of 0.2 (a worst-case bound for this dot product)
      // moves them by less than 2e-6.
      ASSERT_GT(min_top, 1.0 - 1e-5) << "premise: a row is not one-hot";
      ASSERT_GT(max_lse, 1e3) << "premise: scores are not large";
      const hwyattn_status status = call.Run();
      ASSERT_EQ(status, HWYATTN_OK) << hwyattn_last_error();
      CheckAgainstReference(call);
    }
  }
}

// Every score exactly +1e4 (or -1e4): 100 * 100 is exact in fp32, so the
// softmax is exactly uniform and the output is the mean of v. A kernel that
// exponentiates without subtracting the max overflows (inf / inf = NaN) or
// underflows (0 / 0 = NaN) here. Some keys are blocked by -INFINITY.
TEST(LargeLogitsTest, EqualScoresOfPlusMinus1e4) {
  for (float sign : {1.0f, -1.0f}) {
    for (int64_t k_len : {7, 600}) {
      SCOPED_TRACE("sign " + std::to_string(sign) + " Lk " + std::to_string(k_len));
      Problem p;
      p.batch = 1;
      p.q_heads = 2;
      p.kv_heads = 1;
      p.q_len = 3;
      p.k_len = k_len;
      p.dim = 1;
      p.v_dim = 5;
      p.scale = 1.0f;
      p.has_mask = true;
      p.mask = MakeMask(MaskForm::kRank2, HWYATTN_F32, p);
      p.mask.block_prob = 0.3;
      p.want_weights = true;
      p.want_lse = true;
      p.seed = 83;
      Call call(p);
      call.q.ForEach([&](const int64_t* idx, int64_t) { call.q.SetF32(idx, 100.0f * sign); });
      call.k.ForEach([&](const int64_t* idx, int64_t) { call.k.SetF32(idx, 100.0f); });
      // Make the F32 mask purely blocking: finite entries add 0, so every
      // allowed score is exactly sign * 1e4.
      call.mask.ForEach([&](const int64_t* idx, int64_t) {
        if (std::isfinite(call.mask.GetF32(idx))) call.mask.SetF32(idx, 0.0f);
      });
      const hwyattn_status status = call.Run();
      ASSERT_EQ(status, HWYATTN_OK) << hwyattn_last_error();
      CheckAgainstReference(call);
    }
  }
}

// An F32 mask made of nothing but -INFINITY and huge finite values.
TEST(LargeLogitsTest, HugeAdditiveMask) {
  Problem p;
  p.batch = 2;
  p.q_heads = 2;
  p.kv_heads = 2;
  p.q_len = 9;
  p.k_len = 130;
  p.dim = 16;
  p.v_dim = 16;
  p.has_mask = true;
  p.mask = MakeMask(MaskForm::kFull, HWYATTN_F32, p);
  p.mask.block_prob = 0.5;
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 85;
  Call call(p);
  // Finite entries become -3e4 or +3e4 (distinct by key so the rows stay
  // one-hot): scores far outside exp's range in both directions.
  call.mask.ForEach([&](const int64_t* idx, int64_t) {
    const float m = call.mask.GetF32(idx);
    if (std::isfinite(m)) call.mask.SetF32(idx, (m > 0 ? 3e4f : -3e4f) + 100.0f * idx[3]);
  });
  const hwyattn_status status = call.Run();
  ASSERT_EQ(status, HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(call);
}

// ---------------------------------------------------------------------------
// Edge shapes.
// ---------------------------------------------------------------------------

TEST(EdgeTest, SingleElement) {
  for (int64_t offset : {0, 1}) {
    for (hwyattn_causal causal : {HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_TOP_LEFT}) {
      Problem p;  // B = H = L = D = Dv = 1.
      p.causal = causal;
      p.want_weights = true;
      p.want_lse = true;
      p.q_layout.offset = p.k_layout.offset = p.v_layout.offset = p.out_layout.offset = offset;
      p.weights_layout.offset = p.lse_layout.offset = offset;
      p.seed = 91;
      RunAndCheck(p);
    }
  }
}

// The toy call T1 of bench/README.md: B=1, H=2, L=3, D=2.
TEST(EdgeTest, ToyShapeT1) {
  for (hwyattn_causal causal :
       {HWYATTN_CAUSAL_NONE, HWYATTN_CAUSAL_TOP_LEFT, HWYATTN_CAUSAL_BOTTOM_RIGHT}) {
    SCOPED_TRACE(CausalName(causal));
    Problem p;
    p.q_heads = p.kv_heads = 2;
    p.q_len = p.k_len = 3;
    p.dim = p.v_dim = 2;
    p.causal = causal;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 93;
    RunAndCheck(p);
  }
  Problem p;
  p.q_heads = p.kv_heads = 2;
  p.q_len = p.k_len = 3;
  p.dim = p.v_dim = 2;
  p.null_opts = true;
  RunAndCheck(p);
}

// Sizes beyond the sweep: a head dim larger than any tile or cache line
// budget, and many tiny heads (far more work items than threads).
TEST(EdgeTest, ExtremeShapes) {
  {
    SCOPED_TRACE("D 513, Dv 700");
    Problem p;
    p.batch = 1;
    p.q_heads = 2;
    p.kv_heads = 1;
    p.q_len = 19;
    p.k_len = 41;
    p.dim = 513;
    p.v_dim = 700;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 94;
    RunAndCheck(p);
  }
  {
    SCOPED_TRACE("B 64, H 16, L 1..3");
    Problem p;
    p.batch = 64;
    p.q_heads = 16;
    p.kv_heads = 4;
    p.q_len = 1;
    p.k_len = 3;
    p.dim = 8;
    p.v_dim = 5;
    p.kv_len.resize(64);
    for (int b = 0; b < 64; ++b) p.kv_len[b] = b % 4;
    p.want_lse = true;
    p.seed = 96;
    RunAndCheck(p);
  }
}

// Pointers misaligned by one float on shapes whose rows would otherwise be
// vector-aligned (D a multiple of 16), prefill and decode.
TEST(EdgeTest, MisalignedByOneFloat) {
  for (LenPair lens : {LenPair{64, 64}, LenPair{1, 512}}) {
    Problem p;
    p.batch = 2;
    p.q_heads = 4;
    p.kv_heads = 4;
    std::tie(p.q_len, p.k_len) = lens;
    p.dim = 128;
    p.v_dim = 128;
    p.q_layout.offset = p.k_layout.offset = p.v_layout.offset = p.out_layout.offset = 1;
    p.want_lse = true;
    p.lse_layout.offset = 1;
    p.seed = 95;
    RunAndCheck(p);
  }
}

// opts == NULL means the defaults: the result equals the oracle's default and
// is byte-identical to a call with hwyattn_sdpa_options_init options.
TEST(EdgeTest, NullOptionsAreDefaults) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.q_len = 20;
  p.k_len = 30;
  p.dim = 64;
  p.v_dim = 64;
  p.seed = 97;
  p.null_opts = true;
  Call with_null(p);
  ASSERT_EQ(with_null.Run(), HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(with_null);
  p.null_opts = false;
  Call with_init(p);
  ASSERT_EQ(with_init.Run(), HWYATTN_OK) << hwyattn_last_error();
  EXPECT_EQ(with_null.out.Snapshot(), with_init.out.Snapshot());
}

// Many threads calling at once (the header says hwyattn_sdpa is thread-safe)
// get the same bytes as a call made alone.
TEST(EdgeTest, ConcurrentCallersGetIdenticalResults) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 1;
  p.q_len = 40;
  p.k_len = 90;
  p.dim = 64;
  p.v_dim = 32;
  p.causal = HWYATTN_CAUSAL_TOP_LEFT;
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 99;
  Call alone(p);
  ASSERT_EQ(alone.Run(), HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(alone);
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Call>> calls;
  for (int t = 0; t < kThreads; ++t) calls.push_back(std::make_unique<Call>(p));
  std::vector<hwyattn_status> status(kThreads, HWYATTN_INTERNAL_ERROR);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3 && (rep == 0 || status[t] == HWYATTN_OK); ++rep) {
        status[t] = calls[t]->Run();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(status[t], HWYATTN_OK) << "thread " << t;
    EXPECT_TRUE(calls[t]->out.Snapshot() == alone.out.Snapshot()) << "out, thread " << t;
    EXPECT_TRUE(calls[t]->weights.Snapshot() == alone.weights.Snapshot())
        << "weights, thread " << t;
    EXPECT_TRUE(calls[t]->lse.Snapshot() == alone.lse.Snapshot()) << "lse, thread " << t;
  }
}

// Bad arguments (every entry point, every kind) are hardening_test's table.

// True if `name` occurs in `text` as a whole identifier (not inside a longer
// one: "k" matches "k: shape[3]" and "k's" but not "mask" or "kv_len").
bool ContainsIdentifier(const std::string& text, const std::string& name) {
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t pos = text.find(name); pos != std::string::npos; pos = text.find(name, pos + 1)) {
    const bool left_ok = pos == 0 || !is_ident(text[pos - 1]);
    const size_t end = pos + name.size();
    const bool right_ok = end == text.size() || !is_ident(text[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// The rest of the C ABI.
// ---------------------------------------------------------------------------

TEST(ApiTest, Version) {
  EXPECT_STREQ(hwyattn_version(), "0.4.0");
  std::ostringstream os;
  os << HWYATTN_VERSION_MAJOR << "." << HWYATTN_VERSION_MINOR << "." << HWYATTN_VERSION_PATCH;
  EXPECT_EQ(os.str(), hwyattn_version()) << "header macros and library disagree";
  EXPECT_EQ(hwyattn_abi_version(), static_cast<uint32_t>(HWYATTN_ABI_VERSION));
}

TEST(ApiTest, StatusStrings) {
  const hwyattn_status all[] = {HWYATTN_OK, HWYATTN_INVALID_ARGUMENT, HWYATTN_UNSUPPORTED,
                                HWYATTN_OUT_OF_MEMORY, HWYATTN_INTERNAL_ERROR};
  std::vector<std::string> seen;
  for (hwyattn_status s : all) {
    const char* text = hwyattn_status_string(s);
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, "") << "status " << s;
    EXPECT_STRNE(text, "unknown hwyattn_status") << "status " << s;
    for (const std::string& other : seen) EXPECT_NE(other, text) << "two codes, one string";
    seen.push_back(text);
  }
  EXPECT_NE(std::string(hwyattn_status_string(HWYATTN_OK)).find("HWYATTN_OK"), std::string::npos);
  EXPECT_STREQ(hwyattn_status_string(EnumFromInt<hwyattn_status>(12345)), "unknown hwyattn_status");
  EXPECT_STREQ(hwyattn_status_string(EnumFromInt<hwyattn_status>(-1)), "unknown hwyattn_status");
}

// Outputs in F16 and BF16: the fp32 result rounded once, to nearest even,
// at the store: the same bits as rounding the F32 output of the same call
// (the test's own rounding, reference.h), on every kernel (small, decode
// over several chunks, prefill tiles), with lse, ALiBi and sinks, bf16
// products, and an output with a non-unit last stride. lse stays F32 and
// equal.
TEST(OutputDtypeTest, F16AndBf16RoundTheF32Result) {
  struct Case {
    const char* name;
    int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
    bool modifiers, bf16_products, strided;
  };
  const Case cases[] = {
      {"Small", 1, 2, 1, 3, 5, 4, 3, false, false, false},
      {"Decode", 2, 8, 2, 1, 1300, 64, 64, true, false, false},
      {"DecodeBf16", 1, 8, 1, 2, 700, 128, 128, false, true, false},
      {"Prefill", 1, 4, 2, 130, 300, 40, 24, true, false, false},
      {"PrefillBf16Strided", 1, 2, 2, 100, 260, 64, 64, false, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> q(c.B * c.Hq * c.Lq * c.D), k(c.B * c.Hkv * c.Lk * c.D),
        v(c.B * c.Hkv * c.Lk * c.Dv);
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = dist(rng);
    hwyattn_tensor tq, tk, tv;
    const int64_t qs[4] = {c.B, c.Hq, c.Lq, c.D}, ks[4] = {c.B, c.Hkv, c.Lk, c.D},
                  vs[4] = {c.B, c.Hkv, c.Lk, c.Dv};
    ASSERT_EQ(hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 4, qs), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&tk, k.data(), HWYATTN_F32, 4, ks), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&tv, v.data(), HWYATTN_F32, 4, vs), HWYATTN_OK);
    const int64_t n = c.B * c.Hq * c.Lq * c.Dv, step = c.strided ? 3 : 1;
    std::vector<float> slopes(c.Hq), sinks(c.Hq);
    for (int64_t h = 0; h < c.Hq; ++h) {
      slopes[h] = -0.01f * static_cast<float>(h + 1);
      sinks[h] = 0.25f * static_cast<float>(h) - 1.0f;
    }
    // One call per output dtype; out has `step` elements per value.
    auto run = [&](hwyattn_dtype dtype, std::vector<uint8_t>* out, std::vector<float>* lse) {
      const size_t es = DtypeSize(dtype);
      out->assign(static_cast<size_t>(n * step) * es, 0xCD);
      lse->assign(static_cast<size_t>(c.B * c.Hq * c.Lq), 0.0f);
      hwyattn_tensor to, tl;
      const int64_t ls[3] = {c.B, c.Hq, c.Lq};
      EXPECT_EQ(hwyattn_tensor_contiguous(&to, out->data(), dtype, 4, qs), HWYATTN_OK);
      to.shape[3] = c.Dv;
      for (int d = 0; d < 4; ++d) to.stride[d] = 0;
      to.stride[3] = step;
      to.stride[2] = c.Dv * step;
      to.stride[1] = c.Lq * to.stride[2];
      to.stride[0] = c.Hq * to.stride[1];
      EXPECT_EQ(hwyattn_tensor_contiguous(&tl, lse->data(), HWYATTN_F32, 3, ls), HWYATTN_OK);
      hwyattn_sdpa_options o;
      hwyattn_sdpa_options_init(&o);
      o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
      o.lse = &tl;
      if (c.modifiers) {
        o.alibi_slopes = slopes.data();
        o.sinks = sinks.data();
      }
      if (c.bf16_products) o.precision = HWYATTN_PRECISION_BF16;
      EXPECT_EQ(hwyattn_sdpa(&tq, &tk, &tv, &to, &o), HWYATTN_OK) << hwyattn_last_error();
    };
    std::vector<uint8_t> f32, f16, bf16;
    std::vector<float> lse32, lse16, lsebf;
    run(HWYATTN_F32, &f32, &lse32);
    run(HWYATTN_F16, &f16, &lse16);
    run(HWYATTN_BF16, &bf16, &lsebf);
    EXPECT_EQ(lse16, lse32);
    EXPECT_EQ(lsebf, lse32);
    for (int64_t e = 0; e < n * step; ++e) {
      uint16_t h, b;
      std::memcpy(&h, &f16[static_cast<size_t>(e) * 2], 2);
      std::memcpy(&b, &bf16[static_cast<size_t>(e) * 2], 2);
      if (e % step != 0) {  // between the values: untouched
        ASSERT_EQ(h, 0xCDCD) << "F16 element " << e;
        ASSERT_EQ(b, 0xCDCD) << "BF16 element " << e;
        continue;
      }
      float x;
      std::memcpy(&x, &f32[static_cast<size_t>(e) * 4], 4);
      ASSERT_EQ(h, FloatToF16(x)) << "F16 element " << e << ": F32 out " << x;
      ASSERT_EQ(b, FloatToBf16(x)) << "BF16 element " << e << ": F32 out " << x;
    }
  }
}

TEST(ApiTest, NumThreads) {
  const int saved = hwyattn_get_num_threads();
  EXPECT_GE(saved, 1);
  EXPECT_EQ(hwyattn_set_num_threads(-1), HWYATTN_INVALID_ARGUMENT);
  EXPECT_EQ(hwyattn_get_num_threads(), saved) << "a rejected value must not change the setting";
  EXPECT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  EXPECT_EQ(hwyattn_get_num_threads(), 1);
  EXPECT_EQ(hwyattn_set_num_threads(3), HWYATTN_OK);
  EXPECT_EQ(hwyattn_get_num_threads(), 3);
  EXPECT_EQ(hwyattn_set_num_threads(0), HWYATTN_OK);
  EXPECT_GE(hwyattn_get_num_threads(), 1) << "0 resolves to the core count";
  EXPECT_EQ(hwyattn_set_num_threads(saved), HWYATTN_OK);
}

TEST(ApiTest, TensorContiguous) {
  float data[2 * 3 * 4 * 5];
  const int64_t shape[4] = {2, 3, 4, 5};
  hwyattn_tensor t;
  ASSERT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 4, shape), HWYATTN_OK);
  EXPECT_EQ(t.data, data);
  EXPECT_EQ(t.dtype, HWYATTN_F32);
  EXPECT_EQ(t.rank, 4);
  const int64_t want_stride[4] = {60, 20, 5, 1};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(t.shape[d], shape[d]);
    EXPECT_EQ(t.stride[d], want_stride[d]) << "dim " << d;
  }
  ASSERT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_BOOL, 2, shape + 2), HWYATTN_OK);
  EXPECT_EQ(t.rank, 2);
  EXPECT_EQ(t.stride[0], 5);
  EXPECT_EQ(t.stride[1], 1);

  EXPECT_EQ(hwyattn_tensor_contiguous(nullptr, data, HWYATTN_F32, 4, shape),
            HWYATTN_INVALID_ARGUMENT);
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 4, nullptr), HWYATTN_INVALID_ARGUMENT);
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 0, shape), HWYATTN_INVALID_ARGUMENT);
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 5, shape), HWYATTN_INVALID_ARGUMENT);
  const int64_t zero[2] = {3, 0};
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 2, zero), HWYATTN_INVALID_ARGUMENT);
  const int64_t huge[3] = {int64_t{1} << 32, int64_t{1} << 32, 4};
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, 3, huge), HWYATTN_INVALID_ARGUMENT)
      << "2^66 elements overflow int64";
}

TEST(ApiTest, OptionsInit) {
  hwyattn_sdpa_options opts;
  std::memset(&opts, 0xAB, sizeof(opts));
  hwyattn_sdpa_options_init(&opts);
  EXPECT_EQ(opts.struct_size, sizeof(hwyattn_sdpa_options));
  EXPECT_EQ(opts.scale, 0.0f);
  EXPECT_EQ(opts.causal, HWYATTN_CAUSAL_NONE);
  EXPECT_EQ(opts.mask, nullptr);
  EXPECT_EQ(opts.kv_len, nullptr);
  EXPECT_EQ(opts.weights, nullptr);
  EXPECT_EQ(opts.lse, nullptr);
  // Documented as no-ops; must not crash.
  hwyattn_sdpa_options_init_sized(nullptr, sizeof(hwyattn_sdpa_options));
  (hwyattn_sdpa_options_init)(nullptr);
}

// struct_size lets the options grow: a caller compiled against a newer,
// larger struct works as long as the fields this library does not know are
// zero; a set unknown field must not be silently ignored; a size that no
// released header had is an error. (capi_test.c checks 0.1-sized structs.)
TEST(ApiTest, OptionsStructSize) {
  Problem p;
  p.q_len = 4;
  p.k_len = 6;
  p.dim = 8;
  p.v_dim = 8;
  p.causal = HWYATTN_CAUSAL_TOP_LEFT;
  Call call(p);
  struct Newer {
    hwyattn_sdpa_options base;
    uint64_t unknown[4];
  } newer;
  std::memset(&newer, 0, sizeof(newer));
  newer.base = call.opts;
  newer.base.struct_size = sizeof(newer);
  ASSERT_EQ(hwyattn_sdpa(call.q.desc(), call.k.desc(), call.v.desc(), call.out.desc(), &newer.base),
            HWYATTN_OK)
      << hwyattn_last_error();
  CheckAgainstReference(call);

  const std::vector<unsigned char> out_before = call.out.Snapshot();
  newer.unknown[2] = 1;
  const hwyattn_status status =
      hwyattn_sdpa(call.q.desc(), call.k.desc(), call.v.desc(), call.out.desc(), &newer.base);
  EXPECT_TRUE(status == HWYATTN_UNSUPPORTED || status == HWYATTN_INVALID_ARGUMENT)
      << hwyattn_status_string(status);
  EXPECT_TRUE(ContainsIdentifier(hwyattn_last_error(), "struct_size") ||
              ContainsIdentifier(hwyattn_last_error(), "opts"))
      << hwyattn_last_error();

  hwyattn_sdpa_options small = call.opts;
  small.struct_size = sizeof(hwyattn_sdpa_options) - 8;
  EXPECT_EQ(hwyattn_sdpa(call.q.desc(), call.k.desc(), call.v.desc(), call.out.desc(), &small),
            HWYATTN_INVALID_ARGUMENT);
  EXPECT_TRUE(call.out.Snapshot() == out_before) << "a rejected call wrote out";
}

// The last error is per thread: another thread's failure does not replace
// this thread's message, and a later success does not clear it.
TEST(ApiTest, LastErrorIsThreadLocal) {
  Problem p;
  p.q_len = 3;
  p.k_len = 4;
  p.dim = 2;
  p.v_dim = 2;
  Call call(p);
  ASSERT_EQ(hwyattn_sdpa(call.q.desc(), call.k.desc(), call.v.desc(), nullptr, &call.opts),
            HWYATTN_INVALID_ARGUMENT);
  const std::string mine = hwyattn_last_error();
  ASSERT_TRUE(ContainsIdentifier(mine, "out")) << mine;

  std::string fresh = "(not set)", theirs = "(not set)";
  std::thread([&] {
    fresh = hwyattn_last_error();
    EXPECT_EQ(hwyattn_sdpa(nullptr, call.k.desc(), call.v.desc(), call.out.desc(), &call.opts),
              HWYATTN_INVALID_ARGUMENT);
    theirs = hwyattn_last_error();
  }).join();
  EXPECT_EQ(fresh, "");
  EXPECT_TRUE(ContainsIdentifier(theirs, "q")) << theirs;
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(std::string(hwyattn_last_error()), mine) << "another thread's failure leaked here";

  ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
  EXPECT_EQ(std::string(hwyattn_last_error()), mine) << "a success must not clear the message";
}

}  // namespace
}  // namespace hwyattn_test
