// SPDX-License-Identifier: Apache-2.0
//
// Decode attention, per target: few query rows (a GQA group of one decode
// step, or a handful of positions) against a long K/V cache.
//
// Packing K/V would cost more than the attention itself here (each element is
// used by a few rows only), so K and V are read in place and keys are the
// lanes:
//   scores: the rows in groups of R (a power of two), N / R keys at a time,
//     vectors along the head dim: one accumulator per (row, key), so each K
//     vector loaded feeds all R rows; then a log2(N)-level ConcatEven /
//     ConcatOdd pairwise reduction turns the N accumulators into one vector
//     of (row, key) scores;
//   softmax: per row over the chunk (max, Exp2, sum);
//   P.V: value dims are the lanes, up to 4 rows x 4 vectors of accumulators,
//     each V vector loaded once per row group feeds 4 FMAs.
// K and V lines are prefetched ahead (PrefetchKeys). Long caches are cut
// into kDecodeChunk-key chunks merged by log-sum-exp (a vector pass per row),
// so a single (batch, kv head) still feeds every thread; a work item is one
// chunk or, when there are items enough, a run of kDecodeRun consecutive
// chunks done phase by phase (AttendChunksOf).

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "src/cache_line.h"
#include "src/ops/blocks.h"
#include "src/ops/convert.h"
#include "src/ops/decode_attention.h"
#include "src/ops/decode_bf16.h"
#include "src/ops/flash_bf16.h"  // Bf16Pair
#include "src/ops/int8_products.h"
#include "src/ops/score_rules.h"
#include "src/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/ops/decode_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h
#include "src/ops/reduce_keys-inl.h"
#include "src/ops/registers-inl.h"
#include "src/ops/score_rules-inl.h"
#include "src/ops/softmax-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DF and kLanes: vectors-inl.h.
using VF = hn::Vec<DF>;
// Whether this target's kernels may run the AVX512_BF16 loops
// (decode_bf16.h; the planner sets plan.bf16_dot only for them).
constexpr bool kBf16DotTarget = HWY_TARGET == HWY_AVX3;

// K and V lines are prefetched ahead of their use (one prefetch per line,
// interleaved with the vector loads): kPrefetchKeys keys, or more for short
// rows, so that at least kPrefetchBytes of the stream are in flight
// (PrefetchKeys). Without it a decode step streaming K/V from L3 or memory
// is latency-bound (D1 at half speed). 32 keys ahead: 10% faster than 16 on
// D1; further made no difference there, but rows of 64 B (D2q: int8, D 64,
// one query row per kv head, little arithmetic per byte) were only 2 KiB
// ahead, too little time for memory (D2qcold with 8 KiB ahead: -25%; 16 KiB
// gained nothing more).
// Over pages, "ahead" follows the block table (AheadOffset): the rows
// ahead are in another page. Prefetches of any address are harmless: they
// never fault.
constexpr int64_t kPrefetchKeys = 32;
constexpr int64_t kPrefetchBytes = 8192;

// Paged V rows longer than one slice of value dims (WeightedValues reads
// kVecs vectors of each row per pass) are summed in batches of about
// kSliceBatchKeys keys, each row's later slices prefetched while its first is
// read: a batch's later passes find its rows in L1 instead of walking its
// pages again (V1 on Zen 5, 1 / 2 threads: -11% / -9% time).
constexpr int64_t kSliceBatchKeys = 32;

// Keys ahead for rows of `row_bytes`.
inline int64_t PrefetchKeys(int64_t row_bytes) {
  return std::max(kPrefetchKeys, kPrefetchBytes / std::max<int64_t>(row_bytes, 1));
}

// Whether to prefetch at element d (a multiple of kLanes) of a T row: at
// every vector, except for int8, whose vectors are a quarter line (there,
// at the first vector of each line). Every vector for F16/BF16 (two per
// line) measured faster than once per line on D2h (Zen 4).
// Each span of vectors a loop reads from a row (a block of head dims, a
// slice of value dims) also prefetches its last element: when rows do not
// start on a line (a pool at 16 bytes past a page, as malloc returns it),
// the vector starts miss the span's last line, which then came by demand at
// every row (V1 on such a pool: 1 / 2 threads -21% / -12% time with it).
template <typename T>
HWY_INLINE bool PrefetchAt(size_t d) {
  return sizeof(T) >= 2 || (d * sizeof(T)) % kCacheLineBytes == 0;
}

// body(v_0, ..., v_{kN-1}) with v_c = LoadWideUnscaled(p + c * kLanes)
// (numbers 1 / kWideFactor<T> times their values: the loops multiply their
// sums), widened a pair at a time (LoadWidePairUnscaled: fp8's bytes as one
// vector of 16-bit lanes).
template <size_t kN, typename T, class Body>
HWY_INLINE void WithWideRow(const T* HWY_RESTRICT p, Body&& body) {
  WithRegisters<kN>(hn::Zero(DF()), [&](auto&... v) HWYATTN_INLINE_LAMBDA {
    Unroll<kN / 2>([&](auto i) HWYATTN_INLINE_LAMBDA {
      LoadWidePairUnscaled(p + 2 * i * kLanes, Nth<2 * i>(v...), Nth<2 * i + 1>(v...));
    });
    if constexpr (kN % 2 != 0) Nth<kN - 1>(v...) = LoadWideUnscaled(p + (kN - 1) * kLanes);
    body(v...);
  });
}

// Streamed K and V lines are prefetched into L1 or L2 (PrefetchLine<kL2>, kL2
// from StreamPrefetchLevel, a template parameter of the whole chunk so the
// loops carry no branch).
// StreamPrefetchLevel asks for L2 only on x86 CPUs with AVX2 (AMD family
// 19h), so the L2 loops are compiled for those targets alone: every other
// target (and a capped SSE4 or fallback on such a CPU) runs the L1 loops,
// and each architecture's build compiles half the instances.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
constexpr bool kL2Loops = true;
#else
constexpr bool kL2Loops = false;
#endif

// The multiply-adds of head dims [d, d + kBlock * kLanes) into the
// accumulators of ScoreKeyGroup (a pack of kLanes): the kRows x kBlock query
// vectors are loaded into registers once and feed every key of the group, so
// a K vector costs one load for kRows FMAs (Zen 4 loads one 512-bit vector
// per cycle: reloading q for every FMA made the score loop load-bound).
template <bool kL2, size_t kRows, size_t kBlock, typename T, class... V>
HWY_INLINE void ScoreDimBlock(const float* HWY_RESTRICT q, size_t ldq, size_t d,
                              const T* HWY_RESTRICT k, int64_t ldk, int64_t ahead, V&... acc) {
  constexpr size_t kKeys = kLanes / kRows;
  const DF df;
  WithRegistersFrom<kRows * kBlock>(
      [&](auto i) HWYATTN_INLINE_LAMBDA {
        return hn::Load(df, q + (i / kBlock) * ldq + d + (i % kBlock) * kLanes);
      },
      [&](auto&... qv) HWYATTN_INLINE_LAMBDA {
        const T* kr = k + d;  // key kk's row, a step of ldk per key
        Unroll<kKeys>([&](auto kk) HWYATTN_INLINE_LAMBDA {
          WithWideRow<kBlock>(kr, [&](auto&... kv) HWYATTN_INLINE_LAMBDA {
            Unroll<kBlock>([&](auto c) HWYATTN_INLINE_LAMBDA {
              if (PrefetchAt<T>(d + c * kLanes)) PrefetchLine<kL2>(kr + ahead + c * kLanes);
              Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
                auto& x = Nth<r * kKeys + kk>(acc...);
                x = hn::MulAdd(Nth<r * kBlock + c>(qv...), Nth<c>(kv...), x);
              });
            });
          });
          PrefetchLine<kL2>(kr + ahead + kBlock * kLanes - 1);  // the span's end (PrefetchAt)
          kr += ldk;
        });
      });
}

