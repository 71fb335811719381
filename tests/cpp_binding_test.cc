// SPDX-License-Identifier: Apache-2.0
//
// The C++ binding (include/hwyattn.hpp): hwyattn::sdpa, merge_states and
// the KV cache (kv_cache_write, kv_attention over paged and contiguous F32,
// BF16, I8, ggml block-format and I4 caches; the packed ones decoded by this
// file's own reader of hwyattn.h's layouts) against the double-precision
// oracle (tests/reference.h, given C structs built here by hand, not by the
// binding), Precision::kInt8 on block-format keys (within the header's bound
// of kF32, equal to kF32 on the query quantized here; kF32's bits on a float
// K), the byte-size helpers and byte-vector views, the error paths
// in both styles (exceptions and Result), the refusal of an explicit scale
// of 0, and the RAII MultiheadAttention against the C calls' bits. Compiled with
// -std=c++17 -Wall -Wextra -pedantic -Werror, so the header is held to that.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.hpp"
#include "tests/reference.h"

namespace {

using hwyattn::Causal;
using hwyattn::ConstTensorView;
using hwyattn::SdpaOptions;
using hwyattn::TensorView;

std::vector<float> Random(size_t n, uint32_t seed, float amp = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// max |got - ref| / max |ref| over all elements.
double RelErr(const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double err = 0.0, mag = 0.0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    mag = std::max(mag, std::fabs(ref[i]));
  }
  return mag > 0.0 ? err / mag : err;
}

constexpr double kTol = 1e-5;
constexpr float kPattern = -12345.0f;  // an output's "not yet written"

bool AllEqual(const std::vector<float>& v, float x) {
  return std::all_of(v.begin(), v.end(), [x](float e) { return e == x; });
}

hwyattn_tensor CDense(const float* data, std::vector<int64_t> shape) {
  hwyattn_tensor t;
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, const_cast<float*>(data), HWYATTN_F32,
                                      static_cast<int32_t>(shape.size()), shape.data()),
            HWYATTN_OK);
  return t;
}

hwyattn_test::RefResult Reference(const hwyattn_tensor& q, const hwyattn_tensor& k,
                                  const hwyattn_tensor& v, const hwyattn_sdpa_options& opts) {
  hwyattn_test::RefResult ref;
  std::string error;
  EXPECT_TRUE(hwyattn_test::ReferenceSdpa(q, k, v, &opts, &ref, &error)) << error;
  return ref;
}

// One attention problem, dense [B, H, L, D] buffers.
struct Qkv {
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  std::vector<float> q, k, v, out;
  Qkv(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, int64_t dv,
      uint32_t seed)
      : B(b),
        Hq(hq),
        Hkv(hkv),
        Lq(lq),
        Lk(lk),
        D(d),
        Dv(dv),
        q(Random(static_cast<size_t>(b * hq * lq * d), seed)),
        k(Random(static_cast<size_t>(b * hkv * lk * d), seed + 1)),
        v(Random(static_cast<size_t>(b * hkv * lk * dv), seed + 2)),
        out(static_cast<size_t>(b * hq * lq * dv), kPattern) {}
  ConstTensorView Q() const { return ConstTensorView(q, {B, Hq, Lq, D}); }
  ConstTensorView K() const { return ConstTensorView(k, {B, Hkv, Lk, D}); }
  ConstTensorView V() const { return ConstTensorView(v, {B, Hkv, Lk, Dv}); }
  TensorView Out() { return TensorView(out, {B, Hq, Lq, Dv}); }
  hwyattn_tensor CQ() const { return CDense(q.data(), {B, Hq, Lq, D}); }
  hwyattn_tensor CK() const { return CDense(k.data(), {B, Hkv, Lk, D}); }
  hwyattn_tensor CV() const { return CDense(v.data(), {B, Hkv, Lk, Dv}); }
};

hwyattn_sdpa_options COptions() {
  hwyattn_sdpa_options o;
  hwyattn_sdpa_options_init(&o);
  return o;
}

// ---------------------------------------------------------------------------
// sdpa against the oracle
// ---------------------------------------------------------------------------

TEST(CppSdpa, CausalDefaultScale) {
  Qkv p(2, 4, 4, 9, 9, 16, 16, 11);
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(), SdpaOptions().causal(Causal::kTopLeft));
  hwyattn_sdpa_options c = COptions();
  c.causal = HWYATTN_CAUSAL_TOP_LEFT;
  EXPECT_LT(RelErr(p.out, Reference(p.CQ(), p.CK(), p.CV(), c).out), kTol);
}

// A BF16 output through a TensorView of another dtype: the F32 result's bits
// rounded to nearest even (the test's own rounding, reference.h).
TEST(CppSdpa, Bf16Output) {
  Qkv p(1, 2, 2, 5, 7, 8, 8, 12);
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out());
  std::vector<uint16_t> bits(p.out.size());
  hwyattn::sdpa(p.Q(), p.K(), p.V(),
                hwyattn::TensorView(bits.data(), hwyattn::DType::kBF16, {1, 2, 5, 8}));
  for (size_t i = 0; i < bits.size(); ++i)
    EXPECT_EQ(bits[i], hwyattn_test::FloatToBf16(p.out[i])) << i;
}

TEST(CppSdpa, GqaCrossAttentionBottomRightExplicitScale) {
  Qkv p(1, 6, 2, 5, 11, 8, 12, 21);
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(),
                SdpaOptions().scale(0.3f).causal(Causal::kBottomRight));
  hwyattn_sdpa_options c = COptions();
  c.scale = 0.3f;
  c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  EXPECT_LT(RelErr(p.out, Reference(p.CQ(), p.CK(), p.CV(), c).out), kTol);
}

TEST(CppSdpa, BoolMaskKvLenWeightsLseAndStridedQuery) {
  const int64_t B = 2, H = 3, Lq = 4, Lk = 7, D = 8;
  // q stored batch_first, [B, Lq, H, D], described as [B, H, Lq, D] by strides.
  const std::vector<float> q_blh = Random(static_cast<size_t>(B * Lq * H * D), 31);
  const std::vector<float> k = Random(static_cast<size_t>(B * H * Lk * D), 32);
  const std::vector<float> v = Random(static_cast<size_t>(B * H * Lk * D), 33);
  std::vector<uint8_t> mask(static_cast<size_t>(Lq * Lk));  // [Lq, Lk], broadcast
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + 3) % 5 != 0;
  const std::vector<int32_t> kv_len = {7, 5};
  std::vector<float> out(static_cast<size_t>(B * H * Lq * D), kPattern);
  std::vector<float> weights(static_cast<size_t>(B * H * Lq * Lk), kPattern);
  std::vector<float> lse(static_cast<size_t>(B * H * Lq), kPattern);

  const ConstTensorView q(q_blh.data(), {B, H, Lq, D}, {Lq * H * D, D, H * D, 1});
  hwyattn::sdpa(q, ConstTensorView(k, {B, H, Lk, D}), ConstTensorView(v, {B, H, Lk, D}),
                TensorView(out, {B, H, Lq, D}),
                SdpaOptions()
                    .mask(ConstTensorView(mask.data(), hwyattn::DType::kBool, {Lq, Lk}))
                    .kv_len(kv_len)
                    .weights(TensorView(weights, {B, H, Lq, Lk}))
                    .lse(TensorView(lse, {B, H, Lq})));

  hwyattn_tensor cq = CDense(q_blh.data(), {B, H, Lq, D});
  const int64_t strides[4] = {Lq * H * D, D, H * D, 1};
  std::copy(strides, strides + 4, cq.stride);
  hwyattn_tensor cmask;
  const int64_t mshape[2] = {Lq, Lk};
  ASSERT_EQ(hwyattn_tensor_contiguous(&cmask, mask.data(), HWYATTN_BOOL, 2, mshape), HWYATTN_OK);
  hwyattn_sdpa_options c = COptions();
  c.mask = &cmask;
  c.kv_len = kv_len.data();
  const hwyattn_test::RefResult ref =
      Reference(cq, CDense(k.data(), {B, H, Lk, D}), CDense(v.data(), {B, H, Lk, D}), c);
  EXPECT_LT(RelErr(out, ref.out), kTol);
  EXPECT_LT(RelErr(weights, ref.weights), kTol);
  for (size_t i = 0; i < lse.size(); ++i) {
    EXPECT_NEAR(lse[i], ref.lse[i], 1e-5 * std::max(1.0, std::fabs(ref.lse[i]))) << i;
  }
}

TEST(CppSdpa, ScoreModifiers) {
  Qkv p(1, 4, 2, 6, 10, 16, 8, 41);
  const std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  const std::vector<float> sinks = {0.5f, -1.0f, 2.0f, -INFINITY};
  std::vector<float> lse(static_cast<size_t>(p.Hq * p.Lq), kPattern);
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(),
                SdpaOptions()
                    .causal(Causal::kBottomRight)
                    .window_left(4)
                    .softcap(2.0f)
                    .alibi_slopes(slopes)
                    .sinks(sinks)
                    .lse(TensorView(lse, {1, p.Hq, p.Lq})));
  hwyattn_sdpa_options c = COptions();
  c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  c.window_left = 4;
  c.softcap = 2.0f;
  c.alibi_slopes = slopes.data();
  c.sinks = sinks.data();
  const hwyattn_test::RefResult ref = Reference(p.CQ(), p.CK(), p.CV(), c);
  EXPECT_LT(RelErr(p.out, ref.out), kTol);
  for (size_t i = 0; i < lse.size(); ++i) {
    EXPECT_NEAR(lse[i], ref.lse[i], 1e-5 * std::max(1.0, std::fabs(ref.lse[i]))) << i;
  }
}

// ---------------------------------------------------------------------------
// Errors, both styles
// ---------------------------------------------------------------------------

