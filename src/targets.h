// SPDX-License-Identifier: Apache-2.0
//
// Which SIMD target the kernels run on.
//
// Every kernel family is one foreach_target translation unit that HWY_EXPORTs
// a function returning that target's table of kernels (a struct whose first
// member is `int64_t target`). We pick the entry from Highway's dispatch table
// ourselves rather than through HWY_DYNAMIC_DISPATCH because HWYATTN_TARGET
// must cap the choice for this library only: capping through
// hwy::DisableTargets would change the target of every other Highway user in
// the process, since ChosenTarget is global to libhwy.
#ifndef HWYATTN_SRC_TARGETS_H_
#define HWYATTN_SRC_TARGETS_H_

#include <stddef.h>
#include <stdint.h>

#include "hwy/detect_targets.h"
#include "hwy/targets.h"  // HWY_MAX_DYNAMIC_TARGETS, HWY_HIGHEST_TARGET_BIT

// Whether this build compiles the bf16 dot-product pieces: on x86-64 the
// AVX512_BF16 loops (src/ops/flash_bf16.cc, decode_bf16.cc, matmul_bf16.cc)
// with the AVX3 target, whose kernels are their only callers; on arm64 the
// BFDOT prefill tiles of the NEON target (src/ops/flash_bf16_neon.cc) and,
// where the SVE targets are compiled, of those (flash_bf16_sve.cc). GCC or
// clang (target attributes). Builds that leave the AVX3 target out (the
// sanitizer builds, HWYATTN_EXTRA_DISABLED_TARGETS) compile decode's and
// matmul's as aborting stubs that nothing calls: Bf16DotFor() is false there.
#if (defined(__GNUC__) || defined(__clang__)) &&          \
    ((defined(__x86_64__) && (HWY_TARGETS & HWY_AVX3)) || \
     (defined(__aarch64__) && (HWY_TARGETS & HWY_NEON)))
#define HWYATTN_BF16_DOT_COMPILED 1
#else
#define HWYATTN_BF16_DOT_COMPILED 0
#endif
#if HWYATTN_BF16_DOT_COMPILED && defined(__aarch64__) && \
    (HWY_TARGETS & (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128))
#define HWYATTN_SVE_BF16_DOT_COMPILED 1
#else
#define HWYATTN_SVE_BF16_DOT_COMPILED 0
#endif

