// SPDX-License-Identifier: Apache-2.0
//
// Every allocation the library makes can fail cleanly: with the n-th
// allocation made to fail (src/scratch.h's test hook, reachable because this
// test links the static library), a call returns HWYATTN_OUT_OF_MEMORY with a
// message and leaves its outputs untouched, for n = 0, 1, 2, ... until the
// call needs no more allocations and succeeds. Each call runs on a fresh
// thread, whose scratch buffers start empty, so every allocation is reached.
//
// And the converse: once a thread's scratch is warm, calls of the same shapes
// allocate nothing at all (SteadyState below): no AlignedAlloc (the hook made
// to fail) and no C++ heap allocation (this binary counts operator new:
// tests/new_hook.h).
//
// Both also run with the caller's pool (opts->parallel, tests/test_pools.h):
// the workers then run on the pool's threads (or on the caller), with the
// calling thread's scratch.
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "src/scratch.h"
#include "tests/new_hook.h"
#include "tests/test_pools.h"

namespace {

// Runs `call` on a fresh thread with allocations failing after `allowed`.
hwyattn_status RunWithAllocationLimit(int64_t allowed, const std::function<hwyattn_status()>& call,
                                      std::string* error) {
  hwyattn_status status = HWYATTN_INTERNAL_ERROR;
  std::thread t([&] {
    hwyattn::FailAllocationsAfter(allowed);
    status = call();
    hwyattn::FailAllocationsAfter(-1);
    *error = hwyattn_last_error();
  });
  t.join();
  return status;
}

// Fails allocation 0, 1, ... until `call` succeeds; `output` must keep its
// bytes on every failure.
void ExpectCleanOutOfMemory(const std::function<hwyattn_status()>& call,
                            const std::vector<float>& output) {
  const std::vector<float> before = output;
  for (int64_t allowed = 0;; ++allowed) {
    ASSERT_LT(allowed, 64) << "the call never succeeded";
    std::string error;
    const hwyattn_status s = RunWithAllocationLimit(allowed, call, &error);
    if (s == HWYATTN_OK) {
      EXPECT_GT(allowed, 0) << "the call allocated nothing: the test is vacuous";
      return;
    }
    ASSERT_EQ(s, HWYATTN_OUT_OF_MEMORY) << "allocation " << allowed << ": " << error;
    EXPECT_FALSE(error.empty());
    ASSERT_EQ(memcmp(before.data(), output.data(), before.size() * sizeof(float)), 0)
        << "allocation " << allowed << " failed, yet the output was written";
  }
}

hwyattn_tensor Dense(float* data, std::vector<int64_t> shape) {
  hwyattn_tensor t;
  hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, static_cast<int32_t>(shape.size()),
                            shape.data());
  return t;
}

// A 4-head MHA configuration of width E without biases, and its weights.
struct TestModule {
  std::vector<float> w;
  hwyattn_mha_config cfg;
  hwyattn_mha_weights weights;
  TestModule(const TestModule&) = delete;
  explicit TestModule(int64_t E) : w(static_cast<size_t>(4 * E * E), 0.01f) {
    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = E;
    cfg.num_heads = 4;
    weights = {
        w.data(), w.data() + E * E, w.data() + 2 * E * E, w.data() + 3 * E * E, nullptr, nullptr,
        nullptr,  nullptr};
  }
};

// Pools for the tests below: 2 worker threads, and every task inline.
struct Pools {
  hwyattn_test::TestPool threads{hwyattn_test::PoolKind::kThreads, 2, 2};
  hwyattn_test::TestPool inline_pool{hwyattn_test::PoolKind::kInline, 0, 3};
  // nullptr (the library's own threads) and the two pools.
  const hwyattn_parallel* all[3] = {nullptr, threads.parallel(), inline_pool.parallel()};
};

