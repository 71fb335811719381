// SPDX-License-Identifier: Apache-2.0
//
// The prefill's operand packing, per target (flash_attention.cc): K and V of
// a (batch, kv head) into the panels and rows the register tiles read (PackKV,
// the kernel table's pack_kv phase: dequantized, gathered from pages, rounded
// under bf16 products, or paired along the head dim or the keys for the bf16
// dot-product tiles), the flags of key tiles whose V is not finite, and a work
// item's query rows, scaled and transposed into [D][Bq] (PackQueries).

#if defined(HWYATTN_SRC_OPS_FLASH_PACK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_FLASH_PACK_INL_H_
#undef HWYATTN_SRC_OPS_FLASH_PACK_INL_H_
#else
#define HWYATTN_SRC_OPS_FLASH_PACK_INL_H_
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "hwy/highway.h"
#include "src/cache_line.h"
#include "src/ops/blocks.h"
#include "src/ops/convert.h"
#include "src/ops/flash_attention.h"
#include "src/ops/convert-inl.h"
#include "src/ops/flash_tiles-inl.h"
#include "src/ops/registers-inl.h"
#include "src/ops/score_rules-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// An element of Q, K or V as a product's operand: widened exactly, and
// under bf16 products (kRound) rounded to bf16 (BF16 inputs stay as they are).
template <bool kRound, typename T>
HWY_INLINE float Operand(T x) {
  return kRound ? hwyattn::RoundToBf16(ToFloat(x)) : ToFloat(x);
}

// K of (b, kvh) as [panel][D][MR]: step d of a panel holds keys panel*MR + r,
// the broadcast operand of TileMul. Keys at or past the batch's key end are 0.
// A quantized cache's keys are dequantized (x * scale, fp32) here.
// Paged K is gathered here (its rows are never read in place).
// Under bf16 products (kRound) every element is rounded (RoundToBf16).
template <typename T, bool kRound>
void PackKeys(const SdpaProblem& p, int64_t b, int64_t kvh, float* HWY_RESTRICT dst) {
  const int64_t sd = p.k.stride[3];
  const int64_t dim = p.head_dim, key_end = p.KeyEnd(b);
  const int64_t panels = (key_end + kMR - 1) / kMR;
  for (int64_t panel = 0; panel < panels; ++panel) {
    float* HWY_RESTRICT out = dst + panel * dim * kMR;
    for (size_t r = 0; r < kMR; ++r) {
      const int64_t j = panel * static_cast<int64_t>(kMR) + static_cast<int64_t>(r);
      if (j < key_end) {
        const T* row = p.k.As<T>() + p.KeyRowOffset(p.k, b, kvh, j);
        if constexpr (kIsQuantized<T>) {
          int64_t step;
          const float* scale = p.ScaleRow(p.k_scale, b, kvh, j, &step);
          for (int64_t d = 0; d < dim; ++d)
            out[d * kMR + r] = Operand<kRound>(ToFloat(row[d * sd]) * scale[d * step]);
        } else {
          for (int64_t d = 0; d < dim; ++d) out[d * kMR + r] = Operand<kRound>(row[d * sd]);
        }
      } else {
        for (int64_t d = 0; d < dim; ++d) out[d * kMR + r] = 0.0f;
      }
    }
  }
}

// Elements [d0, d0 + n) of key (or value) j's row of t in the packed format
// kType (blocks.h) into x as fp32 values: I4's numbers times the cache's
// scales (s: k_scale or v_scale), a block format's as they are.
template <Dtype kType>
HWY_INLINE void PackedSpan(const SdpaProblem& p, const TensorView& t, const KvScale& s, int64_t b,
                           int64_t kvh, int64_t j, int64_t d0, int64_t n, float* HWY_RESTRICT x) {
  DequantizeSpan<kType>(t.BytesAt(p.KeyRowOffset(t, b, kvh, j)), d0, n, x);
  if constexpr (kType == Dtype::kI4) {
    int64_t step;
    const float* scale = p.ScaleRow(s, b, kvh, j, &step) + d0 * step;
    for (int64_t i = 0; i < n; ++i) x[i] *= scale[i * step];
  }
}