namespace hwyattn {

// Floats per vector of the kernels of the vector-length-agnostic SVE targets
// (HWY_SVE, HWY_SVE2): their layouts need a compile-time lane count, so they
// are built for 512-bit vectors (src/ops/vectors-inl.h) and allowed only on
// hardware whose vectors are exactly that long (AllowedTargets).
constexpr size_t kSveVlaFloatLanes = 16;

// Targets the kernels may use: those this CPU supports (hwy::SupportedTargets)
// that are no better than the HWYATTN_TARGET cap, if set, less HWY_SVE and
// HWY_SVE2 unless the hardware vector holds exactly kSveVlaFloatLanes floats.
// Read once.
int64_t AllowedTargets();

// Picks the best allowed kernel table from an HWY_EXPORT dispatch table
// (`F##HighwayDispatchTable`), in either of its layouts: with more than one
// target compiled, entry 0 is Highway's ChooseAndCall trampoline (skipped),
// entries 1 to HWY_MAX_DYNAMIC_TARGETS are the targets from bit
// HWY_HIGHEST_TARGET_BIT + 1 - HWY_MAX_DYNAMIC_TARGETS up (Highway's
// ChosenTarget index) and the last one is the portable fallback; with a
// single target (e.g. SCALAR alone on ppc64el and s390x with Highway 1.0.3),
// the table is that target's function alone. Only the entries of allowed
// targets and the fallback are called: a target's function may use its
// instructions even to return a pointer (POWER10's pla, with Highway's PPC10
// target), so calling another target's would fault. Lower target bits are
// better targets. The portable fallback (EMU128, or SCALAR with GCC < 12.3)
// is compiled on every architecture (HWY_COMPILE_ALL_ATTAINABLE in
// CMakeLists.txt) and runs anywhere: it is the answer when the cap excludes
// everything, so the result is never null.
template <class Kernels, size_t kN>
const Kernels* PickKernels(const Kernels* (*const (&table)[kN])()) {
  static_assert(kN == 1 || kN == HWY_MAX_DYNAMIC_TARGETS + 2, "an HWY_EXPORT table");
  const int64_t allowed = AllowedTargets();
  const Kernels* best = nullptr;
  const Kernels* worst = nullptr;
  for (size_t i = kN == 1 ? 0 : 1; i < kN; ++i) {
    if (table[i] == nullptr) continue;
    if (kN != 1 && i != kN - 1) {
      const int64_t target = int64_t{1}
                             << (HWY_HIGHEST_TARGET_BIT + 1 - HWY_MAX_DYNAMIC_TARGETS + (i - 1));
      if ((target & allowed) == 0) continue;
    }
    const Kernels* k = table[i]();
    if ((k->target & allowed) != 0 && (best == nullptr || k->target < best->target)) best = k;
    if (worst == nullptr || k->target > worst->target) worst = k;
  }
  return best != nullptr ? best : worst;
}

// Where the kernels' software prefetches of streamed data (a decode step's K
// and V) should land: L1 (prefetcht0) or L2 (prefetcht1).
enum class StreamPrefetch { kL1, kL2 };

// The choices that depend on the microarchitecture rather than the
// instruction set, one row per kind of CPU measured (docs/PERFORMANCE.md):
// - "zen4", AMD family 19h (Zen 4, and Zen 3 for the prefetches): a decode
//   step streams its K/V at twice the speed with L2 prefetches (the 32 KiB L1
//   is flooded by a 32-keys-ahead stream), and an I8 cache's decode under bf16
//   products runs faster on the AVX512_BF16 dot products (D1qb -8 to -11% time:
//   512-bit FMAs run as two 256-bit halves there, so the halved multiply-adds
//   pay for the int8 -> bf16 pairing);
// - "default", every other CPU: L1 prefetches (Zen 5 measured them the faster)
//   and I8 on the portable loops (Zen 5: the dot products +11 to +19% time).
// Picked once from the CPU's identity (CPUID vendor and family); the
// environment variable HWYATTN_TUNING=<name> picks a row instead (so either
// path can be tested and timed on one machine; documented in hwyattn.h).
struct Tuning {
  const char* name;
  StreamPrefetch prefetch;
  bool i8_bf16_dot;  // I8 caches' decode on the bf16 dot products (Bf16DotFor)
};
const Tuning& CpuTuning();
inline StreamPrefetch StreamPrefetchLevel() { return CpuTuning().prefetch; }

// The bf16 dot products of the bf16-products kernels: AVX512_BF16's
// vdpbf16ps inside the AVX3 kernels (prefill, decode and matmul tiles), and
// Armv8.6 BF16's BFDOT inside the NEON and SVE kernels (the prefill tiles;
// decode and matmul keep the portable bf16 rule there). Used when the CPU has
// the instructions (on arm64: the BF16 hwcap for NEON, SVEBF16 for SVE),
// that target is allowed and HWYATTN_TARGET is unset, unknown or a bf16
// name (Bf16DotTargetName; Highway's plain names cap below the dot
// products). Read once.
// kDecodeI8: the decode kernel on an I8 cache (only where CpuTuning says).
// The decode kernels also need AVX512_VBMI (FP8 numbers are looked up by its
// byte permutes): Zen 4, Zen 5 and Intel from Ice Lake have it; Cooper Lake's
// decode keeps the portable bf16 rule.
enum class Bf16DotKernel { kPrefill, kDecode, kDecodeI8, kMatmul };
// Whether the `kernel` of `target` (a Highway target bit) runs the bf16 dot
// products: the one rule every planner asks.
bool Bf16DotFor(int64_t target, Bf16DotKernel kernel);
// Whether the integer kernel of `target` (precision = INT8's scores) runs
// AVX512_VNNI's vpdpbusd (src/ops/int8_vnni.cc): the AVX3 target, allowed,
// on a CPU with AVX512_VNNI, with HWYATTN_TARGET unset, unknown or a bf16
// name, as for the bf16 dot products (a plain "AVX3" caps below both). Read
// once.
bool Int8DotFor(int64_t target);
// Highway 1.0.3 has no targets for the dot products, so they have their own
// names, which hwyattn_simd_target reports when they are on: Highway's name
// and "_BF16" ("AVX3_BF16", "NEON_BF16", "SVE_256_BF16", ...). Null for a
// target without bf16 dot-product tiles.
const char* Bf16DotTargetName(int64_t target);

// Highway's name of a target bit, e.g. "AVX3".
const char* TargetName(int64_t target);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_TARGETS_H_
