// SPDX-License-Identifier: Apache-2.0
//
// The prefill's tile shapes per target (flash_attention.cc): the register
// tile's rows kMR, the query tile Bq (the lanes of kTileVectors vectors), the
// key tiles of the fp32 and bf16 products, and whether this target runs the
// bf16 dot-product tiles (flash_bf16.h) and whose. The packing
// (flash_pack-inl.h), the prefetch (flash_prefetch-inl.h) and the kernel lay
// out their panels and scratch by these constants.

#if defined(HWYATTN_SRC_OPS_FLASH_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_FLASH_TILES_INL_H_
#undef HWYATTN_SRC_OPS_FLASH_TILES_INL_H_
#else
#define HWYATTN_SRC_OPS_FLASH_TILES_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "src/ops/flash_bf16.h"
#include "src/ops/matmul-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// DF and kLanes: vectors-inl.h (via matmul-inl.h).
constexpr size_t kMR = kTileRows;
constexpr size_t kQueryTile = kTileVectors * kLanes;
// Keys per online-softmax step: 8 panels (64 keys on AVX-512, 48 on AVX2).
// On AVX-512 with D = Dv = 64 a step touches S^T (12 KiB), O^T (12 KiB), the K
// panels and the V rows (16 KiB each): about L1's 48 KiB. 128 keys measured
// 1-2% slower on P1, P3 and X1 (Zen 5), within 1% either way on Zen 4.
constexpr size_t kKeyTile = 8 * kMR;
// Under bf16_dot 16 panels (128 keys): the dot products take half the time,
// so a step's fixed costs (O^T loaded, rescaled and stored by every P . V
// tile, the softmax's per-column set-up) weigh twice as much; 128 keys halve
// them. P1b on Zen 4: -3.2 to -4.0% on 1 thread, -1.4 to -1.7% on 2 (96
// keys: -1.6%, 256: -2.4% on 1 thread).
constexpr size_t kBf16KeyTile = 16 * kMR;

// Whether this target's kernels may run the bf16 dot-product tiles, and
// whose (flash_bf16.h: AVX3's AVX512_BF16 ones, NEON's and the SVE targets'
// BFDOT ones; the planner sets plan.bf16_dot only for them, Bf16DotFor).
#undef HWYATTN_BF16_DOT_TILES  // per target: this file is compiled once for each
#if HWYATTN_BF16_DOT_COMPILED && HWY_TARGET == HWY_AVX3
#define HWYATTN_BF16_DOT_TILES 1
namespace bf16_tiles = ::hwyattn::avx512_bf16;
constexpr size_t kBf16TileLanes = bf16_tiles::kLanes;
#elif HWYATTN_BF16_DOT_COMPILED && HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON
#define HWYATTN_BF16_DOT_TILES 1
namespace bf16_tiles = ::hwyattn::neon_bf16;
constexpr size_t kBf16TileLanes = bf16_tiles::kLanes;
#elif HWYATTN_SVE_BF16_DOT_COMPILED && (HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || \
                                        HWY_TARGET == HWY_SVE_256 || HWY_TARGET == HWY_SVE2_128)
#define HWYATTN_BF16_DOT_TILES 1
namespace bf16_tiles = ::hwyattn::sve_bf16;
// The hardware's lanes (svcntw()), which are kLanes wherever this target
// runs (vectors-inl.h).
constexpr size_t kBf16TileLanes = kLanes;
#else
#define HWYATTN_BF16_DOT_TILES 0
#endif
constexpr bool kBf16DotTarget = HWYATTN_BF16_DOT_TILES;

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_FLASH_TILES_INL_H_ toggle
