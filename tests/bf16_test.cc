// SPDX-License-Identifier: Apache-2.0
//
// precision = HWYATTN_PRECISION_BF16 (hwyattn.h): Q K^T and P V take their
// operands rounded to bf16 (nearest even; BF16 inputs as they are, F32 and
// F16 inputs rounded, P rounded after the exp) and accumulate in fp32. Run
// once per SIMD target by ctest (HWYATTN_TARGET): every target gives the
// same rounding rule.
//
// What is checked, against the double oracle (tests/reference.h) on
// operands rounded here by an implementation of our own (RoundBf16: double
// arithmetic, no bit tricks):
// - lse and weights depend on Q K^T only: fp32-small against the oracle on
//   the rounded q and k (an unrounded q or k would miss by ~1e-3);
// - out: P's rounding moves each weight by at most 2^-9 of itself, so out is
//   within 2^-9 max|v| (plus fp32 noise) of the oracle on the rounded q, k, v;
// - ExactProbabilities: scores chosen so that the rounded P is known in
//   advance (the running max is the first key): out is fp32-small against
//   the hand-computed sum of bf16(P_j) bf16(v_j) / sum P_j, which fails if
//   any of q, k, v or P is not rounded;
// - results do not depend on the thread count (bits).
// The error against the unrounded oracle (bf16's own, ~1e-3) is reported.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"

namespace {

// x rounded to the nearest bf16 (8 significant bits), ties to even; finite
// values only. Every step is exact in double.
float RoundBf16(float x) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  int e;
  std::frexp(static_cast<double>(x), &e);  // x = f 2^e, 0.5 <= |f| < 1
  const double ulp = std::ldexp(1.0, e - 8);
  return static_cast<float>(std::nearbyint(static_cast<double>(x) / ulp) * ulp);
}

uint16_t Bf16Bits(float x) {  // x is a bf16 value
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>(u >> 16);
}

// The value of binary16 bits (normal numbers, zero), in double.
float F16Value(uint16_t bits) {
  const int exp = (bits >> 10) & 0x1F, mant = bits & 0x3FF;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return static_cast<float>((bits & 0x8000) ? -mag : mag);
}

// A dense [d0, d1, d2, d3] tensor stored as `dtype` (F32, F16 or BF16),
// with its values as floats (exactly what the library reads) and those
// values rounded to bf16.
struct Input {
  hwyattn_dtype dtype;
  std::vector<float> values, rounded;
  std::vector<uint16_t> bits;  // F16 / BF16 storage
  hwyattn_tensor desc, rounded_desc;

  Input(hwyattn_dtype t, const int64_t shape[4], std::mt19937* rng, float amp) : dtype(t) {
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    std::uniform_real_distribution<float> dist(-amp, amp);
    for (int64_t i = 0; i < n; ++i) {
      float x = dist(*rng);
      if (t == HWYATTN_BF16) {
        x = RoundBf16(x);
        bits.push_back(Bf16Bits(x));
      } else if (t == HWYATTN_F16) {
        // A random binary16 value near x: exponent of x, random mantissa.
        int e;
        std::frexp(x, &e);
        const int biased = std::max(1, std::min(30, e - 1 + 15));
        const uint16_t b =
            static_cast<uint16_t>((x < 0 ? 0x8000 : 0) | (biased << 10) | ((*rng)() & 0x3FF));
        bits.push_back(b);
        x = F16Value(b);
      }
      values.push_back(x);
      rounded.push_back(RoundBf16(x));
    }
    void* data = t == HWYATTN_F32 ? static_cast<void*>(values.data()) : bits.data();
    hwyattn_tensor_contiguous(&desc, data, t, 4, shape);
    hwyattn_tensor_contiguous(&rounded_desc, rounded.data(), HWYATTN_F32, 4, shape);
  }
};

