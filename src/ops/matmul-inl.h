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
// vectors + the broadcasts must fit the register file (kTileRows below). The tiles are packs of
// local vectors (registers-inl.h), which SVE's sizeless vectors can be, unlike arrays.
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
#include "src/ops/registers-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Register tile of this target: kTileRows (MR) x kTileVectors (NR in vectors),
// the first of 8 x 3, 6 x 3 and 6 x 2 whose registers fit the target's
// vector register file (vectors-inl.h): MR x NR accumulators, NR B vectors
// and the broadcasts of A. One broadcast register on x86 (an FMA operand
// broadcast from memory, or one register reused) and on SVE (ld1rw into one
// or two registers); on NEON, GCC loads the MR values of a step into MR
// registers for its by-lane FMAs (8 x 3 spilled two accumulators there).
// So: 8 x 3 on AVX-512 and SVE (28 of 32), 6 x 3 on NEON (27 of 32), 6 x 2 on
// AVX2 and SSE4 (15 of 16).
constexpr size_t TileRegisters(size_t rows, size_t vectors) {
  return rows * vectors + vectors + (HWY_TARGET == HWY_NEON ? rows : 1);
}
constexpr size_t kTileRows = TileRegisters(8, 3) <= kVectorRegisters ? 8 : 6;
constexpr size_t kTileVectors = TileRegisters(kTileRows, 3) <= kVectorRegisters ? 3 : 2;
static_assert(TileRegisters(kTileRows, kTileVectors) <= kVectorRegisters,
              "the register tile fits the register file");

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

// acc += A * B[kc][ldb] (the first kNQ vectors of each B row), acc being the
// kMR x kNQ register tile as a pack of kMR * kNQ vectors, row-major
// (registers-inl.h: sizeless vectors cannot form an array).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch, class... VF>
HWY_INLINE void TileMulAdd(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                           size_t ldb, const Prefetch& prefetch, VF&... acc) {
  static_assert(sizeof...(VF) == kMR * kNQ, "one accumulator per (row, vector)");
  const size_t N = hn::Lanes(df);
  const Prefetch pf = prefetch;  // a local copy: its fields stay in registers
  for (size_t k = 0; k < kc; ++k) {
    pf(k);
    WithRegistersFrom<kNQ>([&](auto c)
                               HWYATTN_INLINE_LAMBDA { return hn::LoadU(df, b + k * ldb + c * N); },
                           [&](auto&... bv) HWYATTN_INLINE_LAMBDA {
                             Unroll<kMR>([&](auto r) HWYATTN_INLINE_LAMBDA {
                               const auto ar = hn::Set(df, a(k, r));
                               Unroll<kNQ>([&](auto c) HWYATTN_INLINE_LAMBDA {
                                 auto& x = Nth<r * kNQ + c>(acc...);
                                 x = hn::MulAdd(ar, Nth<c>(bv...), x);
                               });
                             });
                           });
  }
}

// Writes a kMR x (kNQ vectors) accumulator tile (a pack, as TileMulAdd's) to
// C (row stride ldc floats, any alignment).
template <size_t kMR, size_t kNQ, class DF, class... VF>
HWY_INLINE void StoreTile(DF df, float* HWY_RESTRICT c, size_t ldc, const VF&... acc) {
  static_assert(sizeof...(VF) == kMR * kNQ, "one accumulator per (row, vector)");
  const size_t N = hn::Lanes(df);
  Unroll<kMR * kNQ>([&](auto i) HWYATTN_INLINE_LAMBDA {
    hn::StoreU(Nth<i>(acc...), df, c + (i / kNQ) * ldc + (i % kNQ) * N);
  });
}

// C = A x B (+ init_row broadcast to every row, if not null): a kMR x (kNQ
// vectors) tile written to C (row stride ldc floats, any alignment).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileMul(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                        size_t ldb, float* HWY_RESTRICT c, size_t ldc,
                        const float* HWY_RESTRICT init_row = nullptr,
                        const Prefetch& prefetch = Prefetch()) {
  const size_t N = hn::Lanes(df);
  WithRegistersFrom<kNQ>(
      [&](auto q) HWYATTN_INLINE_LAMBDA {
        return init_row != nullptr ? hn::LoadU(df, init_row + q * N) : hn::Zero(df);
      },
      [&](auto&... init) HWYATTN_INLINE_LAMBDA {
        WithRegistersFrom<kMR * kNQ>([&](auto i)
                                         HWYATTN_INLINE_LAMBDA { return Nth<i % kNQ>(init...); },
                                     [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
                                       TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, prefetch, acc...);
                                       StoreTile<kMR, kNQ>(df, c, ldc, acc...);
                                     });
      });
}

// C += A x B for a kMR x (kNQ vectors) tile (a later depth block of a
// product whose earlier blocks are already in C).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileMulAccumulate(DF df, size_t kc, const AOperand& a, const float* HWY_RESTRICT b,
                                  size_t ldb, float* HWY_RESTRICT c, size_t ldc,
                                  const Prefetch& prefetch = Prefetch()) {
  const size_t N = hn::Lanes(df);
  WithRegistersFrom<kMR * kNQ>(
      [&](auto i)
          HWYATTN_INLINE_LAMBDA { return hn::LoadU(df, c + (i / kNQ) * ldc + (i % kNQ) * N); },
      [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
        TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, prefetch, acc...);
        StoreTile<kMR, kNQ>(df, c, ldc, acc...);
      });
}

// C = C * col_scale + A x B for a kMR x (kNQ vectors) tile, where col_scale
// holds one factor per column (the online-softmax rescale of the output, whose
// columns are queries).
template <size_t kMR, size_t kNQ, class DF, class AOperand, class Prefetch = NoPrefetch>
HWY_INLINE void TileColumnScaleMulAdd(DF df, size_t kc, const AOperand& a,
                                      const float* HWY_RESTRICT b, size_t ldb,
                                      const float* HWY_RESTRICT col_scale, float* HWY_RESTRICT c,
                                      size_t ldc, const Prefetch& prefetch = Prefetch()) {
  const size_t N = hn::Lanes(df);
  WithRegistersFrom<kNQ>([&](auto q)
                             HWYATTN_INLINE_LAMBDA { return hn::LoadU(df, col_scale + q * N); },
                         [&](auto&... scale) HWYATTN_INLINE_LAMBDA {
                           WithRegistersFrom<kMR * kNQ>(
                               [&](auto i) HWYATTN_INLINE_LAMBDA {
                                 return hn::Mul(hn::LoadU(df, c + (i / kNQ) * ldc + (i % kNQ) * N),
                                                Nth<i % kNQ>(scale...));
                               },
                               [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
                                 TileMulAdd<kMR, kNQ>(df, kc, a, b, ldb, prefetch, acc...);
                                 StoreTile<kMR, kNQ>(df, c, ldc, acc...);
                               });
                         });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_MATMUL_INL_H_ toggle
