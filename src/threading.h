// SPDX-License-Identifier: Apache-2.0
//
// Who runs a call's parallel phases (Executor: OpenMP, or the caller's pool
// from opts->parallel), the one way every phase is started (ParallelRegion),
// and the work sharing inside a phase (ItemShare, RunShares).
#ifndef HWYATTN_SRC_THREADING_H_
#define HWYATTN_SRC_THREADING_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <new>

namespace hwyattn {

// n >= 0; 0 = all available cores (OpenMP's default for the calling thread).
void SetNumThreads(int n);
// The resolved count, >= 1 (what hwyattn_get_num_threads reports; with
// HWYATTN_OPENMP=OFF calls without a pool still run on one thread).
int NumThreads();

// A worker of a parallel phase: fn(ctx, w) for w in [0, workers).
// A worker of a parallel region: body(ctx, worker).
using WorkerFn = void (*)(void* ctx, int64_t worker);
// The caller's pool's entry point (hwyattn_parallel::parallel_for, whose
// tasks are WorkerFns: capi checks the types match).
using ParallelForFn = void (*)(void* pool, int64_t n, WorkerFn task, void* task_ctx);

// Where one call's parallel phases run: the caller's pool (opts->parallel's
// fields, as validated: a copy, so the caller's struct is not read again),
// or, when parallel_for is null, the library's own OpenMP threads.
struct Executor {
  void* pool = nullptr;
  ParallelForFn parallel_for = nullptr;
  int64_t pool_workers = 0;  // >= 1 with a pool

  bool HasPool() const { return parallel_for != nullptr; }
  // The most workers a phase may have: the pool's num_workers, else
  // NumThreads() (1 when built with HWYATTN_OPENMP=OFF). Planners take the
  // min of this and what a phase's work is worth, so a phase never has more
  // workers than work items.
  int64_t MaxWorkers() const;
};

// A thread must get at least this much work to pay for waking it (a
// fork/join costs a few microseconds; 2 MFLOP take ~10 us on one core).
constexpr double kMinFlopsPerWorker = 2e6;

// Workers worth waking for `flops` of work split into `items` pieces:
// min(executor.MaxWorkers(), flops / kMinFlopsPerWorker + 1, items), at
// least 1. The one thread-count rule of every parallel phase, so that small
// calls never wake a second thread.
inline int64_t WorkersFor(const Executor& executor, double flops, int64_t items) {
  int64_t workers = executor.MaxWorkers();
  const int64_t worth = static_cast<int64_t>(flops / kMinFlopsPerWorker) + 1;
  if (worth < workers) workers = worth;
  if (items < workers) workers = items;
  return workers < 1 ? 1 : workers;
}

// The same rule for work that moves bytes rather than multiplying (cache
// writes, copies): a worker must get at least this many bytes (~10 us of
// streaming) to be worth waking.
constexpr double kMinBytesPerWorker = 256 * 1024;

inline int64_t WorkersForBytes(const Executor& executor, double bytes, int64_t items) {
  return WorkersFor(executor, bytes / kMinBytesPerWorker * kMinFlopsPerWorker, items);
}

// Runs fn(ctx, w) exactly once for every worker w in [0, workers), and
// returns when all have finished:
// - workers <= 1: fn(ctx, 0) on the calling thread (no pool call, no fork);
// - with a pool: one parallel_for of `workers` tasks, task w = worker w;
// - else an OpenMP region of `workers` threads; if OpenMP grants fewer (a
//   call from inside the caller's own parallel region, a thread limit), each
//   thread runs several workers in turn;
// - built with HWYATTN_OPENMP=OFF: the workers in turn on the calling thread.
// Workers must not depend on running at the same time as each other (no
// barrier, no waiting for another worker): a pool may run its tasks one at a
// time, in any order. A phase that needs a barrier is two regions. A worker
// never starts a region itself, so parallel_for is never called from inside
// a task.
void RunWorkers(const Executor& executor, int64_t workers, WorkerFn fn, void* ctx);

// The parallel region of a phase: body(worker) for every worker in
// [0, workers), on `executor` (see RunWorkers). Worker w owns slice w of the
// call's per-worker scratch and share w of an ItemShare set.
template <typename Body>
void ParallelRegion(const Executor& executor, int64_t workers, const Body& body) {
  RunWorkers(
      executor, workers,
      [](void* ctx, int64_t worker) { (*static_cast<const Body*>(ctx))(worker); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

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
// Every worker walks all shares, so whichever workers run, in whatever order
// and however many at once (a pool that runs its tasks one at a time: the
// first does every item, the others find nothing left), every item is run
// exactly once.
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
