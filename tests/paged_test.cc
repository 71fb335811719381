// SPDX-License-Identifier: Apache-2.0
//
// Paged K/V (SdpaProblem::pages, the KV cache's block table) in the decode
// and prefill kernels, through the internal API: the same problem with K/V
// contiguous and scattered over pages in a shuffled order must give
//   - the same bits, when the decode kernel's runs keep whole key groups (pages
//     of a multiple of 16 keys) and always in the prefill kernel (which gathers
//     paged rows into the same packed panels it builds from contiguous ones);
//   - for other page sizes (1, 5, 7: key groups cut by page ends, scored one
//     key at a time), results within fp32 rounding of the contiguous ones.
// Both are also checked against a plain double-precision softmax written
// here. F32, F16 and BF16 caches, GQA, causal, lse, head dims with a tail.
// Runs once per SIMD target (HWYATTN_TARGET); links the static library for
// the internal API.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "src/attention.h"
#include "src/ops/decode_attention.h"
#include "src/ops/convert.h"
#include "src/sdpa_problem.h"

namespace hwyattn {
namespace {

struct PagedCase {
  const char* name;
  int64_t hq, hkv, lq, lk, d;
  hwyattn_dtype dtype;
  hwyattn_causal causal;
  int64_t page_size;
  bool bit_identical;  // expected to equal the contiguous result exactly
};

void PrintTo(const PagedCase& c, std::ostream* os) { *os << c.name; }

// x rounded to the dtype, as the float it then is, and its 16 bits.
uint16_t HalfBits(float x, hwyattn_dtype dtype, float* rounded) {
  if (dtype == HWYATTN_BF16) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    u &= 0xFFFF0000u;
    memcpy(rounded, &u, 4);
    return static_cast<uint16_t>(u >> 16);
  }
  // The library's own conversion: what is under test here is attention over
  // the stored bits, and the reference reads the same bits back.
  const F16 h = FloatToF16(x);
  *rounded = ToFloat(h);
  return h.bits;
}

// Values of one K or V tensor [Hkv, Lk, D] in the case's dtype: `values` as
// floats (rounded to the dtype) and `bytes` in the dtype's encoding.
struct Cache {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

Cache MakeCache(size_t n, hwyattn_dtype dtype, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Cache c;
  c.values.resize(n);
  c.bytes.resize(n * (dtype == HWYATTN_F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    const float x = u(*rng);
    if (dtype == HWYATTN_F32) {
      c.values[i] = x;
      memcpy(c.bytes.data() + 4 * i, &x, 4);
    } else {
      const uint16_t bits = HalfBits(x, dtype, &c.values[i]);
      memcpy(c.bytes.data() + 2 * i, &bits, 2);
    }
  }
  return c;
}

TensorView View(const void* data, hwyattn_dtype dtype, const int64_t shape[4]) {
  TensorView t;
  t.data = data;
  t.dtype = static_cast<Dtype>(dtype);
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.stride[i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return t;
}

class PagedTest : public ::testing::TestWithParam<PagedCase> {};

TEST_P(PagedTest, MatchesContiguous) {
  const PagedCase& c = GetParam();
  std::mt19937 rng(1234);
  const int64_t dv = c.d;
  const size_t elem = c.dtype == HWYATTN_F32 ? 4 : 2;
  std::vector<float> q(static_cast<size_t>(c.hq * c.lq * c.d));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : q) x = u(rng);
  const Cache k = MakeCache(static_cast<size_t>(c.hkv * c.lk * c.d), c.dtype, &rng);
  const Cache v = MakeCache(static_cast<size_t>(c.hkv * c.lk * dv), c.dtype, &rng);

  // The pages: [num_pages, Hkv, P, D], the sequence's pages in a shuffled
  // order with a spare page left unused at each end.
  const int64_t P = c.page_size, used = (c.lk + P - 1) / P, num_pages = used + 2;
  std::vector<int32_t> table(static_cast<size_t>(used));
  std::vector<int32_t> ids(static_cast<size_t>(used));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  for (int64_t i = 0; i < used; ++i) table[static_cast<size_t>(i)] = ids[static_cast<size_t>(i)];
  const size_t page_elems = static_cast<size_t>(c.hkv * P * c.d);
  std::vector<uint8_t> k_pages(static_cast<size_t>(num_pages) * page_elems * elem, 0xFF);
  std::vector<uint8_t> v_pages(static_cast<size_t>(num_pages) * page_elems * elem, 0xFF);
  for (int64_t h = 0; h < c.hkv; ++h) {
    for (int64_t j = 0; j < c.lk; ++j) {
      const size_t page = static_cast<size_t>(table[static_cast<size_t>(j / P)]);
      const size_t dst = ((page * c.hkv + h) * P + j % P) * c.d * elem;
      const size_t src = static_cast<size_t>((h * c.lk + j) * c.d) * elem;
      memcpy(k_pages.data() + dst, k.bytes.data() + src, c.d * elem);
      memcpy(v_pages.data() + dst, v.bytes.data() + src, dv * elem);
    }
  }

  const int64_t q_shape[4] = {1, c.hq, c.lq, c.d}, o_shape[4] = {1, c.hq, c.lq, dv};
  const int64_t kv_shape[4] = {1, c.hkv, c.lk, c.d}, page_shape[4] = {num_pages, c.hkv, P, c.d};
  const int64_t lse_shape[4] = {1, 1, c.hq, c.lq};
  std::vector<float> out_flat(static_cast<size_t>(c.hq * c.lq * dv), -7.0f), out_paged = out_flat;
  std::vector<float> lse_flat(static_cast<size_t>(c.hq * c.lq), -7.0f), lse_paged = lse_flat;

  SdpaProblem p;
  p.q = View(q.data(), HWYATTN_F32, q_shape);
  p.batch = 1;
  p.q_heads = c.hq;
  p.kv_heads = c.hkv;
  p.q_len = c.lq;
  p.kv_len = c.lk;
  p.head_dim = c.d;
  p.value_dim = dv;
  p.scale = 1.0f / sqrtf(static_cast<float>(c.d));
  p.causal = static_cast<Causal>(c.causal);
  p.has_lse = true;

  SdpaProblem flat = p;
  flat.k = View(k.bytes.data(), c.dtype, kv_shape);
  flat.v = View(v.bytes.data(), c.dtype, kv_shape);
  flat.out = View(out_flat.data(), HWYATTN_F32, o_shape);
  flat.lse = View(lse_flat.data(), HWYATTN_F32, lse_shape);
  ASSERT_EQ(RunSdpa(flat), HWYATTN_OK);

  SdpaProblem paged = p;
  paged.k = View(k_pages.data(), c.dtype, page_shape);
  paged.v = View(v_pages.data(), c.dtype, page_shape);
  paged.out = View(out_paged.data(), HWYATTN_F32, o_shape);
  paged.lse = View(lse_paged.data(), HWYATTN_F32, lse_shape);
  paged.pages.table = table.data();
  paged.pages.table_stride = used;
  paged.pages.page_size = P;
  ASSERT_EQ(RunSdpa(paged), HWYATTN_OK);

  if (c.bit_identical) {
    EXPECT_EQ(0, memcmp(out_flat.data(), out_paged.data(), out_flat.size() * sizeof(float)));
    EXPECT_EQ(0, memcmp(lse_flat.data(), lse_paged.data(), lse_flat.size() * sizeof(float)));
  }

  // Both against a plain double softmax over the dtype-rounded values.
  const int64_t group = c.hq / c.hkv;
  const int64_t offset = c.causal == HWYATTN_CAUSAL_BOTTOM_RIGHT ? c.lk - c.lq : 0;
  double max_err = 0.0;
  for (int64_t h = 0; h < c.hq; ++h) {
    const int64_t hk = h / group;
    for (int64_t i = 0; i < c.lq; ++i) {
      const int64_t end = c.causal == HWYATTN_CAUSAL_NONE ? c.lk : std::min(c.lk, i + offset + 1);
      std::vector<double> s(static_cast<size_t>(c.lk));
      double m = -INFINITY;
      for (int64_t j = 0; j < end; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < c.d; ++d) {
          dot += static_cast<double>(q[static_cast<size_t>((h * c.lq + i) * c.d + d)]) *
                 k.values[static_cast<size_t>((hk * c.lk + j) * c.d + d)];
        }
        s[static_cast<size_t>(j)] = dot * p.scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double l = 0.0;
      for (int64_t j = 0; j < end; ++j) l += exp(s[static_cast<size_t>(j)] - m);
      for (int64_t e = 0; e < dv; ++e) {
        double o = 0.0;
        for (int64_t j = 0; j < end; ++j) {
          o += exp(s[static_cast<size_t>(j)] - m) / l *
               v.values[static_cast<size_t>((hk * c.lk + j) * dv + e)];
        }
        const size_t at = static_cast<size_t>((h * c.lq + i) * dv + e);
        max_err = std::max({max_err, fabs(out_flat[at] - o), fabs(out_paged[at] - o)});
      }
      const double lse = m + log(l);
      const size_t at = static_cast<size_t>(h * c.lq + i);
      EXPECT_NEAR(lse_paged[at], lse, 1e-5 * std::max(1.0, fabs(lse))) << "row " << h << "," << i;
    }
  }
  EXPECT_LT(max_err, 2e-5);
}

const PagedCase kCases[] = {
    // Decode (rows = Lq * G <= 8): runs of whole key groups give the same bits.
    {"decode_gqa4_f32_p16", 8, 2, 1, 1500, 128, HWYATTN_F32, HWYATTN_CAUSAL_NONE, 16, true},
    {"decode_mha_f32_p32", 4, 4, 1, 777, 64, HWYATTN_F32, HWYATTN_CAUSAL_NONE, 32, true},
    {"decode_gqa8_bf16_p16", 8, 1, 1, 600, 128, HWYATTN_BF16, HWYATTN_CAUSAL_NONE, 16, true},
    {"decode_gqa2_f16_p16", 4, 2, 1, 531, 64, HWYATTN_F16, HWYATTN_CAUSAL_NONE, 16, true},
    {"decode_dimtail_f32_p16", 4, 2, 1, 300, 40, HWYATTN_F32, HWYATTN_CAUSAL_NONE, 16, true},
    {"decode_chunked_causal_p16", 4, 2, 3, 1100, 64, HWYATTN_F32, HWYATTN_CAUSAL_BOTTOM_RIGHT, 16,
     true},
    // A GQA group of 16 rows: two decode units of 8 heads (DecodeParts).
    {"decode_parts_gqa16_f16_p16", 16, 1, 1, 600, 64, HWYATTN_F16, HWYATTN_CAUSAL_NONE, 16, true},
    // Page ends that cut the key groups: fp32-close, not the same bits.
    {"decode_gqa4_f32_p5", 8, 2, 1, 1500, 128, HWYATTN_F32, HWYATTN_CAUSAL_NONE, 5, false},
    {"decode_mha_bf16_p1", 4, 4, 1, 300, 64, HWYATTN_BF16, HWYATTN_CAUSAL_NONE, 1, false},
    {"decode_single_key_p7", 4, 2, 1, 1, 64, HWYATTN_F32, HWYATTN_CAUSAL_NONE, 7, false},
    // A found case: the chunk's padding past a short last page (keys 30-32 of
    // 33 in pages of 3, 3 rows) after a longer problem left scores there.
    {"decode_rows3_bf16_p3_k34", 3, 1, 1, 34, 1, HWYATTN_BF16, HWYATTN_CAUSAL_NONE, 3, false},
    {"decode_rows3_bf16_p3_k33", 3, 1, 1, 33, 1, HWYATTN_BF16, HWYATTN_CAUSAL_NONE, 3, false},
    // Prefill: paged rows are gathered into the same packed panels.
    {"prefill_causal_f32_p16", 4, 2, 70, 300, 64, HWYATTN_F32, HWYATTN_CAUSAL_BOTTOM_RIGHT, 16,
     true},
    {"prefill_causal_f16_p7", 4, 4, 100, 100, 64, HWYATTN_F16, HWYATTN_CAUSAL_TOP_LEFT, 7, true},
    {"prefill_bf16_p1", 2, 1, 33, 65, 48, HWYATTN_BF16, HWYATTN_CAUSAL_NONE, 1, true},
};

INSTANTIATE_TEST_SUITE_P(Cases, PagedTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<PagedCase>& info) {
                           return info.param.name;
                         });

// The decode kernel's units (decode_attention.h's rule): a GQA group of at
// most 8 rows whole; a larger one, of at most 4 positions, in the fewest
// equal parts (of at most 4) of at most 8 rows; else 0 (the prefill kernel).
TEST(DecodePartsTest, HandValues) {
  struct Row {
    int64_t q_len, q_heads, kv_heads, parts;
  };
  const Row rows[] = {
      {1, 8, 1, 1},  {8, 1, 1, 1},  {2, 8, 2, 1},  {1, 16, 1, 2}, {1, 32, 2, 2},
      {2, 16, 1, 4}, {4, 8, 1, 4},  {1, 12, 1, 2}, {2, 12, 1, 3}, {1, 9, 1, 3},
      {1, 11, 1, 0}, {3, 16, 1, 0}, {1, 64, 1, 0}, {5, 2, 1, 0},  {9, 1, 1, 0},
      {3, 6, 1, 3},  {2, 6, 1, 2},  {4, 32, 1, 0}, {1, 40, 2, 4},
  };
  for (const Row& r : rows) {
    SdpaProblem p;
    p.batch = 1;
    p.q_len = r.q_len;
    p.q_heads = r.q_heads;
    p.kv_heads = r.kv_heads;
    EXPECT_EQ(DecodeParts(p), r.parts)
        << "Lq " << r.q_len << ", Hq " << r.q_heads << ", Hkv " << r.kv_heads;
  }
}

}  // namespace
}  // namespace hwyattn
