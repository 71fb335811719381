// SPDX-License-Identifier: Apache-2.0
//
// Armv8.6 BF16 register tiles (see flash_bf16.h): BFDOT (vbfdotq_laneq_f32)
// does 4 lanes x 2 bf16 multiply-adds into fp32 sums per instruction, with
// the broadcast operand taken by lane from a register of pairs, so a K or V
// panel step of the 6-row tile is two loads (4 + 2 pairs) instead of 6
// broadcasts: 18 accumulators, 3 query vectors and 2 row registers of the
// 32. Not a foreach_target unit: one copy for arm64, each function under a
// target attribute, called only where Bf16DotFor says the CPU has BF16.
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__aarch64__)
#include <arm_neon.h>

#define HWYATTN_BF16_TARGET __attribute__((target("arch=armv8.2-a+bf16")))

namespace hwyattn {
namespace neon_bf16 {
namespace {

static_assert(kLanes == 4 && kTileRows == 6, "4 + 2 rows' pairs per step");

HWYATTN_BF16_TARGET inline bfloat16x8_t LoadPairs(const uint32_t* p) {
  return vreinterpretq_bf16_u32(vld1q_u32(p));
}

// acc[r][c] += a[c] . b[r] for rows r < kRows of one step: a[c] is the
// vector of 4 pairs at vecs + c * kLanes, b[r] row r's pair, rows_at[0..kRows)
// (read as a vector of 4 pairs and one of 2 when kRows == 6, else one
// broadcast per row, so that no load reads past the last row).
template <size_t kRows, size_t kVectors>
HWYATTN_BF16_TARGET inline void DotStep(float32x4_t (&acc)[kRows][kVectors], const uint32_t* vecs,
                                        const uint32_t* rows_at) {
  bfloat16x8_t a[kVectors];
#pragma GCC unroll 16
  for (size_t c = 0; c < kVectors; ++c) a[c] = LoadPairs(vecs + c * kLanes);
  if constexpr (kRows == kTileRows) {
    const bfloat16x8_t b0 = LoadPairs(rows_at);
    const bfloat16x4_t b1 = vreinterpret_bf16_u32(vld1_u32(rows_at + 4));
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) {
      acc[0][c] = vbfdotq_laneq_f32(acc[0][c], a[c], b0, 0);
      acc[1][c] = vbfdotq_laneq_f32(acc[1][c], a[c], b0, 1);
      acc[2][c] = vbfdotq_laneq_f32(acc[2][c], a[c], b0, 2);
      acc[3][c] = vbfdotq_laneq_f32(acc[3][c], a[c], b0, 3);
      acc[4][c] = vbfdotq_lane_f32(acc[4][c], a[c], b1, 0);
      acc[5][c] = vbfdotq_lane_f32(acc[5][c], a[c], b1, 1);
    }
  } else {
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) {
      const bfloat16x8_t br = vreinterpretq_bf16_u32(vdupq_n_u32(rows_at[r]));
#pragma GCC unroll 16
      for (size_t c = 0; c < kVectors; ++c) acc[r][c] = vbfdotq_f32(acc[r][c], a[c], br);
    }
  }
}

using Acc = float32x4_t;
HWYATTN_BF16_TARGET inline Acc Zero() { return vdupq_n_f32(0.0f); }
HWYATTN_BF16_TARGET inline Acc Set(float x) { return vdupq_n_f32(x); }
HWYATTN_BF16_TARGET inline Acc Load(const float* p) { return vld1q_f32(p); }
HWYATTN_BF16_TARGET inline Acc Mul(Acc a, Acc b) { return vmulq_f32(a, b); }
HWYATTN_BF16_TARGET inline void Store(float* p, Acc a) { vst1q_f32(p, a); }

#include "src/ops/flash_bf16_tiles-inl.h"

constexpr bool kValueRowsAtRunTime = false;

}  // namespace

#include "src/ops/flash_bf16_shapes-inl.h"

HWYATTN_BF16_TARGET void ValueSkippingZeros(size_t dims, size_t vectors, size_t pairs,
                                            const uint32_t* v_pairs, size_t ldv,
                                            const uint32_t* p_pairs, size_t ldp, const float* alpha,
                                            float* o, size_t ldo) {
  for (size_t d = 0; d < dims; ++d) {
    for (size_t c = 0; c < vectors * kLanes; c += kLanes) {
      float32x4_t acc = vmulq_f32(vld1q_f32(o + d * ldo + c), vld1q_f32(alpha + c));
      for (size_t i = 0; i < pairs; ++i) {
        const uint16x8_t prob = vreinterpretq_u16_u32(vld1q_u32(p_pairs + i * ldp + c));
        const uint16x8_t value = vreinterpretq_u16_u32(vdupq_n_u32(v_pairs[i * ldv + d]));
        // Value halves kept where the probability half is not +0.
        const uint16x8_t kept = vbicq_u16(value, vceqzq_u16(prob));
        acc = vbfdotq_f32(acc, vreinterpretq_bf16_u16(prob), vreinterpretq_bf16_u16(kept));
      }
      vst1q_f32(o + d * ldo + c, acc);
    }
  }
}

}  // namespace neon_bf16
}  // namespace hwyattn

#endif  // HWYATTN_BF16_DOT_COMPILED && __aarch64__
