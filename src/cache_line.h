// SPDX-License-Identifier: Apache-2.0
//
// The kernels' software prefetch: the cache line they step by (one prefetch
// per line of a streamed row, a panel's lines spread over a tile's steps) and
// the one instruction they issue (PrefetchLine). The line per architecture,
// at compile time: a prefetch stepping by less than the real line only
// repeats itself, one stepping by more misses lines.
#ifndef HWYATTN_SRC_CACHE_LINE_H_
#define HWYATTN_SRC_CACHE_LINE_H_

#include <stddef.h>

#include "hwy/base.h"  // HWY_INLINE

namespace hwyattn {

#if defined(__APPLE__) && defined(__aarch64__)
constexpr size_t kCacheLineBytes = 128;  // Apple M-series cores
#elif defined(__powerpc64__)
constexpr size_t kCacheLineBytes = 128;  // POWER8 to POWER10
#elif defined(__s390x__)
constexpr size_t kCacheLineBytes = 256;  // z13 and later
#else
constexpr size_t kCacheLineBytes = 64;  // x86-64, Arm Cortex and Neoverse cores
#endif
constexpr size_t kCacheLineFloats = kCacheLineBytes / sizeof(float);

// Asks for the line that holds p, for reading, into every cache level (L1),
// or into L2 and out (kL2), with the compiler's builtin on
// every architecture (prefetcht0 / prefetcht1 on x86, prfm on arm64, dcbt on
// POWER, pfd on s390x; nothing on a RISC-V without Zicbop). Not
// hwy::Prefetch: Highway 1.4's compiles to nothing where __SSE2__ is not
// defined, that is on every architecture but x86.
// Always inlined (HWY_INLINE): GCC takes a function that only prefetches for
// one without effects (const) and deletes the calls it has not inlined yet.
template <bool kL2 = false>
HWY_INLINE void PrefetchLine(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, kL2 ? 2 : 3);
#else
  (void)p;
#endif
}

}  // namespace hwyattn

#endif  // HWYATTN_SRC_CACHE_LINE_H_