double MaxAbs(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// The double oracle on the bf16-rounded operands (what the library must match
// to fp32-small error) and on the unrounded ones (bf16's own error, reported),
// and max|v| of the rounded values (P's rounding bounds out by 2^-9 of it).
void References(const Input& q, const Input& k, const Input& v, const hwyattn_sdpa_options& opts,
                hwyattn_test::RefResult* rounded, hwyattn_test::RefResult* plain, double* v_max) {
  std::string error;
  ASSERT_TRUE(hwyattn_test::ReferenceSdpa(q.rounded_desc, k.rounded_desc, v.rounded_desc, &opts,
                                          rounded, &error))
      << error;
  ASSERT_TRUE(hwyattn_test::ReferenceSdpa(q.desc, k.desc, v.desc, &opts, plain, &error)) << error;
  *v_max = 0.0;
  for (float x : v.rounded) *v_max = std::max(*v_max, static_cast<double>(std::fabs(x)));
}

// hwyattn_sdpa under bf16 products on 1, 2 and 3 threads: the same bits
// each time; returns the 1-thread output.
std::vector<float> SameBitsOverThreads(const Input& q, const Input& k, const Input& v,
                                       const int64_t (&os)[4], hwyattn_causal causal) {
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    std::vector<float> out(static_cast<size_t>(os[0] * os[1] * os[2] * os[3]), NAN);
    hwyattn_tensor tout;
    hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, os);
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = causal;
    opts.precision = HWYATTN_PRECISION_BF16;
    EXPECT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    EXPECT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout, &opts), HWYATTN_OK);
    outs.push_back(out);
  }
  EXPECT_EQ(hwyattn_set_num_threads(0), HWYATTN_OK);
  EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * sizeof(float)));
  return outs[0];
}

