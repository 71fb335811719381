// SPDX-License-Identifier: Apache-2.0
//
// Packed matmul for linear layers, per target: Y = X W^T + b.
//
// W is packed once (PackedWeights::Pack) into [n / NR][k][NR] panels, the B
// operand of the micro-kernel. A work item owns up to kRowPanels * MR rows
// of X (BLIS's MC): it packs them into kRowPanels [k][MR] panels (the
// broadcast operands) held in L2, then for every panel of every output's W,
// depth block by depth block (KC), runs the micro-kernel over all of its row
// panels, so each W panel is
// fetched from L3 once per MC rows (and reused from L1/L2 by the other row
// panels) instead of once per MR rows. X is packed once per call however many
// projections share it. Traffic per MR x NR tile: k * (MR + NR) floats from
// L1/L2 for 2 * k * MR * NR FLOPs.
//
// bf16 products (MatmulPrecision::kBf16) and BF16 weight storage: x's rows
// are packed rounded to bf16 (RoundToBf16, the attention's rule); weights in
// BF16 storage are bf16 pairs, widened exactly (two shifts) into fp32 FMAs on
// every target, or multiplied by vdpbf16ps on CPUs with AVX512_BF16
// (matmul_bf16.h; x then packed as pairs too); F32 weights under bf16
// products are rounded at each load. Depths are handled in pairs: the
// packed x panel has an even depth (a zero step after an odd k), and depth
// blocks start at even depths.

#include <stddef.h>
#include <stdint.h>

#include <algorithm>

#include <string.h>

#include "src/cache_line.h"
#include "src/ops/convert.h"
#include "src/ops/matmul.h"
#include "src/ops/matmul_bf16.h"
#include "src/scratch.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/matmul-inl.h"
#include "src/ops/registers-inl.h"
#include "src/ops/convert-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DF and kLanes: vectors-inl.h (via matmul-inl.h).
using DU = hn::RebindToUnsigned<DF>;
constexpr size_t kMR = kTileRows;
constexpr size_t kNR = kTileVectors * kLanes;

// Cache blocking (BLIS's loops around the micro-kernel), for caches of ~1 MiB
// L2 and 32-48 KiB L1 per core:
// - MC = kRowPanels * MR rows of X per work item, packed once per call as
//   kRowPanels [k][MR] panels (the broadcast operands), which stay in L2.
// - KC = kDepth: one pass of the micro-kernel covers up to kDepth depths; the
//   item runs every row panel against one W panel's KC x NR slice (in L2,
//   after the first row panel fetched it from L3) before moving on, so the
//   L2 holds MC x KC floats of X and KC x NR of W (448 KiB at most on AVX-512,
//   half the L2). Later depth blocks accumulate into Y (MC x NR floats, in L1).
// - NC = NR: W is streamed panel by panel, each read from L3 once per MC rows,
//   the next slice prefetched into L2 while the current one's tiles run.
// Smaller KC for an L1-resident W slice (128 or 256: 24-48 KiB): 3-5% slower
// on every bench_matmul shape: the L2 feeds the micro-kernel at full speed,
// and each depth block adds a tile's loads and stores of Y.
constexpr size_t kRowPanels = 8;
constexpr size_t kDepth = 1024;

// W [n, k] as [ceil(n / NR)][k][NR] panels (zero past n): panel p's depth
// block [k0, k0 + kc) is the contiguous kc x NR slice at (p * k + k0) * NR.
void PackWeights(const float* w, int64_t n, int64_t k, float* dst) {
  // Preconditions (free in Release).
  HWY_DASSERT(n >= 1 && k >= 0 && (w != nullptr || k == 0) && IsScratchAligned(dst));
  const int64_t panels = (n + kNR - 1) / kNR;
  for (int64_t p = 0; p < panels; ++p) {
    float* HWY_RESTRICT panel = dst + p * k * static_cast<int64_t>(kNR);
    for (size_t c = 0; c < kNR; ++c) {
      const int64_t row = p * static_cast<int64_t>(kNR) + static_cast<int64_t>(c);
      for (int64_t kk = 0; kk < k; ++kk) panel[kk * kNR + c] = row < n ? w[row * k + kk] : 0.0f;
    }
  }
}

