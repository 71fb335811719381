/* SPDX-License-Identifier: Apache-2.0
 *
 * mpi_long_context.c: long-context decoding with the KV cache sharded over
 * MPI ranks (libhwyattn_mpi). Each rank keeps a contiguous piece of the
 * cache, in rank order; the newest tokens go to the last rank. At every step
 * all ranks hold the same query (in an engine, the layer's input is
 * replicated), and hwyattn_mpi_sharded_sdpa returns on every rank the
 * attention over the whole cache, as one process holding it would compute
 * it: one small MPI_Allgather and one MPI_Allreduce of Hq * (D + 1) floats.
 *
 *   mpirun -np 4 ./mpi_long_context [tokens]     (default 8192 cached tokens)
 *
 * Cache entries are a function of their position, so that rank 0 can check
 * the last step against hwyattn_sdpa over the whole cache, rebuilt in one
 * process (which a real engine, whose cache does not fit one machine, could
 * not do). Exits non-zero if a call fails or the check does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hwyattn_mpi.h"

#define HQ 8  /* query heads */
#define HKV 2 /* kv heads (GQA: 4 query heads per kv head) */
#define D 64  /* head_dim */
#define STEPS 4

/* Element i of token t's key or value row of kv head h: any deterministic
 * function of the position does. */
static float CacheValue(int which, int64_t t, int h, int i) {
  return (float)sin(0.001 * (double)t * (i + 1) + 0.7 * h + 1.3 * which);
}

/* Fills [HKV, n, D] rows of positions [first, first + n) (key or value). */
static void FillCache(float* dst, int which, int64_t first, int64_t n, int64_t capacity) {
  int h, i;
  int64_t t;
  for (h = 0; h < HKV; ++h)
    for (t = 0; t < n; ++t)
      for (i = 0; i < D; ++i) dst[(h * capacity + t) * D + i] = CacheValue(which, first + t, h, i);
}

int main(int argc, char** argv) {
  int rank = 0, size = 1, step, failed = 0, any_failed = 0;
  int64_t tokens = argc > 1 ? atoll(argv[1]) : 8192, first, mine, capacity, i;
  float *k, *v, q[HQ * D], out[HQ * D];
  hwyattn_sdpa_options opts;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (tokens < 1) tokens = 1;

  /* This rank's piece of the prompt's cache, room for STEPS more on the last. */
  first = tokens * rank / size;
  mine = tokens * (rank + 1) / size - first;
  capacity = mine + (rank == size - 1 ? STEPS : 0);
  k = malloc(sizeof(float) * (size_t)(HKV * (capacity > 0 ? capacity : 1) * D));
  v = malloc(sizeof(float) * (size_t)(HKV * (capacity > 0 ? capacity : 1) * D));
  if (k == NULL || v == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  FillCache(k, 0, first, mine, capacity);
  FillCache(v, 1, first, mine, capacity);

  hwyattn_sdpa_options_init(&opts);
  opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT; /* the new token sees the whole cache */
  for (step = 0; step < STEPS && !failed; ++step) {
    /* The new token: its query (the same on every rank) and, on the last
     * rank, its key and value appended to the cache. */
    hwyattn_tensor tq, tk, tv, to;
    int64_t qs[3] = {HQ, 1, D}, ks[3] = {HKV, capacity, D};
    for (i = 0; i < HQ * D; ++i)
      q[i] = (float)cos(0.01 * (double)(tokens + step) * (i % D + 1) + i / D);
    if (rank == size - 1) {
      int h, j;
      for (h = 0; h < HKV; ++h)
        for (j = 0; j < D; ++j) {
          k[(h * capacity + mine) * D + j] = CacheValue(0, tokens + step, h, j);
          v[(h * capacity + mine) * D + j] = CacheValue(1, tokens + step, h, j);
        }
      ++mine;
    }
    hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 3, qs);
    /* [HKV, mine, D] views of the [HKV, capacity, D] buffers; mine may be 0. */
    hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 3, ks);
    hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 3, ks);
    tk.shape[1] = tv.shape[1] = mine;
    if (hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, &tq, &tk, &tv, &to, &opts) != HWYATTN_OK) {
      fprintf(stderr, "rank %d: %s\n", rank, hwyattn_mpi_last_error());
      failed = 1;
    } else if (rank == 0) {
      printf("step %d (%lld cached tokens over %d ranks): out[0][0..3] = %.6f %.6f %.6f %.6f\n",
             step, (long long)(tokens + step + 1), size, out[0], out[1], out[2], out[3]);
    }
  }

  /* Rank 0 checks the last step against hwyattn_sdpa over the whole cache. */
  if (rank == 0 && !failed) {
    const int64_t total = tokens + STEPS;
    float* fk = malloc(sizeof(float) * (size_t)(HKV * total * D));
    float* fv = malloc(sizeof(float) * (size_t)(HKV * total * D));
    float ref[HQ * D];
    hwyattn_tensor tq, tk, tv, tr;
    int64_t qs[3] = {HQ, 1, D}, ks[3] = {HKV, total, D};
    double worst = 0.0;
    if (fk == NULL || fv == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    FillCache(fk, 0, 0, total, total);
    FillCache(fv, 1, 0, total, total);
    hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tr, ref, HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tk, fk, HWYATTN_F32, 3, ks);
    hwyattn_tensor_contiguous(&tv, fv, HWYATTN_F32, 3, ks);
    if (hwyattn_sdpa(&tq, &tk, &tv, &tr, &opts) != HWYATTN_OK) {
      failed = 1;
    } else {
      for (i = 0; i < HQ * D; ++i) {
        const double err =
            fabs((double)out[i] - ref[i]) / (fabs(ref[i]) > 1.0 ? fabs(ref[i]) : 1.0);
        if (err > worst) worst = err;
      }
      printf("largest relative difference from one process: %.2g\n", worst);
      failed = !(worst <= 2e-6);
    }
    free(fk);
    free(fv);
  }
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  free(k);
  free(v);
  MPI_Finalize();
  return any_failed;
}