struct Case {
  const char* name;
  int64_t batch, q_heads, kv_heads, q_len, k_len, dim, value_dim;
  hwyattn_causal causal;
  hwyattn_dtype dtype;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Bf16Sdpa : public ::testing::TestWithParam<Case> {};

// The shapes of every kernel the default precision would pick (small,
// decode, prefill), causal and not, GQA, F32 / F16 / BF16 inputs.
const Case kCases[] = {
    {"Tiny", 1, 2, 2, 3, 3, 2, 2, HWYATTN_CAUSAL_NONE, HWYATTN_F32},
    {"Decode", 2, 8, 2, 1, 700, 64, 64, HWYATTN_CAUSAL_NONE, HWYATTN_F32},
    {"Prefill", 2, 4, 2, 77, 150, 64, 48, HWYATTN_CAUSAL_NONE, HWYATTN_F32},
    {"PrefillCausal", 1, 4, 1, 130, 130, 40, 40, HWYATTN_CAUSAL_TOP_LEFT, HWYATTN_F32},
    {"PrefillF16", 1, 2, 2, 70, 90, 32, 32, HWYATTN_CAUSAL_BOTTOM_RIGHT, HWYATTN_F16},
    {"PrefillBf16", 2, 2, 1, 100, 200, 64, 64, HWYATTN_CAUSAL_NONE, HWYATTN_BF16},
};

TEST_P(Bf16Sdpa, AgainstRoundedOperands) {
  const Case& c = GetParam();
  std::mt19937 rng(7);
  const int64_t qs[4] = {c.batch, c.q_heads, c.q_len, c.dim};
  const int64_t ks[4] = {c.batch, c.kv_heads, c.k_len, c.dim};
  const int64_t vs[4] = {c.batch, c.kv_heads, c.k_len, c.value_dim};
  const int64_t os[4] = {c.batch, c.q_heads, c.q_len, c.value_dim};
  const int64_t ws[4] = {c.batch, c.q_heads, c.q_len, c.k_len};
  const int64_t ls[3] = {c.batch, c.q_heads, c.q_len};
  // Scores of a few units: the softmax is neither flat nor one-hot.
  Input q(c.dtype, qs, &rng, 2.0f), k(c.dtype, ks, &rng, 2.0f), v(c.dtype, vs, &rng, 1.0f);
  std::vector<float> out(static_cast<size_t>(os[0] * os[1] * os[2] * os[3]), NAN);
  std::vector<float> weights(static_cast<size_t>(ws[0] * ws[1] * ws[2] * ws[3]), NAN);
  std::vector<float> lse(static_cast<size_t>(ls[0] * ls[1] * ls[2]), NAN);
  hwyattn_tensor tout, tw, tl;
  hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, os);
  hwyattn_tensor_contiguous(&tw, weights.data(), HWYATTN_F32, 4, ws);
  hwyattn_tensor_contiguous(&tl, lse.data(), HWYATTN_F32, 3, ls);
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = c.causal;
  opts.precision = HWYATTN_PRECISION_BF16;
  opts.lse = &tl;
  ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout, &opts), HWYATTN_OK)
      << hwyattn_last_error();
  // Once more with the weights: the same out (weights never change it).
  std::vector<float> out_w(out.size(), NAN);
  hwyattn_tensor tout_w;
  hwyattn_tensor_contiguous(&tout_w, out_w.data(), HWYATTN_F32, 4, os);
  opts.weights = &tw;
  ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout_w, &opts), HWYATTN_OK)
      << hwyattn_last_error();
  if (c.q_len * c.q_heads / c.kv_heads > 8) {
    EXPECT_EQ(0, std::memcmp(out.data(), out_w.data(), out.size() * sizeof(float)));
  }  // else out is the decode kernel's, out_w the prefill kernel's (weights)

  hwyattn_sdpa_options ref_opts;
  hwyattn_sdpa_options_init(&ref_opts);
  ref_opts.causal = c.causal;
  hwyattn_test::RefResult rounded_ref, plain_ref;
  double v_max;
  ASSERT_NO_FATAL_FAILURE(References(q, k, v, ref_opts, &rounded_ref, &plain_ref, &v_max));

  const double out_max = MaxAbs(rounded_ref.out);
  double err = 0.0, plain_err = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, std::fabs(out[i] - rounded_ref.out[i]));
    plain_err = std::max(plain_err, std::fabs(out[i] - plain_ref.out[i]));
  }
  // P's rounding: each weight within 2^-9 of itself, so |d out| <= 2^-9 |v|max.
  const double bound = std::ldexp(v_max, -9) * 1.01 + 2e-5 * out_max;
  EXPECT_LE(err, bound) << "out against the oracle on bf16-rounded q, k, v";
  double w_err = 0.0, l_err = 0.0, l_plain = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    w_err = std::max(w_err, std::fabs(weights[i] - rounded_ref.weights[i]));
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    const double scale = 1.0 + std::fabs(rounded_ref.lse[i]);
    l_err = std::max(l_err, std::fabs(lse[i] - rounded_ref.lse[i]) / scale);
    l_plain = std::max(l_plain, std::fabs(lse[i] - plain_ref.lse[i]) / scale);
  }
  EXPECT_LE(w_err, 1e-5) << "weights against the oracle on bf16-rounded q, k";
  EXPECT_LE(l_err, 2e-6) << "lse against the oracle on bf16-rounded q, k";
  if (c.dtype != HWYATTN_BF16) {
    // The rounding of q and k shows in the scores (so the checks above see it).
    EXPECT_GT(l_plain, 20 * l_err + 1e-7) << "lse does not look rounded";
  } else {
    EXPECT_EQ(err, plain_err);  // bf16 inputs are rounded already
  }
  std::printf(
      "[%s] max|out - ref(rounded)| / max|ref| = %.3g (bound %.3g); against the "
      "unrounded oracle %.3g; lse rel %.3g / unrounded %.3g\n",
      c.name, err / out_max, bound / out_max, plain_err / MaxAbs(plain_ref.out), l_err, l_plain);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Sdpa, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Scores in log2 units of -j/4 (scale = ln 2, q = 1, k_j = -j/4), with
