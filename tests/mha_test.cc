// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mha_* through the C ABI against a double-precision reference: the
// projections are computed in double here, the attention by the sdpa oracle
// (tests/reference.cc) on those projections rounded to float (a relative
// change of ~6e-8, far below the 1e-5 tolerance), the output projection in
// double again. Also: one handle used from several threads at once gives the
// same bytes as sequential use. bf16 cases: weight_dtype BF16 (the reference
// uses the weights rounded to bf16; fp32 products: the same 1e-5), and
// precision BF16 (the reference also rounds x, the projections q, k, v and
// the attention's output to bf16, as the library's operands; what it does
// not model is the rounding of P, at most 2^-9 of max|v| in each attention
// output, and projections rounding the other way at ties: a looser bound,
// still below bf16's own error against the unrounded layer).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"

namespace {

struct MhaCase {
  const char* name;
  int64_t batch, q_len, kv_len, embed, heads, head_dim, kv_heads, kdim, vdim;
  bool bias, self;
  hwyattn_causal causal;
  bool bool_mask;          // a [Lq, Lk] BOOL attn_mask
  bool key_lengths;        // kv_len per batch (key_padding_mask)
  bool weights;            // per-head weights output
  bool modifiers = false;  // a sliding window, softcap, ALiBi and sinks
  hwyattn_dtype weight_dtype = HWYATTN_F32;
  bool bf16_products = false;  // opts.precision = BF16
};

// x rounded to the nearest bfloat16, ties to even (finite x).
double Bf16(double x) {
  const float f = static_cast<float>(x);
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  memcpy(&r, &u, sizeof(r));
  return r;
}

template <typename T>
std::vector<T> RoundedBf16(std::vector<T> v) {
  for (T& x : v) x = static_cast<T>(Bf16(x));
  return v;
}

// y[m][n] = sum_k x[m][k] w[n][k] + b[n] (nn.Linear), in double.
std::vector<double> Linear(const std::vector<double>& x, int64_t rows, int64_t in,
                           const std::vector<float>& w, int64_t out, const float* b) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < out; ++n) {
      double acc = b != nullptr ? b[n] : 0.0;
      for (int64_t k = 0; k < in; ++k) acc += x[m * in + k] * static_cast<double>(w[n * in + k]);
      y[m * out + n] = acc;
    }
  }
  return y;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> Random(size_t n, std::mt19937* rng, float scale = 0.5f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

hwyattn_tensor Dense(float* data, std::vector<int64_t> shape) {
  hwyattn_tensor t;
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, static_cast<int32_t>(shape.size()),
                                      shape.data()),
            HWYATTN_OK);
  return t;
}

// A layer with random weights and inputs for one case, plus the options.
struct Layer {
  MhaCase c;
  int64_t hd, hkv, kdim, vdim, lk;
  std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo, xq, xk, xv;
  std::vector<uint8_t> mask;
  std::vector<int32_t> lengths;
  std::vector<float> slopes, sinks;  // [heads], with c.modifiers
  hwyattn_mha* m = nullptr;
  double p_rounding_bound = 0.0;  // set by Reference under bf16 products

