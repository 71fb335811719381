// SPDX-License-Identifier: Apache-2.0
//
// The thread count that calls may use (hwyattn_set_num_threads), and the
// work sharing of the parallel phases (ItemShare).
#ifndef HWYATTN_SRC_THREADING_H_
#define HWYATTN_SRC_THREADING_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <new>

namespace hwyattn {

// n >= 0; 0 = all available cores (OpenMP's default for the calling thread).
void SetNumThreads(int n);
// The resolved count, >= 1.
int NumThreads();

// This thread's index in the enclosing parallel region (0 outside one, and
// always 0 when built with HWYATTN_OPENMP=OFF): which slice of the caller's
// scratch a worker uses.
int WorkerIndex();
// The number of threads in the enclosing parallel region (1 outside one).
int WorkerCount();

// Work sharing with affinity: items [0, n) are split into one contiguous
// share per worker; worker w takes its own share in order through an atomic
// cursor and, once it is done, helps the other workers with the rest of
// theirs. Consecutive items usually touch neighbouring data (the same K/V
// head; the rows that the next phase of a layer reads on the same core),
// which then stays in the worker's own L2, where items handed out one by one
// from a common counter would send both cores through all of the data; the
// helping keeps the balance of a dynamic schedule. One share per cache line.
struct alignas(64) ItemShare {
  std::atomic<int64_t> next;
  int64_t end;
};

// Floats of scratch that `count` shares take (a whole number of lines).
inline size_t ShareFloats(int64_t count) {
  return static_cast<size_t>(count) * sizeof(ItemShare) / sizeof(float);
}

// Constructs `count` shares of items [0, n) in `memory` (ShareFloats(count)
// floats, 64-byte aligned).
inline ItemShare* InitShares(void* memory, int64_t count, int64_t n) {
  ItemShare* shares = static_cast<ItemShare*>(memory);
  for (int64_t w = 0; w < count; ++w) {
    new (&shares[w]) ItemShare{{n * w / count}, n * (w + 1) / count};
  }
  return shares;
}

// Runs the items of all `count` shares, starting with worker `me`'s own:
// run(i, next), where next is the item that follows i in its share (-1 at
// the share's end), the one this worker takes next unless another took it.
// Every worker walks all shares, so if OpenMP gave the region fewer threads
// than `count`, the missing workers' shares are still done.
template <typename Run>
void RunShares(ItemShare* shares, int64_t count, int64_t me, const Run& run) {
  for (int64_t k = 0; k < count; ++k) {
    ItemShare& share = shares[(me + k) % count];
    for (int64_t i = share.next.fetch_add(1, std::memory_order_relaxed); i < share.end;
         i = share.next.fetch_add(1, std::memory_order_relaxed)) {
      run(i, i + 1 < share.end ? i + 1 : -1);
    }
  }
}

}  // namespace hwyattn

#endif  // HWYATTN_SRC_THREADING_H_
