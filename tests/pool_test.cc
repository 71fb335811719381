// SPDX-License-Identifier: Apache-2.0
//
// opts->parallel: calls that run on the caller's thread pool give the same
// bits as the library's own OpenMP threads (1 and 2 threads), whatever the
// pool (tests/test_pools.h): real threads (2 and 3), every task on the
// calling thread in order or in reverse, or 2 threads that claim 16 workers,
// more than any phase has work items. Every pool also checks the contract
// of hwyattn_parallel on each call: 1 <= n <= num_workers, never from inside
// a task (a thread-local flag), every task run once. The OpenMP result is
// checked against the double oracle (tests/reference.h), so identical wrong
// answers cannot pass. Covered: the prefill kernel (causal, masks, padding,
// GQA, weights, lse; K/V used in place or packed), the decode kernel (one
// and two query rows, several key chunks and their merge), the small kernel,
// and hwyattn_mha_forward (projections and attention).
//
// Also run under ThreadSanitizer (scripts/test.sh --sanitizers, which builds
// with HWYATTN_OPENMP=OFF): the pool path needs no OpenMP, so TSan sees all
// of the library's threading through the pool's threads.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_pools.h"
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

struct PoolSpec {
  const char* name;
  PoolKind kind;
  int threads;      // WorkerThreads (kThreads)
  int32_t claimed;  // num_workers
};

const PoolSpec kPools[] = {
    {"threads2", PoolKind::kThreads, 2, 2},
    {"threads3", PoolKind::kThreads, 3, 3},
    {"reverse_on_caller", PoolKind::kReverse, 0, 3},
    {"inline_in_order", PoolKind::kInline, 0, 3},
    {"threads2_claiming16", PoolKind::kThreads, 2, 16},
};

// memcmp of two tensors' whole storage (both empty when an output was not
// requested). The guards were filled identically, so any difference is in
// the results.
bool SameBytes(const TensorBuf& a, const TensorBuf& b) {
  const std::vector<unsigned char> x = a.Snapshot(), y = b.Snapshot();
  return x.size() == y.size() && (x.empty() || memcmp(x.data(), y.data(), x.size()) == 0);
}

struct SdpaCase {
  std::string name;
  Problem problem;
  bool threaded;  // large enough that a pool of >= 2 workers gets tasks
};

std::vector<SdpaCase> SdpaCases() {
  std::vector<SdpaCase> cases;
  {
    // Causal GQA prefill with weights and lse: K/V scanned for non-finite
    // values per kv head (the packing phase), then the query tiles.
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
    p.seed = 2001;
    cases.push_back({"CausalGqaPrefillWeightsLse", p, true});
  }
  {
    // Masks and padding, F16 keys (packed), cross lengths, Dv != D, rows
    // whose keys are all blocked.
    Problem p;
    p.batch = 2;
    p.q_heads = 6;
    p.kv_heads = 3;
    p.q_len = 130;
    p.k_len = 257;
    p.dim = 40;
    p.v_dim = 24;
    p.k_dtype = HWYATTN_F16;
    p.kv_len = {257, 100};
    p.has_mask = true;
    p.mask.dtype = HWYATTN_BOOL;
    p.mask.shape = {2, 1, 130, 257};
    p.mask.block_rows = true;
    p.want_lse = true;
    p.seed = 2002;
    cases.push_back({"MaskedPaddedF16Prefill", p, true});
  }
  {
    // F32 K/V used in place, no mask: no packing phase at all.
    Problem p;
    p.batch = 1;
    p.q_heads = 4;
    p.kv_heads = 4;
    p.q_len = 256;
    p.k_len = 256;
    p.dim = 64;
    p.v_dim = 64;
    p.seed = 2003;
    cases.push_back({"InPlacePrefill", p, true});
  }
  {
    // Decode: one query row per head over a long cache, 10 key chunks per
    // kv head, merged in a second phase.
    Problem p;
    p.batch = 1;
    p.q_heads = 8;
    p.kv_heads = 2;
    p.q_len = 1;
    p.k_len = 5000;
    p.dim = 128;
    p.v_dim = 128;
    p.want_lse = true;
    p.seed = 2004;
    cases.push_back({"GqaDecodeLk5000", p, true});
  }
  {
    // Decode with padding and a mask that cut the chunks unevenly, two query
    // rows, bottom-right causal.
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
    p.seed = 2005;
    cases.push_back({"MaskedPaddedDecode", p, true});
  }
  {
    // The small kernel: one thread, the pool is never called.
    Problem p;
    p.batch = 1;
    p.q_heads = 2;
    p.kv_heads = 2;
    p.q_len = 3;
    p.k_len = 3;
    p.dim = 2;
    p.v_dim = 2;
    p.want_lse = true;
    p.seed = 2006;
    cases.push_back({"TinyKernel", p, false});
  }
  return cases;
}

