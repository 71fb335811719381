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

#include <stddef.h>
#include <stdint.h>

#include <algorithm>

#include "src/ops/matmul.h"
#include "src/scratch.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kMR = kTileRows;
constexpr size_t kNR = kTileVectors * HWY_LANES(float);

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
constexpr size_t kLineFloats = 64 / sizeof(float);

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

// Packs rows [m0, m0 + MR) of x (zero past the last row) as a [k][MR] panel.
void PackRows(const RowsView& x, int64_t m0, float* HWY_RESTRICT a) {
  const int64_t k = x.cols;
  for (size_t r = 0; r < kMR; ++r) {
    const int64_t m = m0 + static_cast<int64_t>(r);
    if (m < x.rows) {
      const float* src = x.data + x.RowOffset(m);
      for (int64_t kk = 0; kk < k; ++kk) a[kk * kMR + r] = src[kk * x.col_stride];
    } else {
      for (int64_t kk = 0; kk < k; ++kk) a[kk * kMR + r] = 0.0f;
    }
  }
}

// Prefetches `count` lines from `lines` on, one per k step of a tile (into
// L2: the slice of W the next panel's tiles read, while this one's run).
struct LinePrefetch {
  const float* lines;
  size_t count;
  HWY_INLINE void operator()(size_t k) const {
    if (k < count) __builtin_prefetch(lines + k * kLineFloats, 0, 2);
  }
};

// Depths [k0, k0 + kc) of the MR x (kNQ vectors) tile of y = x w^T + b at
// rows [m0, m0 + MR) and columns [n0, n0 + cols), cols <= kNQ * lanes: `a` is
// the rows' packed panel, `b` the columns' packed W slice. The first depth
// block starts from the bias, later ones from what the earlier left in y.
template <size_t kNQ>
void MultiplyTile(const RowsView& x, int64_t m0, const float* HWY_RESTRICT a, int64_t k0, size_t kc,
                  const float* HWY_RESTRICT b, const float* HWY_RESTRICT bias, int64_t n0,
                  int64_t cols, const RowsView& y, const LinePrefetch& prefetch) {
  const DF df;
  const PackedA a_slice{a + k0 * static_cast<int64_t>(kMR), kMR};
  const int64_t rows = std::min<int64_t>(kMR, x.rows - m0);
  // Whole tiles whose MR rows are evenly spaced go straight to Y; edges and
  // rows that cross a group boundary go through `tile`.
  if (rows == static_cast<int64_t>(kMR) && cols == static_cast<int64_t>(kNQ * hn::Lanes(df)) &&
      y.col_stride == 1 && m0 / y.rows_per_group == (m0 + rows - 1) / y.rows_per_group) {
    float* c = y.data + y.RowOffset(m0) + n0;
    const size_t ldc = static_cast<size_t>(y.row_stride);
    if (k0 == 0) {
      TileMul<kMR, kNQ>(df, kc, a_slice, b, kNR, c, ldc, bias + n0, prefetch);
    } else {
      TileMulAccumulate<kMR, kNQ>(df, kc, a_slice, b, kNR, c, ldc, prefetch);
    }
    return;
  }
  HWY_ALIGN float tile[kMR * kNR] = {};
  if (k0 == 0) {
    TileMul<kMR, kNQ>(df, kc, a_slice, b, kNR, tile, kNR, bias + n0);
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = y.data + y.RowOffset(m0 + r) + n0 * y.col_stride;
      for (int64_t c = 0; c < cols; ++c) tile[r * kNR + c] = src[c * y.col_stride];
    }
    TileMulAccumulate<kMR, kNQ>(df, kc, a_slice, b, kNR, tile, kNR);
  }
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
template <size_t kNQ>
void MultiplyPanel(const RowsView& x, int64_t m0, size_t row_panels,
                   const float* HWY_RESTRICT a_panels, size_t panel_floats, int64_t k0, size_t kc,
                   const float* HWY_RESTRICT b, const float* HWY_RESTRICT bias, int64_t n0,
                   int64_t cols, const RowsView& y, const float* next, size_t next_lines) {
  const size_t per_tile = (next_lines + row_panels - 1) / row_panels;
  for (size_t i = 0; i < row_panels; ++i) {
    const size_t first = std::min(next_lines, i * per_tile);
    MultiplyTile<kNQ>(
        x, m0 + static_cast<int64_t>(i * kMR), a_panels + i * panel_floats, k0, kc, b, bias, n0,
        cols, y, LinePrefetch{next + first * kLineFloats, std::min(per_tile, next_lines - first)});
  }
}

