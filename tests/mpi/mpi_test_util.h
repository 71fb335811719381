// SPDX-License-Identifier: Apache-2.0
//
// Scaffolding for the MPI tests (run under mpirun, one process per rank):
// failure counting that every rank agrees on, dense random problems with
// their single-process hwyattn_sdpa result, and comparisons.
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

// MPI_Init, then g_rank and g_size of MPI_COMM_WORLD.
void Init(int* argc, char*** argv);

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

// One attention problem: sizes and score rules (the whole problem's, as
// hwyattn_sdpa would take them in one process).
struct Case {
  const char* name;
  int64_t batch, q_heads, kv_heads, q_len, k_len, head_dim, value_dim;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  int64_t window_left = 0, window_right = 0;
  float scale = 0.0f, softcap = 0.0f;
  bool alibi = false, sinks = false, kv_len = false, k_batch_1 = false;
  enum { kNoMask, kBoolMask, kF32Mask } mask = kNoMask;
  bool padded_kv = false;  // ring tests: k, v slices with a row stride > their dim
};

// A Case of self attention over one sequence of seq_len tokens (the ring's).
Case SelfCase(const char* name, int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t seq_len,
              int64_t head_dim, int64_t value_dim);

// A case's data, built the same on every rank (seeded by the name), and
// the single-process hwyattn_sdpa of the whole problem (out_ref, lse_ref).
struct Problem {
  Case c;
  Dense q, k, v, out_ref, lse_ref, mask_f32;
  std::vector<uint8_t> mask_bool;
  hwyattn_tensor mask;  // the whole problem's, when c.mask != kNoMask
  std::vector<int32_t> kv_len;
  std::vector<float> slopes, sinks;

  explicit Problem(const Case& cs);
  Problem(const Problem&) = delete;
  // The case's options (no mask: each test slices its own), with lse.
  hwyattn_sdpa_options Options(hwyattn_tensor* lse) const;
};

// t restricted to keys [begin, begin + count) along logical dimension 2 (the
// key axis of k, v; dimension 3 of a mask); count 0 gives shape 0 and data
// NULL, as an empty shard is described.
hwyattn_tensor KeySlice(const hwyattn_tensor& t, int dim, int64_t begin, int64_t count);

// One rank's two chunks of a ring's zigzag layout (hwyattn_mpi_ring_slice).
struct Chunks {
  int64_t first[2], len[2];
  int64_t total() const { return len[0] + len[1]; }
};

// This rank's chunks of seq_len tokens over `size` ranks (default: all).
Chunks MySlice(int64_t seq_len, int size = -1);

// A slice of a dense [B, H, L, X] tensor (logical) along L, as a dense
// [B, H, L_r, X] tensor whose rows are `row_stride` (>= X) floats apart.
struct SliceOf {
  std::vector<float> data;
  hwyattn_tensor desc;
  SliceOf(const Dense& whole, const Chunks& c, int64_t row_stride);
};

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
