// SPDX-License-Identifier: Apache-2.0
//
// Scratch memory: one grow-only, 64-byte aligned buffer per calling thread,
// reused by every later call on that thread, so steady-state calls allocate
// nothing. Worker threads of a call get disjoint slices of the caller's buffer.
#ifndef HWYATTN_SRC_SCRATCH_H_
#define HWYATTN_SRC_SCRATCH_H_

#include <stddef.h>
#include <stdint.h>

namespace hwyattn {

constexpr size_t kScratchAlign = 64;

// Whether p is kScratchAlign-aligned, as every slice of scratch the planner
// hands a kernel is (a precondition the kernels assert).
inline bool IsScratchAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kScratchAlign == 0;
}

// Rounds n floats up to a whole number of cache lines.
inline size_t PadFloats(size_t n) {
  constexpr size_t kLine = kScratchAlign / sizeof(float);
  return (n + kLine - 1) / kLine * kLine;
}

// Independent buffers, so that a layer can hold its activations while the
// matmul and the attention it calls use their own scratch.
// kJobs holds the plans of a call's problems (src/attention.cc),
// kSequences a kv_attention call's problems, one per sequence.
enum class ScratchSlot { kAttention = 0, kMatmul = 1, kLayer = 2, kJobs = 3, kSequences = 4 };
constexpr int kNumScratchSlots = 5;

// At least `bytes` bytes, 64-byte aligned, valid until this thread's next call
// of ThreadScratch for the same slot. Null if the allocation failed (the old
// buffer is kept), including sizes no allocator can serve.
void* ThreadScratch(ScratchSlot slot, size_t bytes);

// Every heap allocation of the library's buffers goes through here:
// 64-byte aligned, at least `bytes` (rounded up to the alignment), null on
// failure or when `bytes` is too large to round. Free with FreeAligned.
void* AlignedAlloc(size_t bytes);

// Frees what AlignedAlloc returned (null is a no-op). Not free(): Windows'
// C runtime has no aligned_alloc, and its _aligned_malloc's blocks must be
// given back to _aligned_free.
void FreeAligned(void* p);

// Test hook (internal, not exported from the shared library; tests reach it
// by linking hwyattn_static): the next `n` calls of AlignedAlloc (from any
// thread) behave normally and every later one fails as if memory were
// exhausted, until the hook is reset with n < 0 (the default).
void FailAllocationsAfter(int64_t n);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_SCRATCH_H_