// perturbations of q and k that bf16 rounding removes: P_j = 2^(-j/4), whose
// rounding is known (none of 2^(-1/4), 2^(-1/2), 2^(-3/4) is near a bf16
// tie), and key 0 is every row's max, so the running max never moves and
// the kernel rounds the final P. Expected, in double:
//   out = sum_j bf16(P_j) bf16(v_j) / sum_j P_j   (the sums keep fp32 P).
// Each of q, k, v or P left unrounded misses by 1e-4 to 1e-2.
void ExactProbabilities(hwyattn_causal causal, int64_t k_len, int threads) {
  const int64_t B = 2, Hq = 2, Hkv = 1, Lq = 20, Dv = 24;
  std::vector<float> q(static_cast<size_t>(B * Hq * Lq), 1.0f + 0x1p-10f);
  std::vector<float> k(static_cast<size_t>(B * Hkv * k_len)),
      v(static_cast<size_t>(B * k_len * Dv));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < k_len; ++j) {
      const float exact = -0.25f * static_cast<float>(j);
      // A perturbation below half a bf16 ulp of exact.
      k[b * k_len + j] = exact * (1.0f + 0x1p-11f);
    }
  }
  for (float& x : v) x = dist(rng);
  const int64_t qs[4] = {B, Hq, Lq, 1}, ks[4] = {B, Hkv, k_len, 1}, vs[4] = {B, Hkv, k_len, Dv};
  const int64_t os[4] = {B, Hq, Lq, Dv}, ls[3] = {B, Hq, Lq};
  std::vector<float> out(static_cast<size_t>(B * Hq * Lq * Dv), NAN);
  std::vector<float> lse(static_cast<size_t>(B * Hq * Lq), NAN);
  hwyattn_tensor tq, tk, tv, tout, tl;
  hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 4, qs);
  hwyattn_tensor_contiguous(&tk, k.data(), HWYATTN_F32, 4, ks);
  hwyattn_tensor_contiguous(&tv, v.data(), HWYATTN_F32, 4, vs);
  hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, os);
  hwyattn_tensor_contiguous(&tl, lse.data(), HWYATTN_F32, 3, ls);
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.scale = static_cast<float>(std::log(2.0));
  opts.causal = causal;
  opts.precision = HWYATTN_PRECISION_BF16;
  opts.lse = &tl;
  ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
  ASSERT_EQ(hwyattn_sdpa(&tq, &tk, &tv, &tout, &opts), HWYATTN_OK) << hwyattn_last_error();
  ASSERT_EQ(hwyattn_set_num_threads(0), HWYATTN_OK);
  double worst = 0.0, lse_worst = 0.0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t i = 0; i < Lq; ++i) {
        const int64_t last = causal == HWYATTN_CAUSAL_NONE ? k_len - 1
                             : causal == HWYATTN_CAUSAL_TOP_LEFT
                                 ? std::min(i, k_len - 1)
                                 : std::min(i + k_len - Lq, k_len - 1);
        double l = 0.0;
        std::vector<double> num(static_cast<size_t>(Dv), 0.0);
        for (int64_t j = 0; j <= last; ++j) {
          const double p = std::exp2(-0.25 * static_cast<double>(j));
          l += p;
          const double pr = RoundBf16(static_cast<float>(p));
          for (int64_t d = 0; d < Dv; ++d) {
            num[d] += pr * RoundBf16(v[(b * k_len + j) * Dv + d]);
          }
        }
        for (int64_t d = 0; d < Dv; ++d) {
          const double got = out[((b * Hq + h) * Lq + i) * Dv + d];
          worst = std::max(worst, std::fabs(got - num[d] / l));
        }
        lse_worst = std::max(lse_worst, std::fabs(lse[(b * Hq + h) * Lq + i] - std::log(l)));
      }
    }
  }
  EXPECT_LE(worst, 3e-6) << "causal " << causal << ", Lk " << k_len << ", threads " << threads;
  EXPECT_LE(lse_worst, 3e-6);
}

TEST(Bf16Exact, Bidirectional) { ExactProbabilities(HWYATTN_CAUSAL_NONE, 150, 1); }
TEST(Bf16Exact, TopLeft) { ExactProbabilities(HWYATTN_CAUSAL_TOP_LEFT, 150, 2); }
TEST(Bf16Exact, BottomRight) { ExactProbabilities(HWYATTN_CAUSAL_BOTTOM_RIGHT, 61, 2); }
TEST(Bf16Exact, ShortKeys) { ExactProbabilities(HWYATTN_CAUSAL_NONE, 7, 1); }

