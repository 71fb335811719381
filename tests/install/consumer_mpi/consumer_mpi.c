/* SPDX-License-Identifier: Apache-2.0
 *
 * A C99 user of an INSTALLED libhwyattn_mpi (tests/install/check_mpi.sh builds
 * it with pkg-config's flags and through find_package(hwyattn COMPONENTS mpi),
 * then runs it on 2 ranks): the keys of one small problem split over the
 * ranks, checked against hwyattn_sdpa of all of them in this process. */
#include <math.h>
#include <stdio.h>

#include "hwyattn_mpi.h"

#define LQ 2
#define LK 6
#define D 4

int main(int argc, char** argv) {
  float q[LQ * D], k[LK * D], v[LK * D], out[LQ * D], ref[LQ * D];
  int64_t qs[2] = {LQ, D}, ks[2] = {LK, D}, shard[2] = {0, D};
  hwyattn_tensor tq, tk, tv, to, tr, tks, tvs;
  int rank = 0, size = 1, i, bad = 0, all_bad = 0;
  int64_t first, count;
  hwyattn_status s;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (i = 0; i < LQ * D; ++i) q[i] = (float)sin(0.3 * i);
  for (i = 0; i < LK * D; ++i) {
    k[i] = (float)cos(0.7 * i);
    v[i] = (float)(i % 5) - 2.0f;
  }
  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 2, qs);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 2, ks);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 2, ks);
  hwyattn_tensor_contiguous(&to, out, HWYATTN_F32, 2, qs);
  hwyattn_tensor_contiguous(&tr, ref, HWYATTN_F32, 2, qs);
  if (hwyattn_sdpa(&tq, &tk, &tv, &tr, NULL) != HWYATTN_OK) bad = 1;
  /* This rank's keys: [first, first + count). */
  first = LK * rank / size;
  count = LK * (rank + 1) / size - first;
  shard[0] = count > 0 ? count : 1;
  hwyattn_tensor_contiguous(&tks, k + first * D, HWYATTN_F32, 2, shard);
  hwyattn_tensor_contiguous(&tvs, v + first * D, HWYATTN_F32, 2, shard);
  tks.shape[0] = tvs.shape[0] = count;
  s = hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, &tq, &tks, &tvs, &to, NULL);
  if (s != HWYATTN_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, hwyattn_mpi_last_error());
    bad = 1;
  }
  for (i = 0; i < LQ * D; ++i) {
    if (fabsf(out[i] - ref[i]) > 2e-6f * (fabsf(ref[i]) > 1.0f ? fabsf(ref[i]) : 1.0f)) bad = 1;
  }
  MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("consumer_mpi on %d ranks: %s\n", size, all_bad ? "FAILED" : "OK");
  MPI_Finalize();
  return all_bad;
}
