// SPDX-License-Identifier: Apache-2.0
//
// The decode loops' score groups (GroupRows) and the transpose-and-sum of
// their kLanes accumulators, one per (row, key), into one vector of the
// totals (ReduceKeys): the F32 loops' (decode_attention.cc) and the block
// formats' (block_rows.cc), so both sum alike.

// Per-target include guard (foreach_target includes this once per target).
#if defined(HWYATTN_SRC_OPS_REDUCE_KEYS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_REDUCE_KEYS_INL_H_
#undef HWYATTN_SRC_OPS_REDUCE_KEYS_INL_H_
#else
#define HWYATTN_SRC_OPS_REDUCE_KEYS_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "src/ops/reduce_keys_avx512.h"
#include "src/ops/registers-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per score group: the smallest power of two >= rows, at most a vector.
// A group's kLanes / group keys are scored at once, an accumulator per
// (row, key), which ReduceKeys sums into lane row * keys + key.
constexpr size_t GroupRows(size_t rows) {
  size_t g = 1;
  while (g < rows && g < kLanes) g *= 2;
  return g;
}

#if HWY_TARGET != HWY_SCALAR  // (no ConcatEven there; one lane needs no sums)
// Pairwise sums of a pack of accumulators (registers-inl.h), halving it
// until one vector is left: lanes [0, N/2) of a level's result i sum adjacent
// lanes of accumulator 2i, lanes [N/2, N) those of 2i + 1.
template <class... V>
HWY_INLINE hn::Vec<DF> ReducePairwise(V&... acc) {
  if constexpr (sizeof...(V) == 1) {
    return Nth<0>(acc...);
  } else {
    const DF df;
    return WithRegistersFrom<sizeof...(V) / 2>(
        [&](auto i) HWYATTN_INLINE_LAMBDA {
          auto& a = Nth<2 * i>(acc...);
          auto& b = Nth<2 * i + 1>(acc...);
          return hn::Add(hn::ConcatEven(df, b, a), hn::ConcatOdd(df, b, a));
        },
        [&](auto&... next) HWYATTN_INLINE_LAMBDA { return ReducePairwise(next...); });
  }
}
#endif

// Transposes-and-sums kLanes accumulators (one per key; a pack) into one
// vector of the keys' totals: on AVX3 ReduceKeys16; elsewhere pairwise
// (ReducePairwise): after log2(N) levels lane i holds key i's total.
template <class... V>
HWY_INLINE hn::Vec<DF> ReduceKeys(V&... acc) {
  static_assert(sizeof...(V) == kLanes, "an accumulator per lane");
#if HWY_TARGET == HWY_AVX3
  __m512 raw[16] = {acc.raw...};
  return hn::Vec<DF>{ReduceKeys16(raw)};
#elif HWY_TARGET != HWY_SCALAR
  return ReducePairwise(acc...);
#else
  return Nth<0>(acc...);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_REDUCE_KEYS_INL_H_