// The bits of x rounded to bf16 (RoundToBf16), in the high half.
inline uint32_t RoundedBits(float x) {
  const float r = hwyattn::RoundToBf16(x);
  uint32_t u;
  memcpy(&u, &r, sizeof(u));
  return u;
}

// The pair (lo, hi) of bf16 bits (high halves of rounded floats) as one lane.
inline uint32_t PairBits(uint32_t lo, uint32_t hi) { return (hi & 0xFFFF0000u) | (lo >> 16); }

// W [n, k] rounded to bf16 as [ceil(n / NR)][ceil(k / 2)][NR] pairs (see
// PackedMatrix), zero past n and past k.
void PackWeightsBf16(const float* w, int64_t n, int64_t k, uint32_t* dst) {
  HWY_DASSERT(n >= 1 && k >= 0 && (w != nullptr || k == 0) && IsScratchAligned(dst));
  const int64_t panels = (n + kNR - 1) / kNR, kp = (k + 1) / 2;
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* HWY_RESTRICT panel = dst + p * kp * static_cast<int64_t>(kNR);
    for (size_t c = 0; c < kNR; ++c) {
      const int64_t row = p * static_cast<int64_t>(kNR) + static_cast<int64_t>(c);
      for (int64_t i = 0; i < kp; ++i) {
        const uint32_t lo = row < n ? RoundedBits(w[row * k + 2 * i]) : 0;
        const uint32_t hi = row < n && 2 * i + 1 < k ? RoundedBits(w[row * k + 2 * i + 1]) : 0;
        panel[i * static_cast<int64_t>(kNR) + static_cast<int64_t>(c)] = PairBits(lo, hi);
      }
    }
  }
}

// How a work item packs its rows of x.
enum class APack {
  kFloats,   // [k_even][MR] floats as they are
  kRounded,  // [k_even][MR] floats rounded to bf16
  kPairs     // [k_even / 2][MR] bf16 pairs (the vdpbf16ps operand)
};

// Packs rows [m0, m0 + MR) of x (zero past the last row, and a zero depth
// step after an odd k) as a panel of `pack`'s layout.
void PackRows(const RowsView& x, int64_t m0, APack pack, float* HWY_RESTRICT a) {
  const int64_t k = x.cols, k_even = k + (k & 1);
  if (pack == APack::kPairs) {
    uint32_t* HWY_RESTRICT pairs = reinterpret_cast<uint32_t*>(a);
    for (size_t r = 0; r < kMR; ++r) {
      const int64_t m = m0 + static_cast<int64_t>(r);
      const float* src = m < x.rows ? x.data + x.RowOffset(m) : nullptr;
      int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR  // (no ConcatEven; kPairs runs on AVX3 only)
      if (src != nullptr && x.col_stride == 1) {
        // Whole vectors of pairs: 2N floats rounded, their even and odd
        // lanes joined, into a chunk buffer, then spread to the panel's
        // column r (the scalar rounding below cost 8% of M1b's time).
        const DF df;
        const DU du;
        const size_t N = hn::Lanes(df);
        constexpr size_t kChunk = 256;
        HWY_ALIGN uint32_t chunk[kChunk];
        const auto high = hn::Set(du, 0xFFFF0000u);
        while (i + static_cast<int64_t>(N) <= k / 2) {
          const size_t n = static_cast<size_t>(
              std::min<int64_t>(kChunk, (k / 2 - i) / static_cast<int64_t>(N) * N));
          for (size_t j = 0; j < n; j += N) {
            const float* p = src + 2 * (i + static_cast<int64_t>(j));
            const auto lo = hn::BitCast(du, RoundToBf16(df, hn::LoadU(df, p)));
            const auto hi = hn::BitCast(du, RoundToBf16(df, hn::LoadU(df, p + N)));
            const auto even = hn::ConcatEven(du, hi, lo), odd = hn::ConcatOdd(du, hi, lo);
            hn::Store(hn::Or(hn::And(odd, high), hn::ShiftRight<16>(even)), du, chunk + j);
          }
          for (size_t j = 0; j < n; ++j) {
            pairs[(i + static_cast<int64_t>(j)) * static_cast<int64_t>(kMR) +
                  static_cast<int64_t>(r)] = chunk[j];
          }
          i += static_cast<int64_t>(n);
        }
      }
#endif
      for (; i < k_even / 2; ++i) {
        const uint32_t lo = src != nullptr ? RoundedBits(src[2 * i * x.col_stride]) : 0;
        const uint32_t hi =
            src != nullptr && 2 * i + 1 < k ? RoundedBits(src[(2 * i + 1) * x.col_stride]) : 0;
        pairs[i * static_cast<int64_t>(kMR) + static_cast<int64_t>(r)] = PairBits(lo, hi);
      }
    }
    return;
  }
  for (size_t r = 0; r < kMR; ++r) {
    const int64_t m = m0 + static_cast<int64_t>(r);
    if (m < x.rows) {
      const float* src = x.data + x.RowOffset(m);
      if (pack == APack::kRounded) {
        for (int64_t kk = 0; kk < k; ++kk)
          a[kk * kMR + r] = hwyattn::RoundToBf16(src[kk * x.col_stride]);
      } else {
        for (int64_t kk = 0; kk < k; ++kk) a[kk * kMR + r] = src[kk * x.col_stride];
      }
    } else {
      for (int64_t kk = 0; kk < k; ++kk) a[kk * kMR + r] = 0.0f;
    }
    if (k != k_even) a[k * kMR + r] = 0.0f;
  }
}

