// SPDX-License-Identifier: Apache-2.0
//
// Fused scaled dot-product attention (FlashAttention-style), per target.
//
// A work item owns Bq query rows of one (batch, kv head) and walks the keys in
// tiles of Bk, keeping for each row the running max m, the running softmax
// denominator l and an unnormalised output accumulator O; nothing of size
// Lq x Lk exists unless the caller asked for the weights.
//
// Scores are transposed so that queries are the vector lanes, in both
// products, which run on the same register tile (TileMulAdd, MR rows broadcast
// from A x kTileVectors query vectors):
//   S^T[Bk][Bq] = K_tile[Bk][D] . Q^T[D][Bq]     (A = K rows)
//   m' = max(m, max_k S^T), in registers         (ScorePanel)
//   P^T = 2^(S^T - m'), l = l * alpha + sum P^T  (SoftmaxTileUpdate)
//   O^T[Dv][Bq] = O^T * alpha + V_tile^T . P^T   (A = V rows)
// so the per-query max, sum and rescale are element-wise vector operations.
// V's rows are the broadcast operand (the MR value dims of a key are
// contiguous), read in place when they are F32 with contiguous dims; P^T is
// the vector operand as the softmax left it. O^T is transposed back to rows
// once per work item (StoreOutputs).
//
// Traffic per work item: Q tile once (D x Bq), then per key tile a K panel
// stream (Bk x D) and a V stream (Bk x Dv) from L2, S^T and O^T in L1. With
// Bq = 48, D = 64 that is 4 * 48 FLOPs per float read: compute-bound, as
// long as the streams do not stall the register tiles: each tile prefetches
// the K and V lines that the tile two ahead reads first (flash_prefetch-inl.h).
//
// K rows are the broadcast operand, read in place when they are F32 with a
// contiguous head dim (one pointer per row of the register tile); otherwise
// K is packed once per (batch, kv head) by pack_kv (flash_pack-inl.h), a
// separate parallel phase. Either way every query tile and every query head
// of the GQA group reuses them. Scores are in log2 units: Q is pre-multiplied by
// scale * log2(e), the additive mask by log2(e), and exp(x) becomes Exp2.

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <algorithm>

#include "src/cache_line.h"
#include "src/ops/convert.h"
#include "src/ops/flash_attention.h"
#include "src/ops/int8_products.h"
#include "src/ops/score_rules.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/flash_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/flash_pack-inl.h"
#include "src/ops/flash_prefetch-inl.h"
#include "src/ops/flash_tiles-inl.h"
#include "src/ops/matmul-inl.h"
#include "src/ops/registers-inl.h"
#include "src/ops/score_rules-inl.h"
#include "src/ops/softmax-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- masks

// Adds the caller's mask to the scores of keys [jt0, jt1) of the first `rows`
// lanes (MaskedScores). Lane c's mask elements start at mask_row[c], keys
// stride[3] apart, so a lane's run is a row of the mask: each run is read as
// biases (MaskBiases: a vector at a time when contiguous, F16 widened by the
// vector unit), transposed into `bias` [keys][Bq] (lanes past `rows` up to
// `lanes` are 0), and added to S^T a vector at a time. (Score by score in
// scalar code it took 30% of a masked D = 256 prefill, ggml's F16 mask.)
void ApplyMask(const SdpaProblem& p, const int64_t* HWY_RESTRICT mask_row, int64_t rows,
               size_t lanes, int64_t jt0, int64_t jt1, float* HWY_RESTRICT bias,
               float* HWY_RESTRICT s) {
  const DF df;
  const int64_t sj = p.mask.stride[3];
  const size_t keys = static_cast<size_t>(jt1 - jt0);
  HWY_ALIGN float run[HWY_MAX(kKeyTile, kBf16KeyTile)];
  WithMaskElements(p.mask, [&](const auto* HWY_RESTRICT m) {
    for (int64_t c = 0; c < rows; ++c) {
      MaskBiases(m + mask_row[c] + jt0 * sj, sj, keys, run);
      for (size_t j = 0; j < keys; ++j) bias[j * kQueryTile + c] = run[j];
    }
  });
  for (size_t j = 0; j < keys; ++j) {
    float* HWY_RESTRICT bj = bias + j * kQueryTile;
    for (size_t c = static_cast<size_t>(rows); c < lanes; ++c) bj[c] = 0.0f;
    float* HWY_RESTRICT srow = s + j * kQueryTile;
    for (size_t c = 0; c < lanes; c += kLanes) {
      hn::Store(MaskedScores(df, hn::Load(df, srow + c), hn::Load(df, bj + c)), df, srow + c);
    }
  }
}

// Whether the mask blocks keys [jt0, jt1) for each of the first `rows` lanes
// (mask_row[c]: lane c's mask row), stopping at the first key one sees.
bool MaskBlocksTile(const SdpaProblem& p, const int64_t* HWY_RESTRICT mask_row, int64_t rows,
                    int64_t jt0, int64_t jt1) {
  for (int64_t c = 0; c < rows; ++c) {
    int64_t first = jt0, end = jt1;
    MaskRowSpan(p.mask, mask_row[c], &first, &end);
    if (first < end) return false;
  }
  return true;
}

// ---------------------------------------------------------------- P . V

// SoftmaxTileUpdate's emitters under bf16 products: P rounded to bf16 after
// the exp (the row sums keep the fp32 values) as the operand of P . V.
// Portable tiles: rounded in place (RoundToBf16).
struct RoundedProbabilities {
  float* HWY_RESTRICT s;
  size_t ld;
  template <class... VF>
  HWY_INLINE void operator()(DF df, size_t r, size_t c, size_t count, const VF&... p) const {
    Unroll<sizeof...(VF)>([&](auto i) HWYATTN_INLINE_LAMBDA {
      if (i < count) hn::Store(RoundToBf16(df, Nth<i>(p...)), df, s + (r + i) * ld + c);
    });
  }
};

