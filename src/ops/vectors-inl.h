// SPDX-License-Identifier: Apache-2.0
//
// The vectors every kernel computes with, per target: one home for the
// descriptor DF, its lane count kLanes (a compile-time layout constant: tile
// widths, packed panels, scratch strides) and the register count that sizes
// the register tiles (matmul-inl.h).
//
// DF is the target's full vector, ScalableTag<float>, except on the
// vector-length-agnostic targets (SVE, SVE2, RVV). There HWY_LANES(float) is
// only an upper bound (SVE: 64 floats, 2048 bits) and Lanes() a run-time
// value, while the kernels need the lane count at compile time. On the SVE
// targets DF is FixedTag<float, kSveVlaFloatLanes> (512 bits,
// src/targets.h), and their kernel tables run only on hardware whose
// vectors are exactly that long (AllowedTargets,
// src/targets.cc): A64FX and other 512-bit cores get full width; on 256-bit
// hardware Highway picks HWY_SVE_256, on 128-bit SVE2 HWY_SVE2_128 (both with
// compile-time lengths: 8 and 4 floats), and other lengths fall back to
// NEON. (Exactly, not at least: Highway's ConcatEven/ConcatOdd shuffle whole
// hardware vectors, which a FixedTag narrower than the hardware would get
// wrong.)
//
// The other targets with run-time vector lengths (RVV: Highway >= 1.4 gives
// the bounds, HWY_MIN_BYTES < HWY_MAX_BYTES; Highway 1.0.3 calls SVE_256 and
// SVE2_128 scalable too, HWY_HAVE_SCALABLE, although their lengths are fixed)
// get the shortest vector the target guarantees, FixedTag<float,
// HWY_MIN_BYTES / 4> (RVV: 4 floats, the V extension's minimum VLEN of 128
// bits), which every CPU of the target runs: Highway's RVV operations act on
// the tag's lanes (the vector length they set), not on the whole register,
// so the same kernels run on 128-, 256- and 512-bit vectors
// (scripts/cross_test.sh's riscv64-hwy14 leg tests the three), using the
// first 128 bits of the longer ones.

// Per-target include guard (foreach_target includes this once per target).
#if defined(HWYATTN_SRC_OPS_VECTORS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_VECTORS_INL_H_
#undef HWYATTN_SRC_OPS_VECTORS_INL_H_
#else
#define HWYATTN_SRC_OPS_VECTORS_INL_H_
#endif

#include <stddef.h>

#include "hwy/highway.h"
#include "src/targets.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2
using DF = hn::FixedTag<float, kSveVlaFloatLanes>;
#elif defined(HWY_MIN_BYTES) && HWY_MIN_BYTES < HWY_MAX_BYTES
using DF = hn::FixedTag<float, HWY_MIN_BYTES / sizeof(float)>;
#else
using DF = hn::ScalableTag<float>;
#endif
// Floats per vector: hn::Lanes(DF()) wherever the target's kernels run.
constexpr size_t kLanes = hn::MaxLanes(DF());

// Architectural vector registers: 32 on AVX-512, NEON, SVE and RVV; 16 on AVX2
// and SSE4 (and assumed for the portable fallback).
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR || (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3)
constexpr size_t kVectorRegisters = 16;
#else
constexpr size_t kVectorRegisters = 32;
#endif

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_VECTORS_INL_H_ toggle