  explicit Layer(const MhaCase& mc) : c(mc) {
    hd = c.head_dim ? c.head_dim : c.embed / c.heads;
    hkv = c.kv_heads ? c.kv_heads : c.heads;
    kdim = c.self || !c.kdim ? c.embed : c.kdim;
    vdim = c.self || !c.vdim ? c.embed : c.vdim;
    lk = c.self ? c.q_len : c.kv_len;
    std::mt19937 rng(1234);
    wq = Random(c.heads * hd * c.embed, &rng);
    wk = Random(hkv * hd * kdim, &rng);
    wv = Random(hkv * hd * vdim, &rng);
    wo = Random(c.embed * c.heads * hd, &rng);
    bq = Random(c.heads * hd, &rng);
    bk = Random(hkv * hd, &rng);
    bv = Random(hkv * hd, &rng);
    bo = Random(c.embed, &rng);
    xq = Random(c.batch * c.q_len * c.embed, &rng, 1.0f);
    xk = c.self ? xq : Random(c.batch * lk * kdim, &rng, 1.0f);
    xv = c.self ? xq : Random(c.batch * lk * vdim, &rng, 1.0f);
    if (c.bool_mask) {
      mask.resize(static_cast<size_t>(c.q_len * lk));
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + i / 3) % 5 != 0;
      mask[0] = 0;  // with the mask below, row 0 keeps other keys
    }
    if (c.key_lengths) {
      for (int64_t b = 0; b < c.batch; ++b)
        lengths.push_back(static_cast<int32_t>((lk * (b + 1) + 1) / (c.batch + 1) + 1));
    }
    if (c.modifiers) {
      for (int64_t h = 0; h < c.heads; ++h) {
        slopes.push_back(0.25f / static_cast<float>(h + 1));
        sinks.push_back(0.5f * static_cast<float>(h) - 1.0f);
      }
    }
    hwyattn_mha_config cfg;
    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = c.embed;
    cfg.num_heads = c.heads;
    cfg.head_dim = c.head_dim;
    cfg.num_kv_heads = c.kv_heads;
    cfg.kdim = c.self ? 0 : c.kdim;
    cfg.vdim = c.self ? 0 : c.vdim;
    cfg.has_bias = c.bias;
    cfg.weight_dtype = c.weight_dtype;
    hwyattn_mha_weights w = {wq.data(),
                             wk.data(),
                             wv.data(),
                             wo.data(),
                             c.bias ? bq.data() : nullptr,
                             c.bias ? bk.data() : nullptr,
                             c.bias ? bv.data() : nullptr,
                             c.bias ? bo.data() : nullptr};
    EXPECT_EQ(hwyattn_mha_create(&cfg, &w, &m), HWYATTN_OK) << hwyattn_last_error();
  }
  ~Layer() { hwyattn_mha_destroy(m); }

  // Runs the layer into out (and weights if requested).
  hwyattn_status Forward(std::vector<float>* out, std::vector<float>* weights) {
    out->assign(static_cast<size_t>(c.batch * c.q_len * c.embed), NAN);
    hwyattn_tensor tq = Dense(xq.data(), {c.batch, c.q_len, c.embed});
    hwyattn_tensor tk = Dense(xk.data(), {c.batch, lk, kdim});
    hwyattn_tensor tv = Dense(xv.data(), {c.batch, lk, vdim});
    hwyattn_tensor to = Dense(out->data(), {c.batch, c.q_len, c.embed});
    hwyattn_sdpa_options opts;
    Options(&opts);
    hwyattn_tensor tw, tmask;
    if (c.weights) {
      weights->assign(static_cast<size_t>(c.batch * c.heads * c.q_len * lk), NAN);
      tw = Dense(weights->data(), {c.batch, c.heads, c.q_len, lk});
      opts.weights = &tw;
    }
    if (c.bool_mask) {
      const int64_t shape[2] = {c.q_len, lk};
      hwyattn_tensor_contiguous(&tmask, mask.data(), HWYATTN_BOOL, 2, shape);
      opts.mask = &tmask;
    }
    return hwyattn_mha_forward(m, &tq, c.self ? nullptr : &tk, c.self ? nullptr : &tv, &to, &opts);
  }

  void Options(hwyattn_sdpa_options* opts) {
    hwyattn_sdpa_options_init(opts);
    opts->causal = c.causal;
    opts->precision = c.bf16_products ? HWYATTN_PRECISION_BF16 : HWYATTN_PRECISION_F32;
    if (c.key_lengths) opts->kv_len = lengths.data();
    if (c.modifiers) {  // slopes and sinks: filled once, at construction
      opts->window_left = 7;
      opts->softcap = 2.0f;
      opts->alibi_slopes = slopes.data();
      opts->sinks = sinks.data();
    }
  }

  // The reference output [B, Lq, E] and weights [B, H, Lq, Lk].
  void Reference(std::vector<double>* out, std::vector<double>* weights) {
    const int64_t qw = c.heads * hd, kw = hkv * hd;
    // What the products see: bf16 weights, and bf16 activations under bf16
    // products.
    const bool round_w = c.weight_dtype == HWYATTN_BF16 || c.bf16_products;
    const std::vector<float> wq_r = round_w ? RoundedBf16(wq) : wq;
    const std::vector<float> wk_r = round_w ? RoundedBf16(wk) : wk;
    const std::vector<float> wv_r = round_w ? RoundedBf16(wv) : wv;
    const std::vector<float> wo_r = round_w ? RoundedBf16(wo) : wo;
    auto act = [&](const std::vector<float>& x) {
      return c.bf16_products ? ToDouble(RoundedBf16(x)) : ToDouble(x);
    };
    const std::vector<double> q =
        Linear(act(xq), c.batch * c.q_len, c.embed, wq_r, qw, c.bias ? bq.data() : nullptr);
    const std::vector<double> k =
        Linear(act(xk), c.batch * lk, kdim, wk_r, kw, c.bias ? bk.data() : nullptr);
    const std::vector<double> v =
        Linear(act(xv), c.batch * lk, vdim, wv_r, kw, c.bias ? bv.data() : nullptr);
    std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
    if (c.bf16_products) {
      qf = RoundedBf16(qf);
      kf = RoundedBf16(kf);
      vf = RoundedBf16(vf);
    }
    // [B, L, H, hd] memory as the logical [B, H, L, hd].
    auto heads_view = [&](float* data, int64_t heads, int64_t len) {
      hwyattn_tensor t;
      memset(&t, 0, sizeof(t));
      t.data = data;
      t.dtype = HWYATTN_F32;
      t.rank = 4;
      const int64_t shape[4] = {c.batch, heads, len, hd};
      const int64_t stride[4] = {len * heads * hd, hd, heads * hd, 1};
      memcpy(t.shape, shape, sizeof(shape));
      memcpy(t.stride, stride, sizeof(stride));
      return t;
    };
    const hwyattn_tensor tq = heads_view(qf.data(), c.heads, c.q_len);
    const hwyattn_tensor tk = heads_view(kf.data(), hkv, lk);
    const hwyattn_tensor tv = heads_view(vf.data(), hkv, lk);
    hwyattn_sdpa_options opts;
    Options(&opts);
    hwyattn_tensor tmask;
    if (c.bool_mask) {
      const int64_t shape[2] = {c.q_len, lk};
      hwyattn_tensor_contiguous(&tmask, mask.data(), HWYATTN_BOOL, 2, shape);
      opts.mask = &tmask;
    }
    hwyattn_test::RefResult r;
    std::string error;
    ASSERT_TRUE(hwyattn_test::ReferenceSdpa(tq, tk, tv, &opts, &r, &error)) << error;
    std::vector<double> attended(static_cast<size_t>(c.batch * c.q_len * qw));
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t h = 0; h < c.heads; ++h) {
        for (int64_t i = 0; i < c.q_len; ++i) {
          for (int64_t d = 0; d < hd; ++d) {
            attended[(b * c.q_len + i) * qw + h * hd + d] = r.out[r.RowIndex(b, h, i) * hd + d];
          }
        }
      }
    }
    if (c.bf16_products) {
      for (double& x : attended) x = Bf16(static_cast<float>(x));
      // P rounded to bf16 moves each attention output by at most 2^-9
      // max|v|; the output projection sums them with |wo|'s row weights.
      double max_v = 0.0, max_row = 0.0;
      // std::max, not fmax: GCC 12's aarch64 vectorizer fails (an internal
      // compiler error) on an fmax reduction into a double.
      for (float x : vf) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
      for (int64_t e = 0; e < c.embed; ++e) {
        double row = 0.0;
        for (int64_t i = 0; i < qw; ++i) row += fabs(wo_r[static_cast<size_t>(e * qw + i)]);
        max_row = fmax(max_row, row);
      }
      p_rounding_bound = ldexp(max_v, -9) * max_row;
    }
    *out = Linear(attended, c.batch * c.q_len, qw, wo_r, c.embed, c.bias ? bo.data() : nullptr);
    *weights = r.weights;
  }
};