// The bf16 dot-product tiles: only as the pairs of keys (2i, 2i+1) the value
// tile reads (p_pairs[i][lane] in Bf16Pair's layout, a last odd key paired
// with 0). AVX3: two rows per vcvtne2ps2bf16 (nearest even, as RoundToBf16)
// and a word interleave; the AVX3 kernels are compiled without AVX512_BF16,
// so the instruction is inline assembly; it runs only under bf16_dot, which
// the planner sets only on CPUs that have it. Like the vdpbf16ps that reads
// the pairs, it takes a subnormal probability (below 2^-126) as zero. Other
// targets (NEON, SVE): RoundToBf16 and Bf16Pairs.
struct PairedProbabilities {
  uint32_t* HWY_RESTRICT pairs;
  size_t ld_pairs;
  template <class... VF>
  HWY_INLINE void operator()(DF df, size_t r, size_t c, size_t count, const VF&... p) const {
    static_assert(sizeof...(VF) % 2 == 0, "whole pairs of rows");
#if HWY_TARGET == HWY_AVX3 && (defined(__GNUC__) || defined(__clang__))
    alignas(64) static constexpr uint16_t kInterleave[32] = {
        0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i interleave = _mm512_load_si512(kInterleave);
    Unroll<sizeof...(VF) / 2>([&](auto pair) HWYATTN_INLINE_LAMBDA {
      constexpr size_t i = 2 * decltype(pair)::value;
      if (i >= count) return;
      const __m512 lo = Nth<i>(p...).raw;
      const __m512 hi = i + 1 < count ? Nth<i + 1>(p...).raw : _mm512_setzero_ps();
      __m512i halves;  // words 0-15: lo rounded, 16-31: hi rounded
      asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(hi), "v"(lo));
      _mm512_storeu_si512(pairs + (r + i) / 2 * ld_pairs + c,
                          _mm512_permutexvar_epi16(interleave, halves));
    });
    (void)df;
#else
    Unroll<sizeof...(VF) / 2>([&](auto pair) HWYATTN_INLINE_LAMBDA {
      constexpr size_t i = 2 * decltype(pair)::value;
      if (i >= count) return;
      const auto lo = RoundToBf16(df, Nth<i>(p...));
      const auto hi = i + 1 < count ? RoundToBf16(df, Nth<i + 1>(p...)) : hn::Zero(df);
      hn::Store(Bf16Pairs(lo, hi), hn::RebindToUnsigned<DF>(), pairs + (r + i) / 2 * ld_pairs + c);
    });
#endif
  }
};

// O^T = O^T * alpha + V_tile^T . P^T is the S^T = K . Q^T register tile again:
// MR value dims (broadcast from V's rows, where the MR dims of a key are
// contiguous) x the query vectors (P^T's rows as the softmax left them), with
// alpha, a per-query factor, a vector multiply. V is broadcast once per tile,
// P^T re-read from L1 for each block of MR dims.

// kRows value dims x the first `vectors` (<= kVectors) query vectors.
template <size_t kRows, size_t kVectors>
void WeightedValuesBlock(size_t vectors, size_t keys, const float* p_t, const float* v, size_t ldv,
                         const float* alpha, float* o_t, const ValueLinePrefetch& prefetch) {
  if constexpr (kVectors > 1) {
    if (vectors < kVectors) {
      WeightedValuesBlock<kRows, kVectors - 1>(vectors, keys, p_t, v, ldv, alpha, o_t, prefetch);
      return;
    }
  }
  TileColumnScaleMulAdd<kRows, kVectors>(DF(), keys, PackedA{v, ldv}, p_t, kQueryTile, alpha, o_t,
                                         kQueryTile, prefetch);
}

// The last `dims` < MR value dims.
template <size_t kRows>
void WeightedValuesRemainder(size_t dims, size_t vectors, size_t keys, const float* p_t,
                             const float* v, size_t ldv, const float* alpha, float* o_t) {
  if constexpr (kRows > 0) {
    if (dims == kRows) {
      WeightedValuesBlock<kRows, kTileVectors>(vectors, keys, p_t, v, ldv, alpha, o_t,
                                               ValueLinePrefetch{nullptr, ldv});
      return;
    }
    WeightedValuesRemainder<kRows - 1>(dims, vectors, keys, p_t, v, ldv, alpha, o_t);
  }
}

// O^T = O^T * alpha + V^T . P^T for `dims` value dims and the first `vectors`
// query vectors: P^T is [keys][Bq] in scratch, V rows ldv apart, O^T
// [dims][Bq].
void WeightedValues(size_t dims, size_t vectors, size_t keys, const float* HWY_RESTRICT p_t,
                    const float* HWY_RESTRICT v, size_t ldv, const float* HWY_RESTRICT alpha,
                    float* HWY_RESTRICT o_t) {
  size_t d0 = 0;
  for (; d0 + kMR <= dims; d0 += kMR) {
    // Block `ahead` starts at dim `ahead`: prefetch the line of its last dim
    // if the block before it ends on another line.
    const size_t ahead = d0 + kPrefetchDistance * kMR;
    const size_t ahead_last = std::min(ahead + kMR, dims) - 1;
    const bool new_line =
        ahead < dims && ahead_last / kCacheLineFloats != (ahead - 1) / kCacheLineFloats;
    WeightedValuesBlock<kMR, kTileVectors>(
        vectors, keys, p_t, v + d0, ldv, alpha, o_t + d0 * kQueryTile,
        ValueLinePrefetch{new_line ? v + ahead_last : nullptr, ldv});
  }
  WeightedValuesRemainder<kMR - 1>(dims - d0, vectors, keys, p_t, v + d0, ldv, alpha,
                                   o_t + d0 * kQueryTile);
}

// WeightedValues for a key tile whose V holds a NaN or an infinity while
// some rows block some of its keys: a blocked key's probability is exactly 0
// and must not turn 0 * NaN into NaN in a row that never attends to it. The
// same operations in the same order as the register tile, a lane keeping its
// accumulator where its probability is 0, so the rows untouched by the
// non-finite value come out bit-identical to a run without it.
void WeightedValuesSkippingZeros(size_t dims, size_t vectors, size_t keys,
                                 const float* HWY_RESTRICT p_t, const float* HWY_RESTRICT v,
                                 size_t ldv, const float* HWY_RESTRICT alpha,
                                 float* HWY_RESTRICT o_t) {
  const DF df;
  for (size_t d = 0; d < dims; ++d) {
    for (size_t c = 0; c < vectors * kLanes; c += kLanes) {
      float* o = o_t + d * kQueryTile + c;
      auto acc = hn::Mul(hn::Load(df, o), hn::Load(df, alpha + c));
      for (size_t j = 0; j < keys; ++j) {
        const auto prob = hn::Load(df, p_t + j * kQueryTile + c);
        const auto sum = hn::MulAdd(hn::Set(df, v[j * ldv + d]), prob, acc);
        acc = hn::IfThenElse(hn::Eq(prob, hn::Zero(df)), acc, sum);
      }
      hn::Store(acc, df, o);
    }
  }
}

// bf16_dot: V pairs of the head ([ceil(Lk/2)][Dv]) and P^T pairs of the key
// tile ([Bk/2][Bq]) for bf16_tiles::ValueTile.
struct Bf16ValueOperands {
  const uint32_t* v_pairs;
  const uint32_t* p_pairs;
  size_t value_dim;
};

// O^T = O^T * alpha + V^T . P^T on the bf16 dot-product tiles: `dims` value
// dims, the first `vectors` query vectors, `keys` keys from an even key
// (pairs rows of v_pairs, Dv apart, and of p_pairs, Bq apart).
void WeightedValuesBf16(size_t dims, size_t vectors, size_t keys, const uint32_t* p_pairs,
                        const uint32_t* v_pairs, size_t value_dim, const float* alpha, float* o_t) {
#if HWYATTN_BF16_DOT_TILES
  for (size_t d0 = 0; d0 < dims; d0 += kMR) {
    bf16_tiles::ValueTile(std::min(kMR, dims - d0), vectors, (keys + 1) / 2, v_pairs + d0,
                          value_dim, p_pairs, kQueryTile, alpha, o_t + d0 * kQueryTile, kQueryTile);
  }
#else
  (void)dims, (void)vectors, (void)keys, (void)p_pairs, (void)v_pairs, (void)value_dim, (void)alpha,
      (void)o_t;
  HWY_ABORT("hwyattn: bf16 dot products reached a kernel of target %s",
            hwy::TargetName(HWY_TARGET));
#endif
}