TEST(CppErrors, ExceptionCarriesStatusAndLastError) {
  Qkv p(1, 2, 2, 3, 5, 8, 8, 51);
  const ConstTensorView k_short(p.k.data(), {1, 2, 5, 4});  // head_dim 4, q has 8
  try {
    hwyattn::sdpa(p.Q(), k_short, p.V(), p.Out());
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_EQ(e.status(), HWYATTN_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("k: head_dim"), std::string::npos) << e.what();
    EXPECT_STREQ(e.what(), hwyattn_last_error());  // copied, the same text
    EXPECT_STREQ(e.status_string(), hwyattn_status_string(HWYATTN_INVALID_ARGUMENT));
  }
  // An hwyattn::Error is a std::runtime_error.
  EXPECT_THROW(hwyattn::sdpa(p.Q(), k_short, p.V(), p.Out()), std::runtime_error);
  EXPECT_TRUE(AllEqual(p.out, kPattern)) << "a failed call wrote its output";
}

TEST(CppErrors, ResultHoldsTheError) {
  Qkv p(1, 4, 3, 3, 5, 8, 8, 61);  // 3 kv heads do not divide 4 query heads
  const hwyattn::Result<void> r = hwyattn::try_sdpa(p.Q(), p.K(), p.V(), p.Out());
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().status(), HWYATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(r.error().what()).find("does not divide"), std::string::npos)
      << r.error().what();
  EXPECT_THROW(r.value(), hwyattn::Error);
  EXPECT_TRUE(AllEqual(p.out, kPattern));

  Qkv good(1, 2, 2, 3, 5, 8, 8, 62);
  const hwyattn::Result<void> ok = hwyattn::try_sdpa(good.Q(), good.K(), good.V(), good.Out());
  EXPECT_TRUE(ok.ok());
  EXPECT_NO_THROW(ok.value());
  EXPECT_THROW((void)ok.error(), std::logic_error);

  hwyattn::Result<int> with_value = 7;
  hwyattn::Result<int> with_error = hwyattn::Error(HWYATTN_UNSUPPORTED, "x: no");
  EXPECT_EQ(*with_value, 7);
  EXPECT_EQ(with_error.value_or(3), 3);
  EXPECT_EQ(with_error.error().status(), HWYATTN_UNSUPPORTED);
  EXPECT_THROW((void)with_error.value(), hwyattn::Error);
}

TEST(CppErrors, ViewsRefuseShapesTheyCannotDescribe) {
  std::vector<float> data(24);
  try {
    TensorView t(data, {2, 3, 5});
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_EQ(e.status(), HWYATTN_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("24 elements but the shape describes 30"),
              std::string::npos)
        << e.what();
  }
  try {
    ConstTensorView t(data.data(), {1, 1, 2, 3, 4});
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank is 5"), std::string::npos) << e.what();
  }
  try {
    ConstTensorView t(data.data(), {4, 0, 6});
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {  // the library's own check (hwyattn_tensor_contiguous)
    EXPECT_NE(std::string(e.what()).find("shape[1] is 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ConstTensorView(data.data(), {4, 6}, {6}), hwyattn::Error);
  const ConstTensorView ok(data, {2, 3, 4});
  EXPECT_EQ(ok.rank(), 3);
  EXPECT_EQ(ok.stride(0), 12);
  EXPECT_EQ(ok.num_elements(), 24);
  // A strided view is checked by the call that uses it.
  Qkv p(1, 1, 1, 2, 3, 4, 4, 71);
  const ConstTensorView bad_k(p.k.data(), {1, 1, 3, 4}, {12, 12, -4, 1});
  const hwyattn::Result<void> r = hwyattn::try_sdpa(p.Q(), bad_k, p.V(), p.Out());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("k:"), std::string::npos) << r.error().what();
}

TEST(CppErrors, Runtime) {
  EXPECT_EQ(std::string(hwyattn::version()), std::to_string(HWYATTN_VERSION_MAJOR) + "." +
                                                 std::to_string(HWYATTN_VERSION_MINOR) + "." +
                                                 std::to_string(HWYATTN_VERSION_PATCH));
  EXPECT_TRUE(hwyattn::abi_compatible());
  EXPECT_EQ(hwyattn::abi_version(), static_cast<uint32_t>(HWYATTN_ABI_VERSION));
  EXPECT_STREQ(hwyattn::simd_target(), hwyattn_simd_target());
  EXPECT_GT(std::strlen(hwyattn::simd_target()), 0u);
  const int before = hwyattn::num_threads();
  const hwyattn::Result<void> r = hwyattn::try_set_num_threads(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("n: -1"), std::string::npos) << r.error().what();
  EXPECT_THROW(hwyattn::set_num_threads(-1), hwyattn::Error);
  EXPECT_EQ(hwyattn::num_threads(), before);
}

// ---------------------------------------------------------------------------
// The scale = 0 trap
// ---------------------------------------------------------------------------

TEST(CppScale, ExplicitZeroIsRejected) {
  Qkv p(1, 2, 2, 3, 5, 8, 8, 81);
  for (float zero : {0.0f, -0.0f}) {
    try {
      hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(), SdpaOptions().scale(zero));
      FAIL() << "scale 0 accepted";
    } catch (const hwyattn::Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.status(), HWYATTN_INVALID_ARGUMENT);
      EXPECT_EQ(what.rfind("scale", 0), 0u) << what;  // names the argument first
      EXPECT_NE(what.find("1/sqrt(head_dim)"), std::string::npos) << what;
      EXPECT_NE(what.find("uniform weights"), std::string::npos) << what;
    }
    EXPECT_FALSE(hwyattn::try_sdpa(p.Q(), p.K(), p.V(), p.Out(), SdpaOptions().scale(zero)).ok());
  }
  EXPECT_TRUE(AllEqual(p.out, kPattern));
}

TEST(CppScale, UnsetIsTheDefaultAndTinyIsUniform) {
  Qkv p(1, 2, 1, 3, 6, 8, 4, 91);
  // Unset (and reset to nullopt): the C default, 1/sqrt(D), bit for bit.
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(), SdpaOptions().scale(0.5f).scale(std::nullopt));
  std::vector<float> c_out(p.out.size(), kPattern);
  hwyattn_tensor cq = p.CQ(), ck = p.CK(), cv = p.CV(), co = CDense(c_out.data(), {1, 2, 3, 4});
  ASSERT_EQ(hwyattn_sdpa(&cq, &ck, &cv, &co, nullptr), HWYATTN_OK);
  EXPECT_EQ(std::memcmp(p.out.data(), c_out.data(), c_out.size() * sizeof(float)), 0);
  hwyattn_sdpa_options c = COptions();
  c.scale = static_cast<float>(1.0 / std::sqrt(8.0));
  EXPECT_LT(RelErr(p.out, Reference(cq, ck, cv, c).out), kTol);
  // What the message suggests for PyTorch's scale=0: uniform weights, so each
  // output row is the mean of the values (one kv head, shared by both).
  hwyattn::sdpa(p.Q(), p.K(), p.V(), p.Out(), SdpaOptions().scale(1e-30f));
  std::vector<double> mean(static_cast<size_t>(p.Hq * p.Lq * p.Dv), 0.0);
  for (int64_t h = 0; h < p.Hq; ++h) {
    for (int64_t i = 0; i < p.Lq; ++i) {
      for (int64_t d = 0; d < p.Dv; ++d) {
        double s = 0.0;
        for (int64_t j = 0; j < p.Lk; ++j) s += p.v[static_cast<size_t>(j * p.Dv + d)];
        mean[static_cast<size_t>((h * p.Lq + i) * p.Dv + d)] = s / static_cast<double>(p.Lk);
      }
    }
  }
  EXPECT_LT(RelErr(p.out, mean), kTol);
}

// ---------------------------------------------------------------------------
// merge_states
// ---------------------------------------------------------------------------

TEST(CppMerge, TwoKeyShardsGiveTheWhole) {
  Qkv p(1, 2, 2, 3, 10, 8, 8, 101);
  const int64_t half = 6, rest = p.Lk - half;
  std::vector<float> out0(p.out.size(), kPattern), out1(p.out.size(), kPattern);
  std::vector<float> lse0(static_cast<size_t>(p.Hq * p.Lq)), lse1(lse0.size()), lse(lse0.size());
  // Shards as strided views of k and v (no copies).
  const int64_t ks[4] = {p.Hkv * p.Lk * p.D, p.Lk * p.D, p.D, 1};
  const ConstTensorView k0(p.k.data(), {1, p.Hkv, half, p.D}, {ks[0], ks[1], ks[2], ks[3]});
  const ConstTensorView k1(p.k.data() + half * p.D, {1, p.Hkv, rest, p.D},
                           {ks[0], ks[1], ks[2], ks[3]});
  const ConstTensorView v0(p.v.data(), {1, p.Hkv, half, p.Dv}, {ks[0], ks[1], ks[2], ks[3]});
  const ConstTensorView v1(p.v.data() + half * p.Dv, {1, p.Hkv, rest, p.Dv},
                           {ks[0], ks[1], ks[2], ks[3]});
  hwyattn::sdpa(p.Q(), k0, v0, TensorView(out0, {1, 2, 3, 8}),
                SdpaOptions().lse(TensorView(lse0, {1, 2, 3})));
  hwyattn::sdpa(p.Q(), k1, v1, TensorView(out1, {1, 2, 3, 8}),
                SdpaOptions().lse(TensorView(lse1, {1, 2, 3})));
  hwyattn::merge_states({ConstTensorView(out0, {1, 2, 3, 8}), ConstTensorView(out1, {1, 2, 3, 8})},
                        {ConstTensorView(lse0, {1, 2, 3}), ConstTensorView(lse1, {1, 2, 3})},
                        p.Out(), TensorView(lse, {1, 2, 3}));
  const hwyattn_test::RefResult ref = Reference(p.CQ(), p.CK(), p.CV(), COptions());
  EXPECT_LT(RelErr(p.out, ref.out), kTol);
  for (size_t i = 0; i < lse.size(); ++i) {
    EXPECT_NEAR(lse[i], ref.lse[i], 1e-5 * std::max(1.0, std::fabs(ref.lse[i]))) << i;
  }
}

