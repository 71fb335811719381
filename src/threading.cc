// SPDX-License-Identifier: Apache-2.0
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

int WorkerIndex() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int WorkerCount() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

}  // namespace hwyattn
