// SPDX-License-Identifier: Apache-2.0
//
// Scratch memory: one grow-only, 64-byte aligned buffer per calling thread,
// reused by every later call on that thread, so steady-state calls allocate
// nothing. Worker threads of a call get disjoint slices of the caller's buffer.
#ifndef HWYATTN_SRC_SCRATCH_H_
#define HWYATTN_SRC_SCRATCH_H_

#include <stddef.h>

namespace hwyattn {

constexpr size_t kScratchAlign = 64;

// Rounds n floats up to a whole number of cache lines.
inline size_t PadFloats(size_t n) {
  constexpr size_t kLine = kScratchAlign / sizeof(float);
  return (n + kLine - 1) / kLine * kLine;
}

// Independent buffers, so that a layer can hold its activations while the
// matmul and the attention it calls use their own scratch.
enum class ScratchSlot { kAttention = 0, kMatmul = 1, kLayer = 2 };
constexpr int kNumScratchSlots = 3;

// At least `bytes` bytes, 64-byte aligned, valid until this thread's next call
// of ThreadScratch for the same slot. Null if the allocation failed (the old
// buffer is kept).
void* ThreadScratch(ScratchSlot slot, size_t bytes);

}  // namespace hwyattn

#endif  // HWYATTN_SRC_SCRATCH_H_