TEST(CppMerge, Errors) {
  std::vector<float> o(8, 1.0f), l(2, 0.0f), out(8, kPattern);
  const hwyattn::Result<void> r =
      hwyattn::try_merge_states({ConstTensorView(o, {2, 4}), ConstTensorView(o, {2, 4})},
                                {ConstTensorView(l, {2})}, TensorView(out, {2, 4}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("lses: 1 entries but outs has 2"), std::string::npos)
      << r.error().what();
  try {
    hwyattn::merge_states({}, {}, TensorView(out, {2, 4}));
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("n is 0"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(AllEqual(out, kPattern));
}

// ---------------------------------------------------------------------------
// MultiheadAttention
// ---------------------------------------------------------------------------

static_assert(!std::is_copy_constructible<hwyattn::MultiheadAttention>::value, "move-only");
static_assert(!std::is_copy_assignable<hwyattn::MultiheadAttention>::value, "move-only");
static_assert(std::is_nothrow_move_constructible<hwyattn::MultiheadAttention>::value, "");
static_assert(std::is_nothrow_move_assignable<hwyattn::MultiheadAttention>::value, "");

struct MhaLayer {
  static constexpr int64_t E = 16, H = 4, Hkv = 2, hd = 4, B = 2, L = 5, S = 7;
  std::vector<float> wq = Random(H * hd * E, 201, 0.3f), wk = Random(Hkv * hd * E, 202, 0.3f),
                     wv = Random(Hkv * hd * E, 203, 0.3f), wo = Random(E * H * hd, 204, 0.3f),
                     bq = Random(H * hd, 205), bk = Random(Hkv * hd, 206),
                     bv = Random(Hkv * hd, 207), bo = Random(E, 208);
  std::vector<float> x = Random(B * L * E, 209), kv = Random(B * S * E, 210);

  hwyattn::MhaConfig Config() const {
    hwyattn::MhaConfig cfg;
    cfg.embed_dim = E;
    cfg.num_heads = H;
    cfg.num_kv_heads = Hkv;
    cfg.has_bias = true;
    return cfg;
  }
  hwyattn::MhaWeights Weights() const {
    return {wq.data(), wk.data(), wv.data(), wo.data(), bq.data(), bk.data(), bv.data(), bo.data()};
  }
  hwyattn_mha* CCreate() const {
    hwyattn_mha_config c;
    hwyattn_mha_config_init(&c);
    c.embed_dim = E;
    c.num_heads = H;
    c.num_kv_heads = Hkv;
    c.has_bias = 1;
    const hwyattn_mha_weights w = Weights();
    hwyattn_mha* m = nullptr;
    EXPECT_EQ(hwyattn_mha_create(&c, &w, &m), HWYATTN_OK) << hwyattn_last_error();
    return m;
  }
  // The C calls' output: self-attention (causal) and cross-attention.
  void CForward(std::vector<float>* self_out, std::vector<float>* cross_out) const {
    hwyattn_mha* m = CCreate();
    hwyattn_tensor tx = CDense(x.data(), {B, L, E}), tkv = CDense(kv.data(), {B, S, E});
    hwyattn_tensor ts = CDense(self_out->data(), {B, L, E});
    hwyattn_tensor tc = CDense(cross_out->data(), {B, L, E});
    hwyattn_sdpa_options c = COptions();
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    EXPECT_EQ(hwyattn_mha_forward(m, &tx, nullptr, nullptr, &ts, &c), HWYATTN_OK);
    EXPECT_EQ(hwyattn_mha_forward(m, &tx, &tkv, &tkv, &tc, nullptr), HWYATTN_OK);
    hwyattn_mha_destroy(m);
  }
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CppMha, ForwardMatchesTheCCallsBits) {
  const MhaLayer layer;
  const size_t n = static_cast<size_t>(MhaLayer::B * MhaLayer::L * MhaLayer::E);
  std::vector<float> c_self(n, kPattern), c_cross(n, kPattern);
  layer.CForward(&c_self, &c_cross);

  const hwyattn::MultiheadAttention m(layer.Config(), layer.Weights());
  ASSERT_TRUE(m.valid());
  std::vector<float> self_out(n, kPattern), cross_out(n, kPattern);
  const ConstTensorView x(layer.x, {MhaLayer::B, MhaLayer::L, MhaLayer::E});
  const ConstTensorView kv(layer.kv, {MhaLayer::B, MhaLayer::S, MhaLayer::E});
  m.forward(x, TensorView(self_out, {MhaLayer::B, MhaLayer::L, MhaLayer::E}),
            SdpaOptions().causal(Causal::kTopLeft));
  m.forward(x, kv, kv, TensorView(cross_out, {MhaLayer::B, MhaLayer::L, MhaLayer::E}));
  EXPECT_TRUE(SameBits(self_out, c_self));
  EXPECT_TRUE(SameBits(cross_out, c_cross));
  EXPECT_FALSE(SameBits(self_out, cross_out));  // the premise: the two calls differ

  // An explicit scale of 0 is refused here too, before the C call.
  std::vector<float> untouched(n, kPattern);
  const hwyattn::Result<void> r = m.try_forward(
      x, TensorView(untouched, {MhaLayer::B, MhaLayer::L, MhaLayer::E}), SdpaOptions().scale(0.0f));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("scale is 0"), std::string::npos);
  EXPECT_TRUE(AllEqual(untouched, kPattern));
}

TEST(CppMha, CreateErrors) {
  const MhaLayer layer;
  hwyattn::MhaConfig cfg = layer.Config();
  cfg.num_kv_heads = 3;  // does not divide 4
  hwyattn::Result<hwyattn::MultiheadAttention> r =
      hwyattn::MultiheadAttention::try_create(cfg, layer.Weights());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status(), HWYATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(r.error().what()).find("num_kv_heads 3 does not divide num_heads 4"),
            std::string::npos)
      << r.error().what();
  EXPECT_THROW(hwyattn::MultiheadAttention(cfg, layer.Weights()), hwyattn::Error);
  hwyattn::MhaWeights w = layer.Weights();
  w.w_o = nullptr;
  try {
    hwyattn::MultiheadAttention m(layer.Config(), w);
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("w_o"), std::string::npos) << e.what();
  }
}

TEST(CppMha, MoveSemantics) {
  const MhaLayer layer;
  const size_t n = static_cast<size_t>(MhaLayer::B * MhaLayer::L * MhaLayer::E);
  std::vector<float> c_self(n, kPattern), c_cross(n, kPattern);
  layer.CForward(&c_self, &c_cross);
  const ConstTensorView x(layer.x, {MhaLayer::B, MhaLayer::L, MhaLayer::E});
  const SdpaOptions causal = SdpaOptions().causal(Causal::kTopLeft);

  hwyattn::Result<hwyattn::MultiheadAttention> created =
      hwyattn::MultiheadAttention::try_create(layer.Config(), layer.Weights());
  ASSERT_TRUE(created.ok()) << created.error().what();
  hwyattn::MultiheadAttention a = std::move(created).value();
  const hwyattn_mha* handle = a.get();
  ASSERT_NE(handle, nullptr);

  // Move construction hands the handle over; the source is empty.
  hwyattn::MultiheadAttention b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.get(), handle);
  std::vector<float> out(n, kPattern);
  b.forward(x, TensorView(out, {MhaLayer::B, MhaLayer::L, MhaLayer::E}), causal);
  EXPECT_TRUE(SameBits(out, c_self));

  // A moved-from module fails cleanly, in both styles.
  std::vector<float> untouched(n, kPattern);
  const TensorView u(untouched, {MhaLayer::B, MhaLayer::L, MhaLayer::E});
  const hwyattn::Result<void> r = a.try_forward(x, u);  // NOLINT(bugprone-use-after-move)
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("empty"), std::string::npos) << r.error().what();
  EXPECT_THROW(a.forward(x, u), hwyattn::Error);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(AllEqual(untouched, kPattern));

  // Move assignment into a live module frees the old one (ASan's leak check
  // sees it in the sanitizer build) and takes the new one.
  hwyattn::MultiheadAttention c(layer.Config(), layer.Weights());
  c = std::move(b);
  EXPECT_EQ(c.get(), handle);
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move)
  std::fill(out.begin(), out.end(), kPattern);
  c.forward(x, TensorView(out, {MhaLayer::B, MhaLayer::L, MhaLayer::E}), causal);
  EXPECT_TRUE(SameBits(out, c_self));
  hwyattn::MultiheadAttention* same =
      &c;                // (through a pointer: compilers warn on a visible self-move)
  c = std::move(*same);  // a self-move leaves it intact
  EXPECT_EQ(c.get(), handle);

  // release() gives up ownership; the caller destroys.
  hwyattn_mha* raw = c.release();
  EXPECT_EQ(raw, handle);
  EXPECT_FALSE(c.valid());
  hwyattn_mha_destroy(raw);
}

// ---------------------------------------------------------------------------
// KV cache: kv_cache_write and kv_attention
// ---------------------------------------------------------------------------

using hwyattn::DType;
using hwyattn::KvBatch;
using hwyattn::KvCache;

// bfloat16 by hand: round to nearest, ties to even (finite inputs).
uint16_t ToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Pages of sequences of lengths kv_len, page_size S, taken from a shuffled
// pool of P pages; block table [num_seqs, stride] padded with -1.
struct Paging {
  int64_t S, stride;
  std::vector<int32_t> table;
  Paging(const std::vector<int32_t>& kv_len, int64_t s, int64_t pages, uint32_t seed)
      : S(s), stride(0) {
    for (int32_t n : kv_len) stride = std::max<int64_t>(stride, (n + S - 1) / S);
    stride += 1;  // a spare column: rows longer than needed are fine
    std::vector<int32_t> pool(static_cast<size_t>(pages));
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<int32_t>(i);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
    table.assign(kv_len.size() * static_cast<size_t>(stride), -1);
    size_t next = 0;
    for (size_t q = 0; q < kv_len.size(); ++q) {
      for (int64_t j = 0; j < (kv_len[q] + S - 1) / S; ++j) {
        table[q * static_cast<size_t>(stride) + static_cast<size_t>(j)] = pool.at(next++);
      }
    }
  }
  int64_t Slot(size_t seq, int64_t t) const {
    return table[seq * static_cast<size_t>(stride) + static_cast<size_t>(t / S)] * S + t % S;
  }
};

