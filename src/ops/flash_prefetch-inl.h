// SPDX-License-Identifier: Apache-2.0
//
// The prefill's software prefetch, per target (flash_attention.cc): how far
// ahead the key tiles pull their K panels and value lines, and the rows a
// work item pulls toward L1 in small steps (the next item's queries, its own
// outputs).

#if defined(HWYATTN_SRC_OPS_FLASH_PREFETCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_FLASH_PREFETCH_INL_H_
#undef HWYATTN_SRC_OPS_FLASH_PREFETCH_INL_H_
#else
#define HWYATTN_SRC_OPS_FLASH_PREFETCH_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include "hwy/highway.h"
#include "src/cache_line.h"
#include "src/ops/flash_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// K and V reach a work item from L2 or L3 (and from memory under other
// processes' cache pressure). A broadcast that misses stalls the register
// tile: the FMAs of later k steps fill the scheduler behind it, so the
// out-of-order window hides an L2 hit but not a trip to L3 or memory. Each
// tile therefore prefetches what the tile kPrefetchDistance tiles later reads
// first, one line per k step of its loop. A tile takes ~800 cycles (8 x 3
// vectors, 64 steps): 2 tiles ahead measured 2.7% faster than 1 on X1 under
// cache pressure, 3 or 4 ahead 2.5% slower than 2.
constexpr size_t kPrefetchDistance = 2;

// A key panel: MR rows `ld` floats apart, line by line, `lines` =
// MR * ceil(D / kCacheLineFloats) of them over the current panel's D steps.
struct KeyPanelPrefetch {
  const float* rows;
  size_t ld;
  size_t lines;
  HWY_INLINE void operator()(size_t k) const {
    if (k < lines) PrefetchLine(rows + (k % kMR) * ld + (k / kMR) * kCacheLineFloats);
  }
};

// P . V's blocks of MR value dims run over the keys; the block
// kPrefetchDistance before one that starts a new cache line of the value rows
// prefetches that line, key k at step k. (The first line of each row is
// prefetched during Q . K.)
struct ValueLinePrefetch {
  const float* line;  // key 0's line, or null
  size_t ldv;
  HWY_INLINE void operator()(size_t k) const {
    if (line != nullptr) PrefetchLine(line + k * ldv);
  }
};

// Rows that a work item pulls toward L1 a few lines per key panel: the next
// item's query rows, which PackQueries reads when that item starts, and this
// item's output rows, which StoreOutputs writes when it ends. Left to those
// moments, both come from L3 or memory in a burst the register tiles cannot
// hide (spread: +1.7% on X1, 1 thread). Not the next head's K/V: their
// thousands of lines crowd out the tiles' own prefetches.
class RowLinesAhead {
 public:
  // Adds `rows` rows of `bytes` each, row c at row(c) (a byte pointer).
  template <class RowAt>
  void AddRows(int64_t rows, int64_t bytes, const RowAt& row) {
    for (int64_t c = 0; c < rows && count_ < kMaxRows; ++c) {
      const uintptr_t first = reinterpret_cast<uintptr_t>(row(c));
      const uintptr_t line0 = first / kCacheLineBytes * kCacheLineBytes;
      rows_[count_] = reinterpret_cast<const char*>(line0);
      lines_[count_] =
          static_cast<uint32_t>((first + static_cast<uintptr_t>(bytes) - 1) / kCacheLineBytes -
                                first / kCacheLineBytes + 1);
      total_ += lines_[count_];
      ++count_;
    }
  }
  // Spreads the lines over `steps` calls of Step.
  void Spread(int64_t steps) {
    per_step_ =
        steps > 0 ? (total_ + static_cast<size_t>(steps) - 1) / static_cast<size_t>(steps) : 0;
  }
  HWY_INLINE void Step() {
    for (size_t n = 0; n < per_step_ && row_ < count_; ++n) {
      PrefetchLine(rows_[row_] + kCacheLineBytes * line_);
      if (++line_ == lines_[row_]) {
        line_ = 0;
        ++row_;
      }
    }
  }

 private:
  static constexpr size_t kMaxRows = 2 * kQueryTile;
  const char* rows_[kMaxRows];
  uint32_t lines_[kMaxRows];
  size_t count_ = 0, total_ = 0, per_step_ = 0, row_ = 0;
  uint32_t line_ = 0;
};

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_FLASH_PREFETCH_INL_H_ toggle
