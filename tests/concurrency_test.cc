// SPDX-License-Identifier: Apache-2.0
//
// Many threads at once: hwyattn_sdpa and hwyattn_mha_forward (one shared
// module) from several threads with distinct outputs, while another thread
// keeps changing hwyattn_set_num_threads and another creates and destroys
// modules. Every result must be bit-identical to the one computed alone and
// sequentially (results do not depend on the thread count), and
// hwyattn_last_error() must stay per thread. scripts/test.sh --sanitizers
// also runs this under ThreadSanitizer.

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

// A spread of problems over both kernels and every output.
std::vector<Problem> SdpaProblems() {
  std::vector<Problem> v;
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.q_len = 37;
  p.k_len = 90;
  p.dim = 24;
  p.v_dim = 16;
  p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  p.want_weights = true;
  p.want_lse = true;
  p.seed = 1;
  v.push_back(p);  // prefill with weights
  p.want_weights = false;
  p.q_len = 1;
  p.k_len = 1300;
  p.kv_len = {1300, 700};
  p.seed = 2;
  v.push_back(p);  // decode, several chunks
  Problem m;
  m.batch = 1;
  m.q_heads = 3;
  m.kv_heads = 1;
  m.q_len = 60;
  m.k_len = 60;
  m.dim = 33;
  m.v_dim = 7;
  m.has_mask = true;
  m.mask.dtype = HWYATTN_F32;
  m.mask.shape = {1, 1, 60, 60};
  m.want_lse = true;
  m.seed = 3;
  v.push_back(m);  // prefill with an additive mask
  return v;
}

struct Golden {
  std::vector<unsigned char> out, weights, lse;
};

Golden Snapshot(const Call& c) {
  return {c.out.Snapshot(), c.weights.Snapshot(), c.lse.Snapshot()};
}

// A shared MHA module and one forward call's buffers.
struct MhaFixture {
  static constexpr int64_t kE = 32, kB = 2, kL = 19, kLk = 23, kKdim = 24;
  hwyattn_mha* module = nullptr;
  std::vector<float> w;

  MhaFixture() {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-0.2f, 0.2f);
    w.resize(4 * kE * kE + 4 * kE);
    for (float& x : w) x = dist(rng);
    hwyattn_mha_config cfg;
    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = kE;
    cfg.num_heads = 4;
    cfg.num_kv_heads = 2;
    cfg.kdim = kKdim;
    cfg.vdim = kKdim;
    cfg.has_bias = 1;
    const float* p = w.data();
    hwyattn_mha_weights weights = {p,
                                   p + kE * kE,
                                   p + 2 * kE * kE,
                                   p + 3 * kE * kE,
                                   p + 4 * kE * kE,
                                   p + 4 * kE * kE + kE,
                                   p + 4 * kE * kE + 2 * kE,
                                   p + 4 * kE * kE + 3 * kE};
    EXPECT_EQ(hwyattn_mha_create(&cfg, &weights, &module), HWYATTN_OK) << hwyattn_last_error();
  }
  ~MhaFixture() { hwyattn_mha_destroy(module); }
};

struct MhaCallBuffers {
  std::vector<float> query, key, out, weights;
  hwyattn_tensor tq{}, tk{}, to{}, tw{};
  hwyattn_sdpa_options opts;

  MhaCallBuffers() {
    using F = MhaFixture;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    query.resize(F::kB * F::kL * F::kE);
    key.resize(F::kB * F::kLk * F::kKdim);
    for (float& x : query) x = dist(rng);
    for (float& x : key) x = dist(rng);
    out.assign(F::kB * F::kL * F::kE, -1.0f);
    weights.assign(F::kB * 4 * F::kL * F::kLk, -1.0f);
    const int64_t qs[3] = {F::kB, F::kL, F::kE}, ks[3] = {F::kB, F::kLk, F::kKdim};
    const int64_t ws[4] = {F::kB, 4, F::kL, F::kLk};
    hwyattn_tensor_contiguous(&tq, query.data(), HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tk, key.data(), HWYATTN_F32, 3, ks);
    hwyattn_tensor_contiguous(&to, out.data(), HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tw, weights.data(), HWYATTN_F32, 4, ws);
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    opts.weights = &tw;
  }
  hwyattn_status Run(const hwyattn_mha* m) {
    return hwyattn_mha_forward(m, &tq, &tk, &tk, &to, &opts);  // value = key
  }
};