// One step of a batch: sequences with kv_len keys (this step's included) and
// q_len new tokens each; the raw keys/values of every token, [len, Hkv, D].
struct KvStep {
  int64_t Hq, Hkv, D, Dv;
  std::vector<int32_t> kv_len, q_len, q_start;
  std::vector<std::vector<float>> k, v;  // per sequence
  std::vector<float> q;                  // [T, Hq, D]
  int32_t T = 0;
  KvStep(int64_t hq, int64_t hkv, int64_t d, int64_t dv, std::vector<int32_t> lens,
         std::vector<int32_t> new_tokens, uint32_t seed)
      : Hq(hq), Hkv(hkv), D(d), Dv(dv), kv_len(std::move(lens)), q_len(std::move(new_tokens)) {
    q_start.push_back(0);
    for (size_t s = 0; s < kv_len.size(); ++s) {
      k.push_back(Random(static_cast<size_t>(kv_len[s] * Hkv * D), seed + 10 * s, 2.0f));
      v.push_back(Random(static_cast<size_t>(kv_len[s] * Hkv * Dv), seed + 10 * s + 1, 2.0f));
      T += q_len[s];
      q_start.push_back(T);
    }
    q = Random(static_cast<size_t>(T * Hq * D), seed + 999);
  }
  // Writes every token through the binding: the history (t < kv_len - q_len)
  // in one call, this step's tokens in another, plus one skipped token.
  void Write(const KvCache& cache, const std::function<int64_t(size_t, int64_t)>& slot) const {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float> kn, vn;
      std::vector<int64_t> slots;
      for (size_t s = 0; s < kv_len.size(); ++s) {
        const int64_t first_new = kv_len[s] - q_len[s];
        for (int64_t t = pass == 0 ? 0 : first_new; t < (pass == 0 ? first_new : kv_len[s]); ++t) {
          kn.insert(kn.end(), k[s].begin() + t * Hkv * D, k[s].begin() + (t + 1) * Hkv * D);
          vn.insert(vn.end(), v[s].begin() + t * Hkv * Dv, v[s].begin() + (t + 1) * Hkv * Dv);
          slots.push_back(slot(s, t));
        }
      }
      // A token with a negative slot: skipped (its huge values would show).
      kn.insert(kn.end(), static_cast<size_t>(Hkv * D), 1e6f);
      vn.insert(vn.end(), static_cast<size_t>(Hkv * Dv), 1e6f);
      slots.push_back(-1);
      const int64_t n = static_cast<int64_t>(slots.size());
      hwyattn::kv_cache_write(cache, ConstTensorView(kn, {n, Hkv, D}),
                              ConstTensorView(vn, {n, Hkv, Dv}), slots);
    }
  }
  ConstTensorView Q() const { return ConstTensorView(q, {T, Hq, D}); }
  hwyattn_tensor CQ() const { return CDense(q.data(), {T, Hq, D}); }
  hwyattn_kv_batch CBatch(const int32_t* q_pos = nullptr) const {
    hwyattn_kv_batch b;
    hwyattn_kv_batch_init(&b);
    b.num_seqs = static_cast<int32_t>(kv_len.size());
    b.q_start = q_start.data();
    b.kv_len = kv_len.data();
    b.q_pos = q_pos;
    return b;
  }
};

hwyattn_test::KvRefResult KvReference(const hwyattn_tensor& q, const hwyattn_kv_cache& cache,
                                      const hwyattn_kv_batch& batch,
                                      const hwyattn_sdpa_options& opts) {
  hwyattn_test::KvRefResult ref;
  std::string error;
  EXPECT_TRUE(hwyattn_test::ReferenceKvAttention(q, cache, batch, &opts, &ref, &error)) << error;
  return ref;
}

// A C cache descriptor built by hand (not through the binding).
hwyattn_kv_cache CCache(void* k, void* v, hwyattn_dtype dtype, std::vector<int64_t> kshape,
                        std::vector<int64_t> vshape) {
  hwyattn_kv_cache c;
  hwyattn_kv_cache_init(&c);
  EXPECT_EQ(hwyattn_tensor_contiguous(&c.k, k, dtype, 4, kshape.data()), HWYATTN_OK);
  EXPECT_EQ(hwyattn_tensor_contiguous(&c.v, v, dtype, 4, vshape.data()), HWYATTN_OK);
  return c;
}

TEST(CppKv, PagedF32MixedBatchWithModifiers) {
  // A chunked prefill (3 new of 9), a decode (1 of 6), a one-token prompt
  // and a full prefill (7 of 7); GQA 4 over 2, D 8, Dv 6, pages of 4.
  const KvStep st(4, 2, 8, 6, {9, 6, 1, 7}, {3, 1, 1, 7}, 101);
  const int64_t P = 11, S = 4;
  const Paging pg(st.kv_len, S, P, 7);
  std::vector<float> kpool(static_cast<size_t>(P * st.Hkv * S * st.D), kPattern);
  std::vector<float> vpool(static_cast<size_t>(P * st.Hkv * S * st.Dv), kPattern);
  const KvCache cache =
      KvCache(TensorView(kpool, {P, st.Hkv, S, st.D}), TensorView(vpool, {P, st.Hkv, S, st.Dv}))
          .block_table(pg.table, pg.stride);
  st.Write(cache, [&](size_t s, int64_t t) { return pg.Slot(s, t); });

  // F32 pages hold the tokens exactly, at their slots; nothing else changed.
  size_t written = 0;
  for (size_t s = 0; s < st.kv_len.size(); ++s) {
    for (int64_t t = 0; t < st.kv_len[s]; ++t, ++written) {
      const int64_t page = pg.Slot(s, t) / S, off = pg.Slot(s, t) % S;
      for (int64_t h = 0; h < st.Hkv; ++h) {
        for (int64_t d = 0; d < st.D; ++d) {
          ASSERT_EQ(kpool[static_cast<size_t>(((page * st.Hkv + h) * S + off) * st.D + d)],
                    st.k[s][static_cast<size_t>((t * st.Hkv + h) * st.D + d)]);
        }
        for (int64_t d = 0; d < st.Dv; ++d) {
          ASSERT_EQ(vpool[static_cast<size_t>(((page * st.Hkv + h) * S + off) * st.Dv + d)],
                    st.v[s][static_cast<size_t>((t * st.Hkv + h) * st.Dv + d)]);
        }
      }
    }
  }
  EXPECT_EQ(static_cast<size_t>(std::count(kpool.begin(), kpool.end(), kPattern)),
            kpool.size() - written * static_cast<size_t>(st.Hkv * st.D));

  // The C view of the same memory, for the oracle.
  hwyattn_kv_cache c =
      CCache(kpool.data(), vpool.data(), HWYATTN_F32, {P, st.Hkv, S, st.D}, {P, st.Hkv, S, st.Dv});
  c.block_table = pg.table.data();
  c.block_table_stride = pg.stride;

  const std::vector<float> slopes = {0.25f, -0.5f, 0.125f, 0.0f},
                           sinks = {0.5f, -1.0f, 2.0f, -3.0f};
  std::vector<float> out(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern);
  std::vector<float> lse(static_cast<size_t>(st.T * st.Hq), kPattern);
  hwyattn::kv_attention(st.Q(), cache, KvBatch(st.q_start, st.kv_len),
                        TensorView(out, {st.T, st.Hq, st.Dv}),
                        SdpaOptions()
                            .scale(0.3f)
                            .causal(Causal::kBottomRight)
                            .window_left(5)
                            .softcap(1.5f)
                            .alibi_slopes(slopes)
                            .sinks(sinks)
                            .lse(TensorView(lse, {st.T, st.Hq})));
  hwyattn_sdpa_options o = COptions();
  o.scale = 0.3f;
  o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  o.window_left = 5;
  o.softcap = 1.5f;
  o.alibi_slopes = slopes.data();
  o.sinks = sinks.data();
  const hwyattn_tensor cq = st.CQ();
  const hwyattn_kv_batch cb = st.CBatch();
  const hwyattn_test::KvRefResult ref = KvReference(cq, c, cb, o);
  EXPECT_LT(RelErr(out, ref.out), kTol);
  EXPECT_LT(RelErr(lse, ref.lse), kTol);

  // Defaults (scale unset = 1/sqrt(D), no causal rule) and explicit
  // positions through the vector batch.
  const std::vector<int32_t> q_pos = {2, 5, 0, 0};
  std::fill(out.begin(), out.end(), kPattern);
  hwyattn::kv_attention(st.Q(), cache, KvBatch(st.q_start, st.kv_len, q_pos),
                        TensorView(out, {st.T, st.Hq, st.Dv}), SdpaOptions().window_right(2));
  o = COptions();
  o.scale = static_cast<float>(1.0 / std::sqrt(8.0));
  o.window_right = 2;
  const hwyattn_kv_batch cb_pos = st.CBatch(q_pos.data());
  EXPECT_LT(RelErr(out, KvReference(cq, c, cb_pos, o).out), kTol);
}

