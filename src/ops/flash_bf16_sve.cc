// SPDX-License-Identifier: Apache-2.0
//
// SVE BF16 register tiles (see flash_bf16.h) of the SVE targets' prefill
// (SVE_256, SVE2_128, and SVE or SVE2 on 512-bit hardware): their 8 x 3 tile
// at the hardware's vector length L = svcntw() floats. BFDOT's indexed form
// (svbfdot_lane_f32) takes the broadcast operand by 32-bit lane within each
// 128-bit segment, and LD1RQW (svld1rq) loads 4 words into every segment, so
// a K or V step of the tile is two loads (the pairs of rows 0-3 and 4-7) and
// 3 query vectors for its 24 BFDOTs: 24 accumulators, 3 query vectors and 2
// row registers of the 32. SVE's vector types are sizeless, so no arrays:
// the accumulators are named variables, a column of 8 rows per query vector,
// passed to always-inlined helpers by reference.
//
// Not a foreach_target unit: one copy for arm64, each function under a target
// attribute, called only by the SVE targets' kernels where Bf16DotFor says
// the CPU has SVE's BF16 instructions (src/targets.h).
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

#if HWYATTN_SVE_BF16_DOT_COMPILED
#include <arm_sve.h>

#define HWYATTN_BF16_TARGET __attribute__((target("+sve+bf16")))
#define HWYATTN_BF16_INLINE HWYATTN_BF16_TARGET inline __attribute__((always_inline))

// The 8 accumulators of one query vector's column, a0 .. a7 (rows 0 .. 7).
#define HWYATTN_COLUMN(a) a##0, a##1, a##2, a##3, a##4, a##5, a##6, a##7
#define HWYATTN_COLUMN_PARAMS(a)                                                                 \
  svfloat32_t &a##0, svfloat32_t &a##1, svfloat32_t &a##2, svfloat32_t &a##3, svfloat32_t &a##4, \
      svfloat32_t &a##5, svfloat32_t &a##6, svfloat32_t &a##7