// Prefetches `count` lines from `lines` on, one per k step of a tile (into
// L2: the slice of W the next panel's tiles read, while this one's run).
struct LinePrefetch {
  const float* lines;
  size_t count;
  HWY_INLINE void operator()(size_t k) const {
    if (k < count) PrefetchLine</*kL2=*/true>(lines + k * kCacheLineFloats);
  }
};

// The product a tile runs, from the packing of x and the storage of W.
enum class Kind {
  kF32,        // floats x floats
  kF32RoundB,  // rounded x floats, W rounded to bf16 at each load
  kPairs,      // floats (rounded or not) x bf16 pairs widened
  kDot         // bf16 pairs x bf16 pairs: vdpbf16ps (matmul_bf16.h)
};

// A's MR values at one depth (a[at], ..., a[at + MR - 1]) as the tile's row
// broadcasts. NEON: two 4-float loads, rows 0-3 and rows 2-5 (both inside
// the 6 values), broadcast by lane, which GCC folds into by-element FMAs: 2
// registers for the 6 rows rather than 6 scalars, room the bf16 kinds' B
// vectors and their pair or rounding temporaries need (with 6 scalars, 5-7
// accumulators spilled per step). Elsewhere a broadcast per row from memory.
struct DepthRows {
#if HWY_TARGET == HWY_NEON
  static_assert(kMR == 6, "rows 0-3 and 2-5");
  hn::Vec<DF> rows03, rows25;
  HWY_INLINE DepthRows(const float* HWY_RESTRICT a, size_t at)
      : rows03(hn::LoadU(DF(), a + at)), rows25(hn::LoadU(DF(), a + at + 2)) {}
  template <size_t kRow>
  HWY_INLINE hn::Vec<DF> Row() const {
    if constexpr (kRow < 4) {
      return hn::Broadcast<static_cast<int>(kRow)>(rows03);
    } else {
      return hn::Broadcast<static_cast<int>(kRow) - 2>(rows25);
    }
  }
#else
  const float* HWY_RESTRICT a;
  size_t at;
  HWY_INLINE DepthRows(const float* HWY_RESTRICT a_, size_t at_) : a(a_), at(at_) {}
  template <size_t kRow>
  HWY_INLINE hn::Vec<DF> Row() const {
    return hn::Set(DF(), a[at + kRow]);
  }
#endif
};