class PoolSdpaTest : public ::testing::TestWithParam<SdpaCase> {};

TEST_P(PoolSdpaTest, SameBitsAsOpenMp) {
  ThreadCountRestorer restore;
  const SdpaCase& c = GetParam();
  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  Call base(c.problem);
  ASSERT_EQ(base.Run(), HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(base);
  ASSERT_EQ(hwyattn_set_num_threads(2), HWYATTN_OK);
  {
    Call two(c.problem);
    ASSERT_EQ(two.Run(), HWYATTN_OK) << hwyattn_last_error();
    EXPECT_TRUE(SameBytes(two.out, base.out)) << "OpenMP: 2 threads differ from 1";
  }
  // One thread for the library's own threads: a pool must not care.
  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  for (const PoolSpec& spec : kPools) {
    SCOPED_TRACE(spec.name);
    TestPool pool(spec.kind, spec.threads, spec.claimed);
    for (int rep = 0; rep < 2; ++rep) {  // a second call reuses warm scratch
      Call call(c.problem);
      call.opts.parallel = pool.parallel();
      ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
      EXPECT_EQ(pool.violation(), "");
      EXPECT_TRUE(SameBytes(call.out, base.out)) << "out differs";
      EXPECT_TRUE(SameBytes(call.weights, base.weights)) << "weights differ";
      EXPECT_TRUE(SameBytes(call.lse, base.lse)) << "lse differs";
      if (c.threaded) {
        EXPECT_GT(pool.MaxTasks(), 1) << "the pool was not used for several workers";
      } else {
        EXPECT_TRUE(pool.calls().empty()) << "a tiny call went to the pool";
      }
      pool.Reset();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sdpa, PoolSdpaTest, ::testing::ValuesIn(SdpaCases()),
                         [](const ::testing::TestParamInfo<SdpaCase>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------
// hwyattn_mha_forward: the projections and the attention on the pool.
// ---------------------------------------------------------------------------

struct MhaCase {
  const char* name;
  int64_t batch, q_len, kv_len, embed, heads, head_dim, kv_heads, kdim, vdim;
  bool self;
  hwyattn_causal causal;
};

const MhaCase kMhaCases[] = {
    // name, B, Lq, Lk, E, H, hd, Hkv, kdim, vdim, self, causal
    // Projections of 19-38 MFLOP and 576 attention rows: every phase threaded.
    {"SelfGqaCausal", 3, 192, 192, 128, 4, 32, 2, 128, 128, true, HWYATTN_CAUSAL_TOP_LEFT},
    // Cross-attention decode: K/V projections of a 1000-key memory, then the
    // decode kernel's chunks and merge.
    {"CrossDecode", 2, 1, 1000, 64, 8, 64, 2, 48, 80, false, HWYATTN_CAUSAL_NONE},
};

hwyattn_tensor Dense(float* data, std::vector<int64_t> shape) {
  hwyattn_tensor t;
  EXPECT_EQ(hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, static_cast<int32_t>(shape.size()),
                                      shape.data()),
            HWYATTN_OK);
  return t;
}

// y = x w^T + b in double (nn.Linear), x [rows, in], w [out, in].
std::vector<double> LinearRef(const std::vector<double>& x, int64_t rows, int64_t in,
                              const std::vector<float>& w, int64_t out,
                              const std::vector<float>& b) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < out; ++n) {
      double acc = b[n];
      for (int64_t k = 0; k < in; ++k) acc += x[m * in + k] * static_cast<double>(w[n * in + k]);
      y[m * out + n] = acc;
    }
  }
  return y;
}

struct MhaLayer {
  MhaCase c;
  std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo, xq, xk, xv;
  hwyattn_mha* m = nullptr;

  explicit MhaLayer(const MhaCase& mc) : c(mc) {
    std::mt19937 rng(77);
    auto random = [&](int64_t n, float scale) {
      std::uniform_real_distribution<float> u(-scale, scale);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      return v;
    };
    const int64_t qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim;
    wq = random(qw * c.embed, 0.3f);
    wk = random(kw * c.kdim, 0.3f);
    wv = random(kw * c.vdim, 0.3f);
    wo = random(c.embed * qw, 0.3f);
    bq = random(qw, 0.3f);
    bk = random(kw, 0.3f);
    bv = random(kw, 0.3f);
    bo = random(c.embed, 0.3f);
    xq = random(c.batch * c.q_len * c.embed, 1.0f);
    xk = c.self ? xq : random(c.batch * c.kv_len * c.kdim, 1.0f);
    xv = c.self ? xq : random(c.batch * c.kv_len * c.vdim, 1.0f);
    hwyattn_mha_config cfg;
    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = c.embed;
    cfg.num_heads = c.heads;
    cfg.head_dim = c.head_dim;
    cfg.num_kv_heads = c.kv_heads;
    cfg.kdim = c.kdim;
    cfg.vdim = c.vdim;
    cfg.has_bias = 1;
    const hwyattn_mha_weights w = {wq.data(), wk.data(), wv.data(), wo.data(),
                                   bq.data(), bk.data(), bv.data(), bo.data()};
    EXPECT_EQ(hwyattn_mha_create(&cfg, &w, &m), HWYATTN_OK) << hwyattn_last_error();
  }
  ~MhaLayer() { hwyattn_mha_destroy(m); }
  MhaLayer(const MhaLayer&) = delete;
  MhaLayer& operator=(const MhaLayer&) = delete;

  hwyattn_status Forward(const hwyattn_parallel* pool, std::vector<float>* out) {
    out->assign(static_cast<size_t>(c.batch * c.q_len * c.embed), NAN);
    hwyattn_tensor tq = Dense(xq.data(), {c.batch, c.q_len, c.embed});
    hwyattn_tensor tk = Dense(xk.data(), {c.batch, c.kv_len, c.kdim});
    hwyattn_tensor tv = Dense(xv.data(), {c.batch, c.kv_len, c.vdim});
    hwyattn_tensor to = Dense(out->data(), {c.batch, c.q_len, c.embed});
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = c.causal;
    opts.parallel = pool;
    return hwyattn_mha_forward(m, &tq, c.self ? nullptr : &tk, c.self ? nullptr : &tv, &to, &opts);
  }

  // Projections in double, rounded to float as the library stores them, the
  // sdpa oracle on their head views, the output projection in double.
  void Reference(std::vector<double>* out) const {
    const int64_t qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim, hd = c.head_dim;
    const std::vector<double> q =
        LinearRef({xq.begin(), xq.end()}, c.batch * c.q_len, c.embed, wq, qw, bq);
    const std::vector<double> k =
        LinearRef({xk.begin(), xk.end()}, c.batch * c.kv_len, c.kdim, wk, kw, bk);
    const std::vector<double> v =
        LinearRef({xv.begin(), xv.end()}, c.batch * c.kv_len, c.vdim, wv, kw, bv);
    std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
    auto heads_view = [&](float* data, int64_t heads, int64_t len) {
      hwyattn_tensor t;
      memset(&t, 0, sizeof(t));
      t.data = data;
      t.dtype = HWYATTN_F32;
      t.rank = 4;
      const int64_t shape[4] = {c.batch, heads, len, hd};
      const int64_t stride[4] = {len * heads * hd, hd, heads * hd, 1};
      memcpy(t.shape, shape, sizeof(shape));
      memcpy(t.stride, stride, sizeof(stride));
      return t;
    };
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = c.causal;
    RefResult r;
    std::string error;
    ASSERT_TRUE(ReferenceSdpa(heads_view(qf.data(), c.heads, c.q_len),
                              heads_view(kf.data(), c.kv_heads, c.kv_len),
                              heads_view(vf.data(), c.kv_heads, c.kv_len), &opts, &r, &error))
        << error;
    std::vector<double> attended(static_cast<size_t>(c.batch * c.q_len * qw));
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t h = 0; h < c.heads; ++h) {
        for (int64_t i = 0; i < c.q_len; ++i) {
          for (int64_t d = 0; d < hd; ++d) {
            attended[(b * c.q_len + i) * qw + h * hd + d] = r.out[r.RowIndex(b, h, i) * hd + d];
          }
        }
      }
    }
    *out = LinearRef(attended, c.batch * c.q_len, qw, wo, c.embed, bo);
  }
};