namespace hwyattn {
namespace sve_bf16 {
namespace {

static_assert(kTileRows == 8, "a step loads the pairs of rows 0-3 and 4-7");

HWYATTN_BF16_INLINE svbfloat16_t LoadPairs(svbool_t pg, const uint32_t* p) {
  return svreinterpret_bf16_u32(svld1_u32(pg, p));
}

// The pairs p[0..3] in every 128-bit segment (those of rows whose `pg` lane
// is off: 0, not read).
HWYATTN_BF16_INLINE svbfloat16_t LoadRowPairs(svbool_t pg, const uint32_t* p) {
  return svreinterpret_bf16_u32(svld1rq_u32(pg, p));
}

// One step of a column: a_r += x . (pair of row r), rows 0-3 from r03's
// segments, 4-7 from r47's.
HWYATTN_BF16_INLINE void DotColumn(HWYATTN_COLUMN_PARAMS(a), svbfloat16_t x, svbfloat16_t r03,
                                   svbfloat16_t r47) {
  a0 = svbfdot_lane_f32(a0, x, r03, 0);
  a1 = svbfdot_lane_f32(a1, x, r03, 1);
  a2 = svbfdot_lane_f32(a2, x, r03, 2);
  a3 = svbfdot_lane_f32(a3, x, r03, 3);
  a4 = svbfdot_lane_f32(a4, x, r47, 0);
  a5 = svbfdot_lane_f32(a5, x, r47, 1);
  a6 = svbfdot_lane_f32(a6, x, r47, 2);
  a7 = svbfdot_lane_f32(a7, x, r47, 3);
}

// One step of a tile of kVectors columns (a; a, b; a, b, c): each column's
// a_r += (its pairs at x, x + lanes, x + 2 lanes) . (row r's pair), rows
// 0-3's pairs at rows[0..4), 4-7's at rows[4..8), those whose lane of
// rows03 / rows47 is off not read (0).
template <size_t kVectors>
HWYATTN_BF16_INLINE void DotStep(HWYATTN_COLUMN_PARAMS(a), HWYATTN_COLUMN_PARAMS(b),
                                 HWYATTN_COLUMN_PARAMS(c), const uint32_t* x, const uint32_t* rows,
                                 svbool_t rows03, svbool_t rows47) {
  const svbool_t all = svptrue_b32();
  const size_t lanes = svcntw();
  const svbfloat16_t r03 = LoadRowPairs(rows03, rows);
  const svbfloat16_t r47 = LoadRowPairs(rows47, rows + 4);
  DotColumn(HWYATTN_COLUMN(a), LoadPairs(all, x), r03, r47);
  if constexpr (kVectors > 1) DotColumn(HWYATTN_COLUMN(b), LoadPairs(all, x + lanes), r03, r47);
  if constexpr (kVectors > 2) DotColumn(HWYATTN_COLUMN(c), LoadPairs(all, x + 2 * lanes), r03, r47);
}

// o[r] * alpha for r < rows, else 0 (not read).
HWYATTN_BF16_INLINE svfloat32_t ScaledRow(const float* o, size_t ldo, svfloat32_t alpha, size_t r,
                                          size_t rows) {
  const svbool_t all = svptrue_b32();
  return r < rows ? svmul_f32_x(all, svld1_f32(all, o + r * ldo), alpha) : svdup_n_f32(0.0f);
}

// a_r = o[r] * alpha.
HWYATTN_BF16_INLINE void LoadScaledColumn(HWYATTN_COLUMN_PARAMS(a), const float* o, size_t ldo,
                                          const float* alpha, size_t rows) {
  const svfloat32_t a = svld1_f32(svptrue_b32(), alpha);
  a0 = ScaledRow(o, ldo, a, 0, rows);
  a1 = ScaledRow(o, ldo, a, 1, rows);
  a2 = ScaledRow(o, ldo, a, 2, rows);
  a3 = ScaledRow(o, ldo, a, 3, rows);
  a4 = ScaledRow(o, ldo, a, 4, rows);
  a5 = ScaledRow(o, ldo, a, 5, rows);
  a6 = ScaledRow(o, ldo, a, 6, rows);
  a7 = ScaledRow(o, ldo, a, 7, rows);
}

// a_r *= scale.
HWYATTN_BF16_INLINE void ScaleColumn(HWYATTN_COLUMN_PARAMS(a), float scale) {
  const svbool_t all = svptrue_b32();
  a0 = svmul_n_f32_x(all, a0, scale);
  a1 = svmul_n_f32_x(all, a1, scale);
  a2 = svmul_n_f32_x(all, a2, scale);
  a3 = svmul_n_f32_x(all, a3, scale);
  a4 = svmul_n_f32_x(all, a4, scale);
  a5 = svmul_n_f32_x(all, a5, scale);
  a6 = svmul_n_f32_x(all, a6, scale);
  a7 = svmul_n_f32_x(all, a7, scale);
}

// o[r] = a_r for r < rows.
HWYATTN_BF16_INLINE void StoreColumn(HWYATTN_COLUMN_PARAMS(a), float* o, size_t ldo, size_t rows) {
  const svbool_t all = svptrue_b32();
  svst1_f32(all, o, a0);  // rows >= 1
  if (rows > 1) svst1_f32(all, o + 1 * ldo, a1);
  if (rows > 2) svst1_f32(all, o + 2 * ldo, a2);
  if (rows > 3) svst1_f32(all, o + 3 * ldo, a3);
  if (rows > 4) svst1_f32(all, o + 4 * ldo, a4);
  if (rows > 5) svst1_f32(all, o + 5 * ldo, a5);
  if (rows > 6) svst1_f32(all, o + 6 * ldo, a6);
  if (rows > 7) svst1_f32(all, o + 7 * ldo, a7);
}

template <size_t kVectors>
HWYATTN_BF16_TARGET void ScoreTileFixed(size_t pairs, const uint32_t* k_pairs,
                                        const uint32_t* q_pairs, size_t ldq, float scale, float* s,
                                        size_t lds) {
  const svbool_t all = svptrue_b32();
  const size_t lanes = svcntw();
  const svfloat32_t zero = svdup_n_f32(0.0f);
  svfloat32_t a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero,
              a7 = zero;
  [[maybe_unused]] svfloat32_t b0 = zero, b1 = zero, b2 = zero, b3 = zero, b4 = zero, b5 = zero,
                               b6 = zero, b7 = zero;
  [[maybe_unused]] svfloat32_t c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero,
                               c6 = zero, c7 = zero;
  for (size_t i = 0; i < pairs; ++i) {
    DotStep<kVectors>(HWYATTN_COLUMN(a), HWYATTN_COLUMN(b), HWYATTN_COLUMN(c), q_pairs + i * ldq,
                      k_pairs + i * kTileRows, all, all);
  }
  ScaleColumn(HWYATTN_COLUMN(a), scale);
  StoreColumn(HWYATTN_COLUMN(a), s, lds, kTileRows);
  if constexpr (kVectors > 1) {
    ScaleColumn(HWYATTN_COLUMN(b), scale);
    StoreColumn(HWYATTN_COLUMN(b), s + lanes, lds, kTileRows);
  }
  if constexpr (kVectors > 2) {
    ScaleColumn(HWYATTN_COLUMN(c), scale);
    StoreColumn(HWYATTN_COLUMN(c), s + 2 * lanes, lds, kTileRows);
  }
}

// The value dims r >= rows of a partial tile are computed on zero pairs
// (not read) and not stored: Dv is a multiple of 8 in every common model.
template <size_t kVectors>
HWYATTN_BF16_TARGET void ValueTileFixed(size_t rows, size_t pairs, const uint32_t* v_pairs,
                                        size_t ldv, const uint32_t* p_pairs, size_t ldp,
                                        const float* alpha, float* o, size_t ldo) {
  const size_t lanes = svcntw();
  const svbool_t rows03 = svwhilelt_b32_u64(0, rows);
  const svbool_t rows47 = svwhilelt_b32_u64(4, rows);
  svfloat32_t a0, a1, a2, a3, a4, a5, a6, a7;
  [[maybe_unused]] svfloat32_t b0, b1, b2, b3, b4, b5, b6, b7;
  [[maybe_unused]] svfloat32_t c0, c1, c2, c3, c4, c5, c6, c7;
  LoadScaledColumn(HWYATTN_COLUMN(a), o, ldo, alpha, rows);
  if constexpr (kVectors > 1)
    LoadScaledColumn(HWYATTN_COLUMN(b), o + lanes, ldo, alpha + lanes, rows);
  if constexpr (kVectors > 2) {
    LoadScaledColumn(HWYATTN_COLUMN(c), o + 2 * lanes, ldo, alpha + 2 * lanes, rows);
  }
  for (size_t i = 0; i < pairs; ++i) {
    DotStep<kVectors>(HWYATTN_COLUMN(a), HWYATTN_COLUMN(b), HWYATTN_COLUMN(c), p_pairs + i * ldp,
                      v_pairs + i * ldv, rows03, rows47);
  }
  StoreColumn(HWYATTN_COLUMN(a), o, ldo, rows);
  if constexpr (kVectors > 1) StoreColumn(HWYATTN_COLUMN(b), o + lanes, ldo, rows);
  if constexpr (kVectors > 2) StoreColumn(HWYATTN_COLUMN(c), o + 2 * lanes, ldo, rows);
}

constexpr bool kValueRowsAtRunTime = true;

}  // namespace

#include "src/ops/flash_bf16_shapes-inl.h"

HWYATTN_BF16_TARGET void ValueSkippingZeros(size_t dims, size_t vectors, size_t pairs,
                                            const uint32_t* v_pairs, size_t ldv,
                                            const uint32_t* p_pairs, size_t ldp, const float* alpha,
                                            float* o, size_t ldo) {
  const svbool_t all = svptrue_b32();
  const svbool_t all16 = svptrue_b16();
  const size_t lanes = svcntw();
  for (size_t d = 0; d < dims; ++d) {
    for (size_t c = 0; c < vectors * lanes; c += lanes) {
      svfloat32_t acc =
          svmul_f32_x(all, svld1_f32(all, o + d * ldo + c), svld1_f32(all, alpha + c));
      for (size_t i = 0; i < pairs; ++i) {
        const svuint16_t prob = svreinterpret_u16_u32(svld1_u32(all, p_pairs + i * ldp + c));
        const svuint16_t value = svreinterpret_u16_u32(svdup_n_u32(v_pairs[i * ldv + d]));
        // Value halves kept where the probability half is not +0.
        const svuint16_t kept = svsel_u16(svcmpeq_n_u16(all16, prob, 0), svdup_n_u16(0), value);
        acc = svbfdot_f32(acc, svreinterpret_bf16_u16(prob), svreinterpret_bf16_u16(kept));
      }
      svst1_f32(all, o + d * ldo + c, acc);
    }
  }
}

}  // namespace sve_bf16
}  // namespace hwyattn

#endif  // HWYATTN_SVE_BF16_DOT_COMPILED