TEST(CppKv, ContiguousBf16InFlashAttentionLayout) {
  // No block table: sequence s is page s, page_size 12 = each sequence's
  // capacity. Memory [pages, slot, Hkv, D] (FlashAttention's), described as
  // [pages, Hkv, slot, D] with strides.
  const KvStep st(6, 3, 16, 16, {12, 4, 7}, {2, 1, 7}, 202);
  const int64_t P = 3, S = 12, H = st.Hkv, D = st.D;
  std::vector<uint16_t> kpool(static_cast<size_t>(P * S * H * D), 0xFFFF);
  std::vector<uint16_t> vpool(kpool.size(), 0xFFFF);
  const std::vector<int64_t> strides = {S * H * D, D, H * D, 1};
  const KvCache cache(TensorView(kpool.data(), DType::kBF16, {P, H, S, D}, strides),
                      TensorView(vpool.data(), DType::kBF16, {P, H, S, D}, strides));
  st.Write(cache, [&](size_t s, int64_t t) { return static_cast<int64_t>(s) * S + t; });
  for (size_t s = 0; s < st.kv_len.size(); ++s) {
    for (int64_t t = 0; t < st.kv_len[s]; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          const size_t at =
              static_cast<size_t>(((static_cast<int64_t>(s) * S + t) * H + h) * D + d);
          const size_t raw = static_cast<size_t>((t * H + h) * D + d);
          ASSERT_EQ(kpool[at], ToBf16(st.k[s][raw])) << s << " " << t << " " << h << " " << d;
          ASSERT_EQ(vpool[at], ToBf16(st.v[s][raw]));
        }
      }
    }
  }

  hwyattn_kv_cache c;
  hwyattn_kv_cache_init(&c);
  c.k.data = kpool.data();
  c.v.data = vpool.data();
  c.k.dtype = c.v.dtype = HWYATTN_BF16;
  c.k.rank = c.v.rank = 4;
  const int64_t shape[4] = {P, H, S, D};
  for (int i = 0; i < 4; ++i) {
    c.k.shape[i] = c.v.shape[i] = shape[i];
    c.k.stride[i] = c.v.stride[i] = strides[static_cast<size_t>(i)];
  }
  std::vector<float> out(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern);
  hwyattn::kv_attention(st.Q(), cache, KvBatch(st.q_start, st.kv_len),
                        TensorView(out, {st.T, st.Hq, st.Dv}),
                        SdpaOptions().causal(Causal::kTopLeft));
  hwyattn_sdpa_options o = COptions();
  o.scale = 0.25f;  // 1/sqrt(16)
  o.causal = HWYATTN_CAUSAL_TOP_LEFT;
  const hwyattn_tensor cq = st.CQ();
  const hwyattn_kv_batch cb = st.CBatch();
  EXPECT_LT(RelErr(out, KvReference(cq, c, cb, o).out), kTol);
}

TEST(CppKv, Int8PerTokenAndPerChannelScales) {
  // Paged I8: keys with per-token scales (written by kv_cache_write), values
  // with per-channel scales the caller fixed.
  const KvStep st(2, 1, 8, 4, {10, 3}, {1, 3}, 303);
  const int64_t P = 6, S = 4, H = st.Hkv;
  const Paging pg(st.kv_len, S, P, 11);
  std::vector<int8_t> kpool(static_cast<size_t>(P * H * S * st.D), 99);
  std::vector<int8_t> vpool(static_cast<size_t>(P * H * S * st.Dv), 99);
  std::vector<float> kscale(static_cast<size_t>(P * H * S), kPattern);
  std::vector<float> vscale = {0.004f, 0.008f, 0.012f, 0.016f};  // [1, 1, 1, Dv]
  const KvCache cache =
      KvCache(TensorView(kpool.data(), DType::kI8, {P, H, S, st.D}),
              TensorView(vpool.data(), DType::kI8, {P, H, S, st.Dv}))
          .scales(TensorView(kscale, {P, H, S, 1}), ConstTensorView(vscale, {1, H, 1, st.Dv}))
          .block_table(pg.table, pg.stride);
  st.Write(cache, [&](size_t s, int64_t t) { return pg.Slot(s, t); });
  for (size_t s = 0; s < st.kv_len.size(); ++s) {
    for (int64_t t = 0; t < st.kv_len[s]; ++t) {
      const int64_t page = pg.Slot(s, t) / S, off = pg.Slot(s, t) % S;
      const float* x = &st.k[s][static_cast<size_t>(t * st.D)];
      float amax = 0.0f;
      for (int64_t d = 0; d < st.D; ++d) amax = std::max(amax, std::fabs(x[d]));
      const float scale = kscale[static_cast<size_t>(page * S + off)];
      EXPECT_FLOAT_EQ(scale, amax / 127.0f);
      for (int64_t d = 0; d < st.D; ++d) {  // within half a step of the input
        const int8_t qk = kpool[static_cast<size_t>((page * S + off) * st.D + d)];
        EXPECT_LE(std::fabs(qk * static_cast<double>(scale) - x[d]), amax / 254.0 * 1.0001);
      }
      for (int64_t d = 0; d < st.Dv; ++d) {
        const double xv = st.v[s][static_cast<size_t>(t * st.Dv + d)];
        const double step = vscale[static_cast<size_t>(d)];
        const double want = std::max(-127.0, std::min(127.0, std::nearbyint(xv / step)));
        EXPECT_EQ(vpool[static_cast<size_t>((page * S + off) * st.Dv + d)], want);
      }
    }
  }

  hwyattn_kv_cache c =
      CCache(kpool.data(), vpool.data(), HWYATTN_I8, {P, H, S, st.D}, {P, H, S, st.Dv});
  const hwyattn_tensor ks = CDense(kscale.data(), {P, H, S, 1});
  const hwyattn_tensor vs = CDense(vscale.data(), {1, H, 1, st.Dv});
  c.k_scale = &ks;
  c.v_scale = &vs;
  c.block_table = pg.table.data();
  c.block_table_stride = pg.stride;
  std::vector<float> out(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern);
  hwyattn::kv_attention(st.Q(), cache, KvBatch(st.q_start, st.kv_len),
                        TensorView(out, {st.T, st.Hq, st.Dv}),
                        SdpaOptions().scale(0.5f).causal(Causal::kBottomRight));
  hwyattn_sdpa_options o = COptions();
  o.scale = 0.5f;
  o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  const hwyattn_tensor cq = st.CQ();
  const hwyattn_kv_batch cb = st.CBatch();
  EXPECT_LT(RelErr(out, KvReference(cq, c, cb, o).out), kTol);
}

// A pool that runs every task on the calling thread, in reverse order.
void SerialReverse(void* pool, int64_t n, hwyattn_task_fn task, void* ctx) {
  ++*static_cast<int*>(pool);
  for (int64_t i = n - 1; i >= 0; --i) task(ctx, i);
}

TEST(CppKv, CallerPoolGivesTheSameBits) {
  const KvStep st(4, 2, 32, 32, {300, 1}, {300, 1}, 404);
  const int64_t P = 2, S = 320;
  std::vector<float> kpool(static_cast<size_t>(P * st.Hkv * S * st.D), 0.0f), vpool = kpool;
  const KvCache cache(TensorView(kpool, {P, st.Hkv, S, st.D}),
                      TensorView(vpool, {P, st.Hkv, S, st.Dv}));
  int calls = 0;
  hwyattn_parallel pool;
  hwyattn_parallel_init(&pool);
  pool.num_workers = 3;
  pool.pool = &calls;
  pool.parallel_for = SerialReverse;
  st.Write(cache, [&](size_t s, int64_t t) { return static_cast<int64_t>(s) * S + t; });
  std::vector<float> own(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern), pooled = own;
  const KvBatch batch(st.q_start, st.kv_len);
  hwyattn::kv_attention(st.Q(), cache, batch, TensorView(own, {st.T, st.Hq, st.Dv}),
                        SdpaOptions().causal(Causal::kBottomRight));
  hwyattn::kv_attention(st.Q(), cache, batch, TensorView(pooled, {st.T, st.Hq, st.Dv}),
                        SdpaOptions().causal(Causal::kBottomRight).parallel(&pool));
  EXPECT_GT(calls, 0);
  EXPECT_TRUE(SameBits(own, pooled));
}