// acc += A x B over kc depths with B's vectors rounded to bf16 as loaded
// (acc: the MR x kNQ tile as a pack, row-major, as TileMulAdd's).
template <size_t kNQ, class... VF>
HWY_INLINE void RoundedBMulAdd(size_t kc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                               const LinePrefetch& prefetch, VF&... acc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const LinePrefetch pf = prefetch;  // a local copy: its fields stay in registers
  for (size_t k = 0; k < kc; ++k) {
    pf(k);
    WithRegistersFrom<kNQ>(
        [&](auto c)
            HWYATTN_INLINE_LAMBDA { return RoundToBf16(df, hn::LoadU(df, b + k * kNR + c * N)); },
        [&](auto&... bv) HWYATTN_INLINE_LAMBDA {
          const DepthRows rows(a, k * kMR);
          Unroll<kMR>([&](auto r) HWYATTN_INLINE_LAMBDA {
            const auto ar = rows.Row<r>();
            Unroll<kNQ>([&](auto c) HWYATTN_INLINE_LAMBDA {
              auto& x = Nth<r * kNQ + c>(acc...);
              x = hn::MulAdd(ar, Nth<c>(bv...), x);
            });
          });
        });
  }
}

// acc += A x B over `pairs` depth pairs, B as bf16 pairs widened exactly:
// the low halves (even depths) first, then the high halves (odd depths), so
// that only kNQ B vectors are live at once.
template <size_t kNQ, class... VF>
HWY_INLINE void PairsMulAdd(size_t pairs, const float* HWY_RESTRICT a,
                            const uint32_t* HWY_RESTRICT b, const LinePrefetch& prefetch,
                            VF&... acc) {
  const DF df;
  const DU du;
  const size_t N = hn::Lanes(df);
  const auto high = hn::Set(du, 0xFFFF0000u);
  const LinePrefetch pf = prefetch;  // a local copy: its fields stay in registers
  for (size_t i = 0; i < pairs; ++i) {
    pf(i);
    WithRegistersFrom<kNQ>(
        [&](auto c) HWYATTN_INLINE_LAMBDA { return hn::LoadU(du, b + i * kNR + c * N); },
        [&](auto&... u) HWYATTN_INLINE_LAMBDA {
          for (size_t half = 0; half < 2; ++half) {
            WithRegistersFrom<kNQ>(
                [&](auto c) HWYATTN_INLINE_LAMBDA {
                  const auto uc = Nth<c>(u...);
                  return hn::BitCast(df, half == 0 ? hn::ShiftLeft<16>(uc) : hn::And(uc, high));
                },
                [&](auto&... bv) HWYATTN_INLINE_LAMBDA {
                  const DepthRows rows(a + (2 * i + half) * kMR, 0);
                  Unroll<kMR>([&](auto r) HWYATTN_INLINE_LAMBDA {
                    const auto ar = rows.Row<r>();
                    Unroll<kNQ>([&](auto c) HWYATTN_INLINE_LAMBDA {
                      auto& x = Nth<r * kNQ + c>(acc...);
                      x = hn::MulAdd(ar, Nth<c>(bv...), x);
                    });
                  });
                });
          }
        });
  }
}

