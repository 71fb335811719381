// SPDX-License-Identifier: Apache-2.0
//
// The only place that starts threads or calls the caller's pool: every
// parallel phase of the library goes through RunWorkers.
#include "src/threading.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <atomic>

namespace hwyattn {
namespace {
std::atomic<int> g_requested{0};
}  // namespace

void SetNumThreads(int n) { g_requested.store(n, std::memory_order_relaxed); }

int NumThreads() {
  const int n = g_requested.load(std::memory_order_relaxed);
  if (n > 0) return n;
#ifdef _OPENMP
  const int max = omp_get_max_threads();
  return max > 0 ? max : 1;
#else
  return 1;  // HWYATTN_OPENMP=OFF
#endif
}

int64_t Executor::MaxWorkers() const {
  if (HasPool()) return pool_workers;  // validated: >= 1
#ifdef _OPENMP
  return NumThreads();
#else
  return 1;  // HWYATTN_OPENMP=OFF: no threads but the caller's pool
#endif
}

void RunWorkers(const Executor& executor, int64_t workers, WorkerFn fn, void* ctx) {
  if (workers <= 1) {
    fn(ctx, 0);
    return;
  }
  if (executor.HasPool()) {
    // A worker is exactly a task: same signature, same index.
    executor.parallel_for(executor.pool, workers, fn, ctx);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(static_cast <int>(workers))
  {
    // Normally one worker per thread; fewer threads than asked for (inside
    // another parallel region, a thread limit) each take several in turn.
    const int64_t threads = omp_get_num_threads();
    for (int64_t w = omp_get_thread_num(); w < workers; w += threads) fn(ctx, w);
  }
#else
  for (int64_t w = 0; w < workers; ++w) fn(ctx, w);
#endif
}

}  // namespace hwyattn
