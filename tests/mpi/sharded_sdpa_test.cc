// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_sharded_sdpa under mpirun -np 1..4: every case splits the keys
// of one problem over the ranks in several ways (even, uneven, with empty
// shards) and compares each rank's result with the single-process
// hwyattn_sdpa of the whole problem (2e-6 relative), checks that two runs
// and all ranks give the same bits, and that bad input on one rank is an
// error on every rank.

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
  int64_t batch, q_heads, kv_heads, q_len, k_len, head_dim, value_dim;
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  int64_t window_left = 0, window_right = 0;
  float scale = 0.0f, softcap = 0.0f;
  bool alibi = false, sinks = false, kv_len = false, k_batch_1 = false;
  enum { kNoMask, kBoolMask, kF32Mask } mask = kNoMask;
};

// The key splits every case runs with (weights per rank, cycled): even,
// uneven with an empty shard, rank 0 empty, and the keys on the last rank.
const std::vector<std::vector<int>> kSplits = {
    {1}, {1, 3, 0, 2}, {0, 1}, {2, 1, 1, 0}, {0, 0, 0, 1}};

// One problem, built the same on every rank (same seed).
struct Problem {
  Case c;
  Dense q, k, v, out_ref, lse_ref, mask_f32;
  std::vector<uint8_t> mask_bool;
  hwyattn_tensor mask;
  std::vector<int32_t> kv_len;
  std::vector<float> slopes, sinks;
  int64_t mask_shape[4] = {1, 1, 1, 1};