// Head dims [d, dim_vec) in blocks of kBlock vectors, then the rest in
// halving blocks (at most one of each size): D = 4 vectors with kBlock = 8
// is one block of 4, so its key rows are still read front to back.
template <bool kL2, size_t kRows, size_t kBlock, typename T, class... V>
HWY_INLINE void ScoreDimBlocks(const float* HWY_RESTRICT q, size_t ldq, size_t d, size_t dim_vec,
                               const T* HWY_RESTRICT k, int64_t ldk, int64_t ahead, V&... acc) {
  for (; d + kBlock * kLanes <= dim_vec; d += kBlock * kLanes) {
    ScoreDimBlock<kL2, kRows, kBlock>(q, ldq, d, k, ldk, ahead, acc...);
  }
  if constexpr (kBlock > 1)
    ScoreDimBlocks<kL2, kRows, kBlock / 2>(q, ldq, d, dim_vec, k, ldk, ahead, acc...);
}

// Scores of kLanes / kRows consecutive keys (rows `ldk` apart) against kRows
// scaled query rows (`ldq` apart) over the first dim_vec (a multiple of
// kLanes, possibly 0) head dims; the first `rows` rows are stored, each as
// kKeys consecutive floats `lds` apart. One accumulator per (row, key): each
// K vector loaded feeds kRows FMAs, so a GQA group's rows share every K load;
// ReduceKeys then puts (row r, key k) in lane r * kKeys + k. Head dims in
// blocks whose query vectors fit in 8 registers (ScoreDimBlocks), each block
// key by key: a key row is read front to back when one block spans it (one
// row per kv head, D <= 8 vectors), else in pieces of 8 / kRows vectors. (Reading
// dim-major, one vector of each of 16 key rows and then the next, kept 16
// lines 256 B apart in flight and ran D2 1.5x slower on Zen 4.) Every
// accumulator sums its head dims in increasing order whatever the blocks:
// the same sums.
template <bool kL2, size_t kRows, typename T>
HWY_INLINE void ScoreKeyGroup(const float* HWY_RESTRICT q, size_t ldq, size_t dim_vec,
                              const T* HWY_RESTRICT k, int64_t ldk, int64_t ahead, size_t rows,
                              float* HWY_RESTRICT s, size_t lds) {
  constexpr size_t kKeys = kLanes / kRows;
  constexpr size_t kBlock = kRows >= 8 ? 1 : 8 / kRows;
  const DF df;
  WithRegisters<kLanes>(hn::Zero(df), [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
    if constexpr (kRows == 1) {
      Unroll<kKeys>([&](auto kk) HWYATTN_INLINE_LAMBDA {
        const T* kr = k + static_cast<int64_t>(kk) * ldk;
        auto& x = Nth<kk>(acc...);
        for (size_t d = 0; d < dim_vec; d += kLanes) {
          if (PrefetchAt<T>(d)) PrefetchLine<kL2>(kr + ahead + d);
          x = hn::MulAdd(hn::Load(df, q + d), LoadWideUnscaled(kr + d), x);
        }
        if (dim_vec != 0) PrefetchLine<kL2>(kr + ahead + dim_vec - 1);
      });
    } else {
      ScoreDimBlocks<kL2, kRows, kBlock>(q, ldq, 0, dim_vec, k, ldk, ahead, acc...);
    }
    VF sums = ReduceKeys(acc...);
    if constexpr (kWideFactor<T> != 1.0f) sums = hn::Mul(sums, hn::Set(df, kWideFactor<T>));
    if constexpr (kRows == 1) {
      hn::StoreU(sums, df, s);
    } else {
      HWY_ALIGN float lanes[kLanes];
      hn::Store(sums, df, lanes);
      for (size_t r = 0; r < rows; ++r)
        memcpy(s + r * lds, lanes + r * kKeys, kKeys * sizeof(float));
    }
  });
}

// Scores of the chunk's first `full` keys (a multiple of kLanes / kRows) for
// all rows, in groups of kRows rows. Not inlined: in its own frame the key
// loop keeps its pointers in registers (inlined into ScoreRun, the 8-row
// loop reloaded four of them from the stack per step on AVX3).
template <bool kL2, size_t kRows, typename T>
HWY_NOINLINE void ScoreKeyBlocks(const float* HWY_RESTRICT q, size_t ldq, size_t dim_vec,
                                 const T* HWY_RESTRICT k, int64_t ldk, int64_t ahead, size_t rows,
                                 int64_t full, float* HWY_RESTRICT s, size_t lds) {
  constexpr int64_t kKeys = static_cast<int64_t>(kLanes / kRows);
  for (int64_t j = 0; j < full; j += kKeys) {
    for (size_t r0 = 0; r0 < rows; r0 += kRows) {
      ScoreKeyGroup<kL2, kRows>(q + r0 * ldq, ldq, dim_vec, k + j * ldk, ldk, ahead,
                                std::min(kRows, rows - r0), s + r0 * lds + j, lds);
    }
  }
}

// A run of keys whose V (or K) rows follow each other `ld` apart: the
// whole chunk, or what of it a page holds. `rows` is the run's first key's
// row, `ahead` the prefetch distance (AheadOffset), `first` its first key's
// index in the chunk's probabilities.
template <typename T>
struct KeyRun {
  const T* rows;
  int64_t ahead;
  size_t first, count;
};

// out[r][dv] = sum_j p[r][j] v[j][dv] for kRows rows (p rows `ldp` apart) and
// kVecs vectors of value dims from dv, over the keys of `num_runs` runs, in
// their order, the accumulators in registers throughout; with `accumulate`,
// the sums continue from out's values (the next batch of runs: the same
// operations in the same order as one pass over all of them). Each row's
// `rest` elements after the slice are prefetched as it is read (the later
// slices' lines: kSliceBatchKeys).
template <bool kL2, size_t kRows, size_t kVecs, typename T>
HWY_INLINE void WeightedValues(const float* HWY_RESTRICT p, size_t ldp, const KeyRun<T>* runs,
                               size_t num_runs, size_t dv, int64_t ldv, size_t rest,
                               bool accumulate, float* HWY_RESTRICT out, size_t ldo) {
  const DF df;
  // The values as WithWideRow loads them: the accumulators hold the sums over
  // kWideFactor<T> (out's values scaled exactly, a power of two).
  const auto unscaled = [&](VF x) HWYATTN_INLINE_LAMBDA {
    if constexpr (kWideFactor<T> != 1.0f) x = hn::Mul(x, hn::Set(df, 1.0f / kWideFactor<T>));
    return x;
  };
  const auto scaled = [&](VF x) HWYATTN_INLINE_LAMBDA {
    if constexpr (kWideFactor<T> != 1.0f) x = hn::Mul(x, hn::Set(df, kWideFactor<T>));
    return x;
  };
  // The kRows x kVecs accumulators, a pack (registers-inl.h), row-major.
  WithRegistersFrom<kRows * kVecs>(
      [&](auto i) HWYATTN_INLINE_LAMBDA {
        return accumulate ? unscaled(hn::LoadU(df, out + (i / kVecs) * ldo + (i % kVecs) * kLanes))
                          : hn::Zero(df);
      },
      [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
        for (size_t k = 0; k < num_runs; ++k) {
          const T* HWY_RESTRICT v = runs[k].rows + dv;
          const int64_t ahead = runs[k].ahead;
          const float* HWY_RESTRICT pk = p + runs[k].first;
          for (size_t j = 0; j < runs[k].count; ++j) {
            const T* HWY_RESTRICT vj = v + static_cast<int64_t>(j) * ldv;
            Unroll<kVecs>([&](auto c) HWYATTN_INLINE_LAMBDA {
              if (PrefetchAt<T>(dv + c * kLanes)) PrefetchLine<kL2>(vj + ahead + c * kLanes);
            });
            PrefetchLine<kL2>(vj + ahead + kVecs * kLanes - 1);
            for (size_t e = kVecs * kLanes; e < kVecs * kLanes + rest; e += kLanes) {
              if (PrefetchAt<T>(dv + e)) PrefetchLine<kL2>(vj + e);
            }
            WithWideRow<kVecs>(vj, [&](auto&... vv) HWYATTN_INLINE_LAMBDA {
              Unroll<kRows>([&](auto r) HWYATTN_INLINE_LAMBDA {
                const VF pr = hn::Set(df, pk[r * ldp + j]);
                Unroll<kVecs>([&](auto c) HWYATTN_INLINE_LAMBDA {
                  auto& x = Nth<r * kVecs + c>(acc...);
                  x = hn::MulAdd(pr, Nth<c>(vv...), x);
                });
              });
            });
          }
        }
        Unroll<kRows * kVecs>([&](auto i) HWYATTN_INLINE_LAMBDA {
          hn::StoreU(scaled(Nth<i>(acc...)), df, out + (i / kVecs) * ldo + (i % kVecs) * kLanes);
        });
      });
}

