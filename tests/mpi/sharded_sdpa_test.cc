// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_sharded_sdpa under mpirun -np 1..4: every case splits the keys
// of one problem over the ranks in several ways (even, uneven, with empty
// shards) and compares each rank's result with the single-process
// hwyattn_sdpa of the whole problem (2e-6 relative), and checks that two
// runs and all ranks give the same bits. (Bad input: hostile_input_test.)

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "hwyattn_mpi.h"
#include "tests/mpi/mpi_test_util.h"

namespace hwyattn_mpi_test {
namespace {

// The key splits every case runs with (weights per rank, cycled): even,
// uneven with an empty shard, rank 0 empty, and the keys on the last rank.
const std::vector<std::vector<int>> kSplits = {
    {1}, {1, 3, 0, 2}, {0, 1}, {2, 1, 1, 0}, {0, 0, 0, 1}};

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

}  // namespace
}  // namespace hwyattn_mpi_test

int main(int argc, char** argv) {
  using namespace hwyattn_mpi_test;
  Init(&argc, &argv);
  for (const Case& c : Cases()) RunCase(c);
  const int code = Finish("sharded_sdpa_test");
  MPI_Finalize();
  return code;
}