// PackKeys of K in a packed format (blocks.h): each row dequantized a
// block (of I4: 32 elements) at a time.
template <bool kRound>
void PackKeysPacked(const SdpaProblem& p, int64_t b, int64_t kvh, float* HWY_RESTRICT dst) {
  const int64_t dim = p.head_dim, key_end = p.KeyEnd(b);
  const int64_t panels = (key_end + kMR - 1) / kMR;
  DispatchPackedDtype(p.k.dtype, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    for (int64_t panel = 0; panel < panels; ++panel) {
      float* HWY_RESTRICT out = dst + panel * dim * kMR;
      for (size_t r = 0; r < kMR; ++r) {
        const int64_t j = panel * static_cast<int64_t>(kMR) + static_cast<int64_t>(r);
        if (j >= key_end) {
          for (int64_t d = 0; d < dim; ++d) out[d * kMR + r] = 0.0f;
          continue;
        }
        for (int64_t d0 = 0; d0 < dim; d0 += kBlockElems) {
          const int64_t n = std::min(kBlockElems, dim - d0);
          float x[kBlockElems];
          PackedSpan<kType>(p, p.k, p.k_scale, b, kvh, j, d0, n, x);
          for (int64_t i = 0; i < n; ++i) out[(d0 + i) * kMR + r] = Operand<kRound>(x[i]);
        }
      }
    }
  });
}

// V of (b, kvh) as [Lk][Dv] rows, for keys below the batch's key end
// (dequantized as keys are, and rounded under kRound).
template <typename T, bool kRound>
void PackValues(const SdpaProblem& p, int64_t b, int64_t kvh, float* HWY_RESTRICT dst) {
  const int64_t sd = p.v.stride[3];
  const int64_t value_dim = p.value_dim, key_end = p.KeyEnd(b);
  for (int64_t j = 0; j < key_end; ++j) {
    const T* row = p.v.As<T>() + p.KeyRowOffset(p.v, b, kvh, j);
    float* HWY_RESTRICT out = dst + j * value_dim;
    if constexpr (kIsQuantized<T>) {
      int64_t step;
      const float* scale = p.ScaleRow(p.v_scale, b, kvh, j, &step);
      for (int64_t dv = 0; dv < value_dim; ++dv)
        out[dv] = Operand<kRound>(ToFloat(row[dv * sd]) * scale[dv * step]);
    } else {
      for (int64_t dv = 0; dv < value_dim; ++dv) out[dv] = Operand<kRound>(row[dv * sd]);
    }
  }
}

// PackValues of V in a packed format.
template <bool kRound>
void PackValuesPacked(const SdpaProblem& p, int64_t b, int64_t kvh, float* HWY_RESTRICT dst) {
  const int64_t value_dim = p.value_dim, key_end = p.KeyEnd(b);
  DispatchPackedDtype(p.v.dtype, [&](auto type) {
    constexpr Dtype kType = decltype(type)::value;
    for (int64_t j = 0; j < key_end; ++j) {
      float* HWY_RESTRICT out = dst + j * value_dim;
      for (int64_t d0 = 0; d0 < value_dim; d0 += kBlockElems) {
        const int64_t n = std::min(kBlockElems, value_dim - d0);
        PackedSpan<kType>(p, p.v, p.v_scale, b, kvh, j, d0, n, out + d0);
        if (kRound) {
          for (int64_t i = 0; i < n; ++i) out[d0 + i] = Operand<true>(out[d0 + i]);
        }
      }
    }
  });
}

// The bits of element x of a tensor rounded to bf16, as the high half of a
// float's bits (the low half zero).
template <typename T>
HWY_INLINE uint32_t Bf16Bits(T x) {
  return FloatBits(hwyattn::RoundToBf16(ToFloat(x)));
}

// Two BF16 elements as they lie in memory (the first in the low half) as
// their Bf16Pair: rounding a bf16 value keeps its bits and quiets a NaN.
HWY_INLINE uint32_t QuietBf16Pair(uint32_t word) {
  return Bf16Pair(Bf16Bits(BF16{static_cast<uint16_t>(word)}),
                  Bf16Bits(BF16{static_cast<uint16_t>(word >> 16)}));
}

