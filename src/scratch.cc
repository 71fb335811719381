// SPDX-License-Identifier: Apache-2.0
#include "src/scratch.h"

#include <stdlib.h>

namespace hwyattn {
namespace {

struct Buffer {
  void* ptr = nullptr;
  size_t size = 0;
  ~Buffer() { free(ptr); }
};

thread_local Buffer t_buffers[kNumScratchSlots];

}  // namespace

void* ThreadScratch(ScratchSlot slot, size_t bytes) {
  Buffer& b = t_buffers[static_cast<int>(slot)];
  if (bytes <= b.size) return b.ptr;
  // Grow by at least 1.5x so a slowly growing sequence of calls reallocates
  // only a logarithmic number of times.
  size_t want = bytes + bytes / 2;
  want = (want + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  void* p = aligned_alloc(kScratchAlign, want);
  if (p == nullptr) {
    want = (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
    p = aligned_alloc(kScratchAlign, want);
    if (p == nullptr) return nullptr;
  }
  free(b.ptr);
  b.ptr = p;
  b.size = want;
  return p;
}

}  // namespace hwyattn
