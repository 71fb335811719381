// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_sdpa over K and V in ggml's block formats (HWYATTN_Q8_0 ...
// HWYATTN_IQ4_NL), against the double oracle reading the same blocks by the
// header's formulas (tests/reference.cc BlockElement): random blocks (random
// fp16 scales and offsets, random numbers), in ggml's own layout (k as
// [Lk, Hkv, D] rows of blocks, the heads interleaved) and padded ones, K and V
// of different formats or one a float tensor, prefill and decode rows, GQA,
// causal, key lengths and modifiers. Then the validation of the block rules
// (hwyattn_sdpa's and caches').
// Run once per SIMD target by ctest (HWYATTN_TARGET).

#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"

namespace hwyattn_test {
namespace {

constexpr hwyattn_dtype kBlockFormats[] = {HWYATTN_Q8_0, HWYATTN_Q4_0, HWYATTN_Q4_1,
                                           HWYATTN_Q5_0, HWYATTN_Q5_1, HWYATTN_IQ4_NL};

// A [B, H, L, dim] tensor of random blocks (or floats), stored with its
// rows `row_gap` elements apart (a multiple of 32: padding between rows)
// and, with `interleave`, as ggml stores a cache: [B, L, H, dim], the heads
// of one position next to each other.
struct Operand {
  hwyattn_dtype dtype;
  std::vector<unsigned char> bytes;
  hwyattn_tensor t{};