// WeightedValuesSkippingZeros on V pairs (keys from the even key j0) and P pairs: the
// order of vdpbf16ps (per pair, the odd key's product, then the even key's,
// each an exactly rounded add of an exact product: an FMA), so the rows the
// non-finite value does not reach match the tile's bits.
void WeightedValuesSkippingZerosPairs(size_t dims, size_t vectors, size_t keys,
                                      const uint32_t* HWY_RESTRICT p_pairs,
                                      const uint32_t* HWY_RESTRICT v_pairs, int64_t value_dim,
                                      int64_t j0, const float* HWY_RESTRICT alpha,
                                      float* HWY_RESTRICT o_t) {
#if HWYATTN_BF16_DOT_TILES && HWY_ARCH_ARM_A64
  // BFDOT adds a pair's two products together before adding them to the sum
  // (rounding to odd), which no sequence of FMAs reproduces: the tile's own
  // instruction, the value halves whose probability is 0 taken as 0.
  HWY_DASSERT(j0 % 2 == 0);
  bf16_tiles::ValueSkippingZeros(dims, vectors, (keys + 1) / 2, v_pairs + j0 / 2 * value_dim,
                                 static_cast<size_t>(value_dim), p_pairs, kQueryTile, alpha, o_t,
                                 kQueryTile);
#else
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  for (size_t d = 0; d < dims; ++d) {
    for (size_t c = 0; c < vectors * kLanes; c += kLanes) {
      float* o = o_t + d * kQueryTile + c;
      auto acc = hn::Mul(hn::Load(df, o), hn::Load(df, alpha + c));
      for (size_t j = 0; j < keys; j += 2) {
        for (size_t k : {j + 1, j}) {
          if (k >= keys) continue;
          const auto pair = hn::Load(du, p_pairs + k / 2 * kQueryTile + c);
          const auto prob = hn::BitCast(
              df, (k & 1) ? hn::And(pair, hn::Set(du, 0xFFFF0000u)) : hn::ShiftLeft<16>(pair));
          const float value = PairedValue(v_pairs, value_dim, j0 + static_cast<int64_t>(k),
                                          static_cast<int64_t>(d));
          const auto sum = hn::MulAdd(hn::Set(df, value), prob, acc);
          acc = hn::IfThenElse(hn::Eq(prob, hn::Zero(df)), acc, sum);
        }
      }
      hn::Store(acc, df, o);
    }
  }
#endif
}

// The keys each query vector of a work item may see by position, [lo[c],
// last[c]] (masks come on top): both grow with c.
struct VectorRange {
  int32_t lo[kTileVectors];
  int32_t last[kTileVectors];
  size_t vectors = 0;
  // The vectors [*v0, *v1) whose ranges meet keys [key0, key_last]
  // (*v0 == *v1: none).
  void Of(int64_t key0, int64_t key_last, size_t* v0, size_t* v1) const {
    size_t a = 0, b = vectors;
    while (a < b && last[a] < key0) ++a;
    while (b > a && lo[b - 1] > key_last) --b;
    *v0 = a;
    *v1 = b;
  }
};

// O^T = O^T * alpha + V^T . P^T over keys [jt0, jt1), in runs of key panels
// that the same query vectors see (VectorRange::Of): a vector's keys outside
// its range have probability 0 and are not multiplied. Each vector is scaled
// by alpha once, in the first run it takes part in (alpha_once: scratch of
// kQueryTile floats); a vector in no run sees no key of the tile, so its
// running max did not move and its alpha is 1. Runs in key order, so each
// vector's sums take the same steps as over the whole tile.
// Out of line (HWY_NOINLINE): inlined into Attend, the prefill took 3-4% more
// instructions (P1, X1).
HWY_NOINLINE void WeightedValuesByRange(const VectorRange& ranges, int64_t jt0, int64_t jt1,
                                        size_t dims, const float* HWY_RESTRICT p_t,
                                        const float* HWY_RESTRICT v_rows, size_t ldv,
                                        const float* HWY_RESTRICT alpha,
                                        float* HWY_RESTRICT alpha_once, float* HWY_RESTRICT o_t,
                                        const Bf16ValueOperands* bf16) {
  const DF df;
  bool scaled[kTileVectors] = {};
  for (int64_t j = jt0; j < jt1;) {
    size_t v0, v1;
    ranges.Of(j, std::min<int64_t>(j + kMR, jt1) - 1, &v0, &v1);
    int64_t end = std::min<int64_t>(j + kMR, jt1);
    for (size_t w0, w1; end < jt1; end = std::min<int64_t>(end + kMR, jt1)) {
      ranges.Of(end, std::min<int64_t>(end + kMR, jt1) - 1, &w0, &w1);
      if (w0 != v0 || w1 != v1) break;
    }
    if (v1 > v0) {
      for (size_t c = v0; c < v1; ++c) {
        hn::Store(scaled[c] ? hn::Set(df, 1.0f) : hn::Load(df, alpha + c * kLanes), df,
                  alpha_once + c * kLanes);
        scaled[c] = true;
      }
      const size_t lanes0 = v0 * kLanes;
      if (bf16 != nullptr) {
        WeightedValuesBf16(dims, v1 - v0, static_cast<size_t>(end - j),
                           bf16->p_pairs + (j - jt0) / 2 * kQueryTile + lanes0,
                           bf16->v_pairs + j / 2 * static_cast<int64_t>(bf16->value_dim),
                           bf16->value_dim, alpha_once + lanes0, o_t + lanes0);
        j = end;
        continue;
      }
      WeightedValues(dims, v1 - v0, static_cast<size_t>(end - j),
                     p_t + (j - jt0) * kQueryTile + lanes0, v_rows + j * static_cast<int64_t>(ldv),
                     ldv, alpha_once + lanes0, o_t + lanes0);
    }
    j = end;
  }
}

// ---------------------------------------------------------------- Q . K

// The keys of one panel that are blocked while its scores are still in
// registers: keys at or past key_end for every query (the zero padding of a
// tile's last panel) and, with key_lo / key_last, keys outside a query
// lane's visible range [key_lo, key_last] (the causal diagonal, the window
// edges).
struct PanelMask {
  int64_t key0;             // the panel's first key
  int64_t key_end;          // keys >= key_end are blocked
  const int32_t* key_lo;    // [Bq] first visible key per query lane, or null
  const int32_t* key_last;  // [Bq] last visible key per query lane
};

// The score modifiers of a work item's lanes (null when there are none):
// softcap, and ALiBi's slope (log2 units) and position per query lane.
struct LaneModifiers {
  const ScoreModifiers* rule;
  const float* slope;  // [Bq], or null without ALiBi
  const int32_t* pos;  // [Bq]
};