// WeightedValues for `rows` <= 4 rows: a switch to the compiled tile shapes.
template <bool kL2, size_t kVecs, typename T>
void WeightedValuesRows(size_t rows, const float* p, size_t ldp, const KeyRun<T>* runs,
                        size_t num_runs, size_t dv, int64_t ldv, size_t rest, bool accumulate,
                        float* out, size_t ldo) {
  switch (rows) {
    case 1:
      WeightedValues<kL2, 1, kVecs>(p, ldp, runs, num_runs, dv, ldv, rest, accumulate, out, ldo);
      break;
    case 2:
      WeightedValues<kL2, 2, kVecs>(p, ldp, runs, num_runs, dv, ldv, rest, accumulate, out, ldo);
      break;
    case 3:
      WeightedValues<kL2, 3, kVecs>(p, ldp, runs, num_runs, dv, ldv, rest, accumulate, out, ldo);
      break;
    default:
      WeightedValues<kL2, 4, kVecs>(p, ldp, runs, num_runs, dv, ldv, rest, accumulate, out, ldo);
      break;
  }
}

// out[r][dv] = sum_j p[r][j] v[j][dv] for `rows` rows, skipping the zero
// probabilities: the operations of WeightedValues and of the scalar tail, in
// the same order (continuing from out's values with `accumulate`).
template <typename T>
void WeightedValuesSkippingZeros(size_t rows, size_t keys, const float* HWY_RESTRICT s, size_t ld,
                                 const T* HWY_RESTRICT v, int64_t ldv, size_t value_dim,
                                 bool accumulate, float* HWY_RESTRICT out) {
  const DF df;
  const size_t dv_vec = value_dim / kLanes * kLanes;
  for (size_t r = 0; r < rows; ++r) {
    const float* pr = s + r * ld;
    float* o = out + r * value_dim;
    for (size_t dv = 0; dv < dv_vec; dv += kLanes) {
      VF acc = accumulate ? hn::LoadU(df, o + dv) : hn::Zero(df);
      for (size_t j = 0; j < keys; ++j) {
        if (pr[j] != 0.0f) {
          acc =
              hn::MulAdd(hn::Set(df, pr[j]), LoadWide(v + static_cast<int64_t>(j) * ldv + dv), acc);
        }
      }
      hn::StoreU(acc, df, o + dv);
    }
    for (size_t dv = dv_vec; dv < value_dim; ++dv) {
      float sum = accumulate ? o[dv] : 0.0f;
      for (size_t j = 0; j < keys; ++j) {
        if (pr[j] != 0.0f) sum += pr[j] * ToFloat(v[static_cast<int64_t>(j) * ldv + dv]);
      }
      o[dv] = sum;
    }
  }
}

// An I8 cache's per-channel scales (scale[d * step]) times `rows` rows of
// `dim` values `dim` apart.
void ScaleChannels(const float* HWY_RESTRICT scale, int64_t step, int64_t rows, int64_t dim,
                   float* HWY_RESTRICT x) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < dim; ++d) x[r * dim + d] *= scale[d * step];
  }
}

// A quantized cache's per-token scales of the chunk's keys [c0, c0 + keys)
// times each row's values of them in s [rows][score stride]: the raw scores
// (K's scales) or the probabilities (V's, after the softmax has summed them;
// with `round`, the products rounded to bf16: bf16 products' P operand).
void ScaleKeys(const SdpaProblem& p, const KvScale& scale, int64_t b, int64_t kvh, int64_t c0,
               int64_t keys, int64_t rows, bool round, float* HWY_RESTRICT s) {
  const size_t ld = DecodeScoreStride(kLanes);
  const int64_t sj = scale.t.stride[2];
  for (int64_t j0 = 0; j0 < keys;) {
    const int64_t run = p.KeysInRun(c0 + j0, keys - j0);
    int64_t unused;
    const float* sc = p.ScaleRow(scale, b, kvh, c0 + j0, &unused);
    for (int64_t r = 0; r < rows; ++r) {
      float* sr = s + r * ld + j0;
      int64_t j = 0;
      if (sj == 1) {  // the scales of a run's keys side by side: a vector at a time
        const DF df;
        for (; j + static_cast<int64_t>(kLanes) <= run; j += kLanes) {
          const VF x = hn::Mul(hn::LoadU(df, sr + j), hn::LoadU(df, sc + j));
          hn::StoreU(round ? RoundToBf16(df, x) : x, df, sr + j);
        }
      }
      for (; j < run; ++j) {
        const float x = sr[j] * sc[j * sj];
        sr[j] = round ? hwyattn::RoundToBf16(x) : x;
      }
    }
    j0 += run;
  }
}

// The scaled query rows of (b, unit) into q [kDecodeMaxRows][dim_pad]: rows
// up to a whole number of score groups are zeros (their scores are dropped);
// with more rows than lanes (8 rows on SSE4) that is several groups, the last
// one partly filled.
// Integer products (plan.int8): the rows, unscaled (the scale multiplies
// the integer kernel's sums), quantized into x (int8_products.h).
void PrepareQueries(const DecodePlan& plan, int64_t b, int64_t unit, size_t dim_pad,
                    float* HWY_RESTRICT q, const Int8DecodeScratch& x) {
  const SdpaProblem& p = *plan.problem;
  const int64_t kvh = plan.KvHead(unit), dim = p.head_dim, rows = plan.rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = plan.Position(r), head = plan.Head(unit, r);
    float* dst = q + static_cast<size_t>(r) * dim_pad;
    ScaledQueryRow(p, b, head, pos, plan.bf16_dot || plan.int8 ? 1.0f : plan.q_scale, dst,
                   plan.bf16);
    for (size_t d = static_cast<size_t>(dim); d < dim_pad; ++d) dst[d] = 0.0f;
    // Per-channel K scales: q . (k * s) = (q * s) . k. (Under bf16_dot they
    // are one per kv head, a factor of the score scale: ScoreChunk.)
    if (p.k_scale.layout == KvScales::kPerChannel && !plan.bf16_dot) {
      int64_t step;
      const float* scale = p.ScaleRow(p.k_scale, b, kvh, 0, &step);
      ScaleChannels(scale, step, 1, dim, dst);
    }
  }
  const size_t group_rows = GroupRows(static_cast<size_t>(rows));
  const size_t rows_pad = (static_cast<size_t>(rows) + group_rows - 1) / group_rows * group_rows;
  for (size_t r = static_cast<size_t>(rows); r < rows_pad; ++r) {
    memset(q + r * dim_pad, 0, dim_pad * sizeof(float));
  }
  if (plan.int8) {
    const size_t blocks = static_cast<size_t>(IntegerBlocks(dim));
    const size_t ldq = blocks * static_cast<size_t>(kBlockElems);
    int8_t* HWY_RESTRICT qi = x.keys;  // a row's int8 numbers (the keys' stage is free)
    // The integer kernel's group of rows (Int8GroupRows) may be larger than
    // the fp32 kernels' (a vector of lanes at most): zeros up to it too.
    const size_t int8_rows = std::max(rows_pad, Int8GroupRows(static_cast<size_t>(rows)));
    for (size_t r = rows_pad; r < int8_rows; ++r)
      memset(q + r * dim_pad, 0, dim_pad * sizeof(float));
    const bool offset = GetInt8Kernels().offset_keys;
    const int32_t zero_point = Int8KeyZeroPoint(Int8LayoutOf(p.k.dtype));
    for (size_t r = 0; r < int8_rows; ++r) {
      // The kernel's operands: int8 and the sums' starts (vpdpbusd), else
      // int16.
      int8_t* row = offset ? x.s + r * ldq : qi;
      QuantizeQueryRow(q + r * dim_pad, dim, row, x.d + r * blocks, x.dsum + r * blocks);
      if (offset) {
        QueryBlockStarts(row, blocks, zero_point, x.start + r * blocks);
      } else {
        for (size_t i = 0; i < ldq; ++i) x.q[r * ldq + i] = qi[i];
      }
    }
  }
  if (kBf16DotTarget && plan.bf16_dot) {
    // The rows (rounded, unscaled: the scale multiplies the dot products) as
    // bf16 pairs, Bf16DecodeQueryPairs(dim) per row from the start of q: in
    // place, each pair written at or before the floats it is made of.
    const size_t ldq = Bf16DecodeQueryPairs(dim);
    for (size_t r = 0; r < rows_pad; ++r) {
      const float* src = q + r * dim_pad;
      for (size_t i = 0; i < ldq; ++i) {
        const uint32_t lo = 2 * i < static_cast<size_t>(dim) ? FloatBits(src[2 * i]) : 0u;
        const uint32_t hi = 2 * i + 1 < static_cast<size_t>(dim) ? FloatBits(src[2 * i + 1]) : 0u;
        const uint32_t pair = Bf16Pair(lo, hi);
        memcpy(q + r * ldq + i, &pair, sizeof(pair));
      }
    }
  }
}