TEST(OutOfMemory, SdpaPrefillAndDecode) {
  Pools pools;
  for (const hwyattn_parallel* pool : pools.all) {
    for (int64_t q_len : {1, 100}) {  // the decode and the prefill kernel
      std::vector<float> q(2 * 4 * q_len * 32, 0.25f), k(2 * 2 * 300 * 32, 0.5f),
          v(2 * 2 * 300 * 32, 0.75f), out(q.size(), -7.0f);
      hwyattn_tensor tq = Dense(q.data(), {2, 4, q_len, 32}), tk = Dense(k.data(), {2, 2, 300, 32}),
                     tv = Dense(v.data(), {2, 2, 300, 32}),
                     to = Dense(out.data(), {2, 4, q_len, 32});
      hwyattn_sdpa_options opts;
      hwyattn_sdpa_options_init(&opts);
      opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;  // also allocates the non-finite flags
      opts.parallel = pool;
      ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to, &opts); }, out);
      // With every score modifier (a window left of the rows, softcap,
      // ALiBi, sinks) and an lse: the same allocations, the same clean
      // failures.
      std::vector<float> per_head = {0.5f, -0.25f, 0.125f, -1.0f}, lse(2 * 4 * q_len, -7.0f);
      hwyattn_tensor tlse = Dense(lse.data(), {2, 4, q_len});
      opts.window_left = 64;
      opts.softcap = 5.0f;
      opts.alibi_slopes = per_head.data();
      opts.sinks = per_head.data();
      opts.lse = &tlse;
      ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to, &opts); }, out);
      // bf16 products: K and V always packed (rounded), decode rows included.
      opts.precision = HWYATTN_PRECISION_BF16;
      ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to, &opts); }, out);
      // An F16 additive mask (ggml's KQ mask, read in place) of zeros and
      // -inf (0xFC00), with fp32 products.
      std::vector<uint16_t> mask(static_cast<size_t>(2 * q_len * 300), 0);
      for (size_t i = 0; i < mask.size(); i += 7) mask[i] = 0xFC00;
      const int64_t mshape[4] = {2, 1, q_len, 300};
      hwyattn_tensor tmask;
      ASSERT_EQ(hwyattn_tensor_contiguous(&tmask, mask.data(), HWYATTN_F16, 4, mshape), HWYATTN_OK);
      opts.mask = &tmask;
      opts.precision = HWYATTN_PRECISION_F32;
      ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to, &opts); }, out);
      // A BF16 output (rounded at the store), in the first half of out's
      // floats, which must stay as they were.
      hwyattn_tensor to16 = to;
      to16.dtype = HWYATTN_BF16;
      ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to16, &opts); }, out);
    }
  }
  EXPECT_EQ(pools.threads.violation(), "");
  EXPECT_EQ(pools.inline_pool.violation(), "");
  EXPECT_GT(pools.threads.MaxTasks(), 1) << "the pool was never used";
}

TEST(OutOfMemory, MhaCreateAndForward) {
  const int64_t E = 32;
  const TestModule module(E);
  std::vector<float> x(2 * 9 * E, 0.5f), out(x.size(), -7.0f);
  hwyattn_mha* m = nullptr;
  std::vector<float> none;
  ExpectCleanOutOfMemory(
      [&] {
        hwyattn_mha_destroy(m);  // a module from an earlier, successful try
        m = nullptr;
        return hwyattn_mha_create(&module.cfg, &module.weights, &m);
      },
      none);
  ASSERT_NE(m, nullptr);
  hwyattn_tensor tx = Dense(x.data(), {2, 9, E}), to = Dense(out.data(), {2, 9, E});
  ExpectCleanOutOfMemory(
      [&] { return hwyattn_mha_forward(m, &tx, nullptr, nullptr, &to, nullptr); }, out);
  // A BF16 out (its bits in a float buffer): the output projection's F32
  // rows take more layer scratch first.
  std::vector<float> out16(x.size() / 2, -7.0f);
  hwyattn_tensor to16 = Dense(out16.data(), {2, 9, E});
  to16.dtype = HWYATTN_BF16;
  ExpectCleanOutOfMemory(
      [&] { return hwyattn_mha_forward(m, &tx, nullptr, nullptr, &to16, nullptr); }, out16);
  Pools pools;
  for (const hwyattn_parallel* pool : pools.all) {
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.parallel = pool;
    ExpectCleanOutOfMemory(
        [&] { return hwyattn_mha_forward(m, &tx, nullptr, nullptr, &to, &opts); }, out);
  }
  EXPECT_EQ(pools.threads.violation(), "");
  EXPECT_EQ(pools.inline_pool.violation(), "");
  hwyattn_mha_destroy(m);
}