// The same bits for 1, 2 and 3 threads (the determinism rule holds for bf16
// products too), and precision = F32 untouched by the option's existence.
TEST(Bf16Threads, BitIdentical) {
  std::mt19937 rng(11);
  const int64_t qs[4] = {1, 8, 200, 64}, ks[4] = {1, 4, 300, 64}, os[4] = {1, 8, 200, 64};
  Input q(HWYATTN_F32, qs, &rng, 1.0f), k(HWYATTN_F32, ks, &rng, 1.0f),
      v(HWYATTN_F32, ks, &rng, 1.0f);
  SameBitsOverThreads(q, k, v, os, HWYATTN_CAUSAL_TOP_LEFT);
}

}  // namespace

namespace {

// NaN confinement under bf16 products: with a causal mask (and a window) a
// NaN in v at key `nan_key` reaches only the rows that see it; every other
// row is bit-identical to a run with a finite value there (the zero-skipping
// path takes the tiles' order of operations). The cases put the key in the
// first key tile, past the first 128-key tile (the bf16 kernel's step), and
// under a window whose rows' tiles start between the non-finite flags'
// tile edges (a tile then spans two flags).
struct NonFiniteCase {
  int64_t len, nan_key, window_left;
};

class Bf16NonFinite : public ::testing::TestWithParam<NonFiniteCase> {};

TEST_P(Bf16NonFinite, ConfinedToRowsThatSeeIt) {
  const NonFiniteCase c = GetParam();
  std::mt19937 rng(5);
  const int64_t qs[4] = {1, 2, c.len, 32}, ks[4] = {1, 1, c.len, 32}, os[4] = {1, 2, c.len, 32};
  Input q(HWYATTN_F32, qs, &rng, 1.0f), k(HWYATTN_F32, ks, &rng, 1.0f),
      v(HWYATTN_F32, ks, &rng, 1.0f);
  std::vector<float> outs[2];
  for (int run = 0; run < 2; ++run) {
    v.values[c.nan_key * 32 + 5] = run == 0 ? NAN : 0.5f;
    outs[run].assign(static_cast<size_t>(os[0] * os[1] * os[2] * os[3]), -7.0f);
    hwyattn_tensor tout;
    hwyattn_tensor_contiguous(&tout, outs[run].data(), HWYATTN_F32, 4, os);
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
    opts.window_left = c.window_left;
    opts.precision = HWYATTN_PRECISION_BF16;
    ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout, &opts), HWYATTN_OK);
  }
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < c.len; ++i) {
      const float* row0 = outs[0].data() + (h * c.len + i) * 32;
      const float* row1 = outs[1].data() + (h * c.len + i) * 32;
      // Row i sees key j when j <= i and (with a window) i - j < window_left.
      const bool sees = c.nan_key <= i && (c.window_left == 0 || i - c.nan_key < c.window_left);
      if (!sees) {
        EXPECT_EQ(0, std::memcmp(row0, row1, 32 * sizeof(float))) << "head " << h << " row " << i;
      } else {
        EXPECT_TRUE(std::isnan(row0[5])) << "head " << h << " row " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bf16, Bf16NonFinite,
                         ::testing::Values(NonFiniteCase{100, 70, 0}, NonFiniteCase{300, 200, 0},
                                           NonFiniteCase{300, 130, 100},
                                           NonFiniteCase{400, 250, 170}),
                         [](const ::testing::TestParamInfo<NonFiniteCase>& info) {
                           return "Len" + std::to_string(info.param.len) + "Nan" +
                                  std::to_string(info.param.nan_key) + "Window" +
                                  std::to_string(info.param.window_left);
                         });

}  // namespace