// Scores of `keys` keys whose rows are ldk apart (k: the first) for every
// row into s [rows][ld]. The rows in groups of a power of two, kLanes / group
// keys at a time; the keys past the last whole group one by one. pad > keys
// (the chunk's last run): the lanes up to pad are set to -inf, with one vector
// store per row (vector loads of scalar-stored lanes would stall on
// forwarding); pad == keys: the tail keys are stored one by one.
template <bool kL2, typename T>
void ScoreRun(const float* HWY_RESTRICT q, size_t dim_pad, int64_t rows, int64_t dim,
              const T* HWY_RESTRICT k, int64_t ldk, int64_t ahead, int64_t keys, int64_t pad,
              float* HWY_RESTRICT s, size_t ld) {
  const DF df;
  const size_t dim_vec = static_cast<size_t>(dim) / kLanes * kLanes;
  const size_t urows = static_cast<size_t>(rows);
  const size_t group_rows = GroupRows(urows);
  const int64_t group_keys = static_cast<int64_t>(kLanes / group_rows);
  const int64_t full = keys / group_keys * group_keys;
  switch (group_rows) {
    case 1: ScoreKeyBlocks<kL2, 1>(q, dim_pad, dim_vec, k, ldk, ahead, urows, full, s, ld); break;
#if HWY_TARGET != HWY_SCALAR
    case 2: ScoreKeyBlocks<kL2, 2>(q, dim_pad, dim_vec, k, ldk, ahead, urows, full, s, ld); break;
    case 4: ScoreKeyBlocks<kL2, 4>(q, dim_pad, dim_vec, k, ldk, ahead, urows, full, s, ld); break;
#endif
#if HWY_MAX_BYTES >= 32
    default: ScoreKeyBlocks<kL2, 8>(q, dim_pad, dim_vec, k, ldk, ahead, urows, full, s, ld); break;
#endif
  }
  const auto lane = hn::Iota(df, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * dim_pad;
    float* sr = s + r * ld;
    // The head-dim tail (dim % N) of the full blocks.
    if (dim_vec < static_cast<size_t>(dim)) {
      for (int64_t j = 0; j < full; ++j) {
        float sum = sr[j];
        for (int64_t d = static_cast<int64_t>(dim_vec); d < dim; ++d)
          sum += qr[d] * ToFloat(k[j * ldk + d]);
        sr[j] = sum;
      }
    }
    // Keys past the last full block: scalar dot products.
    const auto dot = [&](int64_t j) {
      const T* kj = k + j * ldk;
      float sum = 0.0f;
      for (int64_t d = 0; d < dim; ++d) sum += qr[d] * ToFloat(kj[d]);
      return sum;
    };
    if (pad == keys) {
      for (int64_t j = full; j < keys; ++j) sr[j] = dot(j);
    } else if (full < pad) {
      VF tail = hn::Set(df, -INFINITY);
      for (int64_t j = full; j < keys; ++j) {
        tail = hn::IfThenElse(hn::Eq(lane, hn::Set(df, static_cast<float>(j - full))),
                              hn::Set(df, dot(j)), tail);
      }
      hn::StoreU(tail, df, sr + full);
    }
  }
}

// The prefetch distance of a run of keys from key j in t (k or v, rows of
// `row_bytes`): the element offset from key j's row to key j +
// PrefetchKeys's (over pages: in the page the block table gives). 0 (the
// run's own lines again) when that key is past the keys of batch b, whose
// page may not be in the table.
int64_t AheadOffset(const SdpaProblem& p, const TensorView& t, int64_t row_bytes, int64_t b,
                    int64_t h, int64_t j) {
  const int64_t n = PrefetchKeys(row_bytes);
  if (!p.Paged()) return n * t.stride[2];
  if (j + n >= p.KeyEnd(b)) return 0;
  return p.KeyRowOffset(t, b, h, j + n) - p.KeyRowOffset(t, b, h, j);
}

// The caller's mask row from element `at` added to `keys` scores (AddMaskRow).
// Not a template of the cache's dtype: one copy per mask dtype.
void AddMask(const TensorView& mask, int64_t at, int64_t keys, float* HWY_RESTRICT s) {
  WithMaskElements(mask, [&](const auto* HWY_RESTRICT m) {
    AddMaskRow(m + at, mask.stride[3], static_cast<size_t>(keys), s);
  });
}

// The addresses of the rows of keys [j, j + n) of t (k or v, of b and kvh;
// n <= kStageKeys) into rows[], one KeyRowOffset per run of rows a row
// stride apart (the span, or what of it a page holds: KeysInRun); after
// each run, body(i0, run) (Int8ScoreChunk prefetches there). The packed
// formats' row offsets are whole blocks (or even for I4), so ByteOffset is
// linear in them.
template <class Body>
HWY_INLINE void StagedRowAddresses(const SdpaProblem& p, const TensorView& t, int64_t b,
                                   int64_t kvh, int64_t j, int64_t n, const unsigned char** rows,
                                   const Body& body) {
  const int64_t ld_bytes = ByteOffset(t.dtype, t.stride[2]);
  for (int64_t i0 = 0; i0 < n;) {
    const int64_t run = p.KeysInRun(j + i0, n - i0);
    const unsigned char* row0 = t.BytesAt(p.KeyRowOffset(t, b, kvh, j + i0));
    for (int64_t i = 0; i < run; ++i) rows[i0 + i] = row0 + i * ld_bytes;
    body(i0, run);
    i0 += run;
  }
}

// Whether the F32 loops read t (k or v, a block format) through BlockScores
// and BlockValues (blocks.h), each block dequantized in registers, kStageKeys
// rows at a time: fp32 products (bf16 ones stage rounded rows), and not for
// the rerun skipping zero probabilities (ValuesChunk), which stages.
inline bool ReadsBlocks(const DecodePlan& plan, const TensorView& t) {
  return IsBlockDtype(t.dtype) && !plan.bf16;
}

// The rows PrefetchKeys keys ahead (AheadOffset) of the staged rows src[i0,
// i0 + run) of t (a run of StagedRowAddresses from key j; rows of
// row_bytes) into ahead_rows[i0, i0 + run): the rows to prefetch while
// reading them (their own rows where nothing of batch b is that far ahead).
inline void RowsAhead(const SdpaProblem& p, const TensorView& t, int64_t b, int64_t kvh, int64_t j,
                      int64_t row_bytes, const unsigned char* const* src, int64_t i0, int64_t run,
                      const unsigned char** ahead_rows) {
  const int64_t ahead = ByteOffset(t.dtype, AheadOffset(p, t, row_bytes, b, kvh, j + i0));
  for (int64_t i = i0; i < i0 + run; ++i) ahead_rows[i] = src[i] + ahead;
}

