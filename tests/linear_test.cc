// SPDX-License-Identifier: Apache-2.0
//
// The packed matmul behind the MHA projections (src/linear.h: Linear,
// PackedWeights) against a double-precision product, on shapes that reach
// every part of its blocking: depth blocks (k past the depth block of 1024,
// with a short last one), narrow last column panels, partial row panels and
// work items, rows gathered from groups, strided output columns, several
// outputs from one packing of x, k = 0 (y = bias), and bit-identical results
// on 1 and 2 threads; the same with bf16 weights (BF16 storage) and bf16
// products (MatmulPrecision::kBf16), against the double product of the
// operands rounded to bf16 by the test's own rule (odd depths reach the
// pairs' zero padding). Runs once per SIMD target (HWYATTN_TARGET, see
// CMakeLists.txt); links the static library for the internal API.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "src/linear.h"

namespace hwyattn {
namespace {

struct LinearCase {
  const char* name;
  int64_t m, k;
  std::vector<int64_t> n;  // one output per entry, all from the same x
  bool bias;
  // x rows come from groups of `x_group` rows, `x_gap` floats apart between
  // groups; y rows the same with `y_group`, and y columns `y_col_stride` apart.
  int64_t x_group, x_gap, y_group, y_col_stride;
};

void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.name; }

std::vector<float> Random(size_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(*rng);
  return v;
}

// A [rows, cols] view whose rows sit in groups of `group` rows, consecutive
// rows `cols * col_stride + 1` floats apart and groups a further `gap` apart.
RowsView Grouped(float* data, int64_t rows, int64_t cols, int64_t group, int64_t gap,
                 int64_t col_stride) {
  RowsView v;
  v.data = data;
  v.rows = rows;
  v.cols = cols;
  v.rows_per_group = group;
  v.row_stride = cols * col_stride + 1;
  v.group_stride = group * v.row_stride + gap;
  v.col_stride = col_stride;
  return v;
}

int64_t Extent(const RowsView& v) {
  return v.rows == 0 || v.cols == 0 ? 0 : v.RowOffset(v.rows - 1) + (v.cols - 1) * v.col_stride + 1;
}

// x rounded to the nearest bfloat16, ties to even (finite x), as a float.
float Bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  memcpy(&r, &u, sizeof(r));
  return r;
}