namespace {

// Decode shapes (a few query rows per kv head: the decode kernel, keys in
// lanes, 512-key chunks) under bf16 products, against the oracle on the
// rounded operands with the bounds of AgainstRoundedOperands: GQA groups 1,
// 4 and 8, head dims 64, 128, 80 and 17, kv_len 0, 1, odd and several
// chunks (per batch, kv_len), F32 / F16 / BF16 inputs, the modifiers and a
// mask. The prefill kernel on the same problem (forced by a weights output)
// agrees within the same bound.
struct DecodeCase {
  const char* name;
  int64_t q_heads, kv_heads, q_len, k_len, dim, value_dim;
  hwyattn_dtype dtype;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  int64_t window_left = 0;
  float softcap = 0.0f;
  bool alibi = false, sinks = false, mask = false;
};

void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

DecodeCase Modified(DecodeCase c, int which) {
  if (which & 1) c.softcap = 0.8f;
  if (which & 2) c.alibi = true;
  if (which & 4) c.sinks = true;
  if (which & 8) c.mask = true;
  return c;
}

const DecodeCase kDecodeCases[] = {
    {"G1D64One", 2, 2, 1, 1, 64, 64, HWYATTN_F32},
    {"G4D128", 8, 2, 1, 1100, 128, 128, HWYATTN_F32},
    {"G8D80F16", 8, 1, 1, 513, 80, 80, HWYATTN_F16},
    {"G4D17Rows2Bf16", 4, 1, 2, 37, 17, 17, HWYATTN_BF16, HWYATTN_CAUSAL_BOTTOM_RIGHT, 20},
    {"G1Rows3D64Dv40", 2, 2, 3, 45, 64, 40, HWYATTN_F32, HWYATTN_CAUSAL_BOTTOM_RIGHT},
    Modified({"G8D128Bf16Modifiers", 8, 1, 1, 1500, 128, 128, HWYATTN_BF16}, 15),
    Modified({"G2Rows4D80F16Modifiers", 4, 2, 4, 701, 80, 48, HWYATTN_F16,
              HWYATTN_CAUSAL_BOTTOM_RIGHT, 600},
             7),
    Modified({"G4D64F32Mask", 4, 1, 2, 1029, 64, 64, HWYATTN_F32}, 8),
};

class Bf16Decode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(Bf16Decode, AgainstRoundedOperands) {
  const DecodeCase& c = GetParam();
  const int64_t B = 3;
  std::mt19937 rng(17);
  const int64_t qs[4] = {B, c.q_heads, c.q_len, c.dim};
  const int64_t ks[4] = {B, c.kv_heads, c.k_len, c.dim};
  const int64_t vs[4] = {B, c.kv_heads, c.k_len, c.value_dim};
  const int64_t os[4] = {B, c.q_heads, c.q_len, c.value_dim};
  const int64_t ws[4] = {B, c.q_heads, c.q_len, c.k_len};
  const int64_t ls[3] = {B, c.q_heads, c.q_len};
  Input q(c.dtype, qs, &rng, 2.0f), k(c.dtype, ks, &rng, 2.0f), v(c.dtype, vs, &rng, 1.0f);
  // Batch 1 sees no key (lse -inf or the sink), batch 2 an odd part of them.
  const int32_t kv_len[B] = {static_cast<int32_t>(c.k_len), 0,
                             static_cast<int32_t>(c.k_len / 2) | 1};
  std::vector<float> alibi, sinks;
  std::vector<uint8_t> mask;
  hwyattn_tensor tmask;
  for (int64_t h = 0; h < c.q_heads; ++h) {
    alibi.push_back(0.03f / static_cast<float>(h + 1));
    sinks.push_back(0.25f * static_cast<float>(h) - 0.5f);
  }
  if (c.mask) {  // [B, 1, Lq, Lk], about one key in five blocked
    const int64_t ms[4] = {B, 1, c.q_len, c.k_len};
    for (int64_t i = 0; i < B * c.q_len * c.k_len; ++i) mask.push_back(rng() % 5 != 0);
    hwyattn_tensor_contiguous(&tmask, mask.data(), HWYATTN_BOOL, 4, ms);
  }
  auto options = [&](hwyattn_sdpa_options* o) {
    hwyattn_sdpa_options_init(o);
    o->causal = c.causal;
    o->kv_len = kv_len;
    o->window_left = c.window_left;
    o->softcap = c.softcap;
    if (c.alibi) o->alibi_slopes = alibi.data();
    if (c.sinks) o->sinks = sinks.data();
    if (c.mask) o->mask = &tmask;
  };
  std::vector<float> out(static_cast<size_t>(os[0] * os[1] * os[2] * os[3]), NAN);
  std::vector<float> out_w(out.size(), NAN);
  std::vector<float> weights(static_cast<size_t>(ws[0] * ws[1] * ws[2] * ws[3]), NAN);
  std::vector<float> lse(static_cast<size_t>(ls[0] * ls[1] * ls[2]), NAN);
  hwyattn_tensor tout, tout_w, tw, tl;
  hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, os);
  hwyattn_tensor_contiguous(&tout_w, out_w.data(), HWYATTN_F32, 4, os);
  hwyattn_tensor_contiguous(&tw, weights.data(), HWYATTN_F32, 4, ws);
  hwyattn_tensor_contiguous(&tl, lse.data(), HWYATTN_F32, 3, ls);
  hwyattn_sdpa_options opts;
  options(&opts);
  opts.precision = HWYATTN_PRECISION_BF16;
  opts.lse = &tl;
  ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout, &opts), HWYATTN_OK)
      << hwyattn_last_error();
  opts.lse = nullptr;
  opts.weights = &tw;  // the prefill kernel
  ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout_w, &opts), HWYATTN_OK)
      << hwyattn_last_error();

  hwyattn_sdpa_options ref_opts;
  options(&ref_opts);
  hwyattn_test::RefResult ref, plain;
  double v_max;
  ASSERT_NO_FATAL_FAILURE(References(q, k, v, ref_opts, &ref, &plain, &v_max));
  const double out_max = MaxAbs(ref.out);
  const double bound = std::ldexp(v_max, -9) * 1.01 + 2e-5 * out_max;
  double err = 0.0, prefill_err = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - ref.out[i]));
    prefill_err = std::max(prefill_err, static_cast<double>(std::fabs(out[i] - out_w[i])));
  }
  EXPECT_LE(err, bound) << "out against the oracle on bf16-rounded q, k, v";
  EXPECT_LE(prefill_err, 2 * bound) << "decode against the prefill kernel";
  double l_err = 0.0, l_plain = 0.0;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_EQ(lse[i], ref.lse[i]) << "lse " << i;
      continue;
    }
    const double scale = 1.0 + std::fabs(ref.lse[i]);
    l_err = std::max(l_err, std::fabs(lse[i] - ref.lse[i]) / scale);
    l_plain = std::max(l_plain, std::fabs(lse[i] - plain.lse[i]) / scale);
  }
  EXPECT_LE(l_err, 2e-6) << "lse against the oracle on bf16-rounded q, k";
  if (c.dtype != HWYATTN_BF16) {
    EXPECT_GT(l_plain, 20 * l_err + 1e-7) << "lse does not look rounded";
  }
  std::printf(
      "[%s] max|out - ref(rounded)| / max|ref| = %.3g (bound %.3g), vs prefill %.3g; "
      "lse rel %.3g / unrounded %.3g\n",
      c.name, err / out_max, bound / out_max, prefill_err / out_max, l_err, l_plain);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Decode, ::testing::ValuesIn(kDecodeCases),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           return std::string(info.param.name);
                         });