// The same with bf16 weights (weight_dtype BF16: the packed pairs) and bf16
// products in the forward call.
TEST(OutOfMemory, MhaBf16WeightsCreateAndForward) {
  const int64_t E = 32;
  TestModule module(E);
  module.cfg.weight_dtype = HWYATTN_BF16;
  std::vector<float> x(2 * 9 * E, 0.5f), out(x.size(), -7.0f);
  hwyattn_mha* m = nullptr;
  std::vector<float> none;
  ExpectCleanOutOfMemory(
      [&] {
        hwyattn_mha_destroy(m);  // a module from an earlier, successful try
        m = nullptr;
        return hwyattn_mha_create(&module.cfg, &module.weights, &m);
      },
      none);
  ASSERT_NE(m, nullptr);
  hwyattn_tensor tx = Dense(x.data(), {2, 9, E}), to = Dense(out.data(), {2, 9, E});
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.precision = HWYATTN_PRECISION_BF16;
  ExpectCleanOutOfMemory([&] { return hwyattn_mha_forward(m, &tx, nullptr, nullptr, &to, &opts); },
                         out);
  hwyattn_mha_destroy(m);
}

// hwyattn_kv_attention (a decode over two key chunks, a prefill chunk and a
// tiny sequence in one batch, over an I8 paged cache: the gather buffer and
// each sequence's attention scratch are all reserved before any row is
// written) and hwyattn_kv_cache_write (its duplicate-slot check and its row
// buffers), on the library's threads and on the pools. `dtype`: I8, I4 or FP8
// (K scales per token; V per token too, or per tensor), or a block format
// of `block_bytes` per 32 elements (no scales; K and V of different formats
// when `v_dtype` is given).
void KvAttentionAndWrite(hwyattn_dtype dtype, bool v_per_tensor, size_t block_bytes = 0,
                         hwyattn_dtype v_dtype = HWYATTN_F32) {
  const int64_t P = 80, Hkv = 2, S = 16, D = 32, Hq = 4;
  if (block_bytes == 0) v_dtype = dtype;
  // The pool (one byte per element, or blocks of 32 elements of at most
  // block_bytes) lives in float vectors so that ExpectCleanOutOfMemory can
  // compare it.
  const size_t pool_bytes =
      block_bytes == 0 ? P * Hkv * S * D : P * Hkv * S * (D / 32) * block_bytes;
  std::vector<float> kpool((pool_bytes + 3) / 4, 0.0f), vpool(kpool.size() * 4, 0.0f);
  std::vector<float> kscale(P * Hkv * S, 0.0f), vscale(P * Hkv * S, 0.5f);
  hwyattn_kv_cache cache;
  hwyattn_kv_cache_init(&cache);
  const int64_t pool_shape[4] = {P, Hkv, S, D}, scale_shape[4] = {P, Hkv, S, 1};
  const int64_t one[1] = {1};
  ASSERT_EQ(hwyattn_tensor_contiguous(&cache.k, kpool.data(), dtype, 4, pool_shape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&cache.v, vpool.data(), v_dtype, 4, pool_shape), HWYATTN_OK);
  hwyattn_tensor tks, tvs;
  ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kscale.data(), HWYATTN_F32, 4, scale_shape),
            HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tvs, vscale.data(), HWYATTN_F32, v_per_tensor ? 1 : 4,
                                      v_per_tensor ? one : scale_shape),
            HWYATTN_OK);
  if (block_bytes == 0) {
    cache.k_scale = &tks;
    cache.v_scale = &tvs;
  }
  // Sequences: 700 keys (pages 0..43), 300 keys (44..62), 5 keys (63).
  const int32_t lens[3] = {700, 300, 5}, q_lens[3] = {1, 100, 2};
  std::vector<int32_t> table(3 * 48, -1);
  int32_t page = 0;
  for (int s = 0; s < 3; ++s) {
    for (int32_t j = 0; j < (lens[s] + S - 1) / S; ++j) table[s * 48 + j] = page++;
  }
  cache.block_table = table.data();
  cache.block_table_stride = 48;
  // Write every key: 1005 tokens.
  std::vector<int64_t> slot;
  for (int s = 0; s < 3; ++s) {
    for (int32_t t = 0; t < lens[s]; ++t)
      slot.push_back(int64_t{table[s * 48 + t / S]} * S + t % S);
  }
  const int64_t N = static_cast<int64_t>(slot.size());
  std::vector<float> knew(N * Hkv * D), vnew(knew.size());
  for (size_t i = 0; i < knew.size(); ++i) {
    knew[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
    vnew[i] = static_cast<float>(i % 7) * 0.2f - 0.5f;
  }
  hwyattn_tensor tkn = Dense(knew.data(), {N, Hkv, D}), tvn = Dense(vnew.data(), {N, Hkv, D});
  ExpectCleanOutOfMemory(
      [&] { return hwyattn_kv_cache_write(&cache, &tkn, &tvn, slot.data(), nullptr); }, kpool);
  const int32_t q_start[4] = {0, 1, 101, 103};
  hwyattn_kv_batch batch;
  hwyattn_kv_batch_init(&batch);
  batch.num_seqs = 3;
  batch.q_start = q_start;
  batch.kv_len = lens;
  std::vector<float> q(103 * Hq * D, 0.25f), out(q.size(), -7.0f), lse(103 * Hq, -7.0f);
  hwyattn_tensor tq = Dense(q.data(), {103, Hq, D}), to = Dense(out.data(), {103, Hq, D});
  hwyattn_tensor tl = Dense(lse.data(), {103, Hq});
  Pools pools;
  for (const hwyattn_parallel* pool : pools.all) {
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    opts.lse = &tl;
    opts.parallel = pool;
    std::fill(out.begin(), out.end(), -7.0f);
    std::fill(lse.begin(), lse.end(), -7.0f);
    ExpectCleanOutOfMemory([&] { return hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts); },
                           out);
    std::fill(out.begin(), out.end(), -7.0f);
    std::fill(lse.begin(), lse.end(), -7.0f);
    ExpectCleanOutOfMemory([&] { return hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts); },
                           lse);
    // Integer products (on I8, I4 and block-format K; F32 on FP8): the
    // quantized queries' and staged integers' scratch.
    opts.precision = HWYATTN_PRECISION_INT8;
    std::fill(out.begin(), out.end(), -7.0f);
    std::fill(lse.begin(), lse.end(), -7.0f);
    ExpectCleanOutOfMemory([&] { return hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts); },
                           out);
  }
  EXPECT_EQ(pools.threads.violation(), "");
  EXPECT_EQ(pools.inline_pool.violation(), "");
}

