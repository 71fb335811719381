// SPDX-License-Identifier: Apache-2.0

#include "tests/mpi/mpi_test_util.h"

#include <math.h>
#include <string.h>

namespace hwyattn_mpi_test {

int g_rank = 0, g_size = 1, g_failures = 0;

void Dense::Reset(int r, const int64_t* dims) {
  rank = r;
  int64_t n = 1;
  for (int i = 0; i < 4; ++i) shape[i] = 1;
  for (int i = 0; i < r; ++i) {
    shape[4 - r + i] = dims[i];
    n *= dims[i];
  }
  data.assign(static_cast<size_t>(n), 0.0f);
  hwyattn_tensor_contiguous(&desc, data.data(), HWYATTN_F32, r, dims);
}

void Dense::FillRandom(std::mt19937* rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : data) x = dist(*rng);
}

hwyattn_tensor KeySlice(const hwyattn_tensor& t, int dim, int64_t begin, int64_t count) {
  hwyattn_tensor s = t;
  const int axis = dim - (4 - t.rank);
  const int64_t elem = t.dtype == HWYATTN_F32 ? 4 : t.dtype == HWYATTN_BOOL ? 1 : 2;
  s.shape[axis] = count;
  s.data = count == 0 ? nullptr : static_cast<char*>(t.data) + begin * t.stride[axis] * elem;
  return s;
}

std::vector<int64_t> SplitKeys(int64_t total, const std::vector<int>& weights) {
  std::vector<int64_t> w(static_cast<size_t>(g_size));
  int64_t sum = 0;
  for (int r = 0; r < g_size; ++r) {
    w[static_cast<size_t>(r)] = weights[static_cast<size_t>(r) % weights.size()];
    sum += w[static_cast<size_t>(r)];
  }
  if (sum == 0) {
    w[0] = 1;
    sum = 1;
  }
  std::vector<int64_t> lens(static_cast<size_t>(g_size));
  int64_t given = 0, acc = 0;
  for (int r = 0; r < g_size; ++r) {
    acc += w[static_cast<size_t>(r)];
    const int64_t end = total * acc / sum;
    lens[static_cast<size_t>(r)] = end - given;
    given = end;
  }
  return lens;
}

bool Close(const char* what, const float* got, const float* want, int64_t n, double rel) {
  double worst = 0.0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (isinf(w) && g == w) continue;
    const double err = fabs(g - w) / fmax(fabs(w), 1.0);
    if (!(err <= worst)) {  // NaN too
      worst = err;
      at = i;
    }
  }
  if (at >= 0 && !(worst <= rel)) {
    fprintf(stderr,
            "rank %d: %s: element %lld is %.9g, expected %.9g (relative error %.3g > %.3g)\n",
            g_rank, what, static_cast<long long>(at), got[at], want[at], worst, rel);
    return false;
  }
  return true;
}

bool SameOnAllRanks(const void* data, size_t bytes) {
  std::vector<char> root(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  MPI_Bcast(root.data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  int same = memcmp(root.data(), data, bytes) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

int Finish(const char* name) {
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf("%s on %d ranks: %s (%d failures)\n", name, g_size, total == 0 ? "PASSED" : "FAILED",
           total);
  }
  return total == 0 ? 0 : 1;
}

}  // namespace hwyattn_mpi_test