  Operand(hwyattn_dtype d, int64_t B, int64_t H, int64_t L, int64_t dim, int64_t row_gap,
          bool interleave, std::mt19937* rng)
      : dtype(d) {
    const int64_t row = dim + row_gap;
    const int64_t elements = B * H * L * row;
    bytes.resize(StorageBytes(dtype, elements));
    std::uniform_int_distribution<int> byte(0, 255);
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(byte(*rng));
    const size_t block = BlockBytes(dtype);
    if (block != 0) {
      // Scales (and offsets) of a useful size: |d| in [2^-7, 2^-4], m in
      // [-0.5, 0.5]; the numbers stay the random bytes.
      std::uniform_real_distribution<float> mag(0.0078125f, 0.0625f), off(-0.5f, 0.5f);
      std::bernoulli_distribution neg(0.5);
      for (size_t at = 0; at + block <= bytes.size(); at += block) {
        const uint16_t d = FloatToF16(neg(*rng) ? -mag(*rng) : mag(*rng));
        std::memcpy(&bytes[at], &d, 2);
        if (dtype == HWYATTN_Q4_1 || dtype == HWYATTN_Q5_1) {
          const uint16_t m = FloatToF16(off(*rng));
          std::memcpy(&bytes[at + 2], &m, 2);
        }
      }
    } else {
      std::uniform_real_distribution<float> x(-1.0f, 1.0f);
      for (int64_t e = 0; e < elements; ++e) {
        const float v = x(*rng);
        if (dtype == HWYATTN_F32) {
          std::memcpy(&bytes[static_cast<size_t>(e) * 4], &v, 4);
        } else {
          const uint16_t h = dtype == HWYATTN_F16 ? FloatToF16(v) : FloatToBf16(v);
          std::memcpy(&bytes[static_cast<size_t>(e) * 2], &h, 2);
        }
      }
    }
    t.data = bytes.data();
    t.dtype = dtype;
    t.rank = 4;
    const int64_t shape[4] = {B, H, L, dim};
    std::copy(shape, shape + 4, t.shape);
    const int64_t st[4] = {H * L * row, interleave ? row : L * row, interleave ? H * row : row, 1};
    std::copy(st, st + 4, t.stride);
  }
};

struct BlockCase {
  std::string name;
  hwyattn_dtype k, v;
  int64_t B = 1, Hq = 4, Hkv = 2, Lq = 1, Lk = 300, D = 64, Dv = 64;
  int64_t row_gap = 0;
  bool interleave = true;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  bool kv_len = false, modifiers = false;
  bool bf16 = false;  // precision = HWYATTN_PRECISION_BF16
};

// t's elements as a dense F32 [B, H, L, dim] tensor in `storage`, each
// rounded to bf16 (the operands bf16 products multiply: the header's rule).
hwyattn_tensor Bf16Operands(const hwyattn_tensor& t, std::vector<float>* storage) {
  int64_t shape[4], unused[4];
  LogicalDims(t, shape, unused);
  storage->clear();
  int64_t idx[4];
  for (idx[0] = 0; idx[0] < shape[0]; ++idx[0])
    for (idx[1] = 0; idx[1] < shape[1]; ++idx[1])
      for (idx[2] = 0; idx[2] < shape[2]; ++idx[2])
        for (idx[3] = 0; idx[3] < shape[3]; ++idx[3]) {
          const float x = static_cast<float>(ReadElement(t, idx));
          storage->push_back(static_cast<float>(Bf16ToDouble(FloatToBf16(x))));
        }
  hwyattn_tensor dense;
  hwyattn_tensor_contiguous(&dense, storage->data(), HWYATTN_F32, 4, shape);
  return dense;
}

void PrintTo(const BlockCase& c, std::ostream* os) { *os << c.name; }

void RunAndCheck(const BlockCase& c) {
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(c.name)));
  Operand q(HWYATTN_F32, c.B, c.Hq, c.Lq, c.D, 0, false, &rng);
  Operand k(c.k, c.B, c.Hkv, c.Lk, c.D, c.row_gap, c.interleave, &rng);
  Operand v(c.v, c.B, c.Hkv, c.Lk, c.Dv, c.row_gap, c.interleave, &rng);
  std::vector<float> out(static_cast<size_t>(c.B * c.Hq * c.Lq * c.Dv),
                         std::numeric_limits<float>::quiet_NaN());
  std::vector<float> lse(static_cast<size_t>(c.B * c.Hq * c.Lq));
  hwyattn_tensor tout, tlse;
  const int64_t oshape[4] = {c.B, c.Hq, c.Lq, c.Dv}, lshape[3] = {c.B, c.Hq, c.Lq};
  ASSERT_EQ(hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, oshape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tlse, lse.data(), HWYATTN_F32, 3, lshape), HWYATTN_OK);
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = c.causal;
  opts.lse = &tlse;
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < c.B; ++b) lens.push_back(static_cast<int32_t>(c.Lk - 37 * b));
  if (c.kv_len) opts.kv_len = lens.data();
  std::vector<float> sinks;
  if (c.modifiers) {
    opts.window_left = 40;
    opts.softcap = 5.0f;
    for (int64_t h = 0; h < c.Hq; ++h) sinks.push_back(0.25f * static_cast<float>(h));
    opts.sinks = sinks.data();
  }
  if (c.bf16) opts.precision = HWYATTN_PRECISION_BF16;
  ASSERT_EQ(hwyattn_sdpa(&q.t, &k.t, &v.t, &tout, &opts), HWYATTN_OK) << hwyattn_last_error();
  RefResult ref;
  std::string error;
  // bf16 products: the oracle on the dequantized values rounded to bf16.
  std::vector<float> qr, kr, vr;
  const hwyattn_tensor tq = c.bf16 ? Bf16Operands(q.t, &qr) : q.t;
  const hwyattn_tensor tk = c.bf16 ? Bf16Operands(k.t, &kr) : k.t;
  const hwyattn_tensor tv = c.bf16 ? Bf16Operands(v.t, &vr) : v.t;
  ASSERT_TRUE(ReferenceSdpa(tq, tk, tv, &opts, &ref, &error)) << error;
  double max_want = 0.0, max_err = 0.0, max_v = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    max_want = std::max(max_want, std::fabs(ref.out[i]));
    ASSERT_FALSE(std::isnan(out[i])) << "out[" << i << "]";
    max_err = std::max(max_err, std::fabs(out[i] - ref.out[i]));
  }
  for (float x : vr) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  // fp32 products and sums over a few hundred keys: 1e-5 of the largest
  // output, as the other suites; bf16 products also round P (the header's
  // bound: 2^-9 max|v|).
  EXPECT_LE(max_err, 1e-5 * max_want + std::ldexp(max_v, -9)) << "max |out| " << max_want;
  for (size_t r = 0; r < lse.size(); ++r) {
    EXPECT_NEAR(lse[r], ref.lse[r], 1e-5 * std::max(1.0, std::fabs(ref.lse[r]))) << "row " << r;
  }
}

