// SPDX-License-Identifier: Apache-2.0

#include "tests/mpi/mpi_test_util.h"

#include "hwyattn_mpi.h"

#include <math.h>
#include <string.h>

#include <functional>

namespace hwyattn_mpi_test {

int g_rank = 0, g_size = 1, g_failures = 0;

void Init(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

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

Case SelfCase(const char* name, int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t seq_len,
              int64_t head_dim, int64_t value_dim) {
  return Case{name, batch, q_heads, kv_heads, seq_len, seq_len, head_dim, value_dim};
}

Problem::Problem(const Case& cs) : c(cs) {
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(c.name)));
  const int64_t kb = c.k_batch_1 ? 1 : c.batch;
  const int64_t qs[4] = {c.batch, c.q_heads, c.q_len, c.head_dim};
  const int64_t ks[4] = {kb, c.kv_heads, c.k_len, c.head_dim};
  const int64_t vs[4] = {kb, c.kv_heads, c.k_len, c.value_dim};
  const int64_t os[4] = {c.batch, c.q_heads, c.q_len, c.value_dim};
  q.Reset(4, qs);
  k.Reset(4, ks);
  v.Reset(4, vs);
  out_ref.Reset(4, os);
  lse_ref.Reset(3, os);
  q.FillRandom(&rng, -1.5f, 1.5f);
  k.FillRandom(&rng, -1.5f, 1.5f);
  v.FillRandom(&rng, -2.0f, 2.0f);
  if (c.mask == Case::kBoolMask) {  // [B, 1, Lq, Lk], about 1 in 5 blocked
    const int64_t ms[4] = {c.batch, 1, c.q_len, c.k_len};
    mask_bool.resize(static_cast<size_t>(c.batch * c.q_len * c.k_len));
    std::uniform_int_distribution<int> coin(0, 4);
    for (uint8_t& m : mask_bool) m = coin(rng) != 0;
    hwyattn_tensor_contiguous(&mask, mask_bool.data(), HWYATTN_BOOL, 4, ms);
  } else if (c.mask == Case::kF32Mask) {  // [Hq, 1, Lk] (rank 3), some -inf
    const int64_t ms[3] = {c.q_heads, 1, c.k_len};
    mask_f32.Reset(3, ms);
    mask_f32.FillRandom(&rng, -2.0f, 1.0f);
    for (int64_t i = 0; i < mask_f32.size(); i += 7)
      mask_f32.data[static_cast<size_t>(i)] = -INFINITY;
    mask = mask_f32.desc;
  }
  if (c.kv_len) {
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t choices[4] = {c.k_len - 9, 4, c.k_len, 0};
      kv_len.push_back(static_cast<int32_t>(choices[b % 4] < 0 ? 0 : choices[b % 4]));
    }
  }
  for (int64_t h = 0; h < c.q_heads; ++h) {
    slopes.push_back(0.5f / static_cast<float>(h + 1));
    sinks.push_back(h % 3 == 2 ? -INFINITY : 0.25f * static_cast<float>(h));
  }
  hwyattn_sdpa_options opts = Options(&lse_ref.desc);
  if (c.mask != Case::kNoMask) opts.mask = &mask;
  const hwyattn_status s = hwyattn_sdpa(q.t(), k.t(), v.t(), out_ref.t(), &opts);
  EXPECT_MPI(s == HWYATTN_OK, "%s: reference hwyattn_sdpa: %s", c.name, hwyattn_last_error());
}

hwyattn_sdpa_options Problem::Options(hwyattn_tensor* lse) const {
  hwyattn_sdpa_options o;
  hwyattn_sdpa_options_init(&o);
  o.scale = c.scale;
  o.causal = c.causal;
  o.window_left = c.window_left;
  o.window_right = c.window_right;
  o.softcap = c.softcap;
  if (c.alibi) o.alibi_slopes = slopes.data();
  if (c.sinks) o.sinks = sinks.data();
  if (c.kv_len) o.kv_len = kv_len.data();
  o.lse = lse;
  return o;
}

hwyattn_tensor KeySlice(const hwyattn_tensor& t, int dim, int64_t begin, int64_t count) {
  hwyattn_tensor s = t;
  const int axis = dim - (4 - t.rank);
  const int64_t elem = t.dtype == HWYATTN_F32 ? 4 : t.dtype == HWYATTN_BOOL ? 1 : 2;
  s.shape[axis] = count;
  s.data = count == 0 ? nullptr : static_cast<char*>(t.data) + begin * t.stride[axis] * elem;
  return s;
}

Chunks MySlice(int64_t seq_len, int size) {
  Chunks c;
  const hwyattn_status s = hwyattn_mpi_ring_slice(g_rank, size < 0 ? g_size : size, seq_len,
                                                  &c.first[0], &c.len[0], &c.first[1], &c.len[1]);
  EXPECT_MPI(s == HWYATTN_OK, "hwyattn_mpi_ring_slice(%d, %d, %lld): %s", g_rank, g_size,
             static_cast<long long>(seq_len), hwyattn_mpi_last_error());
  return c;
}

SliceOf::SliceOf(const Dense& whole, const Chunks& c, int64_t row_stride) {
  const int64_t b = whole.shape[0], h = whole.shape[1], l = whole.shape[2], x = whole.shape[3];
  const int64_t lr = c.total();
  data.assign(static_cast<size_t>(b * h * lr * row_stride), 0.0f);
  for (int64_t i = 0; i < b * h; ++i) {
    int64_t row = 0;
    for (int a = 0; a < 2; ++a) {
      for (int64_t t = c.first[a]; t < c.first[a] + c.len[a]; ++t, ++row) {
        memcpy(&data[static_cast<size_t>((i * lr + row) * row_stride)],
               &whole.data[static_cast<size_t>((i * l + t) * x)], static_cast<size_t>(x) * 4);
      }
    }
  }
  const int64_t shape[4] = {b, h, lr, x};
  hwyattn_tensor_contiguous(&desc, data.data(), HWYATTN_F32, 4, shape);
  desc.stride[2] = row_stride;
  desc.stride[1] = lr * row_stride;
  desc.stride[0] = h * lr * row_stride;
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