// max |got - want| / max |want| must stay below `tolerance`.
template <typename T>
void ExpectClose(const std::vector<T>& got, const std::vector<double>& want, const char* what,
                 double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0.0, scale = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = fmax(scale, fabs(want[i]));
    const double err = fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LT(worst / fmax(scale, 1e-30), tolerance)
      << what << ": worst at " << at << ": got " << got[at] << " want " << want[at];
}

// Under bf16 products, against the reference on the bf16 operands (see the
// top of the file): the bound of P's rounding relative to max|want|, and
// 2e-4 for projections that round the other way at near-ties.
double Bf16Tolerance(const Layer& layer, const std::vector<double>& want) {
  double scale = 0.0;
  for (double x : want) scale = fmax(scale, fabs(x));
  return layer.p_rounding_bound / fmax(scale, 1e-30) + 2e-4;
}

class MhaTest : public testing::TestWithParam<MhaCase> {};

TEST_P(MhaTest, MatchesReference) {
  Layer layer(GetParam());
  ASSERT_NE(layer.m, nullptr);
  std::vector<float> out, weights;
  ASSERT_EQ(layer.Forward(&out, &weights), HWYATTN_OK) << hwyattn_last_error();
  std::vector<double> want_out, want_weights;
  layer.Reference(&want_out, &want_weights);
  const double tolerance = GetParam().bf16_products ? Bf16Tolerance(layer, want_out) : 1e-5;
  ExpectClose(out, want_out, "out", tolerance);
  // The weights: softmax of scores from the bf16 q and k, fp32 otherwise.
  if (GetParam().weights) {
    ExpectClose(weights, want_weights, "weights", GetParam().bf16_products ? 2e-4 : 1e-5);
  }
}