std::vector<BlockCase> Cases() {
  std::vector<BlockCase> c;
  for (hwyattn_dtype d : kBlockFormats) {
    const std::string n = DtypeName(d);
    BlockCase decode{n + "Decode", d, d};
    decode.Lq = 2;  // 2 positions x GQA group of 2: decode rows
    c.push_back(decode);
    BlockCase prefill{n + "PrefillCausal", d, d};
    prefill.Lq = 70;
    prefill.Lk = 70;
    prefill.causal = HWYATTN_CAUSAL_TOP_LEFT;
    prefill.D = 96;
    prefill.Dv = 32;
    c.push_back(prefill);
  }
  BlockCase mixed{"Q8_0KQ4_0VPaddedRows", HWYATTN_Q8_0, HWYATTN_Q4_0};
  mixed.row_gap = 32;
  mixed.interleave = false;
  mixed.B = 2;
  mixed.kv_len = true;
  mixed.Lq = 17;
  c.push_back(mixed);
  BlockCase f16v{"Q5_1KF16VModifiers", HWYATTN_Q5_1, HWYATTN_F16};
  f16v.modifiers = true;
  f16v.Lq = 33;
  f16v.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  c.push_back(f16v);
  BlockCase f32k{"F32KIQ4_NLVMqa", HWYATTN_F32, HWYATTN_IQ4_NL};
  f32k.Hq = 8;
  f32k.Hkv = 1;
  f32k.Lk = 1000;
  c.push_back(f32k);
  BlockCase big{"Q4_1LongDecodeD128", HWYATTN_Q4_1, HWYATTN_Q8_0};
  big.Hq = 8;
  big.Hkv = 2;
  big.Lk = 4100;
  big.D = big.Dv = 128;
  c.push_back(big);
  // bf16 products over blocks: decode (staged rows rounded) and prefill
  // (packed panels rounded), K and V of different formats.
  BlockCase bf16_decode{"Bf16ProductsQ8_0KQ5_0VDecode", HWYATTN_Q8_0, HWYATTN_Q5_0};
  bf16_decode.bf16 = true;
  bf16_decode.Lq = 2;
  c.push_back(bf16_decode);
  BlockCase bf16_prefill{"Bf16ProductsIQ4_NLKBF16VPrefill", HWYATTN_IQ4_NL, HWYATTN_BF16};
  bf16_prefill.bf16 = true;
  bf16_prefill.Lq = 70;
  bf16_prefill.causal = HWYATTN_CAUSAL_TOP_LEFT;
  c.push_back(bf16_prefill);
  return c;
}

class BlockFormatTest : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockFormatTest, MatchesReference) { RunAndCheck(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Blocks, BlockFormatTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<BlockCase>& info) {
                           return info.param.name;
                         });

// The header's rules for block formats, each broken once: the status, the
// message's words, and nothing written.
TEST(BlockFormatValidation, ShapesStridesAndPlaces) {
  std::mt19937 rng(5);
  Operand q(HWYATTN_F32, 1, 2, 3, 64, 0, false, &rng);
  Operand k(HWYATTN_Q8_0, 1, 2, 40, 64, 0, false, &rng);
  Operand v(HWYATTN_Q4_0, 1, 2, 40, 64, 0, false, &rng);
  std::vector<float> out(2 * 3 * 64, 7.0f);
  hwyattn_tensor tout;
  const int64_t oshape[4] = {1, 2, 3, 64};
  ASSERT_EQ(hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 4, oshape), HWYATTN_OK);
  const auto expect_invalid = [&](const hwyattn_tensor& tq, const hwyattn_tensor& tk,
                                  const hwyattn_tensor& tv, const hwyattn_tensor& to,
                                  const char* words) {
    hwyattn_tensor o = to;
    EXPECT_EQ(hwyattn_sdpa(&tq, &tk, &tv, &o, nullptr), HWYATTN_INVALID_ARGUMENT) << words;
    EXPECT_NE(std::string(hwyattn_last_error()).find(words), std::string::npos)
        << hwyattn_last_error();
    for (float x : out) ASSERT_EQ(x, 7.0f);
  };
  ASSERT_EQ(hwyattn_sdpa(&q.t, &k.t, &v.t, &tout, nullptr), HWYATTN_OK) << hwyattn_last_error();
  std::fill(out.begin(), out.end(), 7.0f);
  {  // D not a multiple of 32
    hwyattn_tensor tk = k.t, tq = q.t;
    tk.shape[3] = tq.shape[3] = 48;
    expect_invalid(tq, tk, v.t, tout, "k: head_dim (shape[3]) is 48; dtype Q8_0 stores blocks");
  }
  {  // a head-dim stride other than 1
    hwyattn_tensor tv = v.t;
    tv.shape[3] = 32;
    tv.stride[3] = 2;
    hwyattn_tensor to = tout;
    to.shape[3] = 32;
    expect_invalid(q.t, k.t, tv, to, "v: value_dim (shape[3]) has stride 2");
  }
  {  // a row stride that splits a block
    hwyattn_tensor tk = k.t;
    tk.stride[2] = 80;
    expect_invalid(q.t, tk, v.t, tout, "k: length (shape[2]) has stride 80, which splits a block");
  }
  {  // a block format where only caches go
    hwyattn_tensor tq = q.t;
    tq.dtype = HWYATTN_Q8_0;
    expect_invalid(tq, k.t, v.t, tout, "q: dtype Q8_0 is a K/V cache format");
    hwyattn_tensor to = tout;
    to.dtype = HWYATTN_IQ4_NL;
    expect_invalid(q.t, k.t, v.t, to, "out: dtype IQ4_NL is a K/V cache format");
  }
}

