// SPDX-License-Identifier: Apache-2.0
//
// Per-target tests of src/ops/softmax-inl.h: Exp2 against std::exp2 in
// double, and one online-softmax tile update against a plain double softmax.
#include <float.h>
#include <math.h>
#include <stddef.h>

#include <algorithm>
#include <random>
#include <vector>

#include "hwy/aligned_allocator.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/softmax_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
// After highway.h
#include "src/ops/softmax-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Exp2 evaluated one vector at a time over `x`.
std::vector<float> Exp2All(const std::vector<float>& x) {
  const DF df;  // the kernels' vectors (vectors-inl.h)
  const size_t N = hn::Lanes(df);
  std::vector<float> in(x), out((x.size() + N - 1) / N * N);
  in.resize(out.size(), 0.0f);
  for (size_t i = 0; i < in.size(); i += N) {
    hn::StoreU(Exp2(df, hn::LoadU(df, in.data() + i)), df, out.data() + i);
  }
  out.resize(x.size());
  return out;
}

void TestExp2Accuracy() {
  // The whole normal range, densely: the documented bound is 3e-7 relative.
  std::vector<float> x;
  for (float v = -126.0f; v <= 127.0f; v += 0.001953125f * 3.1f) x.push_back(v);
  const std::vector<float> y = Exp2All(x);
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp2(static_cast<double>(x[i]));
    const double err = fabs(y[i] - want) / want;
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LT(worst, 3e-7) << "x=" << x[worst_i] << " got " << y[worst_i] << " want "
                         << std::exp2(static_cast<double>(x[worst_i]));
}

void TestExp2Edges() {
  const std::vector<float> x = {-INFINITY, -FLT_MAX, -1e30f, -200.0f, -150.5f, 0.0f, -0.0f, NAN};
  const std::vector<float> y = Exp2All(x);
  // Blocked keys (-inf) and anything below -150 must give exactly 0, or a
  // fully masked row would get a nonzero denominator.
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(y[i], 0.0f) << "x=" << x[i];
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[6], 1.0f);
  EXPECT_TRUE(std::isnan(y[7])) << "NaN must stay NaN, got " << y[7];
}

void TestSoftmaxTileUpdate() {
  const DF df;  // the kernels' vectors (vectors-inl.h)
  const size_t N = hn::Lanes(df);
  const size_t ld = 3 * N;  // queries (lanes)
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-20.0f, 20.0f);
  for (size_t rows : {size_t{1}, size_t{2}, size_t{7}, size_t{16}}) {
    // Two steps: the second one must rescale what the first accumulated.
    std::vector<float> s1(rows * ld), s2(rows * ld);
    for (float& v : s1) v = uniform(rng);
    for (float& v : s2) v = uniform(rng) + 5.0f;
    s1[0] = -INFINITY;  // a blocked key
    // The kernel loads whole aligned vectors, as from its scratch buffers.
    auto m = hwy::AllocateAligned<float>(ld);
    auto l = hwy::AllocateAligned<float>(ld);
    auto alpha = hwy::AllocateAligned<float>(ld);
    auto m_new = hwy::AllocateAligned<float>(ld);
    auto p1 = hwy::AllocateAligned<float>(rows * ld);
    auto p2 = hwy::AllocateAligned<float>(rows * ld);
    for (size_t c = 0; c < ld; ++c) {
      m[c] = -FLT_MAX;
      l[c] = 0.0f;
    }
    for (size_t i = 0; i < rows * ld; ++i) {
      p1[i] = s1[i];
      p2[i] = s2[i];
    }
    for (float* p : {p1.get(), p2.get()}) {
      TileMax(df, p, rows, ld, ld, m.get(), m_new.get());
      SoftmaxTileUpdate(df, p, rows, ld, ld, m_new.get(), m.get(), l.get(), alpha.get());
    }
    for (size_t c = 0; c < ld; ++c) {
      double mx = -INFINITY;
      // std::max, not fmax: GCC 12's aarch64 vectorizer fails (an internal
      // compiler error) on an fmax reduction into a double.
      for (size_t r = 0; r < rows; ++r) {
        mx = std::max(mx, static_cast<double>(std::max(s1[r * ld + c], s2[r * ld + c])));
      }
      double sum = 0.0;
      for (size_t r = 0; r < rows; ++r) {
        sum += std::exp2(s1[r * ld + c] - mx) + std::exp2(s2[r * ld + c] - mx);
      }
      EXPECT_EQ(m[c], static_cast<float>(mx)) << "column " << c;
      EXPECT_NEAR(l[c], sum, 1e-6 * sum) << "column " << c << " rows " << rows;
      for (size_t r = 0; r < rows; ++r) {
        const double x = s2[r * ld + c] - mx;
        const double want = std::exp2(x);
        // Exp2's own 3e-7, plus the float rounding of x = s - m (half an ulp
        // of |x|, i.e. |x| * 2^-24), which exp2 turns into ln(2) times that.
        const double tol = want * (3e-7 + fabs(x) * 0x1p-24 * 0.7);
        EXPECT_NEAR(p2[r * ld + c], want, tol) << "x=" << x;
      }
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {
HWY_BEFORE_TEST(SoftmaxTest);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExp2Accuracy);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExp2Edges);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestSoftmaxTileUpdate);
}  // namespace hwyattn
#endif
