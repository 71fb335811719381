// SPDX-License-Identifier: Apache-2.0
//
// The decode kernel's scores under integer products (precision = INT8,
// int8_products.h), per target, on Highway's portable integer multiply-adds:
// each K block's 32 int8 numbers are widened to int16 once and multiplied
// with every query row's (kept as int16) by ReorderWidenMulAccumulate
// (pmaddwd on x86, smlal on NEON, svmlalb/t on SVE2): exact int32 sums of
// 32 products (|q k| <= 127 * 128, far from overflow). Each block's sum is
// then converted and scaled once per (row, key, block) in fp32, d[r][b] *
// e[j][b] (the query's and the block's scales), into one fp32 vector per
// row, whose lanes are summed once per key. Vectors of at most 16 int16
// lanes: a block is then a whole number of vectors on every target.
//
// Keys are read one at a time (the rows' accumulators in registers, a pack
// as registers-inl.h makes them, since SVE's vectors cannot be array
// elements); the K rows come from the cache in place (I8 rows of whole
// blocks, Q8_0 and Q4_0 blocks with their scales) or from the decode
// kernel's staged integers (IntegerRows).

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "src/ops/blocks.h"
#include "src/ops/int8_products.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/int8_scores.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/registers-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D16 = hn::CappedTag<int16_t, 16>;
using D8 = hn::Rebind<int8_t, D16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF32 = hn::Rebind<float, D32>;

template <Int8KeyLayout kLayout>
using Layout = std::integral_constant<Int8KeyLayout, kLayout>;

// Numbers [i, i + Lanes(d16)) of a block (i a multiple of the lanes) as
// int16: its int8, or (Q4_0) from its 16 bytes of nibbles, element j < 16
// the low nibble of byte j and j + 16 its high one, minus 8.
template <Int8KeyLayout kLayout>
HWY_INLINE hn::Vec<D16> KeyNumbers(D16 d16, const int8_t* HWY_RESTRICT block, size_t i) {
  if constexpr (kLayout == Int8KeyLayout::kQ4_0) {
    const hn::RebindToUnsigned<D16> du16;
    const hn::Rebind<uint8_t, D16> du8;
    const auto* bytes = reinterpret_cast<const uint8_t*>(block);
    const auto wide = hn::BitCast(d16, hn::PromoteTo(du16, hn::LoadU(du8, bytes + i % 16)));
    auto nibbles = hn::And(wide, hn::Set(d16, 15));
    if (i >= 16) nibbles = hn::ShiftRight<4>(wide);
    return hn::Sub(nibbles, hn::Set(d16, 8));
  } else {
    return hn::PromoteTo(d16, hn::LoadU(D8(), block + i));
  }
}

// Int8Kernels::scores for group_rows = kRows and keys laid out as kKeys.
template <size_t kRows, Int8KeyLayout kKeys>
HWY_NOINLINE void ScoreRows(size_t rows, const Int8QueryRows& q, const Int8KeyRows& keys, size_t n,
                            float scale, float* s, size_t lds) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t lanes = hn::Lanes(d16);
  const size_t blocks = q.blocks;
  const size_t ldq = blocks * static_cast<size_t>(kBlockElems);
  constexpr bool kInPlace = kKeys == Int8KeyLayout::kQ8_0 || kKeys == Int8KeyLayout::kQ4_0;
  for (size_t j = 0; j < n; ++j) {
    const int8_t* HWY_RESTRICT k = keys.rows[j];
    WithRegisters<kRows>(hn::Zero(df), [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
      for (size_t b = 0; b < blocks; ++b) {
        const size_t at = b * static_cast<size_t>(kBlockElems);
        // The block's numbers (after its scale in place) and its scale.
        const int8_t* HWY_RESTRICT kb = k + at;
        float e = 1.0f;
        if constexpr (kInPlace) {
          const auto* block =
              reinterpret_cast<const unsigned char*>(k) + b * kInPlaceBlockBytes<kKeys>;
          kb = reinterpret_cast<const int8_t*>(block + 2);
          e = BlockHalf(block, 0);
        } else if constexpr (kKeys == Int8KeyLayout::kScaled) {
          e = keys.e[j * blocks + b];
        }
        WithRegisters<2 * kRows>(hn::Zero(d32), [&](auto&... sums) HWYATTN_INLINE_LAMBDA {
          for (size_t i = 0; i < static_cast<size_t>(kBlockElems); i += lanes) {
            const auto kv = KeyNumbers<kKeys>(d16, kb, i);
            Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
              const auto qv = hn::LoadU(d16, q.q + r * ldq + at + i);
              auto& sum0 = Nth<2 * r>(sums...);
              sum0 = hn::ReorderWidenMulAccumulate(d32, qv, kv, sum0, Nth<2 * r + 1>(sums...));
            });
          }
          Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
            auto& a = Nth<r>(acc...);
            const auto sum = hn::Add(Nth<2 * r>(sums...), Nth<2 * r + 1>(sums...));
            const float scale =
                kKeys == Int8KeyLayout::kUnscaled ? q.d[r * blocks + b] : q.d[r * blocks + b] * e;
            a = hn::MulAdd(hn::ConvertTo(df, sum), hn::Set(df, scale), a);
          });
        });
      }
      Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
        if (r >= rows) return;
        float total = hn::GetLane(hn::SumOfLanes(df, Nth<r>(acc...)));
        if (keys.m != nullptr) {
          for (size_t b = 0; b < blocks; ++b) {
            total += keys.m[j * blocks + b] * q.dsum[r * blocks + b];
          }
        }
        s[r * lds + j] = total * scale;
      });
    });
  }
}

void Scores(size_t group_rows, size_t rows, const Int8QueryRows& q, const Int8KeyRows& keys,
            size_t n, float scale, float* s, size_t lds) {
  HWY_DASSERT(rows >= 1 && rows <= group_rows && group_rows <= 8);
  const auto rows_of = [&](auto layout) {
    constexpr Int8KeyLayout kKeys = decltype(layout)::value;
    switch (group_rows) {
      case 1: return ScoreRows<1, kKeys>(rows, q, keys, n, scale, s, lds);
      case 2: return ScoreRows<2, kKeys>(rows, q, keys, n, scale, s, lds);
      case 4: return ScoreRows<4, kKeys>(rows, q, keys, n, scale, s, lds);
      default: return ScoreRows<8, kKeys>(rows, q, keys, n, scale, s, lds);
    }
  };
  switch (keys.layout) {
    case Int8KeyLayout::kQ8_0: return rows_of(Layout<Int8KeyLayout::kQ8_0>());
    case Int8KeyLayout::kQ4_0: return rows_of(Layout<Int8KeyLayout::kQ4_0>());
    case Int8KeyLayout::kScaled: return rows_of(Layout<Int8KeyLayout::kScaled>());
    default: return rows_of(Layout<Int8KeyLayout::kUnscaled>());
  }
}

constexpr Int8Kernels kInt8Kernels = {HWY_TARGET, false, &Scores};

const Int8Kernels* GetInt8KernelTable() { return &kInt8Kernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetInt8KernelTable);

const Int8Kernels& GetInt8Kernels() {
  static const Int8Kernels* const kernels = [] {
    const Int8Kernels* portable = PickKernels(HWY_DISPATCH_TABLE(GetInt8KernelTable));
    const Int8Kernels* vnni = Int8VnniKernels();
    return vnni != nullptr && Int8DotFor(portable->target) ? vnni : portable;
  }();
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
