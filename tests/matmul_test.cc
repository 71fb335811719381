// SPDX-License-Identifier: Apache-2.0
//
// Per-target tests of the register-blocked micro-kernel (src/ops/matmul-inl.h)
// against a plain double-precision product: TileMul (packed and row-major A),
// TileMulAccumulate and TileColumnScaleMulAdd.
#include <math.h>
#include <stddef.h>

#include <random>
#include <vector>

#include "hwy/aligned_allocator.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/matmul_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
// After highway.h
#include "src/ops/matmul-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void TestTileProducts() {
  const DF df;  // the kernels' vectors (vectors-inl.h)
  const size_t N = hn::Lanes(df);
  constexpr size_t kMR = kTileRows, kNQ = kTileVectors;
  const size_t ldb = kNQ * N + N;  // B rows wider than the tile: only kNQ vectors are used
  const size_t ldc = kNQ * N + 2 * N;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t kc : {size_t{1}, size_t{3}, size_t{64}, size_t{129}}) {
    auto a = hwy::AllocateAligned<float>(kc * kMR);
    auto b = hwy::AllocateAligned<float>(kc * ldb);
    auto c = hwy::AllocateAligned<float>(kMR * ldc);
    auto scale = hwy::AllocateAligned<float>(kNQ * N);
    for (size_t i = 0; i < kc * kMR; ++i) a[i] = uniform(rng);
    for (size_t i = 0; i < kc * ldb; ++i) b[i] = uniform(rng);
    for (size_t i = 0; i < kNQ * N; ++i) scale[i] = uniform(rng);
    for (size_t i = 0; i < kMR * ldc; ++i) c[i] = 1e9f;  // sentinel outside the tile

    TileMul<kMR, kNQ>(df, kc, PackedA{a.get(), kMR}, b.get(), ldb, c.get(), ldc);
    std::vector<float> c0(c.get(), c.get() + kMR * ldc);
    // The same A given row-major (rows lda = kc + 3 apart, read in place)
    // must give the same bits: only the addressing differs.
    const size_t lda = kc + 3;
    std::vector<float> a_rows(kMR * lda, NAN);
    for (size_t r = 0; r < kMR; ++r) {
      for (size_t k = 0; k < kc; ++k) a_rows[r * lda + k] = a[k * kMR + r];
    }
    auto c_rows = hwy::AllocateAligned<float>(kMR * ldc);
    for (size_t i = 0; i < kMR * ldc; ++i) c_rows[i] = 1e9f;
    TileMul<kMR, kNQ>(df, kc, RowMajorA{a_rows.data(), lda}, b.get(), ldb, c_rows.get(), ldc);
    for (size_t i = 0; i < kMR * ldc; ++i) ASSERT_EQ(c_rows[i], c0[i]) << "RowMajorA at " << i;
    // C += A x B, starting from C = A x B (a second depth block of the same
    // values): twice the product.
    TileMulAccumulate<kMR, kNQ>(df, kc, PackedA{a.get(), kMR}, b.get(), ldb, c_rows.get(), ldc);
    // C = C * scale[column] + A x B, starting from C = A x B.
    TileColumnScaleMulAdd<kMR, kNQ>(df, kc, PackedA{a.get(), kMR}, b.get(), ldb, scale.get(),
                                    c.get(), ldc);
    for (size_t r = 0; r < kMR; ++r) {
      for (size_t j = 0; j < ldc; ++j) {
        if (j >= kNQ * N) {  // untouched
          EXPECT_EQ(c[r * ldc + j], 1e9f);
          EXPECT_EQ(c_rows[r * ldc + j], 1e9f);
          continue;
        }
        double dot = 0.0, mag = 0.0;
        for (size_t k = 0; k < kc; ++k) {
          dot += static_cast<double>(a[k * kMR + r]) * b[k * ldb + j];
          mag += fabs(static_cast<double>(a[k * kMR + r]) * b[k * ldb + j]);
        }
        const double tol = 4 * 6e-8 * (mag + 1e-30) * (1 + fabs(scale[j]));
        EXPECT_NEAR(c0[r * ldc + j], dot, tol) << "TileMul r=" << r << " j=" << j << " kc=" << kc;
        EXPECT_NEAR(c[r * ldc + j], dot * (1 + scale[j]), tol)
            << "TileColumnScaleMulAdd r=" << r << " j=" << j << " kc=" << kc;
        EXPECT_NEAR(c_rows[r * ldc + j], 2 * dot, 2 * tol)
            << "TileMulAccumulate r=" << r << " j=" << j << " kc=" << kc;
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
HWY_BEFORE_TEST(MatmulTest);
HWY_EXPORT_AND_TEST_P(MatmulTest, TestTileProducts);
}  // namespace hwyattn
#endif