TEST(OutOfMemory, KvAttentionAndWriteI8) { KvAttentionAndWrite(HWYATTN_I8, false); }
TEST(OutOfMemory, KvAttentionAndWriteI4) { KvAttentionAndWrite(HWYATTN_I4, false); }
TEST(OutOfMemory, KvAttentionAndWriteF8E4M3) { KvAttentionAndWrite(HWYATTN_F8E4M3, true); }
// ggml's blocks: Q8_0 K (34 bytes a block) with an F32 V (4 x 32 bytes).
TEST(OutOfMemory, KvAttentionAndWriteQ8_0KF32V) {
  KvAttentionAndWrite(HWYATTN_Q8_0, false, 34, HWYATTN_F32);
}
TEST(OutOfMemory, KvAttentionAndWriteQ5_1) {
  KvAttentionAndWrite(HWYATTN_Q5_1, false, 24, HWYATTN_Q5_1);
}

// Warm calls allocate nothing: the prefill kernel (with weights and lse), the
// decode kernel over a long cache (key chunks merged by log-sum-exp), the
// small kernel, and the MHA layer, on 1 and 2 threads and on a pool of 2
// threads. Each shape runs once to warm this thread's scratch; then, with
// every library allocation made to fail and operator new counted (not under
// sanitizers), the same calls must succeed and allocate nothing.
TEST(SteadyState, WarmCallsAllocateNothing) {
  std::vector<float> pq(1 * 4 * 100 * 32, 0.25f), pk(1 * 2 * 100 * 32, 0.5f), pv(pk.size(), 0.75f),
      pout(pq.size()), pweights(1 * 4 * 100 * 100), plse(1 * 4 * 100);
  std::vector<float> dq(2 * 8 * 1 * 64, 0.25f), dk(2 * 2 * 4096 * 64, 0.5f), dv(dk.size(), 0.75f),
      dout(dq.size());
  std::vector<float> tq(1 * 2 * 3 * 2, 0.25f), tout(tq.size());
  hwyattn_tensor p_q = Dense(pq.data(), {1, 4, 100, 32}), p_k = Dense(pk.data(), {1, 2, 100, 32}),
                 p_v = Dense(pv.data(), {1, 2, 100, 32}),
                 p_out = Dense(pout.data(), {1, 4, 100, 32}),
                 p_w = Dense(pweights.data(), {1, 4, 100, 100}),
                 p_lse = Dense(plse.data(), {1, 4, 100});
  hwyattn_tensor d_q = Dense(dq.data(), {2, 8, 1, 64}), d_k = Dense(dk.data(), {2, 2, 4096, 64}),
                 d_v = Dense(dv.data(), {2, 2, 4096, 64}),
                 d_out = Dense(dout.data(), {2, 8, 1, 64});
  hwyattn_tensor t_q = Dense(tq.data(), {1, 2, 3, 2}), t_out = Dense(tout.data(), {1, 2, 3, 2});
  hwyattn_sdpa_options causal, plain;
  hwyattn_sdpa_options_init(&causal);
  causal.causal = HWYATTN_CAUSAL_TOP_LEFT;
  causal.weights = &p_w;
  causal.lse = &p_lse;
  hwyattn_sdpa_options_init(&plain);
  hwyattn_test::TestPool pool(hwyattn_test::PoolKind::kThreads, 2, 2);

  const int64_t E = 64;
  const TestModule module(E);
  std::vector<float> x(2 * 40 * E, 0.5f), y(x.size());
  hwyattn_mha* m = nullptr;
  ASSERT_EQ(hwyattn_mha_create(&module.cfg, &module.weights, &m), HWYATTN_OK);
  hwyattn_tensor mx = Dense(x.data(), {2, 40, E}), my = Dense(y.data(), {2, 40, E});

  const std::function<hwyattn_status()> calls[] = {
      [&] { return hwyattn_sdpa(&p_q, &p_k, &p_v, &p_out, &causal); },
      [&] { return hwyattn_sdpa(&d_q, &d_k, &d_v, &d_out, &plain); },
      [&] { return hwyattn_sdpa(&t_q, &t_q, &t_q, &t_out, &plain); },
      [&] { return hwyattn_mha_forward(m, &mx, nullptr, nullptr, &my, &plain); },
  };
  for (int threads : {1, 2, 0}) {  // 0: on the pool
    ASSERT_EQ(hwyattn_set_num_threads(threads == 0 ? 1 : threads), HWYATTN_OK);
    causal.parallel = plain.parallel = threads == 0 ? pool.parallel() : nullptr;
    const std::string mode = threads == 0 ? "the pool" : std::to_string(threads) + " threads";
    for (const auto& call : calls) ASSERT_EQ(call(), HWYATTN_OK) << hwyattn_last_error();
    hwyattn::FailAllocationsAfter(0);
    hwyattn_test::CountNew(true);
    hwyattn_status status[4][3];
    for (int c = 0; c < 4; ++c) {
      for (int rep = 0; rep < 3; ++rep) status[c][rep] = calls[c]();
    }
    hwyattn_test::CountNew(false);
    hwyattn::FailAllocationsAfter(-1);
    if (threads == 0) {
      EXPECT_EQ(pool.violation(), "");
      EXPECT_GT(pool.MaxTasks(), 1) << "the pool was never used";
      pool.Reset();
    }
    for (int c = 0; c < 4; ++c) {
      for (int rep = 0; rep < 3; ++rep) {
        EXPECT_EQ(status[c][rep], HWYATTN_OK) << "call " << c << " allocated on " << mode;
      }
    }
    if (hwyattn_test::kNewHooked) {
      EXPECT_EQ(hwyattn_test::NewCount(), 0) << "operator new during warm calls on " << mode;
    }
  }
  hwyattn_set_num_threads(0);
  hwyattn_mha_destroy(m);
}