// Bf16Pair per lane of two vectors of floats rounded to bf16 (RoundToBf16):
// lo's bf16 in the low half, hi's in the high half.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16Pairs(hn::Vec<DF> lo, hn::Vec<DF> hi) {
  const hn::RebindToUnsigned<DF> du;
  return hn::Or(hn::ShiftRight<16>(hn::BitCast(du, lo)),
                hn::And(hn::BitCast(du, hi), hn::Set(du, 0xFFFF0000u)));
}

// pairs[i][lane] = Bf16Pairs(p[2i][lane], p[2i+1][lane]) for the first
// `lanes` lanes (a multiple of kLanes) of `rows` rows of bf16 values `ldp`
// apart; a row 2i+1 >= rows is taken as zeros: the queries of a tile as the
// pairs along the head dim that the bf16 dot-product tiles read.
void PairRows(size_t rows, size_t lanes, const float* HWY_RESTRICT p, size_t ldp,
              uint32_t* HWY_RESTRICT pairs, size_t ld_pairs) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  for (size_t i = 0; 2 * i < rows; ++i) {
    const float* lo = p + 2 * i * ldp;
    for (size_t c = 0; c < lanes; c += kLanes) {
      const hn::Vec<DF> hi = 2 * i + 1 < rows ? hn::LoadU(df, lo + ldp + c) : hn::Zero(df);
      hn::StoreU(Bf16Pairs(hn::LoadU(df, lo + c), hi), du, pairs + i * ld_pairs + c);
    }
  }
}

// bf16_dot packing (flash_bf16.h). K of (b, kvh) as [panel][ceil(D/2)][MR]
// pairs along the head dim; keys past the key end and the odd dim's partner
// are 0.
template <typename T>
void PackKeyPairs(const SdpaProblem& p, int64_t b, int64_t kvh, uint32_t* HWY_RESTRICT dst) {
  const int64_t sd = p.k.stride[3], dim = p.head_dim, key_end = p.KeyEnd(b);
  const int64_t pairs = (dim + 1) / 2;
  const int64_t panels = (key_end + kMR - 1) / kMR;
  for (int64_t panel = 0; panel < panels; ++panel) {
    uint32_t* HWY_RESTRICT out = dst + panel * pairs * kMR;
    for (size_t r = 0; r < kMR; ++r) {
      const int64_t j = panel * static_cast<int64_t>(kMR) + static_cast<int64_t>(r);
      const T* row = j < key_end ? p.k.As<T>() + p.KeyRowOffset(p.k, b, kvh, j) : nullptr;
      int64_t i = 0;
      if constexpr (std::is_same_v<T, BF16>) {
        // Contiguous BF16: a pair is the 32-bit word its two elements form
        // (NaNs quieted as RoundToBf16 quiets them).
        if (row != nullptr && sd == 1) {
          for (; 2 * i + 1 < dim; ++i) {
            uint32_t word;
            memcpy(&word, row + 2 * i, sizeof(word));
            out[i * static_cast<int64_t>(kMR) + static_cast<int64_t>(r)] = QuietBf16Pair(word);
          }
        }
      } else {
#if HWY_TARGET != HWY_SCALAR  // (no ConcatEven there)
        // A contiguous F32 or F16 row kLanes pairs at a time: 2 kLanes
        // elements rounded (RoundToBf16, the scalar rule's bits), split into
        // the pairs' first and second elements, paired, and stored down the
        // panel's column.
        if (row != nullptr && sd == 1) {
          const DF df;
          HWY_ALIGN uint32_t words[kLanes];
          for (; 2 * (i + static_cast<int64_t>(kLanes)) <= dim; i += kLanes) {
            const auto a = RoundToBf16(df, LoadWide(row + 2 * i));
            const auto c = RoundToBf16(df, LoadWide(row + 2 * i + kLanes));
            hn::Store(Bf16Pairs(hn::ConcatEven(df, c, a), hn::ConcatOdd(df, c, a)),
                      hn::RebindToUnsigned<DF>(), words);
            for (size_t k = 0; k < kLanes; ++k) {
              out[(i + static_cast<int64_t>(k)) * static_cast<int64_t>(kMR) +
                  static_cast<int64_t>(r)] = words[k];
            }
          }
        }
#endif
      }
      for (; i < pairs; ++i) {
        const uint32_t lo = row != nullptr ? Bf16Bits(row[2 * i * sd]) : 0u;
        const uint32_t hi =
            row != nullptr && 2 * i + 1 < dim ? Bf16Bits(row[(2 * i + 1) * sd]) : 0u;
        out[i * static_cast<int64_t>(kMR) + static_cast<int64_t>(r)] = Bf16Pair(lo, hi);
      }
    }
  }
}

