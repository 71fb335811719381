// SPDX-License-Identifier: Apache-2.0
//
// AVX512_BF16 matmul tile (see matmul_bf16.h). Not a foreach_target unit:
// one copy for x86-64, under a target attribute.
#include "src/ops/matmul_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
#include "src/cache_line.h"
#include "src/ops/bf16_dot_avx512.h"

namespace hwyattn {
namespace {

using avx512_bf16::DotStep;
constexpr size_t kLanes = avx512_bf16::kPairLanes;

template <size_t kVectors>
HWYATTN_BF16_TARGET inline void Tile(size_t pairs, const uint32_t* a_pairs, const uint32_t* b_pairs,
                                     size_t ldb, const float* bias, float* c, size_t ldc,
                                     const char* prefetch, size_t prefetch_lines) {
  constexpr size_t kRows = kBf16MatmulRows;
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 16
  for (size_t v = 0; v < kVectors; ++v) {
    if (bias != nullptr) {
      const __m512 b = _mm512_loadu_ps(bias + v * kLanes);
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) acc[r][v] = b;
    } else {
#pragma GCC unroll 16
      for (size_t r = 0; r < kRows; ++r) acc[r][v] = _mm512_loadu_ps(c + r * ldc + v * kLanes);
    }
  }
  for (size_t i = 0; i < pairs; ++i) {
    if (i < prefetch_lines) PrefetchLine</*kL2=*/true>(prefetch + i * 64);
    DotStep<kRows, kVectors>(acc, b_pairs + i * ldb, a_pairs + i * kRows);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (size_t v = 0; v < kVectors; ++v) _mm512_storeu_ps(c + r * ldc + v * kLanes, acc[r][v]);
}

}  // namespace

HWYATTN_BF16_TARGET void Bf16MatmulTile(size_t vectors, size_t pairs, const uint32_t* a_pairs,
                                        const uint32_t* b_pairs, size_t ldb, const float* bias,
                                        float* c, size_t ldc, const void* prefetch,
                                        size_t prefetch_lines) {
  const char* lines = static_cast<const char*>(prefetch);
  switch (vectors) {
    case 1: Tile<1>(pairs, a_pairs, b_pairs, ldb, bias, c, ldc, lines, prefetch_lines); break;
    case 2: Tile<2>(pairs, a_pairs, b_pairs, ldb, bias, c, ldc, lines, prefetch_lines); break;
    default: Tile<3>(pairs, a_pairs, b_pairs, ldb, bias, c, ldc, lines, prefetch_lines); break;
  }
}

}  // namespace hwyattn

#else  // not compiled (src/targets.h) or not x86-64: Bf16DotFor() is false, nothing calls this

#include "hwy/base.h"

namespace hwyattn {
void Bf16MatmulTile(size_t, size_t, const uint32_t*, const uint32_t*, size_t, const float*, float*,
                    size_t, const void*, size_t) {
  HWY_ABORT("hwyattn: AVX512_BF16 tile called on a CPU without it");
}
}  // namespace hwyattn

#endif
