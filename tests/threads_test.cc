// SPDX-License-Identifier: Apache-2.0
//
// The header promises results that are bit-identical for any thread count
// (the work split, the decode key chunks and every reduction order are fixed
// by the problem, not by the threads). These tests run the same inputs with
// 1, 2 and 3 threads and compare the out, weights and lse buffers with
// memcmp. Three threads on this 2-core machine oversubscribe on purpose: it
// changes the split without changing the answer. One run per problem is also
// checked against the oracle, so identical garbage cannot pass.

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

// Restores the library's thread count when a test ends, however it ends.
class ThreadCountRestorer {
 public:
  ThreadCountRestorer() : saved_(hwyattn_get_num_threads()) {}
  ~ThreadCountRestorer() { hwyattn_set_num_threads(saved_); }

 private:
  int saved_;
};

// memcmp of two tensors' whole storage (both empty when an output was not
// requested).
bool SameBytes(const TensorBuf& a, const TensorBuf& b) {
  const std::vector<unsigned char> x = a.Snapshot(), y = b.Snapshot();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size()) == 0);
}

struct NamedProblem {
  std::string name;
  Problem problem;
};

std::vector<NamedProblem> Problems() {
  std::vector<NamedProblem> problems;
  {
    // A causal GQA prefill: enough query blocks for every thread.
    Problem p;
    p.batch = 2;
    p.q_heads = 4;
    p.kv_heads = 2;
    p.q_len = 300;
    p.k_len = 300;
    p.dim = 64;
    p.v_dim = 64;
    p.causal = HWYATTN_CAUSAL_TOP_LEFT;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 1001;
    problems.push_back({"CausalGqaPrefill", p});
  }
  {
    // Decode: one query row against a long cache, the case that splits the
    // keys into chunks and merges them by log-sum-exp.
    Problem p;
    p.batch = 1;
    p.q_heads = 8;
    p.kv_heads = 2;
    p.q_len = 1;
    p.k_len = 2000;
    p.dim = 128;
    p.v_dim = 128;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 1002;
    problems.push_back({"GqaDecodeLk2000", p});
  }
  {
    // Decode with padding and a mask, batched, BF16 cache: the chunk
    // boundaries fall on blocked and unblocked keys.
    Problem p;
    p.batch = 3;
    p.q_heads = 4;
    p.kv_heads = 4;
    p.q_len = 2;
    p.k_len = 1537;
    p.dim = 64;
    p.v_dim = 32;
    p.k_dtype = p.v_dtype = HWYATTN_BF16;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    p.kv_len = {1537, 700, 0};
    p.has_mask = true;
    p.mask.dtype = HWYATTN_F32;
    p.mask.shape = {3, 1, 1, 1537};
    p.mask.block_prob = 0.1;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 1003;
    problems.push_back({"MaskedPaddedBf16Decode", p});
  }
  {
    // The split-key decode kernel proper: F32, few rows per kv head, no
    // weights (asking for them routes the call to the prefill kernel), with
    // padding and a mask that cut the 512-key chunks unevenly.
    Problem p;
    p.batch = 2;
    p.q_heads = 8;
    p.kv_heads = 2;
    p.q_len = 2;
    p.k_len = 2047;
    p.dim = 128;
    p.v_dim = 96;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    p.kv_len = {1500, 513};
    p.has_mask = true;
    p.mask.dtype = HWYATTN_BOOL;
    p.mask.shape = {2, 1, 2, 2047};
    p.mask.block_prob = 0.2;
    p.want_lse = true;
    p.seed = 1004;
    problems.push_back({"MaskedPaddedF32DecodeLseOnly", p});
  }
  {
    // Every score modifier on a windowed GQA prefill (whole key tiles
    // skipped, edge panels masked per lane) ...
    Problem p;
    p.batch = 2;
    p.q_heads = 4;
    p.kv_heads = 2;
    p.q_len = 300;
    p.k_len = 300;
    p.dim = 64;
    p.v_dim = 64;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    p.window_left = 70;
    p.softcap = 1.0f;
    p.alibi_slopes = StandardAlibiSlopes(4);
    for (float& s : p.alibi_slopes) s *= 0.1f;
    p.sinks = {0.5f, -1.0f, 0.0f, 2.0f};
    p.q_amp = 2.0f;
    p.want_weights = true;
    p.want_lse = true;
    p.seed = 1005;
    problems.push_back({"ModifiedWindowedPrefill", p});
    // ... and on a decode step whose window spans three key chunks.
    p.q_len = 1;
    p.k_len = 2000;
    p.window_left = 1100;
    p.batch = 1;
    p.seed = 1006;
    problems.push_back({"ModifiedWindowedDecode", p});
  }
  return problems;
}

class ThreadsTest : public ::testing::TestWithParam<NamedProblem> {};

TEST_P(ThreadsTest, BitIdenticalFor1To3Threads) {
  ThreadCountRestorer restore;
  const Problem& p = GetParam().problem;
  std::unique_ptr<Call> first;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    ASSERT_EQ(hwyattn_get_num_threads(), threads);
    auto call = std::make_unique<Call>(p);  // Same seed: the same inputs.
    const hwyattn_status status = call->Run();
    ASSERT_EQ(status, HWYATTN_OK) << hwyattn_status_string(status) << ": " << hwyattn_last_error();
    if (first == nullptr) {
      CheckAgainstReference(*call);
      first = std::move(call);
      continue;
    }
    // The snapshots cover the whole storage, guards included; the guards
    // were filled identically, so any difference is in the results.
    EXPECT_TRUE(SameBytes(call->out, first->out)) << "out differs";
    EXPECT_TRUE(SameBytes(call->weights, first->weights)) << "weights differ";
    EXPECT_TRUE(SameBytes(call->lse, first->lse)) << "lse differs";
  }
}

// The same without the weights output (lse kept): the decode kernel only
// runs when the weights are not requested.
TEST_P(ThreadsTest, BitIdenticalWithoutWeights) {
  ThreadCountRestorer restore;
  Problem p = GetParam().problem;
  p.want_weights = false;
  std::vector<unsigned char> reference_bytes;
  std::unique_ptr<Call> lse_reference;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    auto owned = std::make_unique<Call>(p);
    Call& call = *owned;
    ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
    if (reference_bytes.empty()) {
      CheckAgainstReference(call);
      reference_bytes = call.out.Snapshot();
      lse_reference = std::move(owned);
      continue;
    }
    const std::vector<unsigned char> bytes = call.out.Snapshot();
    ASSERT_EQ(bytes.size(), reference_bytes.size());
    EXPECT_EQ(std::memcmp(bytes.data(), reference_bytes.data(), bytes.size()), 0) << "out differs";
    if (p.want_lse) {
      EXPECT_TRUE(SameBytes(call.lse, lse_reference->lse)) << "lse differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sdpa, ThreadsTest, ::testing::ValuesIn(Problems()),
                         [](const ::testing::TestParamInfo<NamedProblem>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace hwyattn_test