// V of (b, kvh) as [ceil(key_end/2)][Dv] pairs along the keys (the partner of
// an odd last key is 0).
template <typename T>
void PackValuePairs(const SdpaProblem& p, int64_t b, int64_t kvh, uint32_t* HWY_RESTRICT dst) {
  const int64_t sd = p.v.stride[3], value_dim = p.value_dim, key_end = p.KeyEnd(b);
  for (int64_t j = 0; j < key_end; j += 2) {
    const T* lo = p.v.As<T>() + p.KeyRowOffset(p.v, b, kvh, j);
    const T* hi = j + 1 < key_end ? p.v.As<T>() + p.KeyRowOffset(p.v, b, kvh, j + 1) : nullptr;
    uint32_t* HWY_RESTRICT out = dst + j / 2 * value_dim;
    int64_t dv = 0;
    if (sd == 1) {
      // Contiguous rows a vector at a time, rounded as RoundToBf16.
      const DF df;
      for (; dv + static_cast<int64_t>(kLanes) <= value_dim; dv += kLanes) {
        const auto l = RoundToBf16(df, LoadWide(lo + dv));
        const auto h = hi != nullptr ? RoundToBf16(df, LoadWide(hi + dv)) : hn::Zero(df);
        hn::StoreU(Bf16Pairs(l, h), hn::RebindToUnsigned<DF>(), out + dv);
      }
    }
    for (; dv < value_dim; ++dv) {
      const uint32_t l = Bf16Bits(lo[dv * sd]);
      const uint32_t h = hi != nullptr ? Bf16Bits(hi[dv * sd]) : 0u;
      out[dv] = Bf16Pair(l, h);
    }
  }
}

// The value of key j, dim d from V pairs (PackValuePairs).
HWY_INLINE float PairedValue(const uint32_t* v_pairs, int64_t value_dim, int64_t j, int64_t d) {
  const uint32_t pair = v_pairs[j / 2 * value_dim + d];
  return BitsToFloat((j & 1) ? (pair & 0xFFFF0000u) : (pair << 16));
}

// Sets the non-finite V flags of (b, kvh), one per key tile of the plan:
// finite(j0, j1) says whether V's rows [j0, j1) are all finite.
template <class Finite>
void FlagNonfiniteTiles(const FlashPlan& plan, int64_t b, int64_t kvh, const Finite& finite) {
  const SdpaProblem& p = *plan.problem;
  uint8_t* flags = plan.nonfinite_values + (b * p.kv_heads + kvh) * plan.key_tiles;
  const int64_t key_end = p.KeyEnd(b);
  const int64_t key_tile = static_cast<int64_t>(plan.geometry.key_tile);
  for (int64_t t = 0; t < plan.key_tiles; ++t) {
    const int64_t j0 = t * key_tile;
    const int64_t j1 = std::min<int64_t>(j0 + key_tile, key_end);
    flags[t] = j1 > j0 && !finite(j0, j1);
  }
}