TEST(CppKv, Errors) {
  const KvStep st(2, 1, 4, 4, {5, 2}, {1, 1}, 505);
  const int64_t P = 4, S = 4;
  std::vector<float> kpool(static_cast<size_t>(P * S * st.D), kPattern), vpool = kpool;
  std::vector<int32_t> table = {0, 1, 2, -1};  // [2, 2]
  const KvCache cache =
      KvCache(TensorView(kpool, {P, 1, S, st.D}), TensorView(vpool, {P, 1, S, st.Dv}))
          .block_table(table, 2);
  std::vector<float> out(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern);
  const TensorView o(out, {st.T, st.Hq, st.Dv});
  const KvBatch batch(st.q_start, st.kv_len);

  // A page outside the pool: the library's message, as an exception...
  table[2] = 99;
  try {
    hwyattn::kv_attention(st.Q(), cache, batch, o, SdpaOptions().causal(Causal::kBottomRight));
    FAIL() << "no exception";
  } catch (const hwyattn::Error& e) {
    EXPECT_EQ(e.status(), HWYATTN_INVALID_ARGUMENT);
    const std::string what = e.what();
    EXPECT_NE(what.find("block_table[1][0]"), std::string::npos) << what;
    EXPECT_NE(what.find("99"), std::string::npos) << what;
    EXPECT_STREQ(e.what(), hwyattn_last_error());
  }
  // ... and as a Result.
  hwyattn::Result<void> r = hwyattn::try_kv_attention(st.Q(), cache, batch, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("block_table"), std::string::npos);
  table[2] = 2;
  EXPECT_TRUE(AllEqual(out, kPattern)) << "a failed call wrote its output";

  // A slot written twice in one call: nothing is written.
  std::vector<float> kn = Random(static_cast<size_t>(2 * st.D), 1), vn = kn;
  r = hwyattn::try_kv_cache_write(cache, ConstTensorView(kn, {2, 1, st.D}),
                                  ConstTensorView(vn, {2, 1, st.Dv}), std::vector<int64_t>{5, 5});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status(), HWYATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(r.error().what()).find("slot"), std::string::npos) << r.error().what();
  EXPECT_TRUE(AllEqual(kpool, kPattern) && AllEqual(vpool, kPattern));
  // A slot past the pool (P * S = 16).
  EXPECT_THROW(
      hwyattn::kv_cache_write(cache, ConstTensorView(kn, {2, 1, st.D}),
                              ConstTensorView(vn, {2, 1, st.Dv}), std::vector<int64_t>{0, 16}),
      hwyattn::Error);
  EXPECT_TRUE(AllEqual(kpool, kPattern));

  // The binding's own checks: vector sizes.
  r = hwyattn::try_kv_cache_write(cache, ConstTensorView(kn, {2, 1, st.D}),
                                  ConstTensorView(vn, {2, 1, st.Dv}), std::vector<int64_t>{3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("slot: 1 entries but k_new has 2 tokens"),
            std::string::npos)
      << r.error().what();
  EXPECT_THROW(KvBatch({0, 1}, {5, 2}), hwyattn::Error);
  try {
    const KvBatch b({0, 1, 2}, {5, 2}, {0});
    FAIL() << "no exception: " << b.num_seqs();
  } catch (const hwyattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("q_pos: 1 entries for 2 sequences"), std::string::npos)
        << e.what();
  }
  const std::vector<int32_t> short_table = {0, 1};  // one row for two sequences
  const KvCache short_cache = KvCache(cache).block_table(short_table, 2);
  r = hwyattn::try_kv_attention(st.Q(), short_cache, batch, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.error().what()).rfind("block_table: 2 entries with stride 2", 0), 0u)
      << r.error().what();

  // An explicit scale of 0, in both calls; a mask (kv_attention takes none).
  for (float zero : {0.0f, -0.0f}) {
    r = hwyattn::try_kv_attention(st.Q(), cache, batch, o, SdpaOptions().scale(zero));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(std::string(r.error().what()).rfind("scale is 0", 0), 0u) << r.error().what();
    r = hwyattn::try_kv_cache_write(cache, ConstTensorView(kn, {2, 1, st.D}),
                                    ConstTensorView(vn, {2, 1, st.Dv}), std::vector<int64_t>{0, 1},
                                    SdpaOptions().scale(zero));
    ASSERT_FALSE(r.ok());
  }
  std::vector<uint8_t> mask(1, 1);
  r = hwyattn::try_kv_attention(
      st.Q(), cache, batch, o, SdpaOptions().mask(ConstTensorView(mask.data(), DType::kBool, {1})));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.error().what()).find("mask"), std::string::npos) << r.error().what();
  EXPECT_TRUE(AllEqual(out, kPattern));
  EXPECT_TRUE(AllEqual(kpool, kPattern) && AllEqual(vpool, kPattern));
}

// ---------------------------------------------------------------------------
// ggml's block formats and int4: byte sizes, caches, sdpa's k/v
// ---------------------------------------------------------------------------

static_assert(hwyattn::row_bytes(DType::kQ8_0, 128) == 136, "4 blocks of 34 bytes");
static_assert(hwyattn::row_bytes(DType::kI4, 17) == 9, "two per byte, the last half used");
static_assert(hwyattn::row_bytes(DType::kQ4_0, 48) == -1, "not whole blocks");
static_assert(hwyattn::row_bytes(DType::kF32, 3) == 12, "");

// An IEEE binary16's value.
double HalfValue(uint16_t h) {
  const int e = (h >> 10) & 31;
  const double m = h & 1023;
  double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
  if (e == 31) mag = m == 0 ? INFINITY : NAN;
  return (h >> 15) ? -mag : mag;
}

// Element j of ggml block b, from hwyattn.h's table: an fp16 d (and m) in the
// machine's byte order, element j < 16 the low nibble of qs[j] and j + 16 its
// high nibble, Q5's fifth bit j bit j of the little-endian 32-bit qh. Returned
// as the float the kernels load (exact: d * q; Q4_1 / Q5_1's d * q + m rounded
// once to fp32).
float BlockElement(DType dtype, const uint8_t* b, int64_t bytes, int j) {
  static const int kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};
  const auto half = [b](int at) {
    uint16_t h;
    std::memcpy(&h, b + at, 2);
    return HalfValue(h);
  };
  const double d = half(0);
  if (dtype == DType::kQ8_0) return static_cast<float>(d * static_cast<int8_t>(b[2 + j]));
  const uint8_t* qs = b + bytes - 16;
  int q = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
  if (dtype == DType::kQ5_0 || dtype == DType::kQ5_1) {
    const uint8_t* p = b + (dtype == DType::kQ5_1 ? 4 : 2);
    const uint32_t qh = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
    q |= static_cast<int>((qh >> j) & 1u) << 4;
  }
  switch (dtype) {
    case DType::kQ4_0: return static_cast<float>(d * (q - 8));
    case DType::kQ5_0: return static_cast<float>(d * (q - 16));
    case DType::kIQ4_NL: return static_cast<float>(d * kIq4NlLevels[q]);
    default: return static_cast<float>(d * q + half(2));  // Q4_1, Q5_1
  }
}

// Dense block rows [rows, dim] decoded to floats.
std::vector<float> DecodeBlocks(DType dtype, const std::vector<uint8_t>& bytes, int64_t rows,
                                int64_t dim) {
  const int64_t bb = hwyattn::dtype_storage(dtype).bytes;
  std::vector<float> x(static_cast<size_t>(rows * dim));
  for (int64_t i = 0; i < rows * dim; ++i) {
    x[static_cast<size_t>(i)] =
        BlockElement(dtype, bytes.data() + (i / 32) * bb, bb, static_cast<int>(i % 32));
  }
  return x;
}

TEST(CppKv, BlockFormatsMatchTheDecodedBytes) {
  struct Format {
    DType dtype;
    int64_t block_bytes;
    double step;  // each value within step * the block's max |x| of the input
  };
  const Format formats[] = {{DType::kQ8_0, 34, 1 / 127.0}, {DType::kQ4_0, 18, 1 / 7.0},
                            {DType::kQ4_1, 20, 1 / 7.0},   {DType::kQ5_0, 22, 1 / 15.0},
                            {DType::kQ5_1, 24, 1 / 28.0},  {DType::kIQ4_NL, 18, 1 / 7.0}};
  for (const Format& f : formats) {
    SCOPED_TRACE(static_cast<int>(f.dtype));
    const KvStep st(4, 2, 64, 32, {9, 6, 1, 7}, {3, 1, 1, 7}, 606);
    const int64_t P = 11, S = 4, H = st.Hkv;
    const Paging pg(st.kv_len, S, P, 13);
    EXPECT_EQ(hwyattn::row_bytes(f.dtype, st.D), 2 * f.block_bytes);
    std::vector<uint8_t> kpool(static_cast<size_t>(hwyattn::dense_bytes(f.dtype, {P, H, S, st.D})));
    std::vector<uint8_t> vpool(
        static_cast<size_t>(hwyattn::dense_bytes(f.dtype, {P, H, S, st.Dv})));
    ASSERT_EQ(kpool.size(), static_cast<size_t>(P * H * S * 2 * f.block_bytes));
    const KvCache cache = KvCache(TensorView(kpool, f.dtype, {P, H, S, st.D}),
                                  TensorView(vpool, f.dtype, {P, H, S, st.Dv}))
                              .block_table(pg.table, pg.stride);
    st.Write(cache, [&](size_t s, int64_t t) { return pg.Slot(s, t); });
    std::vector<float> kf = DecodeBlocks(f.dtype, kpool, P * H * S, st.D);
    std::vector<float> vf = DecodeBlocks(f.dtype, vpool, P * H * S, st.Dv);
    for (size_t s = 0; s < st.kv_len.size(); ++s) {
      for (int64_t t = 0; t < st.kv_len[s]; ++t) {
        const int64_t page = pg.Slot(s, t) / S, off = pg.Slot(s, t) % S;
        for (int64_t h = 0; h < H; ++h) {
          const float* x = &st.k[s][static_cast<size_t>((t * H + h) * st.D)];
          const float* got = &kf[static_cast<size_t>(((page * H + h) * S + off) * st.D)];
          for (int64_t c0 = 0; c0 < st.D; c0 += 32) {
            double amax = 0.0;
            for (int64_t c = c0; c < c0 + 32; ++c) amax = std::max(amax, std::fabs(x[c] * 1.0));
            for (int64_t c = c0; c < c0 + 32; ++c) {
              ASSERT_LE(std::fabs(got[c] - static_cast<double>(x[c])), amax * f.step * 1.01)
                  << "seq " << s << " token " << t << " head " << h << " [" << c << "]";
            }
          }
        }
      }
    }
    std::vector<float> out(static_cast<size_t>(st.T * st.Hq * st.Dv), kPattern);
    std::vector<float> lse(static_cast<size_t>(st.T * st.Hq), kPattern);
    hwyattn::kv_attention(
        st.Q(), cache, KvBatch(st.q_start, st.kv_len), TensorView(out, {st.T, st.Hq, st.Dv}),
        SdpaOptions().causal(Causal::kBottomRight).lse(TensorView(lse, {st.T, st.Hq})));
    // The oracle over an F32 cache of the decoded values.
    hwyattn_kv_cache c =
        CCache(kf.data(), vf.data(), HWYATTN_F32, {P, H, S, st.D}, {P, H, S, st.Dv});
    c.block_table = pg.table.data();
    c.block_table_stride = pg.stride;
    hwyattn_sdpa_options o = COptions();
    o.scale = 0.125f;  // 1/sqrt(64)
    o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    const hwyattn_tensor cq = st.CQ();
    const hwyattn_kv_batch cb = st.CBatch();
    const hwyattn_test::KvRefResult ref = KvReference(cq, c, cb, o);
    EXPECT_LT(RelErr(out, ref.out), kTol);
    EXPECT_LT(RelErr(lse, ref.lse), kTol);
  }
}