// The cache's rules for block formats: no scale tensors, no I8 / FP8
// partner, pages of whole blocks; nothing written on a refused write.
TEST(BlockFormatValidation, Caches) {
  const int64_t P = 3, Hkv = 2, S = 4, D = 64;
  std::vector<unsigned char> kpool(StorageBytes(HWYATTN_Q8_0, P * Hkv * S * D), 0x11);
  std::vector<unsigned char> vpool(StorageBytes(HWYATTN_Q4_1, P * Hkv * S * D), 0x22);
  std::vector<float> kscale(static_cast<size_t>(P * Hkv * S), 1.0f);
  std::vector<float> knew(static_cast<size_t>(2 * Hkv * D), 0.5f);
  const int64_t pool_shape[4] = {P, Hkv, S, D}, scale_shape[4] = {P, Hkv, S, 1};
  const int64_t new_shape[3] = {2, Hkv, D};
  hwyattn_kv_cache cache;
  hwyattn_kv_cache_init(&cache);
  ASSERT_EQ(hwyattn_tensor_contiguous(&cache.k, kpool.data(), HWYATTN_Q8_0, 4, pool_shape),
            HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&cache.v, vpool.data(), HWYATTN_Q4_1, 4, pool_shape),
            HWYATTN_OK);
  hwyattn_tensor tks, tn;
  ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kscale.data(), HWYATTN_F32, 4, scale_shape),
            HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tn, knew.data(), HWYATTN_F32, 3, new_shape), HWYATTN_OK);
  const int64_t slots[2] = {0, 5};
  const std::vector<unsigned char> k0 = kpool, v0 = vpool;
  const auto expect_refused = [&](const hwyattn_kv_cache& c, const char* words) {
    EXPECT_EQ(hwyattn_kv_cache_write(&c, &tn, &tn, slots, nullptr), HWYATTN_INVALID_ARGUMENT)
        << words;
    EXPECT_NE(std::string(hwyattn_last_error()).find(words), std::string::npos)
        << hwyattn_last_error();
    EXPECT_TRUE(kpool == k0 && vpool == v0) << "a refused write changed the pool";
  };
  {
    hwyattn_kv_cache c = cache;
    c.k_scale = c.v_scale = &tks;
    expect_refused(c, "cache: k_scale is given but the cache is Q8_0, a block format");
  }
  {
    hwyattn_kv_cache c = cache;
    c.v.dtype = HWYATTN_I8;
    expect_refused(c, "cache: v has dtype I8 but k has Q8_0");
  }
  {
    hwyattn_kv_cache c = cache;
    c.k.stride[2] = 48;  // slots 48 elements apart: every other slot splits a block
    expect_refused(c, "cache: k: page_size (shape[2]) has stride 48, which splits a block");
  }
  // The same cache as it is: written (Q8_0 K and Q4_1 V of one slot each).
  ASSERT_EQ(hwyattn_kv_cache_write(&cache, &tn, &tn, slots, nullptr), HWYATTN_OK)
      << hwyattn_last_error();
  EXPECT_TRUE(kpool != k0 && vpool != v0);
}

}  // namespace
}  // namespace hwyattn_test