// bf16_dot: packs K and V as pairs, and flags the key tiles whose V is not
// finite (when nonfinite_values is set).
void PackKVPairs(const FlashPlan& plan, int64_t b, int64_t kvh) {
  const SdpaProblem& p = *plan.problem;
  uint32_t* k_dst = reinterpret_cast<uint32_t*>(const_cast<float*>(plan.PackedK(b, kvh)));
  uint32_t* v_dst =
      reinterpret_cast<uint32_t*>(const_cast<float*>(plan.PackedK(b, kvh)) + plan.packed_k_floats);
  DispatchFloatDtype(p.k.dtype, [&](auto tag) { PackKeyPairs<decltype(tag)>(p, b, kvh, k_dst); });
  DispatchFloatDtype(p.v.dtype, [&](auto tag) { PackValuePairs<decltype(tag)>(p, b, kvh, v_dst); });
  if (plan.nonfinite_values == nullptr) return;
  const int64_t value_dim = p.value_dim;
  FlagNonfiniteTiles(plan, b, kvh, [&](int64_t j0, int64_t j1) {
    bool finite = true;
    for (int64_t j = j0; j < j1 && finite; ++j) {
      for (int64_t d = 0; d < value_dim; ++d) {
        finite &= std::isfinite(PairedValue(v_dst, value_dim, j, d));
      }
    }
    return finite;
  });
}

void PackKV(const FlashPlan& plan, int64_t b, int64_t kvh) {
  // Preconditions (free in Release).
  HWY_DASSERT(plan.problem != nullptr && plan.problem->Valid() && plan.packed != nullptr);
  HWY_DASSERT(0 <= b && b < plan.problem->batch && 0 <= kvh && kvh < plan.problem->kv_heads);
  if (plan.bf16_dot) {
    PackKVPairs(plan, b, kvh);
    return;
  }
  const SdpaProblem& p = *plan.problem;
  float* k_dst = const_cast<float*>(plan.PackedK(b, kvh));
  const bool round = p.Bf16Products();
  if (!plan.keys_in_place && IsPackedDtype(p.k.dtype)) {
    round ? PackKeysPacked<true>(p, b, kvh, k_dst) : PackKeysPacked<false>(p, b, kvh, k_dst);
  } else if (!plan.keys_in_place) {
    DispatchCacheDtype(p.k.dtype, [&](auto tag) {
      using T = decltype(tag);
      round ? PackKeys<T, true>(p, b, kvh, k_dst) : PackKeys<T, false>(p, b, kvh, k_dst);
    });
  }
  if (!plan.values_in_place) {
    float* v_dst = k_dst + plan.packed_k_floats;
    if (IsPackedDtype(p.v.dtype)) {
      round ? PackValuesPacked<true>(p, b, kvh, v_dst) : PackValuesPacked<false>(p, b, kvh, v_dst);
    } else {
      DispatchCacheDtype(p.v.dtype, [&](auto tag) {
        using T = decltype(tag);
        round ? PackValues<T, true>(p, b, kvh, v_dst) : PackValues<T, false>(p, b, kvh, v_dst);
      });
    }
  }
  if (plan.nonfinite_values == nullptr) return;
  int64_t ldv;
  const float* v = plan.ValueRows(b, kvh, &ldv);
  FlagNonfiniteTiles(plan, b, kvh, [&](int64_t j0, int64_t j1) {
    return ValuesFinite(v + j0 * ldv, static_cast<size_t>(j1 - j0), ldv,
                        static_cast<size_t>(p.value_dim));
  });
}

// In-register transpose of a kLanes x kLanes block, its rows a pack of
// kLanes vectors (registers-inl.h): log2(kLanes) rounds of the perfect
// unshuffle (row i of a round's output is the even lanes of rows 2i and
// 2i+1, row kLanes/2 + i their odd lanes); afterwards row i holds lane i of
// every input row. kLanes log2(kLanes) shuffles, e.g. 64 for the 16 x 16
// block of AVX-512 instead of 256 scalar stores.
template <class... VF>
HWY_INLINE void TransposeBlock(VF&... rows) {
  static_assert(sizeof...(VF) == kLanes, "a row per lane");
#if HWY_TARGET != HWY_SCALAR
  const DF df;
  constexpr size_t kHalf = kLanes / 2;
  Unroll<hwy::CeilLog2(kLanes)>([&](auto /*round*/) HWYATTN_INLINE_LAMBDA {
    WithRegistersFrom<kLanes>(
        [&](auto i) HWYATTN_INLINE_LAMBDA -> hn::Vec<DF> {
          constexpr size_t kRow = 2 * (decltype(i)::value % kHalf);
          if constexpr (decltype(i)::value < kHalf) {
            return hn::ConcatEven(df, Nth<kRow + 1>(rows...), Nth<kRow>(rows...));
          } else {
            return hn::ConcatOdd(df, Nth<kRow + 1>(rows...), Nth<kRow>(rows...));
          }
        },
        [&](auto&... next) HWYATTN_INLINE_LAMBDA { ((rows = next), ...); });
  });
#else
  ((void)rows, ...);
#endif
}