// One register tile of S^T: MR keys (from `a`) x the first `vectors` (<=
// kVectors) vectors of queries; a partial query tile computes only the
// vectors that hold rows. With a mask, blocked scores are stored as -inf.
// While the scores are in registers, each query lane's tile_max takes their
// max (the online softmax's new running max, without another pass).
// bf16_dot: the panel's K pairs and Q^T pairs (at the panel's first query
// vector) for bf16_tiles::ScoreTile, which applies `scale`.
struct Bf16ScoreOperands {
  const uint32_t* k_pairs;
  const uint32_t* q_pairs;
  size_t pairs;
  float scale;
};

// Always inlined: the register-tile packs made it too large for GCC to
// inline on its own, and out of line it cost X1 5% and P1b 4% (Zen 5).
template <size_t kVectors, class AOperand>
HWY_INLINE void ScorePanel(size_t vectors, size_t dim, AOperand a, const float* q_t, float* s_rows,
                           int64_t key0, const LaneModifiers* mods, const PanelMask* mask,
                           float* tile_max, const KeyPanelPrefetch& prefetch,
                           const Bf16ScoreOperands* bf16 = nullptr) {
  if constexpr (kVectors > 1) {
    if (vectors < kVectors) {
      ScorePanel<kVectors - 1>(vectors, dim, a, q_t, s_rows, key0, mods, mask, tile_max, prefetch,
                               bf16);
      return;
    }
  }
  const DF df;
  using VF = hn::Vec<DF>;
  const hn::RebindToSigned<DF> di;
  // The kMR x kVectors scores, a pack (row-major) in registers.
  WithRegisters<kMR * kVectors>(hn::Zero(df), [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
#if HWYATTN_BF16_DOT_TILES
    if (bf16 != nullptr) {
      // The bf16 dot-product tile stores the scaled scores; the epilogue
      // below takes them from L1.
      static_assert(kMR == bf16_tiles::kTileRows && kLanes == kBf16TileLanes, "bf16 tile geometry");
      bf16_tiles::ScoreTile(kVectors, bf16->pairs, bf16->k_pairs, bf16->q_pairs, kQueryTile,
                            bf16->scale, s_rows, kQueryTile);
      Unroll<kMR * kVectors>([&](auto i) HWYATTN_INLINE_LAMBDA {
        Nth<i>(acc...) =
            hn::LoadU(df, s_rows + (i / kVectors) * kQueryTile + (i % kVectors) * kLanes);
      });
    } else  // NOLINT(readability/braces)
#endif
    {
      (void)bf16;
      TileMulAdd<kMR, kVectors>(df, dim, a, q_t, kQueryTile, prefetch, acc...);
    }
    const VF blocked_value = hn::Set(df, -INFINITY);
    WithRegistersFrom<kVectors>(
        [&](auto c) HWYATTN_INLINE_LAMBDA { return hn::Load(df, tile_max + c * kLanes); },
        [&](auto&... mx) HWYATTN_INLINE_LAMBDA {
          Unroll<kMR>([&](auto r) HWYATTN_INLINE_LAMBDA {
            float* row = s_rows + r * kQueryTile;
            Unroll<kVectors>([&](auto c) HWYATTN_INLINE_LAMBDA {
              VF score = Nth<r * kVectors + c>(acc...);
              // Keys and positions fit in int32: lengths are validated to be < 2^31.
              const auto key = hn::Set(di, static_cast<int32_t>(key0 + static_cast<int64_t>(r)));
              if (mods != nullptr) {
                if (mods->rule->cap != 0.0f) score = mods->rule->Cap(df, score);
                if (mods->slope != nullptr) {
                  const VF distance =
                      hn::ConvertTo(df, hn::Sub(key, hn::Load(di, mods->pos + c * kLanes)));
                  score = hn::MulAdd(hn::Load(df, mods->slope + c * kLanes), distance, score);
                }
              }
              if (mask != nullptr) {
                if (key0 + static_cast<int64_t>(r) >= mask->key_end) {
                  score = blocked_value;
                } else if (mask->key_lo != nullptr) {
                  const auto blocked = hn::RebindMask(
                      df, hn::Or(hn::Lt(key, hn::Load(di, mask->key_lo + c * kLanes)),
                                 hn::Gt(key, hn::Load(di, mask->key_last + c * kLanes))));
                  score = hn::IfThenElse(blocked, blocked_value, score);
                }
              }
              hn::StoreU(score, df, row + c * kLanes);
              auto& m = Nth<c>(mx...);
              m = hn::Max(m, score);
            });
          });
          Unroll<kVectors>([&](auto c) HWYATTN_INLINE_LAMBDA {
            hn::Store(Nth<c>(mx...), df, tile_max + c * kLanes);
          });
        });
  });
}

// ---------------------------------------------------------------- outputs

// out = O * inv for the tile's `rows` rows, from O^T [value_dim_pad][Bq]:
// kLanes dims x kLanes queries at a time, scaled (inv is per query, i.e. per
// lane), transposed in registers and stored as output rows (F32 rows with a
// contiguous last dim directly, others through StoreOutputRow).
void StoreOutputs(const SdpaProblem& p, int64_t b, int64_t kvh, int64_t row0, int64_t rows,
                  const float* HWY_RESTRICT o_t, const float* HWY_RESTRICT inv,
                  int64_t value_dim_pad) {
  const DF df;
  const int64_t value_dim = p.value_dim, so = p.out.stride[3];
  const bool direct = p.out.dtype == Dtype::kF32 && so == 1;
  HWY_ALIGN float spill[kLanes * kLanes];  // a block's rows, when not stored directly
  for (int64_t c0 = 0; c0 < rows; c0 += kLanes) {
    const int64_t block_rows = std::min<int64_t>(kLanes, rows - c0);
    int64_t out_rows[kLanes];  // element offsets in out
    for (int64_t i = 0; i < block_rows; ++i) {
      out_rows[i] = p.RowOffset(p.out, b, kvh, row0 + c0 + i);
    }
    const auto scale = hn::Load(df, inv + c0);
    for (int64_t d0 = 0; d0 < value_dim_pad; d0 += kLanes) {
      WithRegistersFrom<kLanes>(
          [&](auto i) HWYATTN_INLINE_LAMBDA {
            return hn::Mul(hn::Load(df, o_t + (d0 + static_cast<int64_t>(i)) * kQueryTile + c0),
                           scale);
          },
          [&](auto&... block) HWYATTN_INLINE_LAMBDA {
            TransposeBlock(block...);
            const int64_t dims = std::min<int64_t>(kLanes, value_dim - d0);
            if (direct && dims == static_cast<int64_t>(kLanes)) {
              float* out = p.out.AsMutable<float>();
              Unroll<kLanes>([&](auto i) HWYATTN_INLINE_LAMBDA {
                if (static_cast<int64_t>(i) < block_rows) {
                  hn::StoreU(Nth<i>(block...), df, out + out_rows[i] + d0);
                }
              });
              return;
            }
            Unroll<kLanes>([&](auto i) HWYATTN_INLINE_LAMBDA {
              hn::Store(Nth<i>(block...), df, spill + i * kLanes);
            });
            for (int64_t i = 0; i < block_rows; ++i) {
              StoreOutputRow(p.out, out_rows[i] + d0 * so, spill + i * kLanes, dims);
            }
          });
    }
  }
}

