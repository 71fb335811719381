// SPDX-License-Identifier: Apache-2.0
//
// Scaffolding for the MPI tests (run under mpirun, one process per rank):
// failure counting that every rank agrees on, dense random problems, and
// comparison against the single-process hwyattn_sdpa.
#ifndef HWYATTN_TESTS_MPI_MPI_TEST_UTIL_H_
#define HWYATTN_TESTS_MPI_MPI_TEST_UTIL_H_

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include <random>
#include <string>
#include <vector>

#include "hwyattn.h"

namespace hwyattn_mpi_test {

extern int g_rank, g_size, g_failures;

// Records a failure of this rank (printed with the rank and the line).
#define EXPECT_MPI(cond, ...)                                                                 \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      ++::hwyattn_mpi_test::g_failures;                                                       \
      fprintf(stderr, "rank %d: %s:%d: %s: ", ::hwyattn_mpi_test::g_rank, __FILE__, __LINE__, \
              #cond);                                                                         \
      fprintf(stderr, __VA_ARGS__);                                                           \
      fprintf(stderr, "\n");                                                                  \
    }                                                                                         \
  } while (0)

// A dense row-major F32 tensor.
struct Dense {
  std::vector<float> data;
  int64_t shape[4] = {1, 1, 1, 1};
  int rank = 4;
  hwyattn_tensor desc;
  Dense() = default;
  Dense(int rank, const int64_t* dims) { Reset(rank, dims); }
  void Reset(int r, const int64_t* dims);
  void FillRandom(std::mt19937* rng, float lo, float hi);
  hwyattn_tensor* t() { return &desc; }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
};

// t restricted to keys [begin, begin + count) along logical dimension 2 (the
// key axis of k, v; dimension 3 of a mask); count 0 gives shape 0 and data
// NULL, as an empty shard is described.
hwyattn_tensor KeySlice(const hwyattn_tensor& t, int dim, int64_t begin, int64_t count);

// Each rank's key count for a split of `total` keys with the given weights
// (one per rank, cycled if shorter); weights of 0 give empty shards.
std::vector<int64_t> SplitKeys(int64_t total, const std::vector<int>& weights);

// |got - want| <= rel * max(|want|, 1) element by element; reports the worst.
bool Close(const char* what, const float* got, const float* want, int64_t n, double rel);

// Whether every rank holds the same bytes (rank 0's are broadcast).
bool SameOnAllRanks(const void* data, size_t bytes);

// Sums failures over the ranks; prints the verdict on rank 0; returns the
// process exit code (the same on every rank).
int Finish(const char* name);

}  // namespace hwyattn_mpi_test

#endif  // HWYATTN_TESTS_MPI_MPI_TEST_UTIL_H_