void MultiplyRows(const RowsView& x, int64_t m0, const LinearOutput* outputs, size_t num_outputs,
                  float* HWY_RESTRICT a_panels) {
  // Preconditions (free in Release): m0 starts an item of x; every output
  // is [x.rows, w->n] from weights packed for x's depth.
  HWY_DASSERT(x.data != nullptr || x.cols == 0);
  HWY_DASSERT(0 <= m0 && m0 < x.rows && m0 % static_cast<int64_t>(kMR) == 0);
  HWY_DASSERT(IsScratchAligned(a_panels) && outputs != nullptr && num_outputs >= 1);
  for (size_t o = 0; o < num_outputs; ++o) {
    HWY_DASSERT(outputs[o].w != nullptr && outputs[o].w->k == x.cols &&
                outputs[o].w->panels != nullptr && outputs[o].w->bias != nullptr);
    HWY_DASSERT(outputs[o].y.data != nullptr && outputs[o].y.rows == x.rows &&
                outputs[o].y.cols == outputs[o].w->n);
  }
  const size_t N = hn::Lanes(DF());
  const int64_t k = x.cols;
  const size_t panel_floats = PadFloats(static_cast<size_t>(k) * kMR);
  size_t row_panels = 0;
  for (; row_panels < kRowPanels; ++row_panels) {
    const int64_t row = m0 + static_cast<int64_t>(row_panels * kMR);
    if (row >= x.rows) break;
    PackRows(x, row, a_panels + row_panels * panel_floats);
  }
  for (size_t o = 0; o < num_outputs; ++o) {
    const PackedMatrix& w = *outputs[o].w;
    const int64_t panels = (w.n + kNR - 1) / kNR;
    const float* end = w.panels + panels * k * static_cast<int64_t>(kNR);
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n0 = p * static_cast<int64_t>(kNR);
      const int64_t cols = std::min<int64_t>(kNR, w.n - n0);
      const size_t vectors = (static_cast<size_t>(cols) + N - 1) / N;
      // At least one depth block, so that k = 0 still writes the bias.
      int64_t k0 = 0;
      do {
        const size_t kc = static_cast<size_t>(std::min<int64_t>(kDepth, k - k0));
        const float* b = w.panels + (p * k + k0) * static_cast<int64_t>(kNR);
        // The next slice (this panel's next depth block or the next panel's
        // first) follows this one in memory.
        const float* next = b + kc * kNR;
        const size_t next_lines =
            static_cast<size_t>(std::min<ptrdiff_t>(static_cast<ptrdiff_t>(kc * kNR), end - next)) /
            kLineFloats;
        if (vectors == 1) {
          MultiplyPanel<1>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, w.bias, n0, cols,
                           outputs[o].y, next, next_lines);
        } else if (vectors == 2) {
          MultiplyPanel<2>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, w.bias, n0, cols,
                           outputs[o].y, next, next_lines);
        } else {
          MultiplyPanel<kTileVectors>(x, m0, row_panels, a_panels, panel_floats, k0, kc, b, w.bias,
                                      n0, cols, outputs[o].y, next, next_lines);
        }
        k0 += static_cast<int64_t>(kc);
      } while (k0 < k);
    }
  }
}

constexpr MatmulKernels kMatmulKernels = {HWY_TARGET,   kMR,        kNR,
                                          &PackWeights, kRowPanels, &MultiplyRows};

const MatmulKernels* GetMatmulKernelTable() { return &kMatmulKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetMatmulKernelTable);

const MatmulKernels& GetMatmulKernels() {
  static const MatmulKernels* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetMatmulKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