  explicit Problem(const Case& cs) : c(cs) {
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
      memcpy(mask_shape, ms, sizeof(ms));
      mask_bool.resize(static_cast<size_t>(c.batch * c.q_len * c.k_len));
      std::uniform_int_distribution<int> coin(0, 4);
      for (uint8_t& m : mask_bool) m = coin(rng) != 0;
      hwyattn_tensor_contiguous(&mask, mask_bool.data(), HWYATTN_BOOL, 4, ms);
    } else if (c.mask == Case::kF32Mask) {  // [Hq, 1, Lk] (rank 3), some -inf
      const int64_t ms[3] = {c.q_heads, 1, c.k_len};
      mask_shape[1] = c.q_heads;
      mask_shape[3] = c.k_len;
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

void RunCase(const Case& c) {
  Problem p(c);
  for (size_t split = 0; split < kSplits.size(); ++split) {
    const std::vector<int64_t> lens = SplitKeys(c.k_len, kSplits[split]);
    int64_t offset = 0;
    for (int r = 0; r < g_rank; ++r) offset += lens[static_cast<size_t>(r)];
    const int64_t mine = lens[static_cast<size_t>(g_rank)];
    hwyattn_tensor k = KeySlice(p.k.desc, 2, offset, mine);
    hwyattn_tensor v = KeySlice(p.v.desc, 2, offset, mine);
    hwyattn_tensor mask;
    if (c.mask != Case::kNoMask) mask = KeySlice(p.mask, 3, offset, mine);

    Dense out[2], lse[2];
    for (int run = 0; run < 2; ++run) {
      const int64_t os[4] = {c.batch, c.q_heads, c.q_len, c.value_dim};
      out[run].Reset(4, os);
      lse[run].Reset(3, os);
      hwyattn_sdpa_options opts = p.Options(&lse[run].desc);
      if (c.mask != Case::kNoMask) opts.mask = &mask;
      const hwyattn_status s =
          hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, p.q.t(), &k, &v, out[run].t(), &opts);
      EXPECT_MPI(s == HWYATTN_OK, "%s, split %zu: %s", c.name, split, hwyattn_mpi_last_error());
    }
    char what[128];
    snprintf(what, sizeof(what), "%s, split %zu (this rank: keys %lld..%lld): out", c.name, split,
             static_cast<long long>(offset), static_cast<long long>(offset + mine));
    EXPECT_MPI(Close(what, out[0].data.data(), p.out_ref.data.data(), out[0].size(), 2e-6),
               "against hwyattn_sdpa");
    snprintf(what, sizeof(what), "%s, split %zu: lse", c.name, split);
    EXPECT_MPI(Close(what, lse[0].data.data(), p.lse_ref.data.data(), lse[0].size(), 2e-6),
               "against hwyattn_sdpa");
    EXPECT_MPI(memcmp(out[0].data.data(), out[1].data.data(), out[0].data.size() * 4) == 0 &&
                   memcmp(lse[0].data.data(), lse[1].data.data(), lse[0].data.size() * 4) == 0,
               "%s, split %zu: two runs differ", c.name, split);
    EXPECT_MPI(SameOnAllRanks(out[0].data.data(), out[0].data.size() * 4) &&
                   SameOnAllRanks(lse[0].data.data(), lse[0].data.size() * 4),
               "%s, split %zu: ranks differ", c.name, split);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  add({"mha", 2, 4, 4, 3, 37, 16, 16});
  {
    Case c{"gqa_bottom_right_dv", 2, 8, 2, 5, 41, 16, 24};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    add(c);
  }
  {
    Case c{"prefill_top_left", 1, 4, 2, 29, 29, 8, 8};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    add(c);
  }
  {
    Case c{"chunk_bottom_right_window", 2, 2, 1, 13, 40, 8, 8};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    c.window_left = 9;
    add(c);
  }
  {
    Case c{"windows_not_causal", 1, 3, 3, 20, 50, 8, 4};
    c.window_left = 7;
    c.window_right = 3;
    add(c);
  }
  {
    Case c{"kv_len_padding", 4, 4, 2, 3, 45, 8, 8};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    c.kv_len = true;
    add(c);
  }
  {
    Case c{"modifiers", 2, 6, 3, 4, 38, 16, 16};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    c.scale = 0.3f;
    c.softcap = 5.0f;
    c.alibi = c.sinks = true;
    add(c);
  }
  {
    Case c{"alibi_prefill_top_left", 1, 2, 1, 33, 33, 8, 8};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.alibi = true;
    add(c);
  }
  {
    Case c{"bool_mask_top_left", 2, 2, 2, 17, 23, 8, 8};
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.mask = Case::kBoolMask;
    add(c);
  }
  {
    Case c{"f32_mask_window", 1, 4, 2, 9, 31, 8, 8};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    c.window_left = 12;
    c.mask = Case::kF32Mask;
    add(c);
  }
  {
    Case c{"decode", 3, 8, 1, 1, 300, 32, 32};
    c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    c.kv_len = true;
    c.sinks = true;
    add(c);
  }
  {
    Case c{"k_batch_broadcast", 2, 4, 2, 6, 19, 8, 8};
    c.k_batch_1 = true;
    add(c);
  }
  return cases;
}

// Bad input on one rank (or on all): the same status on every rank, a
// message naming the rank, out untouched, and the communicator still usable
// (a valid call right after succeeds).
void BadInput() {
  Case c{"bad_input", 2, 4, 2, 3, 24, 8, 8};
  c.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  c.sinks = true;
  const int last = g_size - 1;
  struct Scenario {
    const char* name;
    int bad_rank;  // whose message is named; -1: none in particular
    hwyattn_status want;
    const char* needle;  // in every rank's message
  };
  const Scenario scenarios[] = {
      {"kv heads differ on the last rank", last, HWYATTN_INVALID_ARGUMENT, "kv heads"},
      {"k NULL on the last rank", last, HWYATTN_INVALID_ARGUMENT, "k is NULL"},
      {"kv_len beyond all keys", -1, HWYATTN_INVALID_ARGUMENT, "kv_len[1]"},
      {"every shard empty", -1, HWYATTN_INVALID_ARGUMENT, "every rank's shard is empty"},
      {"weights on rank 0", 0, HWYATTN_UNSUPPORTED, "weights"},
      {"sinks differ on the last rank", last, HWYATTN_INVALID_ARGUMENT, "sinks"},
      {"misaligned k on rank 0 (found by hwyattn_sdpa)", 0, HWYATTN_INVALID_ARGUMENT, "rank 0"},
      {"causal out of range", -1, HWYATTN_INVALID_ARGUMENT, "causal"},
  };
  for (int sc = 0; sc < static_cast<int>(sizeof(scenarios) / sizeof(scenarios[0])); ++sc) {
    const Scenario& scen = scenarios[sc];
    if ((sc == 0 || sc == 5) && g_size == 1) continue;  // one rank cannot disagree with itself
    Problem p(c);
    const std::vector<int64_t> lens = SplitKeys(c.k_len, {1});
    int64_t offset = 0;
    for (int r = 0; r < g_rank; ++r) offset += lens[static_cast<size_t>(r)];
    const int64_t mine = lens[static_cast<size_t>(g_rank)];
    hwyattn_tensor k = KeySlice(p.k.desc, 2, offset, mine);
    hwyattn_tensor v = KeySlice(p.v.desc, 2, offset, mine);
    const int64_t os[4] = {c.batch, c.q_heads, c.q_len, c.value_dim};
    Dense out(4, os), lse(3, os), weights;
    for (float& x : out.data) x = 7.0f;
    for (float& x : lse.data) x = 7.0f;
    hwyattn_sdpa_options opts = p.Options(&lse.desc);
    hwyattn_tensor q = p.q.desc;
    const hwyattn_tensor* k_arg = &k;
    std::vector<int32_t> kv_len = {3, static_cast<int32_t>(c.k_len + 1)};
    std::vector<float> sinks = p.sinks;
    std::vector<float> misaligned;
    const bool bad_here = g_rank == scen.bad_rank;
    switch (sc) {
      case 0:
        if (bad_here) k.shape[1] = v.shape[1] = 1;
        break;
      case 1:
        if (bad_here) k_arg = nullptr;
        break;
      case 2: opts.kv_len = kv_len.data(); break;
      case 3:
        k = KeySlice(p.k.desc, 2, 0, 0);
        v = KeySlice(p.v.desc, 2, 0, 0);
        break;
      case 4:
        if (bad_here) {
          const int64_t ws[4] = {c.batch, c.q_heads, c.q_len, c.k_len};
          weights.Reset(4, ws);
          opts.weights = weights.t();
        }
        break;
      case 5:
        if (bad_here) sinks[1] += 1.0f;
        opts.sinks = sinks.data();
        break;
      case 6:
        if (bad_here) {  // a copy of the shard one byte off its alignment
          misaligned.resize(static_cast<size_t>(p.k.size()) + 1);
          k.data = reinterpret_cast<char*>(misaligned.data()) + 1;
        }
        break;
      case 7: opts.causal = static_cast<hwyattn_causal>(5); break;
    }
    const hwyattn_status s =
        hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, &q, k_arg, &v, out.t(), &opts);
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
    hwyattn_tensor good_k = KeySlice(p.k.desc, 2, offset, mine);
    hwyattn_tensor good_v = KeySlice(p.v.desc, 2, offset, mine);
    opts = p.Options(&lse.desc);
    const hwyattn_status again =
        hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, p.q.t(), &good_k, &good_v, out.t(), &opts);
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
  for (const Case& c : Cases()) RunCase(c);
  BadInput();
  const int code = Finish("sharded_sdpa_test");
  MPI_Finalize();
  return code;
}