// The MR x (kNQ vectors) tile at c (row stride ldc) over depths
// [k0, k0 + kc) of the x panel `a` (the panel's start) and the W slice `b`
// (at depth k0): c = bias + A B if bias is not null, else c += A B.
template <size_t kNQ, Kind kKind>
HWY_INLINE void RunTile(const float* HWY_RESTRICT a, int64_t k0, size_t kc, const void* b,
                        float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT bias,
                        const LinePrefetch& prefetch) {
  const DF df;
  const size_t N = hn::Lanes(df);
  if constexpr (kKind == Kind::kF32) {
    const PackedA a_slice{a + k0 * static_cast<int64_t>(kMR), kMR};
    const float* bf = static_cast<const float*>(b);
    if (bias != nullptr) {
      TileMul<kMR, kNQ>(df, kc, a_slice, bf, kNR, c, ldc, bias, prefetch);
    } else {
      TileMulAccumulate<kMR, kNQ>(df, kc, a_slice, bf, kNR, c, ldc, prefetch);
    }
  } else if constexpr (kKind == Kind::kDot) {
    if constexpr (kMR == kBf16MatmulRows && kNR == 48) {
      const uint32_t* a_pairs = reinterpret_cast<const uint32_t*>(a) + k0 / 2 * kMR;
      Bf16MatmulTile(kNQ, (kc + 1) / 2, a_pairs, static_cast<const uint32_t*>(b), kNR, bias, c, ldc,
                     prefetch.lines, prefetch.count);
    } else {
      HWY_ABORT("hwyattn: the AVX512_BF16 matmul tile on a target without 16-lane vectors");
    }
  } else {
    WithRegistersFrom<kNQ>(
        [&](auto q) HWYATTN_INLINE_LAMBDA {
          return bias != nullptr ? hn::LoadU(df, bias + q * N) : hn::Zero(df);
        },
        [&](auto&... init) HWYATTN_INLINE_LAMBDA {
          WithRegistersFrom<kMR * kNQ>(
              [&](auto i) HWYATTN_INLINE_LAMBDA {
                return bias != nullptr ? Nth<i % kNQ>(init...)
                                       : hn::LoadU(df, c + (i / kNQ) * ldc + (i % kNQ) * N);
              },
              [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
                const float* a_slice = a + k0 * static_cast<int64_t>(kMR);
                if constexpr (kKind == Kind::kF32RoundB) {
                  RoundedBMulAdd<kNQ>(kc, a_slice, static_cast<const float*>(b), prefetch, acc...);
                } else {
                  PairsMulAdd<kNQ>((kc + 1) / 2, a_slice, static_cast<const uint32_t*>(b), prefetch,
                                   acc...);
                }
                StoreTile<kMR, kNQ>(df, c, ldc, acc...);
              });
        });
  }
}

// Depths [k0, k0 + kc) of the MR x (kNQ vectors) tile of y = x w^T + b at
// rows [m0, m0 + MR) and columns [n0, n0 + cols), cols <= kNQ * lanes: `a` is
// the rows' packed panel, `b` the columns' packed W slice. The first depth
// block starts from the bias, later ones from what the earlier left in y.
template <size_t kNQ, Kind kKind>
void MultiplyTile(const RowsView& x, int64_t m0, const float* HWY_RESTRICT a, int64_t k0, size_t kc,
                  const void* b, const float* HWY_RESTRICT bias, int64_t n0, int64_t cols,
                  const RowsView& y, const LinePrefetch& prefetch) {
  const DF df;
  const int64_t rows = std::min<int64_t>(kMR, x.rows - m0);
  const float* init = k0 == 0 ? bias + n0 : nullptr;
  // Whole tiles whose MR rows are evenly spaced go straight to Y; edges and
  // rows that cross a group boundary go through `tile`.
  if (rows == static_cast<int64_t>(kMR) && cols == static_cast<int64_t>(kNQ * hn::Lanes(df)) &&
      y.col_stride == 1 && m0 / y.rows_per_group == (m0 + rows - 1) / y.rows_per_group) {
    float* c = y.data + y.RowOffset(m0) + n0;
    RunTile<kNQ, kKind>(a, k0, kc, b, c, static_cast<size_t>(y.row_stride), init, prefetch);
    return;
  }
  HWY_ALIGN float tile[kMR * kNR] = {};
  if (k0 != 0) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = y.data + y.RowOffset(m0 + r) + n0 * y.col_stride;
      for (int64_t c = 0; c < cols; ++c) tile[r * kNR + c] = src[c * y.col_stride];
    }
  }
  RunTile<kNQ, kKind>(a, k0, kc, b, tile, kNR, init, LinePrefetch{nullptr, 0});
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = y.data + y.RowOffset(m0 + r) + n0 * y.col_stride;
    for (int64_t c = 0; c < cols; ++c) dst[c * y.col_stride] = tile[r * kNR + c];
  }
}

