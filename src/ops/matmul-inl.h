// SPDX-License-Identifier: Apache-2.0
//
// Register-blocked matmul micro-kernel (BLIS style), per target.
//
// C[kMR rows][kNQ vectors] = sum_k A[k][kMR] * B[k][kNQ vectors]
//
// A is a packed panel: the kMR values of step k are contiguous, so each is a
// broadcast from memory (an embedded-broadcast FMA operand on AVX-512). B rows
// are kNQ full vectors, ldb floats apart. The kMR x kNQ accumulators stay in
// registers for the whole k loop, so each B vector loaded feeds kMR FMAs and
// each A value feeds kNQ FMAs. Register budget: kMR*kNQ accumulators + kNQ B
// vectors (+1 broadcast without embedded broadcasts) must fit the register
// file: 8x3 -> 27 of 32 zmm on AVX-512; 6x2 -> 15 of 16 on AVX2/SSE4.
//
// The attention kernels use it for both products, with queries in the lanes:
// S^T = K_panel x Q^T (A = keys, B = transposed queries, k = head dim) and
// O^T = O^T * alpha + V^T x P^T (A = value rows, B = P^T, k = keys).

#if defined(HWYATTN_SRC_OPS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_MATMUL_INL_H_
#undef HWYATTN_SRC_OPS_MATMUL_INL_H_
#else
#define HWYATTN_SRC_OPS_MATMUL_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Register tile of this target: kTileRows (MR) x kTileVectors (NR in vectors).
#if HWY_MAX_BYTES >= 64
constexpr size_t kTileRows = 8;
constexpr size_t kTileVectors = 3;
#else
constexpr size_t kTileRows = 6;
constexpr size_t kTileVectors = 2;
#endif

// Layouts of the A (broadcast) operand: A(k, r) is row r's value at step k.
// A packed panel: the kMR values of step k are contiguous, `step` floats
// after those of step k - 1 (kMR for a panel packed by PackRows/PackKeys, Bq
// for the P^T tile read in place).
struct PackedA {
  const float* HWY_RESTRICT a;
  size_t step;
  float operator()(size_t k, size_t r) const { return a[k * step + r]; }
};
// kMR rows read in place from a row-major matrix: A(k, r) = a[r * lda + k]
// (e.g. keys straight from the caller's K). The compiler keeps one pointer
// per row.
struct RowMajorA {
  const float* HWY_RESTRICT a;
  size_t lda;
  float operator()(size_t k, size_t r) const { return a[r * lda + k]; }
};

// What a tile prefetches at each k step (called with k): nothing by default.
// The attention kernels pass functors that pull the operands of their next
// tile toward L1 while this one computes (the memory latency then hides
// behind the FMAs instead of stalling the next tile's first steps).
struct NoPrefetch {
  HWY_INLINE void operator()(size_t /*k*/) const {}
};

// acc += A * B[kc][ldb] (the first kNQ vectors of each B row).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch,
          class VF = hn::Vec<DF>>
HWY_INLINE void TileMulAdd(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                           size_t ldb, VF (&acc)[kMR][kNQ], const Prefetch& prefetch = Prefetch()) {
  const size_t N = hn::Lanes(df);
  for (size_t k = 0; k < kc; ++k) {
    prefetch(k);
    VF bv[kNQ];
    HWY_UNROLL(8)
    for (size_t c = 0; c < kNQ; ++c) bv[c] = hn::LoadU(df, b + k * ldb + c * N);
    HWY_UNROLL(16)
    for (size_t r = 0; r < kMR; ++r) {
      const VF ar = hn::Set(df, a(k, r));
      HWY_UNROLL(8)
      for (size_t c = 0; c < kNQ; ++c) acc[r][c] = hn::MulAdd(ar, bv[c], acc[r][c]);
    }
  }
}

// Writes a kMR x (kNQ vectors) accumulator tile to C (row stride ldc floats,
// any alignment).
template <size_t kMR, size_t kNQ, class DF, class VF = hn::Vec<DF>>
HWY_INLINE void StoreTile(DF df, const VF (&acc)[kMR][kNQ], float* HWY_RESTRICT c, size_t ldc) {
  const size_t N = hn::Lanes(df);
  HWY_UNROLL(16)
  for (size_t r = 0; r < kMR; ++r) {
    HWY_UNROLL(8)
    for (size_t q = 0; q < kNQ; ++q) hn::StoreU(acc[r][q], df, c + r * ldc + q * N);
  }
}

// C = A x B (+ init_row broadcast to every row, if not null): a kMR x (kNQ
// vectors) tile written to C (row stride ldc floats, any alignment).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileMul(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                        size_t ldb, float* HWY_RESTRICT c, size_t ldc,
                        const float* HWY_RESTRICT init_row = nullptr,
                        const Prefetch& prefetch = Prefetch()) {
  using VF = hn::Vec<DF>;
  const size_t N = hn::Lanes(df);
  VF init[kNQ];
  HWY_UNROLL(8)
  for (size_t q = 0; q < kNQ; ++q) {
    init[q] = init_row != nullptr ? hn::LoadU(df, init_row + q * N) : hn::Zero(df);
  }
  VF acc[kMR][kNQ];
  HWY_UNROLL(16)
  for (size_t r = 0; r < kMR; ++r) {
    HWY_UNROLL(8)
    for (size_t q = 0; q < kNQ; ++q) acc[r][q] = init[q];
  }
  TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, acc, prefetch);
  StoreTile(df, acc, c, ldc);
}

// C += A x B for a kMR x (kNQ vectors) tile (a later depth block of a
// product whose earlier blocks are already in C).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileMulAccumulate(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                                  size_t ldb, float* HWY_RESTRICT c, size_t ldc,
                                  const Prefetch& prefetch = Prefetch()) {
  using VF = hn::Vec<DF>;
  const size_t N = hn::Lanes(df);
  VF acc[kMR][kNQ];
  HWY_UNROLL(16)
  for (size_t r = 0; r < kMR; ++r) {
    HWY_UNROLL(8)
    for (size_t q = 0; q < kNQ; ++q) acc[r][q] = hn::LoadU(df, c + r * ldc + q * N);
  }
  TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, acc, prefetch);
  StoreTile(df, acc, c, ldc);
}

// C = C * col_scale + A x B for a kMR x (kNQ vectors) tile, where col_scale
// holds one factor per column (the online-softmax rescale of the output, whose
// columns are queries).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileColumnScaleMulAdd(DF df, size_t kc, const AOperand& a,
                                      const float* HWY_RESTRICT b, size_t ldb,
                                      const float* HWY_RESTRICT col_scale, float* HWY_RESTRICT c,
                                      size_t ldc, const Prefetch& prefetch = Prefetch()) {
  using VF = hn::Vec<DF>;
  const size_t N = hn::Lanes(df);
  VF scale[kNQ];
  HWY_UNROLL(8)
  for (size_t q = 0; q < kNQ; ++q) scale[q] = hn::LoadU(df, col_scale + q * N);
  VF acc[kMR][kNQ];
  HWY_UNROLL(16)
  for (size_t r = 0; r < kMR; ++r) {
    HWY_UNROLL(8)
    for (size_t q = 0; q < kNQ; ++q)
      acc[r][q] = hn::Mul(hn::LoadU(df, c + r * ldc + q * N), scale[q]);
  }
  TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, acc, prefetch);
  StoreTile(df, acc, c, ldc);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_MATMUL_INL_H_ toggle