// ---------------------------------------------------------------- attend
//
// Attend computes one work item, a query tile of one (batch, kv head), in
// steps: PackItemQueries (Q^T, scaled, as the products want it),
// ItemKeyRanges (the keys each row, each query vector and the whole tile
// see), then for each key tile ScoreKeyTile (S^T and the tile's running
// max) and UpdateWithKeyTile (the mask's biases, the weights output, the
// online softmax, O^T += V^T . P^T), and FinishRows (out = O / l, lse,
// weights). The steps are forced inline: one function per target, as
// before the split (the same object code).

// The item's scratch (FlashScratchLayout) as typed pointers.
struct ItemScratch {
  ItemScratch(const FlashScratchLayout& l, float* scratch)
      : q_t(scratch + l.q_t),
        s_t(scratch + l.s_t),
        o_t(scratch + l.o_t),
        row_max(scratch + l.row_max),
        tile_max(scratch + l.tile_max),
        row_sum(scratch + l.row_sum),
        rescale(scratch + l.rescale),
        alpha_once(scratch + l.alpha_once),
        k_edge(scratch + l.k_edge),
        key_lo(reinterpret_cast<int32_t*>(scratch + l.key_lo)),
        key_last(reinterpret_cast<int32_t*>(scratch + l.key_last)),
        lane_pos(reinterpret_cast<int32_t*>(scratch + l.lane_pos)),
        lane_slope(scratch + l.lane_slope),
        mask_row(reinterpret_cast<int64_t*>(scratch + l.mask_row)),
        mask_bias(scratch + l.mask_bias),
        q_pairs(reinterpret_cast<uint32_t*>(scratch + l.q_pairs)),
        p_pairs(reinterpret_cast<uint32_t*>(scratch + l.p_pairs)) {}

  float* q_t;
  float* s_t;
  float* o_t;
  float* row_max;
  float* tile_max;
  float* row_sum;
  float* rescale;
  float* alpha_once;
  float* k_edge;
  int32_t* key_lo;
  int32_t* key_last;
  int32_t* lane_pos;
  float* lane_slope;
  int64_t* mask_row;
  float* mask_bias;
  uint32_t* q_pairs;
  uint32_t* p_pairs;
};

// The rows of an item and the keys they see.
struct ItemRows {
  int64_t b, kvh, row0, rows;
  // Keys any row sees: [key_begin, key_end); keys every row sees:
  // [free_begin, free_end); key tiles start at tile_begin.
  int64_t key_begin, key_end, free_begin, free_end, tile_begin;
  size_t q_vectors;    // the query vectors that hold rows
  VectorRange ranges;  // each query vector's keys
};

// Where the item's keys and values are read: packed K panels or K rows in
// place, and V rows (or pairs of rows under bf16_dot).
struct ItemOperands {
  const float* k_packed;
  const float* k_rows;
  int64_t ldk;
  const float* v_rows;
  int64_t ldv;
};

// Q^T of the item's rows into s.q_t: scaled (unscaled under bf16_dot: the
// tile scales its sums), rounded under bf16 products, quantized and
// dequantized under integer products (int8_products.h), and paired under
// bf16_dot.
HWY_INLINE void PackItemQueries(const FlashPlan& plan, const FlashItem& item, bool bf16_dot,
                                const ItemScratch& s) {
  const SdpaProblem& p = *plan.problem;
  const int64_t b = item.b, kvh = item.kvh, row0 = item.row0, rows = item.rows;
  const int64_t dim = p.head_dim;
  const bool bf16 = p.Bf16Products();
  const float q_scale = bf16_dot ? 1.0f : plan.q_scale;
  const bool int8 = p.Int8Products();
  float* HWY_RESTRICT q_t = s.q_t;
  DispatchFloatDtype(p.q.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.q.stride[3] == 1 && !int8) {
      bf16 ? PackQueriesContiguous<T, true>(p, b, kvh, row0, rows, q_scale, q_t)
           : PackQueriesContiguous<T, false>(p, b, kvh, row0, rows, q_scale, q_t);
    } else {
      bf16 ? PackQueries<T, true>(p, b, kvh, row0, rows, int8 ? 1.0f : q_scale, q_t)
           : PackQueries<T, false>(p, b, kvh, row0, rows, int8 ? 1.0f : q_scale, q_t);
    }
  });
  // Integer products: the rows quantized and dequantized, then scaled.
  if (int8) {
    const float* channel_scale = nullptr;
    int64_t step = 0;
    if (p.k_scale.layout == KvScales::kPerChannel)
      channel_scale = p.ScaleRow(p.k_scale, b, kvh, 0, &step);
    for (int64_t c = 0; c < rows; ++c) {
      DequantizedQueryRow(q_t + c, dim, static_cast<int64_t>(kQueryTile), channel_scale, step);
      for (int64_t d = 0; d < dim; ++d) q_t[d * kQueryTile + c] *= q_scale;
    }
  }
  if (bf16_dot)
    PairRows(static_cast<size_t>(dim), kQueryTile, q_t, kQueryTile, s.q_pairs, kQueryTile);
}

