// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_ring_sdpa under mpirun -np 1..4: every rank builds the whole
// problem (same seed), takes its zigzag slice (hwyattn_mpi_ring_slice) of
// q, k and v, runs the ring, and compares its rows with the single-process
// hwyattn_sdpa of the whole sequence (2e-6 relative); two runs must give
// the same bits; bad input on one rank is an error on every rank. The layout
// helper itself is checked against hand-computed chunks.

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "hwyattn_mpi.h"
#include "tests/mpi/mpi_test_util.h"

namespace hwyattn_mpi_test {
namespace {

struct Case {
  const char* name;
  int64_t batch, q_heads, kv_heads, seq_len, head_dim, value_dim;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  int64_t window_left = 0, window_right = 0;
  float scale = 0.0f, softcap = 0.0f;
  bool alibi = false, sinks = false, kv_len = false, k_batch_1 = false;
  bool padded_kv = false;  // k, v slices with a row stride > their dim
};

struct Chunks {
  int64_t first[2], len[2];
  int64_t total() const { return len[0] + len[1]; }
};

Chunks MySlice(int64_t seq_len, int size = -1) {
  Chunks c;
  const hwyattn_status s = hwyattn_mpi_ring_slice(g_rank, size < 0 ? g_size : size, seq_len,
                                                  &c.first[0], &c.len[0], &c.first[1], &c.len[1]);
  EXPECT_MPI(s == HWYATTN_OK, "hwyattn_mpi_ring_slice(%d, %d, %lld): %s", g_rank, g_size,
             static_cast<long long>(seq_len), hwyattn_mpi_last_error());
  return c;
}

// A slice of a dense [B, H, L, X] tensor (logical) along L, as a dense
// [B, H, L_r, X] tensor whose rows are `row_stride` (>= X) floats apart.
struct SliceOf {
  std::vector<float> data;
  hwyattn_tensor desc;
  SliceOf(const Dense& whole, const Chunks& c, int64_t row_stride) {
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
};

struct Problem {
  Case c;
  Dense q, k, v, out_ref, lse_ref;
  std::vector<int32_t> kv_len;
  std::vector<float> slopes, sinks;

  explicit Problem(const Case& cs) : c(cs) {
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(c.name)));
    const int64_t kb = c.k_batch_1 ? 1 : c.batch;
    const int64_t qs[4] = {c.batch, c.q_heads, c.seq_len, c.head_dim};
    const int64_t ks[4] = {kb, c.kv_heads, c.seq_len, c.head_dim};
    const int64_t vs[4] = {kb, c.kv_heads, c.seq_len, c.value_dim};
    const int64_t os[4] = {c.batch, c.q_heads, c.seq_len, c.value_dim};
    q.Reset(4, qs);
    k.Reset(4, ks);
    v.Reset(4, vs);
    out_ref.Reset(4, os);
    lse_ref.Reset(3, os);
    q.FillRandom(&rng, -1.5f, 1.5f);
    k.FillRandom(&rng, -1.5f, 1.5f);
    v.FillRandom(&rng, -2.0f, 2.0f);
    if (c.kv_len) {
      for (int64_t b = 0; b < c.batch; ++b) {
        const int64_t choices[4] = {c.seq_len - 5, 3, c.seq_len, 0};
        kv_len.push_back(static_cast<int32_t>(choices[b % 4] < 0 ? 0 : choices[b % 4]));
      }
    }
    for (int64_t h = 0; h < c.q_heads; ++h) {
      slopes.push_back(0.5f / static_cast<float>(h + 1));
      sinks.push_back(h % 3 == 2 ? -INFINITY : 0.25f * static_cast<float>(h));
    }
    hwyattn_sdpa_options opts = Options(&lse_ref.desc);
    const hwyattn_status s = hwyattn_sdpa(q.t(), k.t(), v.t(), out_ref.t(), &opts);
    EXPECT_MPI(s == HWYATTN_OK, "%s: reference hwyattn_sdpa: %s", c.name, hwyattn_last_error());
  }