// The decode kernel's bits do not depend on the thread count (three chunks
// of keys per kv head, GQA 4), and a batch's rows do not depend on the
// batch's other entries (each batch entry alone gives the same bits).
TEST(Bf16Decode, BitIdenticalThreadsAndBatch) {
  for (hwyattn_dtype dtype : {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16}) {
    std::mt19937 rng(23);
    const int64_t B = 3, Hq = 8, Hkv = 2, Lk = 1300, D = 80;
    const int64_t qs[4] = {B, Hq, 1, D}, ks[4] = {B, Hkv, Lk, D}, os[4] = {B, Hq, 1, D};
    Input q(dtype, qs, &rng, 1.0f), k(dtype, ks, &rng, 1.0f), v(dtype, ks, &rng, 1.0f);
    const std::vector<float> out0 = SameBitsOverThreads(q, k, v, os, HWYATTN_CAUSAL_NONE);
    // Batch entry 2 alone: views of its q, k, v.
    const size_t es = dtype == HWYATTN_F32 ? 4 : 2;
    hwyattn_tensor q1 = q.desc, k1 = k.desc, v1 = v.desc, o1;
    q1.shape[0] = k1.shape[0] = v1.shape[0] = 1;
    q1.data = static_cast<char*>(q1.data) + 2 * Hq * D * es;
    k1.data = static_cast<char*>(k1.data) + 2 * Hkv * Lk * D * es;
    v1.data = static_cast<char*>(v1.data) + 2 * Hkv * Lk * D * es;
    std::vector<float> alone(static_cast<size_t>(Hq * D), NAN);
    const int64_t o1s[4] = {1, Hq, 1, D};
    hwyattn_tensor_contiguous(&o1, alone.data(), HWYATTN_F32, 4, o1s);
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.precision = HWYATTN_PRECISION_BF16;
    ASSERT_EQ(hwyattn_sdpa(&q1, &k1, &v1, &o1, &opts), HWYATTN_OK) << hwyattn_last_error();
    EXPECT_EQ(0, std::memcmp(alone.data(), out0.data() + 2 * Hq * D, alone.size() * 4))
        << "dtype " << dtype;
  }
}

