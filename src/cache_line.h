// SPDX-License-Identifier: Apache-2.0
//
// The cache line the kernels' software prefetches step by (one prefetch per
// line of a streamed row, a panel's lines spread over a tile's steps). Per
// architecture, at compile time: a prefetch stepping by less than the real
// line only repeats itself, one stepping by more misses lines.
#ifndef HWYATTN_SRC_CACHE_LINE_H_
#define HWYATTN_SRC_CACHE_LINE_H_

#include <stddef.h>

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

}  // namespace hwyattn

#endif  // HWYATTN_SRC_CACHE_LINE_H_