// Q rows with a contiguous head dim: kLanes rows x kLanes dims at a time,
// loaded as vectors (LoadWide), scaled, transposed in registers and stored as
// vectors; the dims past the last whole vector one by one. Same layout and
// values as PackQueries.
template <typename T, bool kRound>
void PackQueriesContiguous(const SdpaProblem& p, int64_t b, int64_t kvh, int64_t row0, int64_t rows,
                           float q_scale, float* HWY_RESTRICT dst) {
  const DF df;
  const int64_t dim = p.head_dim;
  const int64_t dim_vec = dim / static_cast<int64_t>(kLanes) * static_cast<int64_t>(kLanes);
  const auto scale = hn::Set(df, q_scale);
  // Row c of the tile (null past the last), as the kernel numbers rows.
  const T* src_rows[kQueryTile];
  for (int64_t c = 0; c < static_cast<int64_t>(kQueryTile); ++c) {
    src_rows[c] = c < rows ? p.q.As<T>() + p.RowOffset(p.q, b, kvh, row0 + c) : nullptr;
  }
  // The tile's rows usually come from L3 or memory: ask for all of their
  // lines first, so that the misses overlap instead of stalling block by block.
  for (int64_t c = 0; c < rows; ++c) {
    const char* row = reinterpret_cast<const char*>(src_rows[c]);
    for (int64_t at = 0; at < dim * static_cast<int64_t>(sizeof(T)); at += 64) {
      PrefetchLine(row + at);
    }
  }
  for (int64_t c0 = 0; c0 < static_cast<int64_t>(kQueryTile); c0 += kLanes) {
    const T* const* src = src_rows + c0;
    for (int64_t d0 = 0; d0 < dim_vec; d0 += kLanes) {
      WithRegistersFrom<kLanes>(
          [&](auto i) HWYATTN_INLINE_LAMBDA -> hn::Vec<DF> {
            if (src[i] == nullptr) return hn::Zero(df);
            const auto q = LoadWide(src[i] + d0);
            return hn::Mul(kRound ? RoundToBf16(df, q) : q, scale);
          },
          [&](auto&... block) HWYATTN_INLINE_LAMBDA {
            TransposeBlock(block...);
            Unroll<kLanes>([&](auto i) HWYATTN_INLINE_LAMBDA {
              hn::Store(Nth<i>(block...), df,
                        dst + (d0 + static_cast<int64_t>(i)) * kQueryTile + c0);
            });
          });
    }
    for (int64_t d = dim_vec; d < dim; ++d) {
      for (size_t i = 0; i < kLanes; ++i)
        dst[d * kQueryTile + c0 + i] = src[i] ? Operand<kRound>(src[i][d]) * q_scale : 0.0f;
    }
  }
}

// Q rows of the tile, scaled, as [D][Bq]; lanes past the last row are 0.
// Under kRound each element is rounded to bf16 before the scale (the scale
// is applied to the product, in fp32).
template <typename T, bool kRound>
void PackQueries(const SdpaProblem& p, int64_t b, int64_t kvh, int64_t row0, int64_t rows,
                 float q_scale, float* HWY_RESTRICT dst) {
  const int64_t dim = p.head_dim, sd = p.q.stride[3];
  for (int64_t c = 0; c < static_cast<int64_t>(kQueryTile); ++c) {
    if (c < rows) {
      const T* row = p.q.As<T>() + p.RowOffset(p.q, b, kvh, row0 + c);
      for (int64_t d = 0; d < dim; ++d) {
        dst[d * kQueryTile + c] = Operand<kRound>(row[d * sd]) * q_scale;
      }
    } else {
      for (int64_t d = 0; d < dim; ++d) dst[d * kQueryTile + c] = 0.0f;
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_FLASH_PACK_INL_H_ toggle
