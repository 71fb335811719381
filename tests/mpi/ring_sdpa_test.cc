// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_ring_sdpa under mpirun -np 1..4: every rank builds the whole
// problem (same seed), takes its zigzag slice (hwyattn_mpi_ring_slice) of
// q, k and v, runs the ring, and compares its rows with the single-process
// hwyattn_sdpa of the whole sequence (2e-6 relative); two runs must give
// the same bits. The layout helper itself is checked against hand-computed
// chunks. (Bad input: hostile_input_test.)

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "hwyattn_mpi.h"
#include "tests/mpi/mpi_test_util.h"

namespace hwyattn_mpi_test {
namespace {

// This rank's rows of the reference, in slice order.
std::vector<float> ExpectedRows(const Dense& whole, const Chunks& c) {
  SliceOf s(whole, c, whole.shape[3]);
  return s.data;
}

void RunCase(const Case& c) {
  Problem p(c);
  const Chunks mine = MySlice(c.q_len);
  SliceOf q(p.q, mine, c.head_dim);
  SliceOf k(p.k, mine, c.head_dim + (c.padded_kv ? 3 : 0));
  SliceOf v(p.v, mine, c.value_dim + (c.padded_kv ? 5 : 0));
  const int64_t os[4] = {c.batch, c.q_heads, mine.total(), c.value_dim};
  Dense out[2], lse[2];
  for (int run = 0; run < 2; ++run) {
    out[run].Reset(4, os);
    lse[run].Reset(3, os);
    hwyattn_sdpa_options opts = p.Options(&lse[run].desc);
    const hwyattn_status s =
        hwyattn_mpi_ring_sdpa(MPI_COMM_WORLD, &q.desc, &k.desc, &v.desc, out[run].t(), &opts);
    EXPECT_MPI(s == HWYATTN_OK, "%s: %s", c.name, hwyattn_mpi_last_error());
  }
  // The whole lse [B, Hq, L] sliced as a [B, Hq, L, 1] tensor.
  Dense lse_whole;
  const int64_t ls[4] = {c.batch, c.q_heads, c.q_len, 1};
  lse_whole.Reset(4, ls);
  lse_whole.data = p.lse_ref.data;
  const std::vector<float> want_out = ExpectedRows(p.out_ref, mine);
  const std::vector<float> want_lse = ExpectedRows(lse_whole, mine);
  char what[160];
  snprintf(what, sizeof(what), "%s (this rank: tokens %lld+%lld, %lld+%lld): out", c.name,
           static_cast<long long>(mine.first[0]), static_cast<long long>(mine.len[0]),
           static_cast<long long>(mine.first[1]), static_cast<long long>(mine.len[1]));
  EXPECT_MPI(Close(what, out[0].data.data(), want_out.data(), out[0].size(), 2e-6),
             "against hwyattn_sdpa");
  snprintf(what, sizeof(what), "%s: lse", c.name);
  EXPECT_MPI(Close(what, lse[0].data.data(), want_lse.data(), lse[0].size(), 2e-6),
             "against hwyattn_sdpa");
  EXPECT_MPI(memcmp(out[0].data.data(), out[1].data.data(), out[0].data.size() * 4) == 0 &&
                 memcmp(lse[0].data.data(), lse[1].data.data(), lse[0].data.size() * 4) == 0,
             "%s: two runs differ", c.name);

  // What the ring says it sent: the slices of ranks r, r-1, ..., r-N+2,
  // each (Bk * Hkv * D + Bv * Hkv * Dv) floats per token.
  hwyattn_mpi_ring_stats stats;
  hwyattn_mpi_ring_last_stats(&stats);
  const int64_t kb = c.k_batch_1 ? 1 : c.batch;
  int64_t want_bytes = 0;
  for (int s = 0; s + 1 < g_size; ++s) {
    int64_t f0, l0, f1, l1;
    hwyattn_mpi_ring_slice((g_rank - s + g_size) % g_size, g_size, c.q_len, &f0, &l0, &f1, &l1);
    want_bytes += (l0 + l1) * kb * c.kv_heads * (c.head_dim + c.value_dim) * 4;
  }
  EXPECT_MPI(stats.steps == g_size && stats.bytes_sent == want_bytes &&
                 stats.compute_seconds > 0.0 && stats.total_seconds >= stats.compute_seconds,
             "%s: stats: steps %d, bytes_sent %lld (want %lld), compute %g s, total %g s", c.name,
             stats.steps, static_cast<long long>(stats.bytes_sent),
             static_cast<long long>(want_bytes), stats.compute_seconds, stats.total_seconds);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  {
    Case c = SelfCase("causal_mha", 1, 4, 4, 64, 16, 16);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  add(SelfCase("not_causal", 2, 2, 2, 40, 8, 8));
  {
    Case c = SelfCase("causal_gqa_dv_uneven", 2, 8, 2, 53, 16, 24);  // 53: no 2N divides it
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    add(c);
  }
  {
    Case c = SelfCase("causal_window", 1, 4, 2, 77, 8, 8);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.window_left = 11;
    add(c);
  }
  {
    Case c = SelfCase("windows_not_causal", 1, 3, 3, 45, 8, 4);
    c.window_left = 7;
    c.window_right = 4;
    add(c);
  }
  {
    Case c = SelfCase("kv_len_padding", 4, 2, 1, 30, 8, 8);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.kv_len = true;
    add(c);
  }
  {
    Case c = SelfCase("not_causal_kv_len", 3, 2, 2, 26, 8, 8);
    c.kv_len = true;
    add(c);
  }
  {
    Case c = SelfCase("modifiers", 2, 6, 3, 38, 16, 16);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.scale = 0.3f;
    c.softcap = 5.0f;
    c.alibi = c.sinks = true;
    add(c);
  }
  {
    Case c = SelfCase("strided_kv_batch_broadcast", 2, 4, 2, 33, 8, 12);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.k_batch_1 = c.padded_kv = true;
    add(c);
  }
  {
    Case c = SelfCase("shortest", 1, 2, 1, 9, 8, 8);  // chunks of one or two tokens up to 4 ranks
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  {
    Case c = SelfCase("long_causal", 1, 2, 2, 300, 32, 32);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  return cases;
}

// The layout helper against hand-computed chunks and its own rules: chunks
// tile [0, L) in order, lengths differ by at most one, rank r holds chunks r
// and 2N - 1 - r.
void Layout() {
  int64_t f0 = -1, l0 = -1, f1 = -1, l1 = -1;
  // L = 10, N = 2: chunks [0,2) [2,5) [5,7) [7,10).
  EXPECT_MPI(hwyattn_mpi_ring_slice(0, 2, 10, &f0, &l0, &f1, &l1) == HWYATTN_OK && f0 == 0 &&
                 l0 == 2 && f1 == 7 && l1 == 3,
             "L=10 N=2 rank 0: %lld+%lld %lld+%lld", (long long)f0, (long long)l0, (long long)f1,
             (long long)l1);
  EXPECT_MPI(hwyattn_mpi_ring_slice(1, 2, 10, &f0, &l0, &f1, &l1) == HWYATTN_OK && f0 == 2 &&
                 l0 == 3 && f1 == 5 && l1 == 2,
             "L=10 N=2 rank 1: %lld+%lld %lld+%lld", (long long)f0, (long long)l0, (long long)f1,
             (long long)l1);
  // L = 4096, N = 2: four chunks of 1024.
  EXPECT_MPI(hwyattn_mpi_ring_slice(1, 2, 4096, &f0, &l0, &f1, &l1) == HWYATTN_OK && f0 == 1024 &&
                 l0 == 1024 && f1 == 2048 && l1 == 1024,
             "L=4096 N=2 rank 1");
  for (int n = 1; n <= 5; ++n) {
    for (int64_t len : {int64_t{2} * n, int64_t{2} * n + 1, int64_t{97}, int64_t{1000003}}) {
      std::vector<int64_t> start(2 * n, -1), size(2 * n, -1);
      for (int r = 0; r < n; ++r) {
        EXPECT_MPI(hwyattn_mpi_ring_slice(r, n, len, &f0, &l0, &f1, &l1) == HWYATTN_OK, "%s",
                   hwyattn_mpi_last_error());
        start[r] = f0;
        size[r] = l0;
        start[2 * n - 1 - r] = f1;
        size[2 * n - 1 - r] = l1;
      }
      int64_t next = 0, lo = len, hi = 0;
      for (int ch = 0; ch < 2 * n; ++ch) {
        EXPECT_MPI(start[ch] == next, "L=%lld N=%d: chunk %d starts at %lld, not %lld",
                   (long long)len, n, ch, (long long)start[ch], (long long)next);
        next = start[ch] + size[ch];
        lo = size[ch] < lo ? size[ch] : lo;
        hi = size[ch] > hi ? size[ch] : hi;
      }
      EXPECT_MPI(next == len && lo >= 1 && hi - lo <= 1,
                 "L=%lld N=%d: chunks end at %lld, "
                 "lengths %lld..%lld",
                 (long long)len, n, (long long)next, (long long)lo, (long long)hi);
    }
  }
  EXPECT_MPI(hwyattn_mpi_ring_slice(0, 3, 5, &f0, &l0, &f1, &l1) == HWYATTN_INVALID_ARGUMENT &&
                 strstr(hwyattn_mpi_last_error(), "seq_len is 5") != nullptr,
             "L < 2N: %s", hwyattn_mpi_last_error());
  EXPECT_MPI(hwyattn_mpi_ring_slice(3, 3, 50, &f0, &l0, &f1, &l1) == HWYATTN_INVALID_ARGUMENT &&
                 strstr(hwyattn_mpi_last_error(), "rank is 3") != nullptr,
             "rank out of range: %s", hwyattn_mpi_last_error());
  EXPECT_MPI(hwyattn_mpi_ring_slice(0, 1, 50, nullptr, &l0, &f1, &l1) == HWYATTN_INVALID_ARGUMENT,
             "NULL output");
}

}  // namespace
}  // namespace hwyattn_mpi_test

int main(int argc, char** argv) {
  using namespace hwyattn_mpi_test;
  Init(&argc, &argv);
  Layout();
  for (const Case& c : Cases()) RunCase(c);
  const int code = Finish("ring_sdpa_test");
  MPI_Finalize();
  return code;
}