// The keys the item's rows see, and each row's state: its visible range
// (s.key_lo, s.key_last), ALiBi's position and slope, its mask row, the
// running max and sum (reset). Lanes past the rows see every key, with
// nothing to add.
HWY_INLINE ItemRows ItemKeyRanges(const SdpaProblem& p, const ScoreModifiers& rule,
                                  const FlashItem& item, const ItemScratch& s) {
  ItemRows r;
  r.b = item.b;
  r.kvh = item.kvh;
  r.row0 = item.row0;
  r.rows = item.rows;
  const int64_t b = r.b, kvh = r.kvh, row0 = r.row0, rows = r.rows, group = p.group();
  const int64_t first_pos = row0 / group, last_pos = (row0 + rows - 1) / group;
  // The union of the rows' visible ranges, which move right with the
  // position (the first row's range starts and ends first); outside their
  // intersection the ranges (causal diagonal, window edges) are masked per
  // lane, and whole key tiles outside every row's range are never computed:
  // a windowed tile costs in proportion to its window.
  const int64_t offset = p.PositionOffset();
  p.VisibleKeys(b, first_pos + offset, &r.key_begin, &r.free_end);
  p.VisibleKeys(b, last_pos + offset, &r.free_begin, &r.key_end);
  r.key_end = std::max(r.key_end, r.key_begin);
  r.free_end = std::min(r.free_end, r.key_end);
  for (int64_t c = 0; c < static_cast<int64_t>(kQueryTile); ++c) {
    if (c < rows) {
      const int64_t row = row0 + c, pos = row / group, head = kvh * group + row % group;
      int64_t first, end;
      p.VisibleKeys(b, pos + offset, &first, &end);
      s.key_lo[c] = static_cast<int32_t>(first);  // |.| < 2^31: validated
      s.key_last[c] = static_cast<int32_t>(end - 1);
      // ALiBi's distances from the row's origin (AlibiOrigin).
      s.lane_pos[c] = static_cast<int32_t>(rule.AlibiOrigin(p, b, head, pos + offset));
      s.lane_slope[c] = rule.Slope(head);
      if (p.has_mask) s.mask_row[c] = p.mask.Offset(b, head, pos, 0);
    } else {
      s.key_lo[c] = 0;
      s.key_last[c] = INT32_MAX;
      s.lane_pos[c] = 0;
      s.lane_slope[c] = 0.0f;
    }
    s.row_max[c] = -FLT_MAX;
    s.row_sum[c] = 0.0f;
  }
  // Under a mask, each row's range loses the keys its mask blocks at either
  // end (MaskRowSpan), and the tile's ranges are its rows' again: the union
  // (keys to compute), the intersection (keys every row sees).
  if (p.has_mask) {
    r.key_begin = INT64_MAX;
    r.key_end = 0;
    r.free_begin = 0;
    r.free_end = INT64_MAX;
    for (int64_t c = 0; c < rows; ++c) {
      int64_t first = s.key_lo[c], end = int64_t{s.key_last[c]} + 1;
      MaskRowSpan(p.mask, s.mask_row[c], &first, &end);
      s.key_lo[c] = static_cast<int32_t>(first);
      s.key_last[c] = static_cast<int32_t>(end - 1);
      if (first < end) {
        r.key_begin = std::min(r.key_begin, first);
        r.key_end = std::max(r.key_end, end);
      }
      r.free_begin = std::max(r.free_begin, first);
      r.free_end = std::min(r.free_end, end);
    }
    if (r.key_begin >= r.key_end) r.key_begin = r.key_end = 0;  // no row sees a key
    r.free_end = std::min(r.free_end, r.key_end);
  }
  // Key tiles start at the panel holding key_begin (a window's left edge
  // seldom falls on a key tile boundary; panels are kMR keys from key 0).
  r.tile_begin = r.key_begin / static_cast<int64_t>(kMR) * kMR;
  // Each query vector's keys: from the first key any of its rows sees to the
  // last (by position alone, its first row's first key and its last row's
  // last, as both grow with the row; a row that sees none, first > last,
  // adds nothing). A key panel is computed only for the vectors whose range
  // it meets (VectorRange::Of): the triangles at a window's edges and past
  // the causal diagonal, and a mask's blocked ends, are skipped a vector at
  // a time, the rest masked per lane.
  r.q_vectors = (static_cast<size_t>(rows) + kLanes - 1) / kLanes;
  for (size_t c = 0; c < r.q_vectors; ++c) {
    r.ranges.lo[c] = INT32_MAX;
    r.ranges.last[c] = -1;
    for (size_t l = c * kLanes; l < std::min<size_t>((c + 1) * kLanes, rows); ++l) {
      if (s.key_lo[l] > s.key_last[l]) continue;
      r.ranges.lo[c] = std::min(r.ranges.lo[c], s.key_lo[l]);
      r.ranges.last[c] = std::max(r.ranges.last[c], s.key_last[l]);
    }
  }
  r.ranges.vectors = r.q_vectors;
  return r;
}

// Query rows of the next item and output rows of this one, spread over the
// item's key panels (rows with a contiguous last dim only).
HWY_INLINE void AddRowsAhead(const SdpaProblem& p, const ItemRows& r, const FlashItem* next,
                             RowLinesAhead* ahead) {
  if (next != nullptr && p.q.stride[3] == 1) {
    const char* q_base = static_cast<const char*>(p.q.data);
    const int64_t q_bytes = static_cast<int64_t>(DtypeSize(p.q.dtype));
    ahead->AddRows(next->rows, p.head_dim * q_bytes, [&](int64_t c) {
      return q_base + p.RowOffset(p.q, next->b, next->kvh, next->row0 + c) * q_bytes;
    });
  }
  if (p.out.stride[3] == 1) {
    const char* out_base = static_cast<const char*>(p.out.data);
    const int64_t out_bytes = static_cast<int64_t>(DtypeSize(p.out.dtype));
    ahead->AddRows(r.rows, p.value_dim * out_bytes, [&](int64_t c) {
      return out_base + p.RowOffset(p.out, r.b, r.kvh, r.row0 + c) * out_bytes;
    });
  }
  ahead->Spread((r.key_end - r.tile_begin + static_cast<int64_t>(kMR) - 1) /
                static_cast<int64_t>(kMR));
}