// NaN and infinities in V under masks, decode-shaped (8 rows per kv head:
// 4 positions x GQA 2, bottom-right causal over 600 keys, the second chunk
// holding the value): rows that do not see key 598 are bit-identical to a
// run with a finite value there; rows that see it get NaN (or +-inf).
TEST(Bf16Decode, NonFiniteConfinedToRowsThatSeeIt) {
  for (hwyattn_dtype dtype : {HWYATTN_F32, HWYATTN_BF16}) {
    for (float bad : {NAN, INFINITY}) {
      std::mt19937 rng(29);
      const int64_t Hq = 4, Hkv = 2, Lq = 4, Lk = 600, D = 48;
      const int64_t qs[4] = {1, Hq, Lq, D}, ks[4] = {1, Hkv, Lk, D}, os[4] = {1, Hq, Lq, D};
      Input q(dtype, qs, &rng, 1.0f), k(dtype, ks, &rng, 1.0f), v(dtype, ks, &rng, 1.0f);
      const size_t at = static_cast<size_t>((1 * Lk + 598) * D + 5);  // kv head 1
      std::vector<float> outs[2];
      for (int run = 0; run < 2; ++run) {
        const float x = run == 0 ? bad : 0.5f;
        v.values[at] = x;
        if (dtype == HWYATTN_BF16) v.bits[at] = Bf16Bits(x);
        outs[run].assign(static_cast<size_t>(Hq * Lq * D), -7.0f);
        hwyattn_tensor tout;
        hwyattn_tensor_contiguous(&tout, outs[run].data(), HWYATTN_F32, 4, os);
        hwyattn_sdpa_options opts;
        hwyattn_sdpa_options_init(&opts);
        opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
        opts.precision = HWYATTN_PRECISION_BF16;
        ASSERT_EQ(hwyattn_sdpa(&q.desc, &k.desc, &v.desc, &tout, &opts), HWYATTN_OK);
      }
      for (int64_t h = 0; h < Hq; ++h) {
        for (int64_t i = 0; i < Lq; ++i) {
          const float* row0 = outs[0].data() + (h * Lq + i) * D;
          const float* row1 = outs[1].data() + (h * Lq + i) * D;
          if (h / 2 == 0 || i < 2) {  // kv head 0, or position 596 + i < 598
            EXPECT_EQ(0, std::memcmp(row0, row1, D * sizeof(float)))
                << "head " << h << " row " << i;
          } else {
            EXPECT_FALSE(std::isfinite(row0[5])) << "head " << h << " row " << i;
            for (int64_t d = 0; d < D; ++d) {
              if (d != 5) {
                EXPECT_EQ(row0[d], row1[d]) << "head " << h << " row " << i;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
