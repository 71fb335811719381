// SPDX-License-Identifier: Apache-2.0
#include "src/scratch.h"

#include <stdint.h>
#include <stdlib.h>
#ifdef _WIN32
#include <malloc.h>  // _aligned_malloc, _aligned_free
#endif

#include <atomic>

namespace hwyattn {
namespace {

struct Buffer {
  void* ptr = nullptr;
  size_t size = 0;
  ~Buffer() { FreeAligned(ptr); }
};

thread_local Buffer t_buffers[kNumScratchSlots];

// FailAllocationsAfter: < 0 = off, else the allocations still allowed.
std::atomic<int64_t> g_allocations_left{-1};

// Whether the test hook says this allocation fails.
bool HookFails() {
  int64_t left = g_allocations_left.load(std::memory_order_relaxed);
  while (left >= 0) {
    if (left == 0) return true;
    if (g_allocations_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      return false;
    }
  }
  return false;
}

}  // namespace

void FailAllocationsAfter(int64_t n) {
  g_allocations_left.store(n < 0 ? -1 : n, std::memory_order_relaxed);
}

void* AlignedAlloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  // Rounding up must not wrap (a wrapped size would be a small buffer handed
  // out for a huge request).
  if (bytes > SIZE_MAX - (kScratchAlign - 1)) return nullptr;
  if (HookFails()) return nullptr;
  const size_t rounded = (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
#ifdef _WIN32
  return _aligned_malloc(rounded, kScratchAlign);
#else
  return aligned_alloc(kScratchAlign, rounded);
#endif
}

void FreeAligned(void* p) {
#ifdef _WIN32
  _aligned_free(p);
#else
  free(p);
#endif
}

void* ThreadScratch(ScratchSlot slot, size_t bytes) {
  Buffer& b = t_buffers[static_cast<int>(slot)];
  if (bytes <= b.size) return b.ptr;
  // Grow by at least 1.5x so a slowly growing sequence of calls reallocates
  // only a logarithmic number of times; no headroom for sizes where 1.5x
  // would not fit in size_t (such a request cannot be served anyway).
  size_t want = bytes;
  if (bytes <= SIZE_MAX / 3) want = bytes + bytes / 2;
  want = want <= SIZE_MAX - (kScratchAlign - 1)
             ? (want + kScratchAlign - 1) / kScratchAlign * kScratchAlign
             : want;
  void* p = AlignedAlloc(want);
  if (p == nullptr && want != bytes) {
    want = bytes;
    p = AlignedAlloc(want);
  }
  if (p == nullptr) return nullptr;
  FreeAligned(b.ptr);
  b.ptr = p;
  b.size = want;
  return p;
}

}  // namespace hwyattn