// Linear on c's shapes against a double product: bf16_weights packs W as
// bf16 pairs; precision kBf16 runs bf16 products. The reference rounds W
// (bf16 storage or products) and x (products) to bf16.
void CheckLinear(const LinearCase& c, bool bf16_weights, MatmulPrecision precision) {
  const bool bf16_products = precision == MatmulPrecision::kBf16;
  SCOPED_TRACE(std::string(bf16_weights ? "bf16 weights" : "f32 weights") +
               (bf16_products ? ", bf16 products" : ", f32 products"));
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.k));
  RowsView x = Grouped(nullptr, c.m, c.k, c.x_group, c.x_gap, 1);
  std::vector<float> x_mem = Random(static_cast<size_t>(std::max<int64_t>(1, Extent(x))), &rng);
  x.data = x_mem.data();

  const size_t outputs = c.n.size();
  std::vector<std::vector<float>> w(outputs), b(outputs);
  std::vector<PackedWeights> packed(outputs);
  for (size_t o = 0; o < outputs; ++o) {
    w[o] = Random(static_cast<size_t>(c.n[o] * c.k), &rng);
    if (c.bias) b[o] = Random(static_cast<size_t>(c.n[o]), &rng);
    ASSERT_TRUE(
        packed[o].Pack(w[o].data(), c.bias ? b[o].data() : nullptr, c.n[o], c.k, bf16_weights));
    ASSERT_EQ(packed[o].pairs != nullptr, bf16_weights);
    ASSERT_EQ(packed[o].panels != nullptr, !bf16_weights);
    // What the products see.
    if (bf16_weights || bf16_products) {
      for (float& f : w[o]) f = Bf16(f);
    }
  }

  std::vector<uint32_t> bits[2];
  for (int threads : {1, 2}) {
    ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    const float kSentinel = 1e30f;
    std::vector<std::vector<float>> y_mem(outputs);
    std::vector<LinearOutput> out(outputs);
    for (size_t o = 0; o < outputs; ++o) {
      RowsView y = Grouped(nullptr, c.m, c.n[o], c.y_group, 3, c.y_col_stride);
      y_mem[o].assign(static_cast<size_t>(Extent(y)), kSentinel);
      y.data = y_mem[o].data();
      out[o] = LinearOutput{&packed[o], y};
    }
    ASSERT_EQ(Linear(x, out.data(), outputs, Executor(), precision), HWYATTN_OK);

    for (size_t o = 0; o < outputs; ++o) {
      const RowsView& y = out[o].y;
      std::vector<bool> written(y_mem[o].size(), false);
      for (int64_t i = 0; i < c.m; ++i) {
        const float* xi = x.data + x.RowOffset(i);
        for (int64_t j = 0; j < c.n[o]; ++j) {
          double dot = c.bias ? b[o][static_cast<size_t>(j)] : 0.0;
          double mag = fabs(dot);
          for (int64_t kk = 0; kk < c.k; ++kk) {
            const double xv = bf16_products ? Bf16(xi[kk]) : xi[kk];
            const double term = xv * w[o][static_cast<size_t>(j * c.k + kk)];
            dot += term;
            mag += fabs(term);
          }
          const int64_t at = y.RowOffset(i) + j * y.col_stride;
          written[static_cast<size_t>(at)] = true;
          // fp32 accumulation over k terms: errors grow like sqrt(k) ulps of
          // the partial sums; a term missing or counted twice is ~1e-3 mag.
          ASSERT_NEAR(y_mem[o][static_cast<size_t>(at)], dot, 2e-6 * mag + 1e-30)
              << "output " << o << " row " << i << " column " << j << ", " << threads << " threads";
        }
      }
      for (size_t at = 0; at < written.size(); ++at) {
        if (!written[at]) {
          ASSERT_EQ(y_mem[o][at], kSentinel) << "output " << o << " wrote " << at;
        }
      }
      for (float v : y_mem[o]) {
        uint32_t u;
        memcpy(&u, &v, sizeof(u));
        bits[threads - 1].push_back(u);
      }
    }
  }
  EXPECT_EQ(bits[0], bits[1]) << "2 threads changed the bits";
  hwyattn_set_num_threads(0);
}

class LinearTest : public testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesDoubleProduct) { CheckLinear(GetParam(), false, MatmulPrecision::kF32); }

TEST_P(LinearTest, Bf16WeightsF32Products) { CheckLinear(GetParam(), true, MatmulPrecision::kF32); }

TEST_P(LinearTest, Bf16WeightsBf16Products) {
  CheckLinear(GetParam(), true, MatmulPrecision::kBf16);
}

TEST_P(LinearTest, F32WeightsBf16Products) {
  CheckLinear(GetParam(), false, MatmulPrecision::kBf16);
}

const LinearCase kCases[] = {
    // name, m, k, n..., bias, x_group, x_gap, y_group, y_col_stride
    {"one", 1, 1, {1}, true, 1, 0, 1, 1},
    {"small", 3, 7, {5}, false, 3, 0, 3, 1},
    {"whole_panels", 64, 64, {48, 96}, true, 64, 0, 64, 1},
    {"edges", 67, 131, {45, 17, 32}, true, 67, 0, 67, 1},
    {"two_items_threads", 130, 300, {97}, true, 130, 0, 130, 1},
    {"depth_blocks", 70, 1030, {50}, true, 70, 0, 70, 1},
    {"depth_blocks_many_outputs", 20, 2100, {16, 48, 33}, false, 20, 0, 20, 1},
    {"grouped_rows", 50, 40, {64}, true, 7, 5, 6, 1},
    {"strided_output", 33, 1100, {40}, true, 11, 2, 33, 3},
    {"no_depth", 9, 0, {20}, true, 9, 0, 9, 1},
};

INSTANTIATE_TEST_SUITE_P(Cases, LinearTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<LinearCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace hwyattn