// The rows of keys [j, j + n) of t (k or v, a block format; n <=
// kStageKeys) as BlockScores and BlockValues read them: rows[] and the rows
// to prefetch meanwhile, ahead[].
BlockRowSpan BlockRowsOf(const DecodePlan& plan, const TensorView& t, int64_t b, int64_t kvh,
                         int64_t j, int64_t n, int64_t dim, const unsigned char** rows,
                         const unsigned char** ahead) {
  const SdpaProblem& p = *plan.problem;
  StagedRowAddresses(p, t, b, kvh, j, n, rows, [&](int64_t i0, int64_t run) {
    RowsAhead(p, t, b, kvh, j, ByteOffset(t.dtype, dim), rows, i0, run, ahead);
  });
  return {rows, ahead, static_cast<size_t>(n), plan.prefetch_l2};
}

// Rows of keys [j, j + n) of t (k or v, of b and kvh; `dim` elements each;
// n <= kStageKeys) as fp32 into dst, `ld` apart (DecodeStaged): a packed
// format's dequantized (DequantizeRows, block_rows.cc), a float tensor's
// converted; under bf16 products rounded to bf16 (their operands' rule).
void StageRows(const SdpaProblem& p, const TensorView& t, int64_t b, int64_t kvh, int64_t j,
               int64_t n, int64_t dim, bool round, float* HWY_RESTRICT dst, size_t ld) {
  if (IsPackedDtype(t.dtype)) {
    const unsigned char* rows[kStageKeys];
    StagedRowAddresses(p, t, b, kvh, j, n, rows, [](int64_t, int64_t) {});
    DequantizeRows(t.dtype, rows, n, dim, dst, ld);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = p.KeyRowOffset(t, b, kvh, j + i);
      float* HWY_RESTRICT row = dst + static_cast<size_t>(i) * ld;
      DispatchFloatDtype(t.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* src = t.As<T>() + at;
        for (int64_t d = 0; d < dim; ++d) row[d] = ToFloat(src[d * t.stride[3]]);
      });
    }
  }
  if (round) {
    for (int64_t i = 0; i < n; ++i) {
      float* HWY_RESTRICT row = dst + static_cast<size_t>(i) * ld;
      for (int64_t d = 0; d < dim; ++d) row[d] = hwyattn::RoundToBf16(row[d]);
    }
  }
}

// Integer products: the raw scores (before the per-token scales, modifiers
// and masks) of the chunk's `keys` keys from c0 into s [rows][ld], times
// the score scale in log2 units; -inf up to a whole vector. kStageKeys keys
// at a time: I8 rows of whole blocks and Q8_0's and Q4_0's blocks are read
// in place, the others' integers staged (IntegerRows; Int8InPlace). Each
// key's row is prefetched PrefetchKeys rows ahead (AheadOffset, from the
// stage's first key).
template <bool kL2>
void Int8ScoreChunk(const DecodePlan& plan, int64_t b, int64_t kvh, int64_t c0, int64_t keys,
                    const Int8DecodeScratch& x, float* HWY_RESTRICT s) {
  const SdpaProblem& p = *plan.problem;
  const int64_t dim = p.head_dim;
  const size_t ld = DecodeScoreStride(kLanes);
  const size_t blocks = static_cast<size_t>(IntegerBlocks(dim));
  const size_t ldk = blocks * static_cast<size_t>(kBlockElems);
  const bool in_place = Int8InPlace(p.k.dtype, dim);
  const Int8KeyLayout layout = Int8LayoutOf(p.k.dtype);
  const bool offsets = p.k.dtype == Dtype::kQ4_1 || p.k.dtype == Dtype::kQ5_1;
  const Int8KeyRows k{x.rows, layout == Int8KeyLayout::kScaled ? x.e : nullptr,
                      offsets ? x.m : nullptr, layout};
  const Int8QueryRows q{x.q, x.d, x.dsum, blocks, x.s, x.start};
  const size_t rows = static_cast<size_t>(plan.rows);
  const Int8Kernels& kernels = GetInt8Kernels();
  const int64_t row_bytes = ByteOffset(p.k.dtype, dim);
  for (int64_t j0 = 0; j0 < keys; j0 += kStageKeys) {
    const int64_t n = std::min(kStageKeys, keys - j0);
    const unsigned char *src[kStageKeys], *ahead[kStageKeys];
    StagedRowAddresses(p, p.k, b, kvh, c0 + j0, n, src, [&](int64_t i0, int64_t run) {
      RowsAhead(p, p.k, b, kvh, c0 + j0, row_bytes, src, i0, run, ahead);
      if (ahead[i0] == src[i0]) return;  // nothing ahead
      for (int64_t i = i0; i < i0 + run; ++i) {
        for (int64_t byte = 0; byte < row_bytes; byte += kCacheLineBytes) {
          PrefetchLine<kL2>(ahead[i] + byte);
        }
        PrefetchLine<kL2>(ahead[i] + row_bytes - 1);
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      x.rows[i] = in_place ? reinterpret_cast<const int8_t*>(src[i])
                           : x.keys + static_cast<size_t>(i) * ldk;
    }
    if (!in_place) IntegerRows(p.k.dtype, src, n, dim, x.keys, x.e, x.m);
    kernels.scores(Int8GroupRows(rows), rows, q, k, static_cast<size_t>(n), plan.q_scale, s + j0,
                   ld);
  }
  const size_t keys_pad = (static_cast<size_t>(keys) + kLanes - 1) / kLanes * kLanes;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = static_cast<size_t>(keys); j < keys_pad; ++j) s[r * ld + j] = -INFINITY;
  }
}