class PoolMhaTest : public ::testing::TestWithParam<MhaCase> {};

TEST_P(PoolMhaTest, SameBitsAsOpenMp) {
  ThreadCountRestorer restore;
  MhaLayer layer(GetParam());
  ASSERT_NE(layer.m, nullptr);
  std::vector<float> base, two;
  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  ASSERT_EQ(layer.Forward(nullptr, &base), HWYATTN_OK) << hwyattn_last_error();
  ASSERT_EQ(hwyattn_set_num_threads(2), HWYATTN_OK);
  ASSERT_EQ(layer.Forward(nullptr, &two), HWYATTN_OK) << hwyattn_last_error();
  // The outputs are finite, so == means the same bits.
  EXPECT_TRUE(two == base) << "OpenMP: 2 threads differ from 1";

  std::vector<double> want;
  layer.Reference(&want);
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, fabs(want[i]));
    worst = std::max(worst, fabs(static_cast<double>(base[i]) - want[i]));
  }
  EXPECT_LT(worst / std::max(scale, 1e-30), 1e-5) << "max|err| " << worst << ", max|ref| " << scale;

  ASSERT_EQ(hwyattn_set_num_threads(1), HWYATTN_OK);
  for (const PoolSpec& spec : kPools) {
    SCOPED_TRACE(spec.name);
    TestPool pool(spec.kind, spec.threads, spec.claimed);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<float> out;
      ASSERT_EQ(layer.Forward(pool.parallel(), &out), HWYATTN_OK) << hwyattn_last_error();
      EXPECT_EQ(pool.violation(), "");
      EXPECT_TRUE(out == base) << "out differs";
      // The projections and the attention: several phases, several workers.
      EXPECT_GE(pool.calls().size(), 3u);
      EXPECT_GT(pool.MaxTasks(), 1);
      pool.Reset();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mha, PoolMhaTest, ::testing::ValuesIn(kMhaCases),
                         [](const ::testing::TestParamInfo<MhaCase>& info) {
                           return std::string(info.param.name);
                         });