TEST(CppSdpa, BlockFormatKeysAndValues) {
  // k and v as llama.cpp's quantized cache holds them: Q5_0 rows written by
  // kv_cache_write into one page of Lk slots, read by sdpa in place; v also
  // as F32 (k and v may differ).
  const int64_t Hq = 4, H = 2, Lq = 5, Lk = 40, D = 64, Dv = 32;
  const std::vector<float> kx = Random(static_cast<size_t>(Lk * H * D), 71);
  const std::vector<float> vx = Random(static_cast<size_t>(Lk * H * Dv), 72);
  std::vector<uint8_t> kb(static_cast<size_t>(hwyattn::dense_bytes(DType::kQ5_0, {1, H, Lk, D})));
  std::vector<uint8_t> vb(static_cast<size_t>(hwyattn::dense_bytes(DType::kQ5_0, {1, H, Lk, Dv})));
  std::vector<int64_t> slots(static_cast<size_t>(Lk));
  for (int64_t t = 0; t < Lk; ++t) slots[static_cast<size_t>(t)] = t;
  hwyattn::kv_cache_write(KvCache(TensorView(kb, DType::kQ5_0, {1, H, Lk, D}),
                                  TensorView(vb, DType::kQ5_0, {1, H, Lk, Dv})),
                          ConstTensorView(kx, {Lk, H, D}), ConstTensorView(vx, {Lk, H, Dv}), slots);
  const std::vector<float> kf = DecodeBlocks(DType::kQ5_0, kb, H * Lk, D);
  const std::vector<float> vf = DecodeBlocks(DType::kQ5_0, vb, H * Lk, Dv);
  std::vector<float> vplain(vf);  // the decoded values as an F32 v
  const std::vector<float> q = Random(static_cast<size_t>(Hq * Lq * D), 73);
  std::vector<float> out(static_cast<size_t>(Hq * Lq * Dv), kPattern);
  hwyattn::sdpa(ConstTensorView(q, {1, Hq, Lq, D}),
                ConstTensorView(kb, DType::kQ5_0, {1, H, Lk, D}),
                ConstTensorView(vb, DType::kQ5_0, {1, H, Lk, Dv}), TensorView(out, {1, Hq, Lq, Dv}),
                SdpaOptions().causal(Causal::kBottomRight));
  hwyattn_sdpa_options o = COptions();
  o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  const hwyattn_tensor cq = CDense(q.data(), {1, Hq, Lq, D});
  const hwyattn_tensor ck = CDense(kf.data(), {1, H, Lk, D});
  const hwyattn_tensor cv = CDense(vf.data(), {1, H, Lk, Dv});
  const hwyattn_test::RefResult ref = Reference(cq, ck, cv, o);
  EXPECT_LT(RelErr(out, ref.out), kTol);
  std::fill(out.begin(), out.end(), kPattern);
  hwyattn::sdpa(ConstTensorView(q, {1, Hq, Lq, D}),
                ConstTensorView(kb, DType::kQ5_0, {1, H, Lk, D}),
                ConstTensorView(vplain, {1, H, Lk, Dv}), TensorView(out, {1, Hq, Lq, Dv}),
                SdpaOptions().causal(Causal::kBottomRight));
  EXPECT_LT(RelErr(out, ref.out), kTol);
}

// Precision::kInt8 (HWYATTN_PRECISION_INT8): each query row quantized per
// block of 32 head dims as ggml's quantize_row_q8_0 does (d = max|x| / 127,
// roundf(x / d)), here with s_d = 1 (block-format K), dequantized.
std::vector<float> Q8Dequantized(const std::vector<float>& q) {
  std::vector<float> r(q.size());
  for (size_t b = 0; b < q.size(); b += 32) {  // D % 32 == 0: blocks within rows
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(q[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = b; i < b + 32; ++i) r[i] = d * std::round(q[i] * id);
  }
  return r;
}

TEST(CppSdpa, Int8PrecisionOnBlockFormatKeys) {
  // sdpa with a ggml block-format K (written by kv_cache_write) and an F32 V,
  // under kF32 and kInt8: a decode (Lq = 1, 2 query rows per kv head: the
  // integer dot products) and a prefill (Lq = 12: fp32 tiles on the quantized
  // query). kInt8 moves out (the query was quantized), by at most what
  // hwyattn.h's accuracy statement allows: each score by at most
  //   E = scale * sum over blocks of (max|q| over the block / 254) * sum |k|
  // over the block (the dequantized key), so the weights by factors within
  // exp(+-2E), out by at most max|v| (exp(2 E_row) - 1) and lse by E_row,
  // E_row the largest E of the row's keys. And kInt8 is kF32 on the quantized
  // query, within fp32 rounding.
  const int64_t Hq = 4, H = 2, Lk = 40, D = 64, Dv = 32;
  const float scale = 0.125f;
  const DType formats[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                           DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL};
  const std::vector<float> kx = Random(static_cast<size_t>(Lk * H * D), 81);
  const std::vector<float> v = Random(static_cast<size_t>(H * Lk * Dv), 82);
  const float vmax = 1.0f;  // Random's amplitude
  std::vector<int64_t> slots(static_cast<size_t>(Lk));
  for (int64_t t = 0; t < Lk; ++t) slots[static_cast<size_t>(t)] = t;
  for (const DType f : formats) {
    std::vector<uint8_t> kb(static_cast<size_t>(hwyattn::dense_bytes(f, {1, H, Lk, D})));
    std::vector<float> vpage(static_cast<size_t>(H * Lk * Dv));
    hwyattn::kv_cache_write(
        KvCache(TensorView(kb, f, {1, H, Lk, D}), TensorView(vpage, {1, H, Lk, Dv})),
        ConstTensorView(kx, {Lk, H, D}), ConstTensorView(v, {Lk, H, Dv}), slots);
    const std::vector<float> kf = DecodeBlocks(f, kb, H * Lk, D);
    for (const int64_t Lq : {int64_t{1}, int64_t{12}}) {
      SCOPED_TRACE(::testing::Message() << "dtype " << static_cast<int>(f) << " Lq " << Lq);
      const std::vector<float> q = Random(static_cast<size_t>(Hq * Lq * D), 83 + Lq);
      const size_t rows = static_cast<size_t>(Hq * Lq);
      std::vector<float> out32(rows * Dv, kPattern), out8 = out32, outq = out32;
      std::vector<float> lse32(rows, kPattern), lse8 = lse32;
      const auto run = [&](const std::vector<float>& query, hwyattn::Precision p,
                           std::vector<float>& out, std::vector<float>* lse) {
        SdpaOptions o = SdpaOptions().scale(scale).causal(Causal::kBottomRight).precision(p);
        if (lse) o.lse(TensorView(*lse, {1, Hq, Lq}));
        const hwyattn::Result<void> r = hwyattn::try_sdpa(
            ConstTensorView(query, {1, Hq, Lq, D}), ConstTensorView(kb, f, {1, H, Lk, D}),
            ConstTensorView(vpage, {1, H, Lk, Dv}), TensorView(out, {1, Hq, Lq, Dv}), o);
        EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
      };
      run(q, hwyattn::Precision::kF32, out32, &lse32);
      run(q, hwyattn::Precision::kInt8, out8, &lse8);
      ASSERT_FALSE(AllEqual(out32, kPattern));
      ASSERT_FALSE(AllEqual(out8, kPattern));
      EXPECT_NE(out8, out32) << "kInt8 gave kF32's bits: the query was not quantized";
      double max_diff = 0.0;
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t hk = h / (Hq / H);
        for (int64_t i = 0; i < Lq; ++i) {
          const size_t row = static_cast<size_t>(h * Lq + i);
          const float* qr = &q[row * D];
          double e_row = 0.0;
          for (int64_t j = 0; j < Lk; ++j) {
            const float* kr = &kf[static_cast<size_t>((hk * Lk + j) * D)];
            double e = 0.0;
            for (int64_t c0 = 0; c0 < D; c0 += 32) {
              double amax = 0.0, ksum = 0.0;
              for (int64_t c = c0; c < c0 + 32; ++c) {
                amax = std::max(amax, std::fabs(static_cast<double>(qr[c])));
                ksum += std::fabs(static_cast<double>(kr[c]));
              }
              e += amax / 254.0 * ksum;
            }
            e_row = std::max(e_row, scale * e);
          }
          const double out_bound = vmax * std::expm1(2.0 * e_row) + 1e-5;
          for (int64_t c = 0; c < Dv; ++c) {
            const double diff =
                std::fabs(static_cast<double>(out8[row * Dv + c]) - out32[row * Dv + c]);
            max_diff = std::max(max_diff, diff);
            ASSERT_LE(diff, out_bound) << "head " << h << " row " << i << " [" << c << "]";
          }
          EXPECT_LE(std::fabs(static_cast<double>(lse8[row]) - lse32[row]), e_row + 1e-5)
              << "head " << h << " row " << i;
        }
      }
      EXPECT_GT(max_diff, 0.0);
      // kF32 on the query quantized by hand: kInt8's numbers within fp32 rounding.
      run(Q8Dequantized(q), hwyattn::Precision::kF32, outq, nullptr);
      std::vector<double> want(outq.begin(), outq.end());
      EXPECT_LT(RelErr(out8, want), kTol);
    }
  }
}

TEST(CppSdpa, Int8PrecisionOnFloatKeysIsF32) {
  // hwyattn.h: on a float K, INT8 is F32, bit for bit (out and lse), decode
  // and prefill, F32 and BF16 K.
  for (const int64_t Lq : {int64_t{1}, int64_t{9}}) {
    Qkv p(1, 4, 2, Lq, 23, 64, 16, 91 + static_cast<uint32_t>(Lq));
    std::vector<uint16_t> kbf(p.k.size());
    for (size_t i = 0; i < kbf.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &p.k[i], 4);
      kbf[i] = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
    for (const bool bf16 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "Lq " << Lq << (bf16 ? " BF16 K" : " F32 K"));
      const ConstTensorView k =
          bf16 ? ConstTensorView(kbf.data(), DType::kBF16, {1, 2, 23, 64}) : p.K();
      std::vector<float> out32(p.out.size(), kPattern), out8 = out32;
      std::vector<float> lse32(static_cast<size_t>(4 * Lq), kPattern), lse8 = lse32;
      hwyattn::sdpa(p.Q(), k, p.V(), TensorView(out32, {1, 4, Lq, 16}),
                    SdpaOptions()
                        .causal(Causal::kBottomRight)
                        .lse(TensorView(lse32, {1, 4, Lq}))
                        .precision(hwyattn::Precision::kF32));
      hwyattn::sdpa(p.Q(), k, p.V(), TensorView(out8, {1, 4, Lq, 16}),
                    SdpaOptions()
                        .causal(Causal::kBottomRight)
                        .lse(TensorView(lse8, {1, 4, Lq}))
                        .precision(hwyattn::Precision::kInt8));
      ASSERT_FALSE(AllEqual(out32, kPattern));
      EXPECT_EQ(std::memcmp(out8.data(), out32.data(), out8.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(lse8.data(), lse32.data(), lse8.size() * sizeof(float)), 0);
    }
  }
}

