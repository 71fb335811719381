// SPDX-License-Identifier: Apache-2.0
//
// bench_mpi: libhwyattn_mpi against one process (issue 18's targets), under
//   mpirun -np 2 bench_mpi [--reps=N] [--seq=L] [--cache=L]
// Ring prefill of P3's shape (B=1, H=4, L=4096, D=128, causal) over N ranks
// x 1 thread against hwyattn_sdpa in one process on N threads, and sharded
// decode of D1's shape (B=1, Hq=32, Hkv=8, Lq=1, Lk=4096, D=128) over N ranks
// x 1 thread against one process on N threads. The one-process rows run on
// rank 0 while the other ranks sleep (not spin) in an MPI_Ibarrier. Each row:
// the median and the best of --reps calls (a call's time is the slowest
// rank's), and for the ring the per-rank compute and wait times, the bytes
// each rank sent, and the overlap achieved: 1 - wait / (the same bytes
// passed around the ring with nothing to compute). Not a ctest: timing.
//
// Run it with `mpirun --bind-to none`: for -np <= 2 Open MPI binds each rank
// to one core by default, and the one-process rows then run their N threads
// on rank 0's single core, comparing N cores with one. At start-up rank 0
// checks its CPU affinity (Linux) and warns on stderr when it allows fewer
// CPUs than there are ranks.

#include <errno.h>
#include <mpi.h>
#if defined(__linux__)
#include <sched.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <random>
#include <vector>

#include "include/hwyattn.h"
#include "include/hwyattn_mpi.h"

namespace {

int g_rank = 0, g_size = 1;

double Now() { return MPI_Wtime(); }

void Check(hwyattn_status s, const char* what) {
  if (s != HWYATTN_OK) {
    fprintf(stderr, "rank %d: %s: %s %s\n", g_rank, what, hwyattn_mpi_last_error(),
            hwyattn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// The CPUs this process may run on, or 0 when that cannot be told.
int AllowedCpus() {
#if defined(__linux__)
  for (int n = 1024; n <= (1 << 20); n *= 2) {  // grows past 1024 CPUs
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) return 0;
    const size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int err = errno;
    const int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return count;
    if (err != EINVAL) return 0;  // EINVAL: the mask is smaller than the kernel's
  }
#endif
  return 0;
}

// Rank 0: the one-process rows run g_size threads on it; if mpirun bound it
// to fewer CPUs, those threads share them and the rows compare unlike things.
void WarnIfBound() {
  const int cpus = AllowedCpus();
  if (cpus == 0 || cpus >= g_size) return;
  fprintf(stderr,
          "bench_mpi: warning: rank 0 may run on %d CPU(s), but the one-process rows run %d "
          "threads on it, so they would time %d threads on %d CPU(s) against %d ranks. Run "
          "under `mpirun --bind-to none` (Open MPI binds each rank to one core by default for "
          "-np <= 2).\n",
          cpus, g_size, g_size, cpus, g_size);
}

struct Tensor {
  std::vector<float> data;
  hwyattn_tensor t;
  Tensor(int64_t b, int64_t h, int64_t l, int64_t d, std::mt19937* rng) {
    data.resize(static_cast<size_t>(b * h * l * d));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : data) x = dist(*rng);
    const int64_t shape[4] = {b, h, l, d};
    hwyattn_tensor_contiguous(&t, data.data(), HWYATTN_F32, 4, shape);
  }
};

// Other ranks wait here, asleep, while rank 0 measures one process.
void WaitForRankZero() {
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  int done = 0;
  while (!done) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) {
      const timespec ts = {0, 200000};
      nanosleep(&ts, nullptr);
    }
  }
}

struct Summary {
  double median, best;
};
Summary Summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

