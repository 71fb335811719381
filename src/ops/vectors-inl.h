// SPDX-License-Identifier: Apache-2.0
//
// The vectors every kernel computes with, per target: one home for the
// descriptor DF, its lane count kLanes (a compile-time layout constant: tile
// widths, packed panels, scratch strides) and the register count that sizes
// the register tiles (matmul-inl.h).
//
// DF is the target's full vector, ScalableTag<float>, except on the
// vector-length-agnostic SVE targets. There HWY_LANES(float) is only an
// upper bound (64 floats, 2048 bits) and Lanes() a run-time value, while the
// kernels need the lane count at compile time. Their DF is FixedTag<float,
// kSveVlaFloatLanes> (512 bits, src/targets.h), and their kernel tables run
// only on hardware whose vectors are exactly that long (AllowedTargets,
// src/targets.cc): A64FX and other 512-bit cores get full width; on 256-bit
// hardware Highway picks HWY_SVE_256, on 128-bit SVE2 HWY_SVE2_128 (both with
// compile-time lengths: 8 and 4 floats), and other lengths fall back to
// NEON. (Exactly, not at least: Highway's ConcatEven/ConcatOdd shuffle whole
// hardware vectors, which a FixedTag narrower than the hardware would get
// wrong.)

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
#else
using DF = hn::ScalableTag<float>;
#endif
// Floats per vector: hn::Lanes(DF()) wherever the target's kernels run.
constexpr size_t kLanes = hn::MaxLanes(DF());

// Architectural vector registers: 32 on AVX-512, NEON and SVE; 16 on AVX2
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