// Every row panel of the item against one KC x NR slice of W (kNQ vectors
// of it hold columns: a last panel of 32 columns on AVX-512 runs 8 x 2 tiles
// rather than multiplying 16 zero columns). The tiles share out the
// prefetching of the next slice's `next_lines` lines at `next`: with W in L3
// or memory (2048 x 2048: 16 MiB), the first row panel would otherwise wait
// for each slice (2048^3 on 2 threads +3%).
template <size_t kNQ, Kind kKind>
void MultiplyPanel(const RowsView& x, int64_t m0, size_t row_panels,
                   const float* HWY_RESTRICT a_panels, size_t panel_floats, int64_t k0, size_t kc,
                   const void* b, const float* HWY_RESTRICT bias, int64_t n0, int64_t cols,
                   const RowsView& y, const float* next, size_t next_lines) {
  const size_t per_tile = (next_lines + row_panels - 1) / row_panels;
  for (size_t i = 0; i < row_panels; ++i) {
    const size_t first = std::min(next_lines, i * per_tile);
    MultiplyTile<kNQ, kKind>(
        x, m0 + static_cast<int64_t>(i * kMR), a_panels + i * panel_floats, k0, kc, b, bias, n0,
        cols, y,
        LinePrefetch{next + first * kCacheLineFloats, std::min(per_tile, next_lines - first)});
  }
}

// MultiplyPanel with the tile width (in vectors) of `vectors` columns.
template <Kind kKind>
void MultiplyPanelOf(size_t vectors, const RowsView& x, int64_t m0, size_t row_panels,
                     const float* HWY_RESTRICT a_panels, size_t panel_floats, int64_t k0, size_t kc,
                     const void* b, const float* HWY_RESTRICT bias, int64_t n0, int64_t cols,
                     const RowsView& y, const float* next, size_t next_lines) {
  if (vectors == 1) {
    MultiplyPanel<1, kKind>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, bias, n0, cols, y,
                            next, next_lines);
  } else if (vectors == 2) {
    MultiplyPanel<2, kKind>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, bias, n0, cols, y,
                            next, next_lines);
  } else {
    MultiplyPanel<kTileVectors, kKind>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, bias,
                                       n0, cols, y, next, next_lines);
  }
}