// Scores of the chunk's `keys` keys from c0 for every row into s [rows][ld]
// (log2 units, lanes past the last key up to a whole vector -inf), masked.
// Staged (plan.staged, T float): K's rows go through `stage` first.
// Integer products (plan.int8): Int8ScoreChunk.
template <bool kL2, typename T>
void ScoreChunk(const DecodePlan& plan, int64_t b, int64_t unit, int64_t c0, int64_t keys,
                const float* HWY_RESTRICT q, size_t dim_pad, float* HWY_RESTRICT s,
                float* HWY_RESTRICT stage, const Int8DecodeScratch& x) {
  const SdpaProblem& p = *plan.problem;
  const int64_t kvh = plan.KvHead(unit), dim = p.head_dim, rows = plan.rows;
  const size_t ld = DecodeScoreStride(kLanes);
  const int64_t offset = p.PositionOffset();

  // Runs of keys whose rows are ldk apart: the whole chunk, or what of it
  // each page holds.
  const int64_t ldk = p.k.stride[2];
  const size_t keys_pad = (static_cast<size_t>(keys) + kLanes - 1) / kLanes * kLanes;
  // bf16_dot: the dot products times the score scale and the kv head's K
  // scale (Bf16DotApplies: one per head when per channel).
  float dot_scale = plan.q_scale;
  if (plan.bf16_dot && p.k_scale.layout == KvScales::kPerChannel) {
    int64_t unused;
    dot_scale *= *p.ScaleRow(p.k_scale, b, kvh, 0, &unused);
  }
  bool staged = false;
  if (plan.int8) {
    Int8ScoreChunk<kL2>(plan, b, kvh, c0, keys, x, s);
    staged = true;  // (done)
  }
  if constexpr (std::is_same_v<T, float>) {
    if (plan.staged && !staged && ReadsBlocks(plan, p.k)) {
      for (int64_t j0 = 0; j0 < keys; j0 += kStageKeys) {
        const int64_t n = std::min(kStageKeys, keys - j0);
        const unsigned char *src[kStageKeys], *ahead[kStageKeys];
        BlockScores(p.k.dtype, BlockRowsOf(plan, p.k, b, kvh, c0 + j0, n, dim, src, ahead),
                    static_cast<size_t>(dim), q, dim_pad, static_cast<size_t>(rows), s + j0, ld);
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (size_t j = static_cast<size_t>(keys); j < keys_pad; ++j) s[r * ld + j] = -INFINITY;
      }
      staged = true;
    } else if (plan.staged && !staged) {
      const size_t lds = StageStride(p);
      for (int64_t j0 = 0; j0 < keys; j0 += kStageKeys) {
        const int64_t n = std::min(kStageKeys, keys - j0);
        StageRows(p, p.k, b, kvh, c0 + j0, n, dim, plan.bf16, stage, lds);
        const int64_t pad = j0 + n == keys ? static_cast<int64_t>(keys_pad) - j0 : n;
        ScoreRun<kL2>(q, dim_pad, rows, dim, stage, static_cast<int64_t>(lds), 0, n, pad, s + j0,
                      ld);
      }
      staged = true;
    }
  }
  for (int64_t j0 = 0; j0 < keys && !staged;) {
    const int64_t run = p.KeysInRun(c0 + j0, keys - j0);
    const T* k = p.k.As<T>() + p.KeyRowOffset(p.k, b, kvh, c0 + j0);
    const bool last = j0 + run == keys;
    const int64_t pad = last ? static_cast<int64_t>(keys_pad) - j0 : run;
    const int64_t ahead =
        AheadOffset(p, p.k, dim * static_cast<int64_t>(sizeof(T)), b, kvh, c0 + j0);
    if (kBf16DotTarget && plan.bf16_dot) {
      Bf16DecodeScores(p.k.dtype, kL2, static_cast<size_t>(rows),
                       GroupRows(static_cast<size_t>(rows)), reinterpret_cast<const uint32_t*>(q),
                       static_cast<size_t>(dim), k, ldk, ahead, static_cast<size_t>(run),
                       static_cast<size_t>(pad), dot_scale, s + j0, ld);
    } else {
      ScoreRun<kL2>(q, dim_pad, rows, dim, k, ldk, ahead, run, pad, s + j0, ld);
    }
    j0 += run;
  }
  // The last run's vector tail pads a whole vector from its own first tail
  // key; when pages cut the chunk, the chunk's padding up to keys_pad may
  // reach past it: -inf there too (the softmax reads whole vectors).
  if (p.Paged()) {
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t j = static_cast<size_t>(keys); j < keys_pad; ++j) s[r * ld + j] = -INFINITY;
    }
  }

  // An I8 cache's per-token K scales: (q . k) * s = q . (k * s).
  if (p.k_scale.layout == KvScales::kPerToken)
    ScaleKeys(p, p.k_scale, b, kvh, c0, keys, rows, false, s);

  // Per row: the modifiers (softcap, ALiBi), the keys outside its visible
  // range (causal, windows), then the caller's mask.
  const ScoreModifiers mods(p);
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * ld;
    const int64_t pos = plan.Position(r), head = plan.Head(unit, r);
    if (mods.any) mods.ApplyRow(sr, keys, head, c0 - mods.AlibiOrigin(p, b, head, pos + offset));
    int64_t first, end;
    p.VisibleKeys(b, pos + offset, &first, &end);
    for (int64_t j = 0; j < std::min(keys, first - c0); ++j) sr[j] = -INFINITY;
    for (int64_t j = std::max<int64_t>(0, end - c0); j < keys; ++j) sr[j] = -INFINITY;
    if (p.has_mask) AddMask(p.mask, p.mask.Offset(b, head, pos, c0), keys, sr);
  }
}

// Softmax of the chunk per row: P = 2^(S - m), unnormalised, in place; (m,
// sum) per row into stats. With `bf16` (bf16 products), P is stored rounded
// to bf16 (the operand of P . V) while the sum takes the fp32 values.
void SoftmaxChunk(int64_t rows, int64_t keys, bool bf16, float* HWY_RESTRICT s,
                  float* HWY_RESTRICT stats) {
  const DF df;
  const size_t ld = DecodeScoreStride(kLanes);
  const size_t keys_pad = (static_cast<size_t>(keys) + kLanes - 1) / kLanes * kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * ld;  // lanes past the last key hold -inf (ScoreChunk)
    VF mx = hn::Set(df, -FLT_MAX);
    for (size_t j = 0; j < keys_pad; j += kLanes) mx = hn::Max(mx, hn::LoadU(df, sr + j));
    const float m = hn::GetLane(hn::MaxOfLanes(df, mx));
    const VF mv = hn::Set(df, m);
    VF sum = hn::Zero(df);
    for (size_t j = 0; j < keys_pad; j += kLanes) {
      const VF pj = Exp2(df, hn::Sub(hn::LoadU(df, sr + j), mv));
      hn::StoreU(bf16 ? RoundToBf16(df, pj) : pj, df, sr + j);
      sum = hn::Add(sum, pj);
    }
    stats[2 * r] = m;
    stats[2 * r + 1] = hn::GetLane(hn::SumOfLanes(df, sum));
  }
}