  hwyattn_sdpa_options Options(hwyattn_tensor* lse) const {
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
};

// This rank's rows of the reference, in slice order.
std::vector<float> ExpectedRows(const Dense& whole, const Chunks& c) {
  SliceOf s(whole, c, whole.shape[3]);
  return s.data;
}

void RunCase(const Case& c) {
  Problem p(c);
  const Chunks mine = MySlice(c.seq_len);
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
  const int64_t ls[4] = {c.batch, c.q_heads, c.seq_len, 1};
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
    hwyattn_mpi_ring_slice((g_rank - s + g_size) % g_size, g_size, c.seq_len, &f0, &l0, &f1, &l1);
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
    Case c{"causal_mha", 1, 4, 4, 64, 16, 16};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  add({"not_causal", 2, 2, 2, 40, 8, 8});
  {
    Case c{"causal_gqa_dv_uneven", 2, 8, 2, 53, 16, 24};  // 53: no 2N divides it
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    add(c);
  }
  {
    Case c{"causal_window", 1, 4, 2, 77, 8, 8};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.window_left = 11;
    add(c);
  }
  {
    Case c{"windows_not_causal", 1, 3, 3, 45, 8, 4};
    c.window_left = 7;
    c.window_right = 4;
    add(c);
  }
  {
    Case c{"kv_len_padding", 4, 2, 1, 30, 8, 8};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.kv_len = true;
    add(c);
  }
  {
    Case c{"not_causal_kv_len", 3, 2, 2, 26, 8, 8};
    c.kv_len = true;
    add(c);
  }
  {
    Case c{"modifiers", 2, 6, 3, 38, 16, 16};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.scale = 0.3f;
    c.softcap = 5.0f;
    c.alibi = c.sinks = true;
    add(c);
  }
  {
    Case c{"strided_kv_batch_broadcast", 2, 4, 2, 33, 8, 12};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.k_batch_1 = c.padded_kv = true;
    add(c);
  }
  {
    Case c{"shortest", 1, 2, 1, 9, 8, 8};  // chunks of one or two tokens up to 4 ranks
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  {
    Case c{"long_causal", 1, 2, 2, 300, 32, 32};
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

// Bad input on one rank (or on all): the same status on every rank, a
// message naming the rank, out untouched, and the communicator still in
// step (a valid call right after succeeds).
void BadInput() {
  Case c{"bad_input", 2, 4, 2, 24, 8, 8};
  c.causal = HWYATTN_CAUSAL_TOP_LEFT;
  c.sinks = true;
  const int last = g_size - 1;
  struct Scenario {
    const char* name;
    int bad_rank;  // whose message is named; -1: none in particular
    hwyattn_status want;
    const char* needle;  // in every rank's message
    bool needs_two_ranks;
  };
  const Scenario scenarios[] = {
      {"kv heads differ on the last rank", last, HWYATTN_INVALID_ARGUMENT, "kv heads", true},
      {"k NULL on the last rank", last, HWYATTN_INVALID_ARGUMENT, "k is NULL", false},
      {"last rank's slice one token short", -1, HWYATTN_INVALID_ARGUMENT, "zigzag", true},
      {"kv_len beyond the sequence", -1, HWYATTN_INVALID_ARGUMENT, "kv_len[1]", false},
      {"mask on rank 0", 0, HWYATTN_UNSUPPORTED, "mask", false},
      {"sinks differ on the last rank", last, HWYATTN_INVALID_ARGUMENT, "sinks", true},
      {"misaligned q on rank 0 (found by hwyattn_sdpa)", 0, HWYATTN_INVALID_ARGUMENT, "rank 0",
       false},
      {"one token per rank (L < 2N)", -1, HWYATTN_INVALID_ARGUMENT, "needs at least", false},
      {"causal out of range", -1, HWYATTN_INVALID_ARGUMENT, "causal", false},
      {"the last rank calls hwyattn_mpi_sharded_sdpa", last, HWYATTN_INVALID_ARGUMENT, "function",
       true},
      {"k dtype differs on the last rank", last, HWYATTN_INVALID_ARGUMENT, "k: dtype", true},
  };
  const int count = static_cast<int>(sizeof(scenarios) / sizeof(scenarios[0]));
  for (int sc = 0; sc < count; ++sc) {
    const Scenario& scen = scenarios[sc];
    if (scen.needs_two_ranks && g_size == 1) continue;  // one rank cannot disagree with itself
    Problem p(c);
    const bool bad_here = g_rank == scen.bad_rank;
    Chunks mine = MySlice(c.seq_len);
    if (sc == 2 && g_rank == last) --mine.len[1];  // the error may name another rank
    if (sc == 7) mine = Chunks{{g_rank, 0}, {1, 0}};
    SliceOf q(p.q, mine, c.head_dim), k(p.k, mine, c.head_dim), v(p.v, mine, c.value_dim);
    const int64_t os[4] = {c.batch, c.q_heads, mine.total(), c.value_dim};
    Dense out(4, os), lse(3, os);
    for (float& x : out.data) x = 7.0f;
    for (float& x : lse.data) x = 7.0f;
    hwyattn_sdpa_options opts = p.Options(&lse.desc);
    const hwyattn_tensor* k_arg = &k.desc;
    std::vector<int32_t> kv_len = {3, static_cast<int32_t>(c.seq_len + 1)};
    std::vector<float> sinks = p.sinks;
    std::vector<float> misaligned;
    std::vector<uint8_t> mask_data(static_cast<size_t>(mine.total() * c.seq_len), 1);
    hwyattn_tensor mask;
    const int64_t ms[2] = {mine.total(), c.seq_len};
    hwyattn_tensor_contiguous(&mask, mask_data.data(), HWYATTN_BOOL, 2, ms);
    switch (sc) {
      case 0:
        if (bad_here) k.desc.shape[1] = v.desc.shape[1] = 1;
        break;
      case 1:
        if (bad_here) k_arg = nullptr;
        break;
      case 3: opts.kv_len = kv_len.data(); break;
      case 4:
        if (bad_here) opts.mask = &mask;
        break;
      case 5:
        if (bad_here) sinks[1] += 1.0f;
        opts.sinks = sinks.data();
        break;
      case 6:
        if (bad_here) {  // a copy of the slice one byte off its alignment
          misaligned.resize(q.data.size() + 1);
          q.desc.data = reinterpret_cast<char*>(misaligned.data()) + 1;
        }
        break;
      case 8: opts.causal = static_cast<hwyattn_causal>(5); break;
      case 10:
        if (bad_here) k.desc.dtype = HWYATTN_BF16;  // same bytes, read as twice the elements
        break;
    }
    hwyattn_status s;
    if (sc == 9 && bad_here) {
      s = hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, &q.desc, k_arg, &v.desc, out.t(), &opts);
    } else {
      s = hwyattn_mpi_ring_sdpa(MPI_COMM_WORLD, &q.desc, k_arg, &v.desc, out.t(), &opts);
    }
    const std::string message = hwyattn_mpi_last_error();
    EXPECT_MPI(s == scen.want, "%s: status %d, expected %d (%s)", scen.name, static_cast<int>(s),
               static_cast<int>(scen.want), message.c_str());
    EXPECT_MPI(message.find(scen.needle) != std::string::npos || (sc == 6 && !bad_here),
               "%s: message \"%s\" lacks \"%s\"", scen.name, message.c_str(), scen.needle);
    if (scen.bad_rank >= 0) {
      const std::string who = "rank " + std::to_string(scen.bad_rank);
      EXPECT_MPI(message.find(who) != std::string::npos, "%s: message \"%s\" does not name %s",
                 scen.name, message.c_str(), who.c_str());
    }
    bool untouched = true;
    for (float x : out.data) untouched &= x == 7.0f;
    for (float x : lse.data) untouched &= x == 7.0f;
    EXPECT_MPI(untouched, "%s: out or lse was written", scen.name);

    // The communicator is still in step: a valid call succeeds.
    const Chunks good = MySlice(c.seq_len);
    SliceOf gq(p.q, good, c.head_dim), gk(p.k, good, c.head_dim), gv(p.v, good, c.value_dim);
    const int64_t gs[4] = {c.batch, c.q_heads, good.total(), c.value_dim};
    Dense gout(4, gs), glse(3, gs);
    opts = p.Options(&glse.desc);
    const hwyattn_status again =
        hwyattn_mpi_ring_sdpa(MPI_COMM_WORLD, &gq.desc, &gk.desc, &gv.desc, gout.t(), &opts);
    EXPECT_MPI(again == HWYATTN_OK, "%s, then a valid call: %s", scen.name,
               hwyattn_mpi_last_error());
  }
}

}  // namespace
}  // namespace hwyattn_mpi_test

int main(int argc, char** argv) {
  using namespace hwyattn_mpi_test;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  Layout();
  for (const Case& c : Cases()) RunCase(c);
  BadInput();
  const int code = Finish("ring_sdpa_test");
  MPI_Finalize();
  return code;
}