void MultiplyRows(const RowsView& x, int64_t m0, const LinearOutput* outputs, size_t num_outputs,
                  MatmulPrecision precision, float* HWY_RESTRICT a_panels) {
  // Preconditions (free in Release): m0 starts an item of x; every output
  // is [x.rows, w->n] from weights packed for x's depth.
  HWY_DASSERT(x.data != nullptr || x.cols == 0);
  HWY_DASSERT(0 <= m0 && m0 < x.rows && m0 % static_cast<int64_t>(kMR) == 0);
  HWY_DASSERT(IsScratchAligned(a_panels) && outputs != nullptr && num_outputs >= 1);
  bool all_pairs = true;
  for (size_t o = 0; o < num_outputs; ++o) {
    HWY_DASSERT(outputs[o].w != nullptr && outputs[o].w->k == x.cols &&
                (outputs[o].w->panels != nullptr) != (outputs[o].w->pairs != nullptr) &&
                outputs[o].w->bias != nullptr);
    HWY_DASSERT(outputs[o].y.data != nullptr && outputs[o].y.rows == x.rows &&
                outputs[o].y.cols == outputs[o].w->n);
    all_pairs = all_pairs && outputs[o].w->pairs != nullptr;
  }
  const bool bf16 = precision == MatmulPrecision::kBf16;
  const APack pack = !bf16 ? APack::kFloats
                     : all_pairs && Bf16DotFor(HWY_TARGET, Bf16DotKernel::kMatmul)
                         ? APack::kPairs
                         : APack::kRounded;
  const size_t N = hn::Lanes(DF());
  const int64_t k = x.cols, k_pairs = (k + 1) / 2;
  const size_t panel_floats = PanelFloats(k, kMR);
  size_t row_panels = 0;
  for (; row_panels < kRowPanels; ++row_panels) {
    const int64_t row = m0 + static_cast<int64_t>(row_panels * kMR);
    if (row >= x.rows) break;
    PackRows(x, row, pack, a_panels + row_panels * panel_floats);
  }
  for (size_t o = 0; o < num_outputs; ++o) {
    const PackedMatrix& w = *outputs[o].w;
    const bool pairs = w.pairs != nullptr;
    const Kind kind = pack == APack::kPairs ? Kind::kDot
                      : pairs               ? Kind::kPairs
                      : bf16                ? Kind::kF32RoundB
                                            : Kind::kF32;
    const int64_t panels = (w.n + kNR - 1) / kNR;
    // Floats (or pair lanes, as many 4-byte words) per panel.
    const int64_t panel_words = (pairs ? k_pairs : k) * static_cast<int64_t>(kNR);
    const float* base = pairs ? reinterpret_cast<const float*>(w.pairs) : w.panels;
    const float* end = base + panels * panel_words;
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n0 = p * static_cast<int64_t>(kNR);
      const int64_t cols = std::min<int64_t>(kNR, w.n - n0);
      const size_t vectors = (static_cast<size_t>(cols) + N - 1) / N;
      // At least one depth block, so that k = 0 still writes the bias.
      int64_t k0 = 0;
      do {
        const size_t kc = static_cast<size_t>(std::min<int64_t>(kDepth, k - k0));
        // The slice's words: kc depths, or ceil(kc / 2) pairs (k0 is even).
        const size_t slice_steps = pairs ? (kc + 1) / 2 : kc;
        const float* b = base + p * panel_words + (pairs ? k0 / 2 : k0) * static_cast<int64_t>(kNR);
        // The next slice (this panel's next depth block or the next panel's
        // first) follows this one in memory.
        const float* next = b + slice_steps * kNR;
        const size_t next_lines = static_cast<size_t>(std::min<ptrdiff_t>(
                                      static_cast<ptrdiff_t>(slice_steps * kNR), end - next)) /
                                  kCacheLineFloats;
        switch (kind) {
          case Kind::kF32:
            MultiplyPanelOf<Kind::kF32>(vectors, x, m0, row_panels, a_panels, panel_floats, k0, kc,
                                        b, w.bias, n0, cols, outputs[o].y, next, next_lines);
            break;
          case Kind::kF32RoundB:
            MultiplyPanelOf<Kind::kF32RoundB>(vectors, x, m0, row_panels, a_panels, panel_floats,
                                              k0, kc, b, w.bias, n0, cols, outputs[o].y, next,
                                              next_lines);
            break;
          case Kind::kPairs:
            MultiplyPanelOf<Kind::kPairs>(vectors, x, m0, row_panels, a_panels, panel_floats, k0,
                                          kc, b, w.bias, n0, cols, outputs[o].y, next, next_lines);
            break;
          case Kind::kDot:
            MultiplyPanelOf<Kind::kDot>(vectors, x, m0, row_panels, a_panels, panel_floats, k0, kc,
                                        b, w.bias, n0, cols, outputs[o].y, next, next_lines);
            break;
        }
        k0 += static_cast<int64_t>(kc);
      } while (k0 < k);
    }
  }
}

constexpr MatmulKernels kMatmulKernels = {HWY_TARGET,       kMR,        kNR,          &PackWeights,
                                          &PackWeightsBf16, kRowPanels, &MultiplyRows};

const MatmulKernels* GetMatmulKernelTable() { return &kMatmulKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetMatmulKernelTable);

size_t PanelFloats(int64_t k, size_t tile_rows) {
  return PadFloats(static_cast<size_t>(k + (k & 1)) * tile_rows);
}

const MatmulKernels& GetMatmulKernels() {
  static const MatmulKernels* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetMatmulKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