// Unnormalised outputs of the chunk's `keys` keys from c0 into out [rows][Dv]:
// 4 rows x 4 vectors of value dims per pass.
// Staged (plan.staged, T float): V's rows go through `stage` first.
template <bool kL2, typename T>
void ValuesChunk(const DecodePlan& plan, int64_t b, int64_t kvh, int64_t c0, int64_t keys,
                 const float* HWY_RESTRICT s, float* HWY_RESTRICT out,
                 uint32_t* HWY_RESTRICT pair_scratch, float* HWY_RESTRICT stage) {
  const SdpaProblem& p = *plan.problem;
  const int64_t value_dim = p.value_dim, rows = plan.rows;
  const size_t ld = DecodeScoreStride(kLanes);
  const int64_t ldv = plan.staged ? static_cast<int64_t>(StageStride(p)) : p.v.stride[2];
  const size_t dv_vec = static_cast<size_t>(value_dim) / kLanes * kLanes;
  // The chunk's runs of keys (the whole chunk, or a page's each), in
  // batches of up to kDecodeMaxRuns: each batch continues the sums of the one
  // before, the same operations in the same order as a chunk in one piece.
  KeyRun<T> runs[kDecodeMaxRuns];
  // Batches end after kDecodeMaxRuns runs or once they hold batch_keys keys.
  const auto for_batches = [&](const auto& body, int64_t batch_keys) {
    if constexpr (std::is_same_v<T, float>) {
      if (plan.staged) {  // one staged run at a time, each continuing the sums
        for (int64_t j0 = 0; j0 < keys; j0 += kStageKeys) {
          const int64_t n = std::min(kStageKeys, keys - j0);
          StageRows(p, p.v, b, kvh, c0 + j0, n, value_dim, plan.bf16, stage,
                    static_cast<size_t>(ldv));
          runs[0] = {stage, 0, static_cast<size_t>(j0), static_cast<size_t>(n)};
          body(size_t{1}, j0 > 0);
        }
        return;
      }
    }
    size_t n = 0;
    bool first = true;
    int64_t batch = 0;
    for (int64_t j0 = 0; j0 < keys;) {
      const int64_t run = p.KeysInRun(c0 + j0, keys - j0);
      runs[n++] = {
          p.v.As<T>() + p.KeyRowOffset(p.v, b, kvh, c0 + j0),
          AheadOffset(p, p.v, value_dim * static_cast<int64_t>(sizeof(T)), b, kvh, c0 + j0),
          static_cast<size_t>(j0), static_cast<size_t>(run)};
      j0 += run;
      batch += run;
      if (n == kDecodeMaxRuns || j0 == keys || batch >= batch_keys) {
        body(n, !first);
        first = false;
        n = 0;
        batch = 0;
      }
    }
  };
  // Every row's sums over the chunk; with skip_zeros, zero probabilities
  // skipped, with the same operations in the same order otherwise.
  const auto values = [&](bool skip_zeros) {
    if (!skip_zeros && ReadsBlocks(plan, p.v)) {
      for (int64_t j0 = 0; j0 < keys; j0 += kStageKeys) {
        const int64_t n = std::min(kStageKeys, keys - j0);
        const unsigned char *src[kStageKeys], *ahead[kStageKeys];
        BlockValues(p.v.dtype, BlockRowsOf(plan, p.v, b, kvh, c0 + j0, n, value_dim, src, ahead),
                    static_cast<size_t>(value_dim), s + j0, ld, static_cast<size_t>(rows), j0 > 0,
                    out, static_cast<size_t>(value_dim));
      }
    } else if (kBf16DotTarget && plan.bf16_dot) {  // the same runs on the AVX512_BF16 loops
      for_batches(
          [&](size_t n, bool accumulate) {
            Bf16ValueRun bruns[kDecodeMaxRuns];
            for (size_t k = 0; k < n; ++k) {
              bruns[k] = {runs[k].rows, runs[k].ahead, runs[k].first, runs[k].count};
            }
            Bf16DecodeValues(p.v.dtype, kL2, static_cast<size_t>(rows), s, ld, bruns, n,
                             static_cast<size_t>(value_dim), ldv, accumulate, skip_zeros, out,
                             pair_scratch);
          },
          keys);
    } else if (skip_zeros) {
      for_batches(
          [&](size_t n, bool) {
            for (size_t k = 0; k < n; ++k) {
              WeightedValuesSkippingZeros(static_cast<size_t>(rows), runs[k].count,
                                          s + runs[k].first, ld, runs[k].rows, ldv,
                                          static_cast<size_t>(value_dim), runs[k].first > 0, out);
            }
          },
          keys);
    } else {
      // Paged rows of 16-bit or 8-bit numbers read in several passes (slices
      // of value dims, groups of 4 rows): short batches, the later passes'
      // lines prefetched by the first (kSliceBatchKeys). F32 rows measured 2%
      // slower so (V2decodes, 1 thread).
      const size_t slice = 4 * kLanes;
      const bool passes = p.Paged() && sizeof(T) <= 2 && (dv_vec > slice || rows > 4);
      for_batches(
          [&](size_t n, bool accumulate) {
            for (int64_t r0 = 0; r0 < rows; r0 += 4) {
              const size_t nr = static_cast<size_t>(std::min<int64_t>(4, rows - r0));
              const float* pr = s + r0 * ld;
              float* o = out + r0 * value_dim;
              size_t dv = 0;
              for (; dv + slice <= dv_vec; dv += slice) {
                const size_t rest =
                    passes && r0 == 0 && dv == 0 ? static_cast<size_t>(value_dim) - slice : 0;
                WeightedValuesRows<kL2, 4>(nr, pr, ld, runs, n, dv, ldv, rest, accumulate, o + dv,
                                           static_cast<size_t>(value_dim));
              }
              for (; dv < dv_vec; dv += kLanes) {
                WeightedValuesRows<kL2, 1>(nr, pr, ld, runs, n, dv, ldv, 0, accumulate, o + dv,
                                           static_cast<size_t>(value_dim));
              }
              for (; dv < static_cast<size_t>(value_dim); ++dv) {
                for (size_t r = 0; r < nr; ++r) {
                  float sum = accumulate ? o[r * value_dim + dv] : 0.0f;
                  for (size_t k = 0; k < n; ++k) {
                    const float* pk = pr + r * ld + runs[k].first;
                    for (size_t j = 0; j < runs[k].count; ++j)
                      sum += pk[j] * ToFloat(runs[k].rows[static_cast<int64_t>(j) * ldv + dv]);
                  }
                  o[r * value_dim + dv] = sum;
                }
              }
            }
          },
          passes ? kSliceBatchKeys : keys);
    }
  };
  values(false);
  // With masking, a row may have a zero probability at a key whose V holds a
  // NaN or an infinity, and 0 * NaN must not reach that row: it makes that
  // row's sums NaN, so a chunk whose sums are not all finite is done again
  // skipping zero probabilities, and rows that never see the value are
  // bit-identical to a run without it. Checking the rows x Dv sums rather
  // than the keys x Dv values before the products saves a pass over the
  // chunk's V (F16 decode steps under a mask, the ggml perf cases: 40% of
  // the time).
  if (p.MayBlockPerRow() &&
      !ValuesFinite(out, static_cast<size_t>(rows), value_dim, static_cast<size_t>(value_dim))) {
    values(true);
  }
}

// Keys [*c0, *c0 + keys) of a chunk narrowed to those from the first to the
// last that the mask lets some row of (b, kvh) see (MaskRowSpan of each
// row): a chunk the mask blocks for every row (outside a sliding window, in
// an engine's cache padding) is skipped, 0 keys.
int64_t MaskedChunkKeys(const DecodePlan& plan, int64_t b, int64_t unit, int64_t* HWY_RESTRICT c0,
                        int64_t keys) {
  const SdpaProblem& p = *plan.problem;
  int64_t lo = *c0 + keys, hi = *c0;
  // A mask broadcast over heads (an engine's, ggml's kq_mask) gives the
  // rows of one position the same mask row: each distinct row scanned once.
  int64_t seen[kDecodeMaxRows];
  int64_t num_seen = 0;
  for (int64_t r = 0; r < plan.rows; ++r) {
    const int64_t at = p.mask.Offset(b, plan.Head(unit, r), plan.Position(r), 0);
    if (std::find(seen, seen + num_seen, at) != seen + num_seen) continue;
    seen[num_seen++] = at;
    int64_t first = *c0, end = *c0 + keys;
    MaskRowSpan(p.mask, at, &first, &end);
    if (first < end) {
      lo = std::min(lo, first);
      hi = std::max(hi, end);
    }
  }
  if (lo >= hi) return 0;
  *c0 = lo;
  return hi - lo;
}

// Chunks [chunk0, chunk0 + count) of (b, unit), each with its own softmax and
// partial result exactly as if alone, but phase by phase over all of them:
// the scores of every chunk (one stream over their K), then the softmaxes,
// then the outputs (one stream over their V). K and V elements of type T.
template <bool kL2, typename T>
void AttendChunksOf(const DecodePlan& plan, int64_t b, int64_t unit, int64_t chunk0, int64_t count,
                    float* HWY_RESTRICT scratch) {
  const SdpaProblem& p = *plan.problem;
  const int64_t kvh = plan.KvHead(unit), value_dim = p.value_dim, rows = plan.rows;
  const size_t dim_pad = (static_cast<size_t>(p.head_dim) + kLanes - 1) / kLanes * kLanes;
  // [kDecodeMaxRows][dim_pad] queries; then [count][rows][ld] scores.
  float* HWY_RESTRICT q = scratch;
  float* HWY_RESTRICT s0 = scratch + PadFloats(static_cast<size_t>(kDecodeMaxRows) * dim_pad);
  const size_t chunk_scores = static_cast<size_t>(rows) * DecodeScoreStride(kLanes);
  // bf16_dot: then the P pairs (Bf16DecodeValues).
  uint32_t* HWY_RESTRICT pair_scratch = reinterpret_cast<uint32_t*>(
      s0 + PadFloats(static_cast<size_t>(kDecodeRun * rows) * DecodeScoreStride(kLanes)));
  // Staged: then the staged rows (DecodeScratchFloats).
  float* HWY_RESTRICT stage =
      reinterpret_cast<float*>(pair_scratch) +
      (plan.bf16_dot ? PadFloats(Bf16DecodeScratchWords(kDecodeChunk, kDecodeMaxRuns)) : 0);
  // Integer products: then Int8DecodeScratch.
  Int8DecodeScratch int8{};
  if (plan.int8) {
    Int8DecodeScratch::Place(
        p.head_dim,
        stage + (plan.staged ? PadFloats(static_cast<size_t>(kStageKeys) * StageStride(p)) : 0),
        &int8);
  }
  PrepareQueries(plan, b, unit, dim_pad, q, int8);

  int64_t c0[kDecodeRun], keys[kDecodeRun];
  float* out[kDecodeRun];
  float* stats[kDecodeRun];
  for (int64_t g = 0; g < count; ++g) {
    const size_t first = plan.PartialIndex(b, unit, chunk0 + g);
    out[g] = plan.partial_out + first * static_cast<size_t>(value_dim);
    stats[g] = plan.partial_stats + first * 2;
    // Keys of this chunk that any row may see; each row may see fewer.
    keys[g] = plan.ChunkKeys(b, chunk0 + g, &c0[g]);
    if (p.has_mask && keys[g] > 0) keys[g] = MaskedChunkKeys(plan, b, unit, &c0[g], keys[g]);
    if (keys[g] == 0) {
      memset(out[g], 0, static_cast<size_t>(rows * value_dim) * sizeof(float));
      for (int64_t r = 0; r < rows; ++r) {
        stats[g][2 * r] = -FLT_MAX;
        stats[g][2 * r + 1] = 0.0f;
      }
    } else {
      ScoreChunk<kL2, T>(plan, b, unit, c0[g], keys[g], q, dim_pad, s0 + g * chunk_scores, stage,
                         int8);
    }
  }
  // Under bf16 products P is rounded once: by the softmax, or with
  // per-token V scales as p_j s_j, the weight of the cache's number v_j (the
  // header's rule, every target: the dot products need a bf16 weight).
  const bool v_per_token = p.v_scale.layout == KvScales::kPerToken;
  for (int64_t g = 0; g < count; ++g) {
    if (keys[g] == 0) continue;
    SoftmaxChunk(rows, keys[g], plan.bf16 && !v_per_token, s0 + g * chunk_scores, stats[g]);
    // Per-token V scales: sum_j p_j (v_j s_j) = sum_j (p_j s_j) v_j (the
    // softmax summed the unscaled p_j).
    if (v_per_token)
      ScaleKeys(p, p.v_scale, b, kvh, c0[g], keys[g], rows, plan.bf16, s0 + g * chunk_scores);
  }
  for (int64_t g = 0; g < count; ++g) {
    if (keys[g] == 0) continue;
    ValuesChunk<kL2, T>(plan, b, kvh, c0[g], keys[g], s0 + g * chunk_scores, out[g], pair_scratch,
                        stage);
    // Per-channel V scales: sum_j p_j (v_j * s) = (sum_j p_j v_j) * s.
    if (p.v_scale.layout == KvScales::kPerChannel) {
      int64_t step;
      const float* scale = p.ScaleRow(p.v_scale, b, kvh, 0, &step);
      ScaleChannels(scale, step, rows, value_dim, out[g]);
    }
  }
}