TEST(Concurrency, ManyCallersWhileTheThreadCountChanges) {
  const int saved = hwyattn_get_num_threads();
  // Golden results: alone, sequential, one thread.
  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  const std::vector<Problem> problems = SdpaProblems();
  std::vector<Golden> golden;
  for (const Problem& p : problems) {
    Call c(p);
    ASSERT_EQ(c.Run(), HWYATTN_OK) << hwyattn_last_error();
    CheckAgainstReference(c);
    golden.push_back(Snapshot(c));
  }
  MhaFixture mha;
  ASSERT_NE(mha.module, nullptr);
  MhaCallBuffers mha_golden;
  ASSERT_EQ(mha_golden.Run(mha.module), HWYATTN_OK) << hwyattn_last_error();
  ASSERT_EQ(hwyattn_set_num_threads(0), HWYATTN_OK);

  constexpr int kWorkers = 4;
  constexpr int kRounds = 6;
  std::atomic<int> running{kWorkers};
  std::atomic<int64_t> mismatches{0}, failures{0}, error_leaks{0}, settings{0};
  std::vector<std::string> first_problem(kWorkers);

  // Changes the thread count until every worker is done.
  std::thread toggler([&] {
    const int counts[] = {1, 2, 3, 0, 2, 1};
    for (int i = 0; running.load() > 0; ++i) {
      if (hwyattn_set_num_threads(counts[i % 6]) != HWYATTN_OK) failures.fetch_add(1);
      settings.fetch_add(1);
      std::this_thread::yield();
    }
  });
  // Creates and destroys modules (and fails to create one) meanwhile.
  std::thread creator([&] {
    while (running.load() > 0) {
      MhaFixture m;
      if (m.module == nullptr) failures.fetch_add(1);
      hwyattn_mha* none = nullptr;
      if (hwyattn_mha_create(nullptr, nullptr, &none) != HWYATTN_INVALID_ARGUMENT) {
        failures.fetch_add(1);
      }
    }
  });

  std::vector<std::thread> workers;
  for (int t = 0; t < kWorkers; ++t) {
    workers.emplace_back([&, t] {
      auto note = [&](const std::string& what) {
        if (first_problem[t].empty()) first_problem[t] = what;
      };
      // This thread's own failure, with a value no other thread uses.
      const int mine = -(1000 + t);
      const std::string my_error = "n: " + std::to_string(mine) + " threads";
      if (hwyattn_set_num_threads(mine) != HWYATTN_INVALID_ARGUMENT) failures.fetch_add(1);
      for (int round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < problems.size(); ++i) {
          const size_t which = (i + static_cast<size_t>(t)) % problems.size();
          Call c(problems[which]);
          if (c.Run() != HWYATTN_OK) {
            failures.fetch_add(1);
            note(std::string("sdpa failed: ") + hwyattn_last_error());
            continue;
          }
          const Golden g = Snapshot(c);
          if (g.out != golden[which].out || g.weights != golden[which].weights ||
              g.lse != golden[which].lse) {
            mismatches.fetch_add(1);
            note("sdpa problem " + std::to_string(which) + " differs from the sequential result");
          }
        }
        MhaCallBuffers buffers;
        if (buffers.Run(mha.module) != HWYATTN_OK) {
          failures.fetch_add(1);
          note(std::string("mha_forward failed: ") + hwyattn_last_error());
        } else if (buffers.out != mha_golden.out || buffers.weights != mha_golden.weights) {
          mismatches.fetch_add(1);
          note("mha_forward differs from the sequential result");
        }
        // Successes do not clear this thread's message; other threads'
        // failures do not replace it.
        if (std::string(hwyattn_last_error()).rfind(my_error + ";", 0) != 0) {
          error_leaks.fetch_add(1);
          note("last error became \"" + std::string(hwyattn_last_error()) + "\"");
        }
      }
      running.fetch_sub(1);
    });
  }
  for (std::thread& w : workers) w.join();
  toggler.join();
  creator.join();
  hwyattn_set_num_threads(saved);

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(error_leaks.load(), 0);
  EXPECT_GT(settings.load(), 0);
  for (int t = 0; t < kWorkers; ++t) EXPECT_EQ(first_problem[t], "") << "thread " << t;
}

// One module, many threads, nothing else: the documented "safe to use from
// many threads at once", with explicit thread counts per caller.
TEST(Concurrency, SharedModuleAtEveryThreadCount) {
  const int saved = hwyattn_get_num_threads();
  MhaFixture mha;
  ASSERT_NE(mha.module, nullptr);
  MhaCallBuffers golden;
  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  ASSERT_EQ(golden.Run(mha.module), HWYATTN_OK) << hwyattn_last_error();
  for (int n : {2, 3, 0}) {
    ASSERT_EQ(hwyattn_set_num_threads(n), HWYATTN_OK);
    std::vector<std::unique_ptr<MhaCallBuffers>> calls;
    for (int t = 0; t < 3; ++t) calls.push_back(std::make_unique<MhaCallBuffers>());
    std::vector<hwyattn_status> status(3, HWYATTN_INTERNAL_ERROR);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] { status[t] = calls[t]->Run(mha.module); });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(status[t], HWYATTN_OK);
      EXPECT_TRUE(calls[t]->out == golden.out) << "threads " << n << ", caller " << t;
      EXPECT_TRUE(calls[t]->weights == golden.weights) << "threads " << n << ", caller " << t;
    }
  }
  hwyattn_set_num_threads(saved);
}

}  // namespace
}  // namespace hwyattn_test