// An I4 cache (pages of (D + 1) / 2 bytes a row, an odd D padding each row)
// with K scales per token (k_channel empty) or per channel [1, Hkv, 1, D], V
// scales per token: the numbers the write leaves, and attention against the
// oracle over an I8 cache holding the same numbers and scales.
void Int4Case(int64_t D, int64_t Dv, const std::vector<float>& k_channel, uint32_t seed) {
  const KvStep st(4, 2, D, Dv, {9, 6, 1, 7}, {3, 1, 1, 7}, seed);
  const int64_t P = 11, S = 4, H = st.Hkv;
  const Paging pg(st.kv_len, S, P, seed);
  std::vector<uint8_t> kpool(static_cast<size_t>(hwyattn::dense_bytes(DType::kI4, {P, H, S, D})));
  std::vector<uint8_t> vpool(static_cast<size_t>(hwyattn::dense_bytes(DType::kI4, {P, H, S, Dv})));
  const int64_t krow = (D + 1) / 2, vrow = (Dv + 1) / 2;
  ASSERT_EQ(kpool.size(), static_cast<size_t>(P * H * S * krow));
  EXPECT_EQ(hwyattn::dense_strides(DType::kI4, {P, H, S, D}),
            (std::vector<int64_t>{H * S * 2 * krow, S * 2 * krow, 2 * krow, 1}));
  std::vector<float> ks(static_cast<size_t>(P * H * S), kPattern), vs = ks;
  const bool per_channel = !k_channel.empty();
  const KvCache cache = KvCache(TensorView(kpool, DType::kI4, {P, H, S, D}),
                                TensorView(vpool, DType::kI4, {P, H, S, Dv}))
                            .scales(per_channel ? ConstTensorView(k_channel, {1, H, 1, D})
                                                : ConstTensorView(TensorView(ks, {P, H, S, 1})),
                                    TensorView(vs, {P, H, S, 1}))
                            .block_table(pg.table, pg.stride);
  st.Write(cache, [&](size_t s, int64_t t) { return pg.Slot(s, t); });
  // The numbers, as an I8 pool [P, H, S, D] for the oracle.
  const auto unpack = [](const std::vector<uint8_t>& pool, int64_t rows, int64_t dim,
                         int64_t row_bytes) {
    std::vector<int8_t> x(static_cast<size_t>(rows * dim));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < dim; ++c) {
        const uint8_t b = pool[static_cast<size_t>(r * row_bytes + c / 2)];
        const int n = c % 2 == 0 ? (b & 15) : (b >> 4);
        x[static_cast<size_t>(r * dim + c)] = static_cast<int8_t>(n >= 8 ? n - 16 : n);
      }
    }
    return x;
  };
  std::vector<int8_t> k8 = unpack(kpool, P * H * S, D, krow);
  std::vector<int8_t> v8 = unpack(vpool, P * H * S, Dv, vrow);
  for (size_t s = 0; s < st.kv_len.size(); ++s) {
    for (int64_t t = 0; t < st.kv_len[s]; ++t) {
      const int64_t page = pg.Slot(s, t) / S, off = pg.Slot(s, t) % S;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = (page * H + h) * S + off;
        const float* x = &st.k[s][static_cast<size_t>((t * H + h) * D)];
        const float* y = &st.v[s][static_cast<size_t>((t * H + h) * Dv)];
        float amax = 0.0f;
        for (int64_t c = 0; c < Dv; ++c) amax = std::max(amax, std::fabs(y[c]));
        EXPECT_EQ(vs[static_cast<size_t>(row)], amax / 7.0f) << s << " " << t << " " << h;
        if (!per_channel) {
          amax = 0.0f;
          for (int64_t c = 0; c < D; ++c) amax = std::max(amax, std::fabs(x[c]));
          EXPECT_EQ(ks[static_cast<size_t>(row)], amax / 7.0f) << s << " " << t << " " << h;
        }
        for (int64_t c = 0; c < D; ++c) {
          const float scale = per_channel ? k_channel[static_cast<size_t>(h * D + c)]
                                          : ks[static_cast<size_t>(row)];
          const float want = std::max(-8.0f, std::min(7.0f, std::nearbyint(x[c] / scale)));
          ASSERT_EQ(k8[static_cast<size_t>(row * D + c)], want)
              << "seq " << s << " token " << t << " head " << h << " k[" << c << "]";
        }
        if (D % 2 == 1) {
          EXPECT_EQ(kpool[static_cast<size_t>(row * krow + krow - 1)] >> 4, 0) << "padding";
        }
      }
    }
  }
  std::vector<float> out(static_cast<size_t>(st.T * st.Hq * Dv), kPattern);
  hwyattn::kv_attention(st.Q(), cache, KvBatch(st.q_start, st.kv_len),
                        TensorView(out, {st.T, st.Hq, Dv}),
                        SdpaOptions().scale(0.4f).causal(Causal::kBottomRight));
  hwyattn_kv_cache c = CCache(k8.data(), v8.data(), HWYATTN_I8, {P, H, S, D}, {P, H, S, Dv});
  const hwyattn_tensor cks =
      per_channel ? CDense(k_channel.data(), {1, H, 1, D}) : CDense(ks.data(), {P, H, S, 1});
  const hwyattn_tensor cvs = CDense(vs.data(), {P, H, S, 1});
  c.k_scale = &cks;
  c.v_scale = &cvs;
  c.block_table = pg.table.data();
  c.block_table_stride = pg.stride;
  hwyattn_sdpa_options o = COptions();
  o.scale = 0.4f;
  o.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  const hwyattn_tensor cq = st.CQ();
  const hwyattn_kv_batch cb = st.CBatch();
  EXPECT_LT(RelErr(out, KvReference(cq, c, cb, o).out), kTol);
}

TEST(CppKv, Int4PerTokenScales) { Int4Case(16, 12, {}, 707); }

TEST(CppKv, Int4PerChannelKPerTokenVOddDims) {
  // KIVI's layout; D = 17, Dv = 9: each row's last high nibble is padding.
  std::vector<float> channel(2 * 17);
  for (size_t i = 0; i < channel.size(); ++i) channel[i] = 0.15f + 0.01f * static_cast<float>(i);
  Int4Case(17, 9, channel, 808);
}

TEST(CppKv, PackedByteSizes) {
  EXPECT_EQ(hwyattn::dense_bytes(DType::kQ8_0, {2, 2, 4, 64}), 16 * 68);
  EXPECT_EQ(hwyattn::dense_bytes(DType::kIQ4_NL, {3, 32}), 3 * 18);
  EXPECT_EQ(hwyattn::dense_bytes(DType::kI4, {2, 2, 4, 17}), 16 * 9);
  EXPECT_EQ(hwyattn::dense_bytes(DType::kBF16, {5, 3}), 30);
  EXPECT_EQ(hwyattn::dense_bytes(DType::kQ4_1, {2, 40}), -1);
  EXPECT_EQ(hwyattn::dense_strides(DType::kQ8_0, {2, 2, 4, 64}),
            (std::vector<int64_t>{512, 256, 64, 1}));
  EXPECT_TRUE(hwyattn::dense_strides(DType::kQ8_0, {2, 0, 4, 64}).empty());

  // A byte vector one block short of the shape: the view says so.
  std::vector<uint8_t> shorter(16 * 68 - 34);
  try {
    const TensorView t(shorter, DType::kQ8_0, {2, 2, 4, 64});
    FAIL() << "no exception: " << t.rank();
  } catch (const hwyattn::Error& e) {
    EXPECT_EQ(e.status(), HWYATTN_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(),
                 "data: the vector holds 1054 bytes but the shape needs 1088 (34 bytes per 32 "
                 "elements)");
  }
  std::vector<uint8_t> i4(16 * 9 + 1);
  EXPECT_THROW(ConstTensorView(i4, DType::kI4, {2, 2, 4, 17}), hwyattn::Error);
  i4.pop_back();
  EXPECT_EQ(ConstTensorView(i4, DType::kI4, {2, 2, 4, 17}).stride(2), 18);
  try {
    const ConstTensorView t(shorter, DType::kQ8_0, {2, 2, 4, 40});
    FAIL() << "no exception: " << t.rank();
  } catch (const hwyattn::Error& e) {
    EXPECT_STREQ(e.what(),
                 "shape: the last size is 40; a block format stores whole blocks of 32 elements");
  }
  // A raw pointer view the binding cannot size: the library refuses D = 48.
  std::vector<uint8_t> pool(4096);
  const KvCache cache(TensorView(pool.data(), DType::kQ8_0, {2, 2, 4, 48}),
                      TensorView(pool.data() + 2048, DType::kQ8_0, {2, 2, 4, 48}));
  const std::vector<float> kn(2 * 48, 0.5f);
  const hwyattn::Result<void> r =
      hwyattn::try_kv_cache_write(cache, ConstTensorView(kn, {1, 2, 48}),
                                  ConstTensorView(kn, {1, 2, 48}), std::vector<int64_t>{0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status(), HWYATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(r.error().what()).find("32"), std::string::npos) << r.error().what();
  EXPECT_TRUE(std::all_of(pool.begin(), pool.end(), [](uint8_t b) { return b == 0; }));
}

}  // namespace