// Times fn() reps times; a call's time is the slowest rank's.
template <typename Fn>
Summary TimeCollective(int reps, Fn fn) {
  std::vector<double> times;
  for (int i = 0; i <= reps; ++i) {  // the first call warms up
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = Now();
    fn();
    double t = Now() - t0, slowest = 0.0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i > 0) times.push_back(slowest);
  }
  return Summarize(times);
}

template <typename Fn>
Summary TimeLocal(int reps, Fn fn) {
  std::vector<double> times;
  for (int i = 0; i <= reps; ++i) {
    const double t0 = Now();
    fn();
    if (i > 0) times.push_back(Now() - t0);
  }
  return Summarize(times);
}

void Ring(int reps, int64_t seq) {
  const int64_t B = 1, H = 4, D = 128;
  std::mt19937 rng(1234 + g_rank);
  // One process, g_size threads, the whole sequence (rank 0).
  Summary one = {0, 0};
  if (g_rank == 0) {
    Tensor q(B, H, seq, D, &rng), k(B, H, seq, D, &rng), v(B, H, seq, D, &rng);
    Tensor out(B, H, seq, D, &rng);
    hwyattn_sdpa_options o;
    hwyattn_sdpa_options_init(&o);
    o.causal = HWYATTN_CAUSAL_TOP_LEFT;
    Check(hwyattn_set_num_threads(g_size), "hwyattn_set_num_threads");
    one = TimeLocal(reps, [&] { Check(hwyattn_sdpa(&q.t, &k.t, &v.t, &out.t, &o), "sdpa"); });
  }
  WaitForRankZero();

  // The ring: each rank its zigzag slice, one thread.
  int64_t f0, l0, f1, l1;
  Check(hwyattn_mpi_ring_slice(g_rank, g_size, seq, &f0, &l0, &f1, &l1), "ring_slice");
  const int64_t lr = l0 + l1;
  Tensor q(B, H, lr, D, &rng), k(B, H, lr, D, &rng), v(B, H, lr, D, &rng), out(B, H, lr, D, &rng);
  hwyattn_sdpa_options o;
  hwyattn_sdpa_options_init(&o);
  o.causal = HWYATTN_CAUSAL_TOP_LEFT;
  Check(hwyattn_set_num_threads(1), "hwyattn_set_num_threads");
  std::vector<hwyattn_mpi_ring_stats> stats;
  const Summary ring = TimeCollective(reps, [&] {
    Check(hwyattn_mpi_ring_sdpa(MPI_COMM_WORLD, &q.t, &k.t, &v.t, &out.t, &o), "ring_sdpa");
    hwyattn_mpi_ring_stats s;
    hwyattn_mpi_ring_last_stats(&s);
    stats.push_back(s);
  });
  stats.erase(stats.begin());  // the warm-up
  double compute = 0, wait = 0;
  for (const hwyattn_mpi_ring_stats& s : stats) {
    compute += s.compute_seconds / static_cast<double>(stats.size());
    wait += s.wait_seconds / static_cast<double>(stats.size());
  }
  // The same bytes around the ring with nothing to compute: what the wait
  // would be without overlap.
  const int64_t bytes = stats.empty() ? 0 : stats[0].bytes_sent;
  std::vector<char> a(static_cast<size_t>(lr * B * H * D * 4 * 2 + 64)), b(a.size() + 64);
  double transfer = 0.0;
  if (g_size > 1) {
    const Summary t = TimeCollective(reps, [&] {
      for (int s = 0; s + 1 < g_size; ++s) {
        MPI_Sendrecv(a.data(), static_cast<int>(a.size() - 64), MPI_BYTE, (g_rank + 1) % g_size, 7,
                     b.data(), static_cast<int>(b.size()), MPI_BYTE, (g_rank + g_size - 1) % g_size,
                     7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    });
    transfer = t.median;
  }
  double per_rank[4] = {compute, wait, static_cast<double>(bytes), transfer};
  std::vector<double> all(static_cast<size_t>(4 * g_size));
  MPI_Gather(per_rank, 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf(
        "ring prefill B=1 H=4 L=%lld D=128 causal, %d rank(s) x 1 thread vs 1 process x %d "
        "threads (%d reps)\n",
        static_cast<long long>(seq), g_size, g_size, reps);
    printf("  one process : median %8.2f ms  best %8.2f ms\n", one.median * 1e3, one.best * 1e3);
    printf("  ring        : median %8.2f ms  best %8.2f ms  -> %.1f%% of one process (median)\n",
           ring.median * 1e3, ring.best * 1e3, 100.0 * one.median / ring.median);
    for (int r = 0; r < g_size; ++r) {
      const double* p = &all[static_cast<size_t>(4 * r)];
      const double overlap = p[3] > 0 ? std::max(0.0, 1.0 - p[1] / p[3]) : 1.0;
      printf(
          "  rank %d: compute %8.2f ms  wait %6.3f ms  sent %6.2f MiB  bare transfer %6.3f ms  "
          "overlap %5.1f%%\n",
          r, p[0] * 1e3, p[1] * 1e3, p[2] / 1048576.0, p[3] * 1e3, 100.0 * overlap);
    }
  }
}

void Sharded(int reps, int64_t cache) {
  const int64_t B = 1, Hq = 32, Hkv = 8, D = 128;
  std::mt19937 rng(99 + g_rank);
  Summary one = {0, 0};
  Tensor q(B, Hq, 1, D, &rng);  // the same values are not needed for timing
  if (g_rank == 0) {
    Tensor k(B, Hkv, cache, D, &rng), v(B, Hkv, cache, D, &rng), out(B, Hq, 1, D, &rng);
    hwyattn_sdpa_options o;
    hwyattn_sdpa_options_init(&o);
    Check(hwyattn_set_num_threads(g_size), "hwyattn_set_num_threads");
    one = TimeLocal(reps, [&] { Check(hwyattn_sdpa(&q.t, &k.t, &v.t, &out.t, &o), "sdpa"); });
  }
  WaitForRankZero();
  const int64_t first = cache * g_rank / g_size, mine = cache * (g_rank + 1) / g_size - first;
  Tensor k(B, Hkv, mine, D, &rng), v(B, Hkv, mine, D, &rng), out(B, Hq, 1, D, &rng);
  hwyattn_sdpa_options o;
  hwyattn_sdpa_options_init(&o);
  Check(hwyattn_set_num_threads(1), "hwyattn_set_num_threads");
  const Summary sharded = TimeCollective(reps, [&] {
    Check(hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, &q.t, &k.t, &v.t, &out.t, &o), "sharded");
  });
  if (g_rank == 0) {
    printf(
        "sharded decode B=1 Hq=32 Hkv=8 Lq=1 Lk=%lld D=128, %d rank(s) x 1 thread vs 1 "
        "process x %d threads (%d reps)\n",
        static_cast<long long>(cache), g_size, g_size, reps);
    printf("  one process : median %8.3f ms  best %8.3f ms\n", one.median * 1e3, one.best * 1e3);
    printf(
        "  sharded     : median %8.3f ms  best %8.3f ms  -> %.2fx one process (median); "
        "allreduce of %lld bytes per rank\n",
        sharded.median * 1e3, sharded.best * 1e3, sharded.median / one.median,
        static_cast<long long>(B * Hq * (D + 1) * 4 + 4));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int reps = 5;
  int64_t seq = 4096, cache = 4096;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--reps=", 7) == 0)
      reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--seq=", 6) == 0)
      seq = atoll(argv[i] + 6);
    else if (strncmp(argv[i], "--cache=", 8) == 0)
      cache = atoll(argv[i] + 8);
    else {
      if (g_rank == 0) fprintf(stderr, "usage: %s [--reps=N] [--seq=L] [--cache=L]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (g_rank == 0) WarnIfBound();
  Ring(reps, seq);
  Sharded(reps, cache);
  MPI_Finalize();
  return 0;
}