// hwyattn_merge_states allocates nothing at all, not even on its first call
// on a fresh thread (its kernel keeps a block's row state on the stack and
// views the caller's descriptors in place): with every library allocation
// failing and operator new counted, cold calls (out of place and in place,
// with sinks, on 1 and 2 threads) succeed and allocate nothing.
TEST(SteadyState, MergeStatesAllocatesNothingEvenCold) {
  const int64_t B = 2, H = 4, L = 33, Dv = 72;
  std::vector<std::vector<float>> o(3, std::vector<float>(B * H * L * Dv)),
      l(3, std::vector<float>(B * H * L));
  for (int i = 0; i < 3; ++i) {
    for (size_t j = 0; j < o[i].size(); ++j)
      o[i][j] = static_cast<float>((j * (i + 3)) % 17) * 0.1f;
    for (size_t j = 0; j < l[i].size(); ++j) l[i][j] = static_cast<float>((j + i) % 5) - 2.0f;
  }
  std::vector<float> out(o[0].size()), lse(l[0].size()), sinks(H, 0.5f);
  hwyattn_tensor to[3], tl[3];
  const hwyattn_tensor* outs[3];
  const hwyattn_tensor* lses[3];
  for (int i = 0; i < 3; ++i) {
    to[i] = Dense(o[i].data(), {B, H, L, Dv});
    tl[i] = Dense(l[i].data(), {B, H, L});
    outs[i] = &to[i];
    lses[i] = &tl[i];
  }
  hwyattn_tensor t_out = Dense(out.data(), {B, H, L, Dv}), t_lse = Dense(lse.data(), {B, H, L});
  for (int threads : {1, 2}) {
    ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    hwyattn_status status[2] = {HWYATTN_INTERNAL_ERROR, HWYATTN_INTERNAL_ERROR};
    std::thread([&] {
      hwyattn::FailAllocationsAfter(0);
      hwyattn_test::CountNew(true);
      status[0] = hwyattn_merge_states(3, outs, lses, sinks.data(), &t_out, &t_lse);
      status[1] = hwyattn_merge_states(3, outs, lses, nullptr, &to[0], &tl[0]);  // in place
      hwyattn_test::CountNew(false);
      hwyattn::FailAllocationsAfter(-1);
    }).join();
    EXPECT_EQ(status[0], HWYATTN_OK) << "out of place, " << threads << " threads";
    EXPECT_EQ(status[1], HWYATTN_OK) << "in place, " << threads << " threads";
    if (hwyattn_test::kNewHooked) {
      EXPECT_EQ(hwyattn_test::NewCount(), 0)
          << "operator new in merge_states on " << threads << " threads";
    }
  }
  hwyattn_set_num_threads(0);
}

}  // namespace