// An F16 or BF16 out (strided: every other element of a wider buffer) holds
// the F32 out's values rounded to nearest even (the test's own rounding,
// reference.h), bit for bit; the elements between stay as they were.
TEST_P(MhaTest, HalfOutputsAreTheF32OutRounded) {
  Layer layer(GetParam());
  ASSERT_NE(layer.m, nullptr);
  std::vector<float> want, weights;
  ASSERT_EQ(layer.Forward(&want, &weights), HWYATTN_OK) << hwyattn_last_error();
  const MhaCase& c = GetParam();
  for (hwyattn_dtype dtype : {HWYATTN_F16, HWYATTN_BF16}) {
    std::vector<uint16_t> out(2 * want.size(), 0xABCD);
    hwyattn_tensor to = Dense(reinterpret_cast<float*>(out.data()), {c.batch, c.q_len, c.embed});
    to.dtype = dtype;
    for (int i = 0; i < to.rank; ++i) to.stride[i] *= 2;
    hwyattn_tensor tq = Dense(layer.xq.data(), {c.batch, c.q_len, c.embed});
    hwyattn_tensor tk = Dense(layer.xk.data(), {c.batch, layer.lk, layer.kdim});
    hwyattn_tensor tv = Dense(layer.xv.data(), {c.batch, layer.lk, layer.vdim});
    hwyattn_sdpa_options opts;
    layer.Options(&opts);
    hwyattn_tensor tmask;
    if (c.bool_mask) {
      const int64_t shape[2] = {c.q_len, layer.lk};
      hwyattn_tensor_contiguous(&tmask, layer.mask.data(), HWYATTN_BOOL, 2, shape);
      opts.mask = &tmask;
    }
    ASSERT_EQ(hwyattn_mha_forward(layer.m, &tq, c.self ? nullptr : &tk, c.self ? nullptr : &tv, &to,
                                  &opts),
              HWYATTN_OK)
        << hwyattn_last_error();
    for (size_t i = 0; i < want.size(); ++i) {
      const uint16_t rounded = dtype == HWYATTN_F16 ? hwyattn_test::FloatToF16(want[i])
                                                    : hwyattn_test::FloatToBf16(want[i]);
      ASSERT_EQ(out[2 * i], rounded) << (dtype == HWYATTN_F16 ? "F16" : "BF16") << " out " << i;
      ASSERT_EQ(out[2 * i + 1], 0xABCD) << "element between " << i;
    }
  }
}