// S^T = K_tile . Q^T for keys [jt0, jt1) into s.s_t, one register tile (MR
// keys x Bq queries) at a time, keys from their packed panels or read in
// place (except a panel that would run past the tensor's last key: copied,
// zero padded); s.tile_max becomes the running max with the tile's scores.
// Panels on the causal diagonal, at a window's edges or holding the tile's
// padding keys are masked in registers; query vectors that see none of a
// panel's keys get -inf without computing them.
HWY_INLINE void ScoreKeyTile(const FlashPlan& plan, const ItemRows& r, const ItemOperands& in,
                             const LaneModifiers* mods, bool bf16_dot, int64_t jt0, int64_t jt1,
                             RowLinesAhead* ahead, const ItemScratch& s) {
  const DF df;
  const SdpaProblem& p = *plan.problem;
  float* HWY_RESTRICT s_t = s.s_t;
  float* HWY_RESTRICT tile_max = s.tile_max;
  const float* HWY_RESTRICT row_max = s.row_max;
  const float* HWY_RESTRICT q_t = s.q_t;
  float* HWY_RESTRICT k_edge = s.k_edge;
  const int64_t dim = p.head_dim;
  const size_t udim = static_cast<size_t>(dim);
  const size_t dim_pairs = static_cast<size_t>(dim + 1) / 2;
  const size_t panels = static_cast<size_t>(jt1 - jt0 + kMR - 1) / kMR;
  for (size_t c = 0; c < r.q_vectors * kLanes; c += kLanes) {
    hn::Store(hn::Load(df, row_max + c), df, tile_max + c);
  }
  // The key panel starting at key j, prefetched if all of it is below key_end.
  const size_t panel_lines =
      kMR * ((static_cast<size_t>(dim) + kCacheLineFloats - 1) / kCacheLineFloats);
  const auto key_panel_prefetch = [&](int64_t j) {
    const size_t lines = j + static_cast<int64_t>(kMR) <= r.key_end ? panel_lines : 0;
    return plan.keys_in_place
               ? KeyPanelPrefetch{in.k_rows + j * in.ldk, static_cast<size_t>(in.ldk), lines}
               : KeyPanelPrefetch{in.k_packed + j * dim, static_cast<size_t>(dim), lines};
  };
  for (size_t panel = 0; panel < panels; ++panel) {
    const int64_t j = jt0 + static_cast<int64_t>(panel * kMR);
    const int64_t j_last = j + static_cast<int64_t>(kMR) - 1;
    const bool edge = j < r.free_begin || j_last >= r.free_end;
    const PanelMask mask{j, jt1, edge ? s.key_lo : nullptr, s.key_last};
    const PanelMask* panel_mask = (edge || j_last >= jt1) ? &mask : nullptr;
    float* s_rows = s_t + panel * kMR * kQueryTile;
    // The first line of the panel's value rows, for P . V (under bf16_dot
    // its rows of V pairs, a row per two keys); the key panel
    // kPrefetchDistance ahead (if it is within key_end), over this one's
    // steps.
    const int64_t v_end = std::min<int64_t>(j + static_cast<int64_t>(kMR), jt1);
    if (bf16_dot) {
      for (int64_t row = j / 2; row < (v_end + 1) / 2; ++row)
        PrefetchLine(in.v_rows + row * in.ldv);
    } else {
      for (int64_t row = j; row < v_end; ++row) PrefetchLine(in.v_rows + row * in.ldv);
    }
    ahead->Step();
    const KeyPanelPrefetch prefetch =
        key_panel_prefetch(j + static_cast<int64_t>(kPrefetchDistance * kMR));
    // The vectors [v0, v1) that see a key of the panel; the others' scores
    // are -inf (blocked), without computing them.
    size_t v0, v1;
    r.ranges.Of(j, j_last, &v0, &v1);
    for (size_t c = 0; c < r.q_vectors; ++c) {
      if (c >= v0 && c < v1) continue;
      for (size_t k = 0; k < kMR; ++k) {
        hn::Store(hn::Set(df, -INFINITY), df, s_rows + k * kQueryTile + c * kLanes);
      }
    }
    if (v1 == v0) continue;
    const size_t lanes0 = v0 * kLanes;
    const LaneModifiers shifted_mods =
        mods != nullptr
            ? LaneModifiers{mods->rule, mods->slope != nullptr ? mods->slope + lanes0 : nullptr,
                            mods->pos + lanes0}
            : LaneModifiers{};
    const PanelMask shifted_mask =
        panel_mask != nullptr
            ? PanelMask{panel_mask->key0, panel_mask->key_end,
                        panel_mask->key_lo != nullptr ? panel_mask->key_lo + lanes0 : nullptr,
                        panel_mask->key_last + lanes0}
            : PanelMask{};
    const LaneModifiers* vmods = mods != nullptr ? &shifted_mods : nullptr;
    const PanelMask* vmask = panel_mask != nullptr ? &shifted_mask : nullptr;
    const float* vq = q_t + lanes0;
    float* vs = s_rows + lanes0;
    float* vmax = tile_max + lanes0;
    if (bf16_dot) {
      const Bf16ScoreOperands operands{
          reinterpret_cast<const uint32_t*>(in.k_packed) + j * static_cast<int64_t>(dim_pairs),
          s.q_pairs + lanes0, dim_pairs, plan.q_scale};
      ScorePanel<kTileVectors>(v1 - v0, udim, PackedA{in.k_packed, kMR}, vq, vs, j, vmods, vmask,
                               vmax, prefetch, &operands);
    } else if (!plan.keys_in_place) {
      ScorePanel<kTileVectors>(v1 - v0, udim, PackedA{in.k_packed + j * dim, kMR}, vq, vs, j, vmods,
                               vmask, vmax, prefetch);
    } else if (j + static_cast<int64_t>(kMR) <= p.kv_len) {
      ScorePanel<kTileVectors>(v1 - v0, udim,
                               RowMajorA{in.k_rows + j * in.ldk, static_cast<size_t>(in.ldk)}, vq,
                               vs, j, vmods, vmask, vmax, prefetch);
    } else {
      for (int64_t k = 0; k < static_cast<int64_t>(kMR); ++k) {
        for (int64_t d = 0; d < dim; ++d) {
          k_edge[k * dim + d] = j + k < p.kv_len ? in.k_rows[(j + k) * in.ldk + d] : 0.0f;
        }
      }
      ScorePanel<kTileVectors>(v1 - v0, udim, RowMajorA{k_edge, udim}, vq, vs, j, vmods, vmask,
                               vmax, KeyPanelPrefetch{nullptr, 0, 0});
    }
  }
}

// The rest of key tile [jt0, jt1) once its scores are in s.s_t: the mask's
// biases (and the tile's max again), the scores into the weights output (log2
// units, normalised in FinishRows), the online softmax update (P, rounded to
// bf16 for P . V under bf16 products; the sums keep the fp32 P), and
// O^T = O^T * alpha + V^T . P^T over the tile's real keys (not the padding).
HWY_INLINE void UpdateWithKeyTile(const FlashPlan& plan, const ItemRows& r, const ItemOperands& in,
                                  bool bf16_dot, int64_t jt0, int64_t jt1, const ItemScratch& s) {
  const DF df;
  const SdpaProblem& p = *plan.problem;
  float* HWY_RESTRICT s_t = s.s_t;
  float* HWY_RESTRICT o_t = s.o_t;
  float* HWY_RESTRICT row_max = s.row_max;
  float* HWY_RESTRICT tile_max = s.tile_max;
  float* HWY_RESTRICT row_sum = s.row_sum;
  float* HWY_RESTRICT rescale = s.rescale;
  uint32_t* HWY_RESTRICT p_pairs = s.p_pairs;
  const size_t tile_keys = static_cast<size_t>(jt1 - jt0 + kMR - 1) / kMR * kMR;
  const size_t cols = r.q_vectors * kLanes;
  if (p.has_mask) {
    ApplyMask(p, s.mask_row, r.rows, cols, jt0, jt1, s.mask_bias, s_t);
    TileMax(df, s_t, tile_keys, kQueryTile, cols, row_max, tile_max);
  }
  if (p.has_weights) {
    for (int64_t c = 0; c < r.rows; ++c) {
      float* w = p.weights.AsMutable<float>() + p.RowOffset(p.weights, r.b, r.kvh, r.row0 + c);
      const int64_t sw = p.weights.stride[3];
      for (int64_t j = jt0; j < jt1; ++j) w[j * sw] = s_t[(j - jt0) * kQueryTile + c];
    }
  }
  if (bf16_dot) {
    SoftmaxTileUpdate(df, s_t, tile_keys, kQueryTile, cols, tile_max, row_max, row_sum, rescale,
                      PairedProbabilities{p_pairs, kQueryTile});
  } else if (p.Bf16Products()) {
    SoftmaxTileUpdate(df, s_t, tile_keys, kQueryTile, cols, tile_max, row_max, row_sum, rescale,
                      RoundedProbabilities{s_t, kQueryTile});
  } else {
    SoftmaxTileUpdate(df, s_t, tile_keys, kQueryTile, cols, tile_max, row_max, row_sum, rescale);
  }
  const bool masked_tile = p.has_mask || jt0 < r.free_begin || jt1 > r.free_end;
  const size_t keys = static_cast<size_t>(jt1 - jt0);
  const size_t value_dims = static_cast<size_t>(p.value_dim);
  // The flags are per key_tile keys from key 0; this tile may span two.
  const int64_t key_tile = static_cast<int64_t>(plan.geometry.key_tile);
  const auto nonfinite = [&](int64_t j) {
    return plan.nonfinite_values[(r.b * p.kv_heads + r.kvh) * plan.key_tiles + j / key_tile] != 0;
  };
  const uint32_t* v_pairs = reinterpret_cast<const uint32_t*>(in.v_rows);
  if (masked_tile && plan.nonfinite_values != nullptr && (nonfinite(jt0) || nonfinite(jt1 - 1))) {
    if (bf16_dot) {
      WeightedValuesSkippingZerosPairs(value_dims, r.q_vectors, keys, p_pairs, v_pairs, p.value_dim,
                                       jt0, rescale, o_t);
    } else {
      WeightedValuesSkippingZeros(value_dims, r.q_vectors, keys, s_t, in.v_rows + jt0 * in.ldv,
                                  static_cast<size_t>(in.ldv), rescale, o_t);
    }
  } else {
    const Bf16ValueOperands operands{v_pairs, p_pairs, value_dims};
    WeightedValuesByRange(r.ranges, jt0, jt1, value_dims, s_t, in.v_rows,
                          static_cast<size_t>(in.ldv), rescale, s.alpha_once, o_t,
                          bf16_dot ? &operands : nullptr);
  }
}