// The checks of the test pools themselves: a broken pool contract is seen.
// Without them a pool that never looked would pass everything above.
TEST(TestPool, DetectsNestingAndBadCounts) {
  TestPool pool(PoolKind::kInline, 0, 2);
  const hwyattn_parallel* p = pool.parallel();
  struct Ctx {
    const hwyattn_parallel* p;
    int runs = 0;
  } ctx{p};
  // A task that calls parallel_for again: nesting.
  p->parallel_for(
      p->pool, 1,
      [](void* c, int64_t) {
        Ctx* x = static_cast<Ctx*>(c);
        ++x->runs;
        if (x->runs == 1)
          x->p->parallel_for(
              x->p->pool, 1, [](void*, int64_t) {}, nullptr);
      },
      &ctx);
  EXPECT_NE(pool.violation().find("inside a task"), std::string::npos) << pool.violation();
  pool.Reset();
  p->parallel_for(
      p->pool, 3, [](void*, int64_t) {}, nullptr);  // more than num_workers
  EXPECT_NE(pool.violation().find("n = 3"), std::string::npos) << pool.violation();
  pool.Reset();
  p->parallel_for(
      p->pool, 0, [](void*, int64_t) {}, nullptr);
  EXPECT_NE(pool.violation().find("n = 0"), std::string::npos) << pool.violation();
  pool.Reset();
  p->parallel_for(
      p->pool, 2, [](void*, int64_t) {}, nullptr);
  EXPECT_EQ(pool.violation(), "");
  ASSERT_EQ(pool.calls().size(), 1u);
  EXPECT_EQ(pool.calls()[0], 2);
}

// WorkerThreads really runs tasks on other threads, each exactly once.
TEST(TestPool, WorkerThreadsRunEveryTaskOnce) {
  TestPool pool(PoolKind::kThreads, 3, 3);
  const hwyattn_parallel* p = pool.parallel();
  struct Ctx {
    std::atomic<int> hits[3];
    std::atomic<int> other_thread{0};
    std::thread::id caller = std::this_thread::get_id();
  } ctx;
  for (auto& h : ctx.hits) h = 0;
  for (int rep = 0; rep < 100; ++rep) {
    p->parallel_for(
        p->pool, 3,
        [](void* c, int64_t i) {
          Ctx* x = static_cast<Ctx*>(c);
          x->hits[i].fetch_add(1);
          if (std::this_thread::get_id() != x->caller) x->other_thread = 1;
        },
        &ctx);
  }
  for (auto& h : ctx.hits) EXPECT_EQ(h.load(), 100);
  EXPECT_EQ(ctx.other_thread.load(), 1);
  EXPECT_EQ(pool.violation(), "");
}

}  // namespace
}  // namespace hwyattn_test