void AttendChunks(const DecodePlan& plan, int64_t b, int64_t unit, int64_t chunk0, int64_t count,
                  float* HWY_RESTRICT scratch) {
  // Preconditions (free in Release).
  HWY_DASSERT(plan.problem != nullptr && plan.problem->Valid() && DecodeApplies(*plan.problem));
  HWY_DASSERT(0 <= b && b < plan.problem->batch && 0 <= unit && unit < plan.units());
  HWY_DASSERT(plan.parts == DecodeParts(*plan.problem) &&
              plan.heads * plan.parts == plan.problem->group() &&
              plan.rows == plan.problem->q_len * plan.heads && plan.rows <= kDecodeMaxRows);
  HWY_DASSERT(1 <= count && count <= plan.run && plan.run <= kDecodeRun && 0 <= chunk0 &&
              chunk0 + count <= plan.chunks);
  HWY_DASSERT(plan.partial_out != nullptr && plan.partial_stats != nullptr &&
              IsScratchAligned(scratch));
  // K and V have one dtype (DecodeApplies), or are staged: F16/BF16 caches are read in
  // place, widened on load (they halve the bytes a memory-bound step streams),
  // I8 caches too, their scales applied to queries, scores, probabilities or
  // outputs (the integers stay as they are).
  // Under bf16 products F32 and F16 elements are read rounded (Bf16Operand);
  // BF16, I8 and FP8 elements are bf16 values already.
  const auto attend = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kL2Loops) {
      if (plan.prefetch_l2) return AttendChunksOf<true, T>(plan, b, unit, chunk0, count, scratch);
    }
    AttendChunksOf<false, T>(plan, b, unit, chunk0, count, scratch);
  };
  // Block formats (and whatever K or V they pair with): staged fp32 rows,
  // already rounded under bf16 products.
  if (plan.staged) return attend(float());
  DispatchCacheDtype(plan.problem->k.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, F16>) {
      if (plan.bf16) return attend(Bf16Operand<T>());
    }
    attend(T());
  });
}

// Combines the chunks of (b, unit) in order: out = sum_c 2^(m_c - M) O_c /
// sum_c 2^(m_c - M) l_c, lse = (M + log2 l) ln 2. The order is fixed, so the
// result does not depend on which thread computed which chunk.
void Merge(const DecodePlan& plan, int64_t b, int64_t unit) {
  HWY_DASSERT(plan.problem != nullptr && 0 <= b && b < plan.problem->batch && 0 <= unit &&
              unit < plan.units() && plan.chunks >= 1);
  const DF df;
  const SdpaProblem& p = *plan.problem;
  const int64_t value_dim = p.value_dim, rows = plan.rows;
  const size_t first = plan.PartialIndex(b, unit, 0);
  const size_t chunk_stride = static_cast<size_t>(rows);
  const ScoreModifiers mods(p);
  const int64_t offset = p.PositionOffset();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = plan.Position(r), head = plan.Head(unit, r);
    float m = -FLT_MAX;
    for (int64_t c = 0; c < plan.chunks; ++c) {
      m = std::max(m, plan.partial_stats[(first + c * chunk_stride + r) * 2]);
    }
    float l = 0.0f;
    for (int64_t c = 0; c < plan.chunks; ++c) {
      const float* st = plan.partial_stats + (first + c * chunk_stride + r) * 2;
      l += (plan.chunks == 1 ? 1.0f : exp2f(st[0] - m)) * st[1];
    }
    // No visible key: l == 0 and the row is zeros (RowInverse).
    const int64_t at = pos + offset;
    const RowEnd row_end(m, l, SinkLog2(p, head),
                         mods.Shift(head, mods.AlibiOrigin(p, b, head, at), at), p.has_lse);
    const float inv = row_end.inverse;
    // The row is summed in place in chunk 0's partial output (contiguous),
    // then stored in the output's dtype.
    float* o = plan.partial_out + (first + r) * value_dim;
    for (int64_t c = 0; c < plan.chunks; ++c) {
      const size_t at = first + c * chunk_stride + r;
      const float w = (plan.chunks == 1 ? 1.0f : exp2f(plan.partial_stats[at * 2] - m)) * inv;
      const float* oc = plan.partial_out + at * value_dim;
      int64_t dv = 0;
      const VF wv = hn::Set(df, w);
      for (; dv + static_cast<int64_t>(kLanes) <= value_dim; dv += kLanes) {
        const VF x = hn::LoadU(df, oc + dv);
        hn::StoreU(c == 0 ? hn::Mul(wv, x) : hn::MulAdd(wv, x, hn::LoadU(df, o + dv)), df, o + dv);
      }
      // The rest one lane at a time, with the same operation (fused or not,
      // as the target's MulAdd is).
      const hn::CappedTag<float, 1> d1;
      for (; dv < value_dim; ++dv) {
        const auto x = hn::Set(d1, oc[dv]), wx = hn::Set(d1, w);
        o[dv] = hn::GetLane(c == 0 ? hn::Mul(wx, x) : hn::MulAdd(wx, x, hn::Set(d1, o[dv])));
      }
    }
    StoreOutputRow(p.out, p.out.Offset(b, head, pos, 0), o, value_dim);
    if (p.has_lse) p.lse.AsMutable<float>()[p.lse.Offset(0, b, head, pos)] = row_end.lse;
  }
}

constexpr DecodeKernels kDecodeKernels = {HWY_TARGET, kLanes, &AttendChunks, &Merge};

const DecodeKernels* GetDecodeKernelTable() { return &kDecodeKernels; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn {

HWY_EXPORT(GetDecodeKernelTable);

const DecodeKernels& GetDecodeKernels() {
  static const DecodeKernels* const kernels = PickKernels(HWY_DISPATCH_TABLE(GetDecodeKernelTable));
  return *kernels;
}

}  // namespace hwyattn
#endif  // HWY_ONCE