// One handle, several threads at once, each its own output: every result is
// byte-identical to the sequential one (the handle is immutable and scratch
// is per calling thread).
TEST_P(MhaTest, SharedHandleAcrossThreads) {
  Layer layer(GetParam());
  ASSERT_NE(layer.m, nullptr);
  std::vector<float> want, want_weights;
  ASSERT_EQ(layer.Forward(&want, &want_weights), HWYATTN_OK) << hwyattn_last_error();
  constexpr int kThreads = 4, kCalls = 5;
  std::vector<std::vector<float>> outs(kThreads), weights(kThreads);
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        // Vectors compare element-wise: memcmp of an empty vector's null data
        // would be undefined. The outputs are finite, so == means same bits.
        if (layer.Forward(&outs[t], &weights[t]) != HWYATTN_OK || outs[t] != want ||
            weights[t] != want_weights) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// The same bits for any thread count (the projections' rows and the heads are
// split between workers, never a sum), and the 1-thread run matches the
// reference. Three threads on a 2-core machine oversubscribe on purpose.
TEST_P(MhaTest, SameBitsForAnyThreadCount) {
  Layer layer(GetParam());
  ASSERT_NE(layer.m, nullptr);
  const int saved = hwyattn_get_num_threads();
  std::vector<float> outs[3], weights[3];
  hwyattn_status status[3];
  for (int t = 0; t < 3; ++t) {
    hwyattn_set_num_threads(t + 1);
    status[t] = layer.Forward(&outs[t], &weights[t]);
  }
  hwyattn_set_num_threads(saved);
  for (int t = 0; t < 3; ++t) ASSERT_EQ(status[t], HWYATTN_OK) << t + 1 << " threads";
  std::vector<double> want_out, want_weights;
  layer.Reference(&want_out, &want_weights);
  ExpectClose(outs[0], want_out, "out, 1 thread",
              GetParam().bf16_products ? Bf16Tolerance(layer, want_out) : 1e-5);
  for (int t = 1; t < 3; ++t) {
    // The outputs are finite, so == means the same bits.
    EXPECT_TRUE(outs[t] == outs[0]) << t + 1 << " threads: out differs from 1 thread";
    EXPECT_TRUE(weights[t] == weights[0]) << t + 1 << " threads: weights differ from 1 thread";
  }
}

const MhaCase kCases[] = {
    // name, B, Lq, Lk, E, H, hd, Hkv, kdim, vdim, bias, self, causal, mask, kv_len, weights
    {"self_bias", 2, 7, 0, 16, 4, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_NONE, false, false, true},
    {"self_no_bias", 2, 33, 0, 32, 4, 0, 0, 0, 0, false, true, HWYATTN_CAUSAL_NONE, false, false,
     false},
    {"self_causal", 1, 50, 0, 24, 3, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT, false, false,
     true},
    {"self_key_padding", 3, 19, 0, 16, 2, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_NONE, false, true,
     true},
    {"self_bool_mask", 2, 9, 0, 16, 4, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_NONE, true, false,
     true},
    {"head_dim_not_embed_over_heads", 2, 11, 0, 20, 3, 7, 0, 0, 0, true, true, HWYATTN_CAUSAL_NONE,
     false, false, false},
    {"gqa", 2, 13, 0, 64, 8, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT, false, false, true},
    {"mqa_decode_rows", 2, 1, 0, 64, 8, 0, 1, 0, 0, false, true, HWYATTN_CAUSAL_NONE, false, false,
     false},
    {"cross_kdim_vdim", 2, 5, 70, 32, 4, 0, 0, 12, 20, true, false, HWYATTN_CAUSAL_NONE, false,
     true, true},
    {"cross_decode", 3, 2, 600, 32, 4, 8, 2, 24, 40, false, false, HWYATTN_CAUSAL_BOTTOM_RIGHT,
     false, true, false},
    {"cross_everything", 2, 17, 29, 48, 6, 10, 3, 20, 36, true, false, HWYATTN_CAUSAL_BOTTOM_RIGHT,
     true, true, true},
    {"larger", 1, 200, 0, 128, 4, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT, false, false,
     false},
    // Projections of 19-39 MFLOP and 576 attention rows: every stage runs on
    // several threads.
    {"threaded", 3, 192, 0, 128, 4, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_NONE, false, false,
     false},
    // Every score modifier, through the module (self-attention, GQA, causal,
    // weights; cross-attention with padding and a mask).
    {"modifiers_self", 2, 40, 0, 32, 4, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT, false,
     false, true, true},
    {"modifiers_cross", 2, 9, 60, 32, 4, 8, 2, 24, 40, false, false, HWYATTN_CAUSAL_BOTTOM_RIGHT,
     true, true, true, true},
    // weight_dtype BF16 with fp32 products; then bf16 products with BF16 and
    // F32 weights (odd widths reach the pairs' zero padding).
    {"bf16_weights", 2, 33, 0, 32, 4, 0, 0, 0, 0, true, true, HWYATTN_CAUSAL_NONE, false, false,
     true, false, HWYATTN_BF16},
    {"bf16_weights_cross", 2, 17, 29, 48, 6, 10, 3, 21, 35, true, false,
     HWYATTN_CAUSAL_BOTTOM_RIGHT, true, true, true, false, HWYATTN_BF16},
    {"bf16_products", 2, 33, 0, 64, 4, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT, false,
     false, true, false, HWYATTN_BF16, true},
    {"bf16_products_f32_weights", 2, 33, 0, 64, 4, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_TOP_LEFT,
     false, false, true, false, HWYATTN_F32, true},
    {"bf16_products_threaded", 3, 192, 0, 128, 4, 0, 2, 0, 0, true, true, HWYATTN_CAUSAL_NONE,
     false, false, false, false, HWYATTN_BF16, true},
    {"bf16_products_cross", 2, 17, 29, 48, 6, 10, 3, 21, 35, true, false,
     HWYATTN_CAUSAL_BOTTOM_RIGHT, true, true, true, false, HWYATTN_BF16, true},
};

INSTANTIATE_TEST_SUITE_P(Cases, MhaTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<MhaCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