// out = O * inv (RowInverse: 1 / l, with the sink in the denominator if
// any), lse, and the weights normalised. A row with no visible key has
// l == 0 and gets zeros; a NaN l (NaN input) stays NaN rather than being
// hidden.
HWY_INLINE void FinishRows(const FlashPlan& plan, const ItemRows& r, const ScoreModifiers& rule,
                           const ItemScratch& s) {
  const SdpaProblem& p = *plan.problem;
  const int64_t group = p.group();
  float* HWY_RESTRICT inv = s.rescale;
  for (int64_t c = 0; c < static_cast<int64_t>(r.q_vectors * kLanes); ++c) {
    if (c >= r.rows) {
      inv[c] = 0.0f;
      continue;
    }
    const float l = s.row_sum[c], m = s.row_max[c];
    const int64_t row = r.row0 + c, pos = row / group, head = r.kvh * group + row % group;
    const RowEnd row_end(m, l, SinkLog2(p, head),
                         rule.Shift(head, s.lane_pos[c], pos + p.PositionOffset()), p.has_lse);
    inv[c] = row_end.inverse;
    if (p.has_lse) p.lse.AsMutable<float>()[p.lse.Offset(0, r.b, head, pos)] = row_end.lse;
    if (p.has_weights) {
      // Keys of skipped tiles (left of every window) and past key_end are 0.
      float* w = p.weights.AsMutable<float>() + p.weights.Offset(r.b, head, pos, 0);
      const int64_t sw = p.weights.stride[3];
      const int64_t tile_begin = r.tile_begin, key_end = r.key_end;
      for (int64_t j = 0; j < std::min(tile_begin, key_end); ++j) w[j * sw] = 0.0f;
      for (int64_t j = tile_begin; j < key_end; ++j) {
        w[j * sw] = (l == 0.0f) ? 0.0f : exp2f(w[j * sw] - m) * inv[c];
      }
      for (int64_t j = std::max(tile_begin, key_end); j < p.kv_len; ++j) w[j * sw] = 0.0f;
    }
  }
  StoreOutputs(p, r.b, r.kvh, r.row0, r.rows, s.o_t, inv, plan.value_dim_pad);
}

void Attend(const FlashPlan& plan, const FlashItem& item, const FlashItem* next,
            float* HWY_RESTRICT scratch) {
  // Preconditions (free in Release): an item is a whole query tile of one
  // (batch, kv head); the planner's scratch slice is aligned.
  HWY_DASSERT(plan.problem != nullptr && plan.problem->Valid() && IsScratchAligned(scratch));
  HWY_DASSERT(plan.geometry.query_tile == kQueryTile &&
              plan.geometry.key_tile == (plan.bf16_dot ? kBf16KeyTile : kKeyTile));
  HWY_DASSERT(0 <= item.b && item.b < plan.problem->batch && 0 <= item.kvh &&
              item.kvh < plan.problem->kv_heads);
  HWY_DASSERT(0 <= item.row0 && item.row0 % static_cast<int64_t>(kLanes) == 0 && 0 < item.rows &&
              item.rows <= static_cast<int64_t>(kQueryTile) &&
              item.row0 + item.rows <= plan.problem->q_len * plan.problem->group());
  HWY_DASSERT(next == nullptr || (0 <= next->b && next->b < plan.problem->batch && 0 <= next->kvh &&
                                  next->kvh < plan.problem->kv_heads));
  const DF df;
  const SdpaProblem& p = *plan.problem;
  const ItemScratch s(FlashScratchLayout(p, plan.geometry, plan.value_dim_pad), scratch);
  const ScoreModifiers rule(p);
  const LaneModifiers lane_mods{&rule, rule.slopes != nullptr ? s.lane_slope : nullptr, s.lane_pos};
  const LaneModifiers* mods = rule.any ? &lane_mods : nullptr;
  // The bf16 dot-product tiles (bf16_tiles): Q^T unscaled, then paired.
  const bool bf16_dot = kBf16DotTarget && plan.bf16_dot;

  PackItemQueries(plan, item, bf16_dot, s);
  const ItemRows r = ItemKeyRanges(p, rule, item, s);
  for (size_t i = 0; i < static_cast<size_t>(plan.value_dim_pad) * kQueryTile; i += kLanes) {
    hn::Store(hn::Zero(df), df, s.o_t + i);
  }
  RowLinesAhead ahead;
  AddRowsAhead(p, r, next, &ahead);

  ItemOperands in;
  in.k_packed = plan.PackedK(r.b, r.kvh);
  in.ldk = 0;
  in.k_rows = plan.keys_in_place ? plan.KeyRows(r.b, r.kvh, &in.ldk) : nullptr;
  in.v_rows = plan.ValueRows(r.b, r.kvh, &in.ldv);
  const int64_t key_tile = static_cast<int64_t>(plan.geometry.key_tile);
  for (int64_t jt0 = r.tile_begin; jt0 < r.key_end; jt0 += key_tile) {
    const int64_t jt1 = std::min<int64_t>(jt0 + key_tile, r.key_end);
    // A key tile the mask blocks for every row is skipped whole: blocked
    // keys inside the rows' spans (a sliding window that wraps around an
    // engine's ring cache, padding between sequences) cost nothing either.
    if (p.has_mask && MaskBlocksTile(p, s.mask_row, r.rows, jt0, jt1)) {
      for (int64_t c = 0; p.has_weights && c < r.rows; ++c) {
        float* w = p.weights.AsMutable<float>() + p.RowOffset(p.weights, r.b, r.kvh, r.row0 + c);
        for (int64_t j = jt0; j < jt1; ++j) w[j * p.weights.stride[3]] = -INFINITY;
      }
      continue;
    }
    ScoreKeyTile(plan, r, in, mods, bf16_dot, jt0, jt1, &ahead, s);
    UpdateWithKeyTile(plan, r, in, bf16_dot, jt0, jt1, s);
  }
  FinishRows(plan, r, rule, s);
}

// Constant-initialised so that reading an unsupported target's table (to learn
// its target bit) executes none of that target's instructions.
constexpr FlashKernels kFlashKernels = {
    HWY_TARGET, {kLanes, kMR, kQueryTile, kKeyTile, kBf16KeyTile}, &PackKV, &Attend};

const FlashKernels* GetFlashKernelTable() { return &kFlashKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetFlashKernelTable);

const FlashKernels& GetFlashKernels() {
  static const FlashKernels* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetFlashKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
