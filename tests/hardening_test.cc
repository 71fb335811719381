// SPDX-License-Identifier: Apache-2.0
//
// Hostile input and numbers at the edges, through the C ABI as users get it.
//
// Part 1 (BadInput): one table of every kind of bad argument for every entry
// point that takes arguments: hwyattn_sdpa, hwyattn_mha_create,
// hwyattn_mha_forward, hwyattn_tensor_contiguous, hwyattn_set_num_threads.
// Each row mutates a valid set of arguments, states the status it must get
// and substrings the message must contain (the argument, the dimension, the
// values). Every output (out, weights, lse of both entry points, the handle
// of mha_create, the descriptor of tensor_contiguous, the thread setting) is
// pre-filled with a sentinel pattern and compared byte for byte afterwards.
//
// Part 2 (Edges): NaN and Inf confinement on the prefill and the decode
// kernel, scores up to 1e30, -INFINITY and -FLT_MAX masks, L = 1, D = 1, head
// dims that are not a multiple of the vector width, and misaligned pointers,
// against the double-precision reference (tests/reference.h). ctest runs the
// binary once per SIMD target (HWYATTN_TARGET).

#include <float.h>
#include <stdint.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_util.h"

// Huge-but-valid requests below must fail with HWYATTN_OUT_OF_MEMORY; under
// AddressSanitizer or ThreadSanitizer an allocation beyond their limit must
// then return NULL (as malloc does) instead of stopping the process.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }

namespace hwyattn_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint32_t kSentinel = 0x7FC0BEEFu;

template <typename Enum>
Enum EnumFromInt(int value) {
  Enum e;
  static_assert(sizeof(e) == sizeof(value), "enum layout");
  std::memcpy(&e, &value, sizeof(e));
  return e;
}

// A buffer of floats with a descriptor, pre-filled with the sentinel.
struct Tensor {
  std::vector<float> data;
  hwyattn_tensor t{};

  Tensor() = default;
  Tensor(std::vector<int64_t> shape, float fill_lo, float fill_hi, uint32_t seed,
         hwyattn_dtype dtype = HWYATTN_F32) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    data.resize(static_cast<size_t>(n) + 16);  // + room for misaligning tests
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(fill_lo, fill_hi);
    for (float& f : data) f = dist(rng);
    EXPECT_EQ(hwyattn_tensor_contiguous(&t, data.data(), dtype, static_cast<int32_t>(shape.size()),
                                        shape.data()),
              HWYATTN_OK);
  }
  void FillSentinel() {
    for (float& f : data) std::memcpy(&f, &kSentinel, sizeof(f));
  }
};

// Valid arguments for every entry point; a case mutates one thing.
struct Env {
  // hwyattn_sdpa: q [2,4,5,8], k [2,2,9,8], v [2,2,9,6], out [2,4,5,6],
  // F32 mask [2,1,5,9], kv_len {9, 4}, weights [2,4,5,9], lse [2,4,5].
  Tensor q{{2, 4, 5, 8}, -1, 1, 1}, k{{2, 2, 9, 8}, -1, 1, 2}, v{{2, 2, 9, 6}, -1, 1, 3};
  Tensor out{{2, 4, 5, 6}, 0, 0, 4}, mask{{2, 1, 5, 9}, -1, 1, 5};
  Tensor weights{{2, 4, 5, 9}, 0, 0, 6}, lse{{2, 4, 5}, 0, 0, 7};
  std::vector<int32_t> kv_len_storage = std::vector<int32_t>(8, 0);
  // Per-head values for opts.alibi_slopes / opts.sinks (Hq = 4 and 4 spare),
  // and a caller's pool for opts.parallel.
  std::vector<float> head_values = std::vector<float>(8, 0.25f);
  hwyattn_parallel pool{};
  hwyattn_sdpa_options opts{};
  const hwyattn_tensor *q_arg, *k_arg, *v_arg;
  hwyattn_tensor* out_arg;
  const hwyattn_sdpa_options* opts_arg;

  // hwyattn_mha_create: E 16, 4 heads of 4, 2 kv heads, kdim 12, vdim 10, biases.
  hwyattn_mha_config cfg{};
  std::vector<float> w_q = std::vector<float>(16 * 16 + 4, 0.01f);
  std::vector<float> w_k = std::vector<float>(8 * 12 + 4, 0.02f);
  std::vector<float> w_v = std::vector<float>(8 * 10 + 4, 0.03f);
  std::vector<float> w_o = std::vector<float>(16 * 16 + 4, 0.04f);
  std::vector<float> bias = std::vector<float>(64, 0.5f);
  hwyattn_mha_weights w{};
  const hwyattn_mha_config* cfg_arg = &cfg;
  const hwyattn_mha_weights* w_arg = &w;
  hwyattn_mha* created;  // output of mha_create: sentinel until written
  hwyattn_mha** created_arg = &created;

  // hwyattn_mha_forward on `module` (made from cfg above): query [2,5,16],
  // key [2,7,12], value [2,7,10], out [2,5,16], BOOL mask [5,7],
  // kv_len {7, 3}, weights [2,4,5,7], lse [2,4,5].
  hwyattn_mha* module = nullptr;
  Tensor query{{2, 5, 16}, -1, 1, 11}, key{{2, 7, 12}, -1, 1, 12}, value{{2, 7, 10}, -1, 1, 13};
  Tensor mha_out{{2, 5, 16}, 0, 0, 14}, mha_weights{{2, 4, 5, 7}, 0, 0, 15};
  Tensor mha_lse{{2, 4, 5}, 0, 0, 16};
  std::vector<uint8_t> bool_mask = std::vector<uint8_t>(5 * 7 + 8, 1);
  hwyattn_tensor tbool_mask{};
  std::vector<int32_t> mha_kv_len = {7, 3};
  hwyattn_sdpa_options mha_opts{};
  const hwyattn_mha* m_arg = nullptr;
  const hwyattn_tensor *query_arg, *key_arg, *value_arg;
  hwyattn_tensor* mha_out_arg;
  const hwyattn_sdpa_options* mha_opts_arg;

  // hwyattn_sdpa_options_copy(copied_arg, copy_src_arg): the base is the
  // options of the sdpa call (a valid struct, a newer header's tail zero).
  struct {
    hwyattn_sdpa_options opts;
    unsigned char tail[16];
  } copy_src = {};
  hwyattn_sdpa_options copied;  // output: sentinel bytes until written
  hwyattn_sdpa_options* copied_arg = &copied;
  const hwyattn_sdpa_options* copy_src_arg = &copy_src.opts;

  // hwyattn_tensor_contiguous(&described, buffer, F32, 3, shape3).
  hwyattn_tensor described;  // output: sentinel bytes until written
  hwyattn_tensor* described_arg = &described;
  float buffer[64];
  hwyattn_dtype c_dtype = HWYATTN_F32;
  int32_t c_rank = 3;
  int64_t shape3[4] = {2, 3, 4, 1};
  const int64_t* shape_arg = shape3;

  // hwyattn_set_num_threads(n).
  int n_threads = 2;

  // hwyattn_merge_states(3, m_outs, m_lses, m_sinks, &m_out, &m_lse): three
  // partials [2,4,5,6] with lses [2,4,5], sinks [4], out and lse_out.
  Tensor m_outs[3] = {Tensor{{2, 4, 5, 6}, -1, 1, 21}, Tensor{{2, 4, 5, 6}, -1, 1, 22},
                      Tensor{{2, 4, 5, 6}, -1, 1, 23}};
  Tensor m_lses[3] = {Tensor{{2, 4, 5}, -3, 3, 24}, Tensor{{2, 4, 5}, -3, 3, 25},
                      Tensor{{2, 4, 5}, -3, 3, 26}};
  Tensor m_out{{2, 4, 5, 6}, 0, 0, 27}, m_lse{{2, 4, 5}, 0, 0, 28};
  std::vector<float> m_sinks = std::vector<float>(8, 0.5f);
  const hwyattn_tensor* m_out_ptrs[3];
  const hwyattn_tensor* m_lse_ptrs[3];
  int32_t m_n = 3;
  const hwyattn_tensor* const* m_outs_arg = m_out_ptrs;
  const hwyattn_tensor* const* m_lses_arg = m_lse_ptrs;
  const float* m_sinks_arg = nullptr;
  hwyattn_tensor* m_out_arg = &m_out.t;
  hwyattn_tensor* m_lse_arg = &m_lse.t;

  // hwyattn_kv_attention(kq_arg, kcache_arg, kbatch_arg, kout_arg, kopts_arg):
  // q [5, 4, 8]; an I8 cache of 4 pages of 4 slots, Hkv 2, D 8, Dv 6, K
  // scales per token [4, 2, 4, 1], V scales per channel [1, 2, 1, 6]; block
  // table [2][3] = {2, 0, -1, 3, 1, -1}; batch q_start {0, 1, 5}, kv_len
  // {6, 7} (a decode at position 5, a chunk at 3..6); causal; out [5, 4, 6],
  // lse [5, 4]. hwyattn_kv_cache_write(kcache_arg, knew_arg, vnew_arg,
  // kslot_arg, wopts_arg): k_new [3, 2, 8], v_new [3, 2, 6], slots {5, -1, 14}.
  std::vector<int8_t> kpool = std::vector<int8_t>(4 * 2 * 4 * 8 + 64, 3);
  std::vector<int8_t> vpool = std::vector<int8_t>(4 * 2 * 4 * 6 + 64, -3);
  Tensor kscale{{4, 2, 4, 1}, 0.01f, 0.02f, 31}, vscale{{1, 2, 1, 6}, 0.01f, 0.02f, 32};
  hwyattn_kv_cache kcache{};
  std::vector<int32_t> ktable = {2, 0, -1, 3, 1, -1};
  std::vector<int32_t> kq_start = {0, 1, 5, 0}, kkv_len = {6, 7, 0}, kq_pos = {5, 3, 0};
  Tensor kq{{5, 4, 8}, -1, 1, 33}, kout{{5, 4, 6}, 0, 0, 34}, klse{{5, 4}, 0, 0, 35};
  hwyattn_kv_batch kbatch{};
  hwyattn_sdpa_options kopts{};
  Tensor knew{{3, 2, 8}, -1, 1, 36}, vnew{{3, 2, 6}, -1, 1, 37};
  std::vector<int64_t> kslot = {5, -1, 14, 0};
  hwyattn_sdpa_options wopts{};
  const hwyattn_tensor* kq_arg = &kq.t;
  const hwyattn_kv_cache* kcache_arg = &kcache;
  const hwyattn_kv_batch* kbatch_arg = &kbatch;
  hwyattn_tensor* kout_arg = &kout.t;
  const hwyattn_sdpa_options* kopts_arg = &kopts;
  const hwyattn_tensor* knew_arg = &knew.t;
  const hwyattn_tensor* vnew_arg = &vnew.t;
  const int64_t* kslot_arg = kslot.data();
  const hwyattn_sdpa_options* wopts_arg = &wopts;

  Env() {
    for (int i = 0; i < 9; ++i) mask.data[static_cast<size_t>(i * 5)] = -kInf;
    hwyattn_kv_cache_init(&kcache);
    const int64_t kshape[4] = {4, 2, 4, 8}, vshape[4] = {4, 2, 4, 6};
    EXPECT_EQ(hwyattn_tensor_contiguous(&kcache.k, kpool.data(), HWYATTN_I8, 4, kshape),
              HWYATTN_OK);
    EXPECT_EQ(hwyattn_tensor_contiguous(&kcache.v, vpool.data(), HWYATTN_I8, 4, vshape),
              HWYATTN_OK);
    kcache.k_scale = &kscale.t;
    kcache.v_scale = &vscale.t;
    kcache.block_table = ktable.data();
    kcache.block_table_stride = 3;
    hwyattn_kv_batch_init(&kbatch);
    kbatch.num_seqs = 2;
    kbatch.q_start = kq_start.data();
    kbatch.kv_len = kkv_len.data();
    hwyattn_sdpa_options_init(&kopts);
    kopts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    kopts.lse = &klse.t;
    hwyattn_sdpa_options_init(&wopts);
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    opts.mask = &mask.t;
    kv_len_storage[0] = 9;
    kv_len_storage[1] = 4;
    opts.kv_len = kv_len_storage.data();
    opts.weights = &weights.t;
    opts.lse = &lse.t;
    q_arg = &q.t;
    k_arg = &k.t;
    v_arg = &v.t;
    out_arg = &out.t;
    opts_arg = &opts;

    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = 16;
    cfg.num_heads = 4;
    cfg.num_kv_heads = 2;
    cfg.kdim = 12;
    cfg.vdim = 10;
    cfg.has_bias = 1;
    w = {w_q.data(),  w_k.data(),       w_v.data(),       w_o.data(),
         bias.data(), bias.data() + 16, bias.data() + 32, bias.data() + 48};
    std::memset(&created, 0xA5, sizeof(created));
    EXPECT_EQ(hwyattn_mha_create(&cfg, &w, &module), HWYATTN_OK) << hwyattn_last_error();
    m_arg = module;
    const int64_t mshape[2] = {5, 7};
    EXPECT_EQ(hwyattn_tensor_contiguous(&tbool_mask, bool_mask.data(), HWYATTN_BOOL, 2, mshape),
              HWYATTN_OK);
    bool_mask[3] = 0;
    hwyattn_sdpa_options_init(&mha_opts);
    mha_opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
    mha_opts.mask = &tbool_mask;
    mha_opts.kv_len = mha_kv_len.data();
    mha_opts.weights = &mha_weights.t;
    mha_opts.lse = &mha_lse.t;
    query_arg = &query.t;
    key_arg = &key.t;
    value_arg = &value.t;
    mha_out_arg = &mha_out.t;
    mha_opts_arg = &mha_opts;

    std::memset(&described, 0x5A, sizeof(described));
    std::memset(&copied, 0x5B, sizeof(copied));
    copy_src.opts = opts;  // a newer header's struct, its unknown tail zero
    copy_src.opts.struct_size = sizeof(copy_src);
    for (Tensor* t : {&out, &weights, &lse, &mha_out, &mha_weights, &mha_lse}) t->FillSentinel();
    for (int i = 0; i < 3; ++i) {
      m_out_ptrs[i] = &m_outs[i].t;
      m_lse_ptrs[i] = &m_lses[i].t;
    }
    m_sinks_arg = m_sinks.data();
    for (Tensor* t : {&m_out, &m_lse}) t->FillSentinel();
    for (Tensor* t : {&kout, &klse}) t->FillSentinel();
  }
  ~Env() { hwyattn_mha_destroy(module); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // Every byte any entry point may write.
  std::vector<unsigned char> Outputs() const {
    std::vector<unsigned char> bytes;
    auto add = [&](const void* p, size_t n) {
      const unsigned char* c = static_cast<const unsigned char*>(p);
      bytes.insert(bytes.end(), c, c + n);
    };
    for (const Tensor* t : {&out, &weights, &lse, &mha_out, &mha_weights, &mha_lse}) {
      add(t->data.data(), t->data.size() * sizeof(float));
    }
    for (const Tensor* t : {&m_out, &m_lse}) add(t->data.data(), t->data.size() * sizeof(float));
    for (const Tensor* t : {&kout, &klse, &kscale}) {
      add(t->data.data(), t->data.size() * sizeof(float));
    }
    add(kpool.data(), kpool.size());
    add(vpool.data(), vpool.size());
    add(&created, sizeof(created));
    add(&described, sizeof(described));
    add(&copied, sizeof(copied));
    const int threads = hwyattn_get_num_threads();
    add(&threads, sizeof(threads));
    return bytes;
  }
};

enum class Entry {
  kSdpa,
  kMhaCreate,
  kMhaForward,
  kContiguous,
  kSetThreads,
  kMerge,
  kKvAttention,
  kKvWrite,
  kOptionsCopy
};

const char* EntryName(Entry e) {
  switch (e) {
    case Entry::kSdpa: return "sdpa";
    case Entry::kMhaCreate: return "mha_create";
    case Entry::kMhaForward: return "mha_forward";
    case Entry::kContiguous: return "tensor_contiguous";
    case Entry::kSetThreads: return "set_num_threads";
    case Entry::kMerge: return "merge_states";
    case Entry::kKvAttention: return "kv_attention";
    case Entry::kKvWrite: return "kv_cache_write";
    case Entry::kOptionsCopy: return "sdpa_options_copy";
  }
  return "?";
}

hwyattn_status Invoke(Entry e, Env& env) {
  switch (e) {
    case Entry::kSdpa:
      return hwyattn_sdpa(env.q_arg, env.k_arg, env.v_arg, env.out_arg, env.opts_arg);
    case Entry::kMhaCreate: return hwyattn_mha_create(env.cfg_arg, env.w_arg, env.created_arg);
    case Entry::kMhaForward:
      return hwyattn_mha_forward(env.m_arg, env.query_arg, env.key_arg, env.value_arg,
                                 env.mha_out_arg, env.mha_opts_arg);
    case Entry::kContiguous:
      return hwyattn_tensor_contiguous(env.described_arg, env.buffer, env.c_dtype, env.c_rank,
                                       env.shape_arg);
    case Entry::kSetThreads: return hwyattn_set_num_threads(env.n_threads);
    case Entry::kMerge:
      return hwyattn_merge_states(env.m_n, env.m_outs_arg, env.m_lses_arg, env.m_sinks_arg,
                                  env.m_out_arg, env.m_lse_arg);
    case Entry::kKvAttention:
      return hwyattn_kv_attention(env.kq_arg, env.kcache_arg, env.kbatch_arg, env.kout_arg,
                                  env.kopts_arg);
    case Entry::kKvWrite:
      return hwyattn_kv_cache_write(env.kcache_arg, env.knew_arg, env.vnew_arg, env.kslot_arg,
                                    env.wopts_arg);
    case Entry::kOptionsCopy: return hwyattn_sdpa_options_copy(env.copied_arg, env.copy_src_arg);
  }
  return HWYATTN_INTERNAL_ERROR;
}

struct BadCase {
  std::string name;
  Entry entry;
  std::function<void(Env&)> mutate;
  hwyattn_status want;
  std::vector<std::string> message;  // each must occur in hwyattn_last_error()
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << EntryName(c.entry) << "/" << c.name; }

constexpr hwyattn_status kInvalid = HWYATTN_INVALID_ARGUMENT;
constexpr hwyattn_status kUnsupported = HWYATTN_UNSUPPORTED;
constexpr int64_t k2e40 = int64_t{1} << 40;

// Points a descriptor's data one byte past its start (misaligned for F32).
void* Misalign(void* p) { return static_cast<char*>(p) + 1; }

std::vector<BadCase> SdpaCases() {
  const Entry e = Entry::kSdpa;
  auto misaligned = [](const float* p) {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + 2);
  };
  std::vector<BadCase> c = {
      // NULL pointers.
      {"QNull", e, [](Env& x) { x.q_arg = nullptr; }, kInvalid, {"q is NULL"}},
      {"KNull", e, [](Env& x) { x.k_arg = nullptr; }, kInvalid, {"k is NULL"}},
      {"VNull", e, [](Env& x) { x.v_arg = nullptr; }, kInvalid, {"v is NULL"}},
      {"OutNull", e, [](Env& x) { x.out_arg = nullptr; }, kInvalid, {"out is NULL"}},
      {"QDataNull", e, [](Env& x) { x.q.t.data = nullptr; }, kInvalid, {"q: data is NULL"}},
      {"KDataNull", e, [](Env& x) { x.k.t.data = nullptr; }, kInvalid, {"k: data is NULL"}},
      {"VDataNull", e, [](Env& x) { x.v.t.data = nullptr; }, kInvalid, {"v: data is NULL"}},
      {"OutDataNull", e, [](Env& x) { x.out.t.data = nullptr; }, kInvalid, {"out: data is NULL"}},
      {"MaskDataNull", e, [](Env& x) { x.mask.t.data = nullptr; }, kInvalid,
       {"mask: data is NULL"}},
      {"WeightsDataNull", e, [](Env& x) { x.weights.t.data = nullptr; }, kInvalid,
       {"weights: data is NULL"}},
      {"LseDataNull", e, [](Env& x) { x.lse.t.data = nullptr; }, kInvalid, {"lse: data is NULL"}},
      // Rank.
      {"QRank0", e, [](Env& x) { x.q.t.rank = 0; }, kInvalid, {"q", "rank is 0", "1..4"}},
      {"QRank5", e, [](Env& x) { x.q.t.rank = 5; }, kInvalid, {"q", "rank is 5"}},
      {"KRankNegative", e, [](Env& x) { x.k.t.rank = -1; }, kInvalid, {"k", "rank is -1"}},
      {"OutRank5", e, [](Env& x) { x.out.t.rank = 5; }, kInvalid, {"out", "rank is 5"}},
      {"MaskRank0", e, [](Env& x) { x.mask.t.rank = 0; }, kInvalid, {"mask", "rank is 0"}},
      {"WeightsRankMax", e, [](Env& x) { x.weights.t.rank = INT32_MAX; }, kInvalid,
       {"weights", "rank is 2147483647"}},
      {"LseRank5", e, [](Env& x) { x.lse.t.rank = 5; }, kInvalid, {"lse", "rank is 5"}},
      // Sizes.
      {"QSizeZero", e, [](Env& x) { x.q.t.shape[2] = 0; }, kInvalid, {"q", "shape[2] is 0"}},
      {"QSizeNegative", e, [](Env& x) { x.q.t.shape[0] = -2; }, kInvalid, {"q", "shape[0] is -2"}},
      {"KSizeZero", e, [](Env& x) { x.k.t.shape[3] = 0; }, kInvalid, {"k", "shape[3] is 0"}},
      {"VSizeNegative", e, [](Env& x) { x.v.t.shape[1] = -1; }, kInvalid, {"v", "shape[1] is -1"}},
      {"OutSizeZero", e, [](Env& x) { x.out.t.shape[3] = 0; }, kInvalid, {"out", "shape[3] is 0"}},
      {"MaskSizeZero", e, [](Env& x) { x.mask.t.shape[3] = 0; }, kInvalid,
       {"mask", "shape[3] is 0"}},
      {"WeightsSizeInt64Min", e, [](Env& x) { x.weights.t.shape[1] = INT64_MIN; }, kInvalid,
       {"weights", "shape[1] is -9223372036854775808"}},
      {"LseSizeZero", e, [](Env& x) { x.lse.t.shape[2] = 0; }, kInvalid, {"lse", "shape[2] is 0"}},
      // Strides: negative, or two output elements on one address.
      {"QStrideNegative", e, [](Env& x) { x.q.t.stride[3] = -1; }, kInvalid,
       {"q", "stride[3] is -1"}},
      {"KStrideNegative", e, [](Env& x) { x.k.t.stride[2] = -8; }, kInvalid,
       {"k", "stride[2] is -8"}},
      {"MaskStrideNegative", e, [](Env& x) { x.mask.t.stride[0] = INT64_MIN; }, kInvalid,
       {"mask", "stride[0] is -9223372036854775808"}},
      {"OutStrideNegative", e, [](Env& x) { x.out.t.stride[1] = -30; }, kInvalid,
       {"out", "stride[1] is -30"}},
      {"OutStrideZeroOverlaps", e, [](Env& x) { x.out.t.stride[3] = 0; }, kInvalid,
       {"out", "value_dim", "stride 0", "overlap"}},
      {"OutRowsOverlap", e, [](Env& x) { x.out.t.stride[2] = 3; }, kInvalid,
       {"out", "stride 3", "overlap"}},
      {"OutHeadsOverlap", e, [](Env& x) { x.out.t.stride[1] = 29; }, kInvalid,
       {"out", "stride 29", "overlap"}},
      {"WeightsKeysOverlap", e, [](Env& x) { x.weights.t.stride[3] = 0; }, kInvalid,
       {"weights", "key length", "stride 0", "overlap"}},
      {"LseOverlaps", e, [](Env& x) { x.lse.t.stride[1] = 4; }, kInvalid,
       {"lse", "stride 4", "overlap"}},
      {"OutAliasesQ", e, [](Env& x) { x.out.t.data = x.q.data.data(); }, kInvalid,
       {"out overlaps q"}},
      {"OutAliasesV", e, [](Env& x) { x.v.t.data = x.out.data.data() + 10; }, kInvalid,
       {"out overlaps v"}},
      {"WeightsAliasMask", e, [](Env& x) { x.mask.t.data = x.weights.data.data() + 9; }, kInvalid,
       {"weights overlaps mask"}},
      {"LseAliasesOut", e, [](Env& x) { x.lse.t.data = x.out.data.data() + 4; }, kInvalid,
       {"overlaps", "out", "lse"}},
      {"OutAliasesKvLen", e,
       [](Env& x) {
         const int32_t lengths[2] = {9, 4};  // valid values, inside out's memory
         std::memcpy(x.out.data.data() + 2, lengths, sizeof(lengths));
         x.opts.kv_len = reinterpret_cast<const int32_t*>(x.out.data.data() + 2);
       },
       kInvalid, {"out overlaps opts->kv_len"}},
      // (Aliasing rows point an input into an output's buffer, inside it, so
      // that no other allocation is involved.)
      // Data pointers.
      {"QMisaligned", e, [](Env& x) { x.q.t.data = Misalign(x.q.data.data()); }, kInvalid,
       {"q: data", "not aligned", "4-byte"}},
      {"OutMisaligned", e, [](Env& x) { x.out.t.data = Misalign(x.out.data.data()); }, kInvalid,
       {"out: data", "not aligned"}},
      {"KvLenMisaligned", e,
       [](Env& x) {
         x.opts.kv_len = reinterpret_cast<const int32_t*>(
             reinterpret_cast<const char*>(x.kv_len_storage.data()) + 2);
       },
       kInvalid, {"kv_len", "not aligned"}},
      {"KSpanWrapsAddressSpace", e,
       [](Env& x) {
         x.k.t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(UINTPTR_MAX - 63) & ~uintptr_t{3});
       },
       kInvalid, {"k: data", "wraps around"}},
      // Dtypes.
      {"QDtypeBool", e, [](Env& x) { x.q.t.dtype = HWYATTN_BOOL; }, kInvalid,
       {"q", "dtype BOOL", "not valid"}},
      {"QDtype77", e, [](Env& x) { x.q.t.dtype = EnumFromInt<hwyattn_dtype>(77); }, kInvalid,
       {"q", "dtype is 77"}},
      {"VDtypeNegative", e, [](Env& x) { x.v.t.dtype = EnumFromInt<hwyattn_dtype>(-1); }, kInvalid,
       {"v", "dtype is -1"}},
      {"OutDtypeI8", e, [](Env& x) { x.out.t.dtype = HWYATTN_I8; }, kInvalid,
       {"out: dtype I8 is accepted only for the K/V pages"}},
      {"OutF16OverlapsQ",
       e,
       [](Env& x) {
         x.out.t.dtype = HWYATTN_F16;
         x.out.t.data = x.q.t.data;
       },
       kInvalid,
       {"out overlaps q"}},
      {"OutDtypeBool", e, [](Env& x) { x.out.t.dtype = HWYATTN_BOOL; }, kInvalid,
       {"out", "dtype BOOL"}},
      {"MaskDtypeBf16", e, [](Env& x) { x.mask.t.dtype = HWYATTN_BF16; }, kUnsupported,
       {"mask", "dtype BF16"}},
      // F16 masks are accepted (ggml's KQ mask); their own bad layouts.
      {"MaskF16Misaligned", e,
       [](Env& x) {
         x.mask.t.dtype = HWYATTN_F16;
         x.mask.t.data = reinterpret_cast<char*>(x.mask.data.data()) + 1;
       },
       kInvalid, {"mask: data", "not aligned to its 2-byte elements"}},
      {"MaskF16KeyLengthMismatch", e,
       [](Env& x) {
         x.mask.t.dtype = HWYATTN_F16;
         x.mask.t.shape[3] = 10;
       },
       kInvalid, {"mask: key length (shape[3]) is 10", "1 or 9"}},
      {"MaskF16SpanWrapsAddressSpace", e,
       [](Env& x) {
         x.mask.t.dtype = HWYATTN_F16;
         x.mask.t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(UINTPTR_MAX - 63) & ~uintptr_t{1});
       },
       kInvalid, {"mask: data", "wraps around"}},
      {"MaskF16StrideOverflow", e,
       [](Env& x) {
         x.mask.t.dtype = HWYATTN_F16;
         x.mask.t.stride[3] = INT64_MAX / 4;
       },
       kInvalid, {"mask: shape[3] = 9 with stride", "overflows 64-bit offsets"}},
      {"WeightsDtypeF16", e, [](Env& x) { x.weights.t.dtype = HWYATTN_F16; }, kUnsupported,
       {"weights", "dtype F16"}},
      {"LseDtypeBool", e, [](Env& x) { x.lse.t.dtype = HWYATTN_BOOL; }, kInvalid,
       {"lse", "dtype BOOL"}},
      // Sizes that disagree.
      {"KBatchMismatch", e, [](Env& x) { x.k.t.shape[0] = 3; }, kInvalid,
       {"k: batch (shape[0]) is 3", "2"}},
      {"KHeadDimMismatch", e, [](Env& x) { x.k.t.shape[3] = 7; }, kInvalid,
       {"k: head_dim (shape[3]) is 7", "head_dim is 8"}},
      {"HqNotMultipleOfHkv", e,
       [](Env& x) {
         x.k.t.shape[1] = 3;
         x.v.t.shape[1] = 3;
       },
       kInvalid, {"k: heads (shape[1]) is 3", "does not divide", "4"}},
      {"VHeadsMismatch", e, [](Env& x) { x.v.t.shape[1] = 1; }, kInvalid,
       {"v: heads (shape[1]) is 1", "2"}},
      {"VLengthMismatch", e, [](Env& x) { x.v.t.shape[2] = 8; }, kInvalid,
       {"v: length (shape[2]) is 8", "9"}},
      {"VBatchMismatch", e, [](Env& x) { x.v.t.shape[0] = 3; }, kInvalid,
       {"v: batch (shape[0]) is 3", "2"}},
      {"OutBatchMismatch", e, [](Env& x) { x.out.t.shape[0] = 1; }, kInvalid,
       {"out: batch (shape[0]) is 1", "2"}},
      {"OutHeadsMismatch", e, [](Env& x) { x.out.t.shape[1] = 2; }, kInvalid,
       {"out: heads (shape[1]) is 2", "4"}},
      {"OutLengthMismatch", e, [](Env& x) { x.out.t.shape[2] = 4; }, kInvalid,
       {"out: length (shape[2]) is 4", "5"}},
      {"OutValueDimMismatch", e, [](Env& x) { x.out.t.shape[3] = 5; }, kInvalid,
       {"out: value_dim (shape[3]) is 5", "6"}},
      {"OutRank3ForRank4", e,
       [](Env& x) {
         x.out.t.rank = 3;
         x.out.t.shape[0] = 4, x.out.t.shape[1] = 5, x.out.t.shape[2] = 6;
         x.out.t.stride[0] = 30, x.out.t.stride[1] = 6, x.out.t.stride[2] = 1;
       },
       kInvalid, {"out: batch (implicit, rank 3) is 1", "2"}},
      {"MaskBatchMismatch", e, [](Env& x) { x.mask.t.shape[0] = 3; }, kInvalid,
       {"mask: batch (shape[0]) is 3", "1 or 2"}},
      {"MaskHeadsMismatch", e, [](Env& x) { x.mask.t.shape[1] = 2; }, kInvalid,
       {"mask: heads (shape[1]) is 2", "1 or 4"}},
      {"MaskQueryLengthMismatch", e, [](Env& x) { x.mask.t.shape[2] = 4; }, kInvalid,
       {"mask: query length (shape[2]) is 4", "1 or 5"}},
      {"MaskKeyLengthMismatch", e, [](Env& x) { x.mask.t.shape[3] = 10; }, kInvalid,
       {"mask: key length (shape[3]) is 10", "1 or 9"}},
      {"MaskRank2QueryLengthMismatch", e,
       [](Env& x) {
         x.mask.t.rank = 2;  // [Lq, Lk], broadcast over batch and heads
         x.mask.t.shape[0] = 2, x.mask.t.shape[1] = 9;
         x.mask.t.stride[0] = 9, x.mask.t.stride[1] = 1;
       },
       kInvalid, {"mask: query length (shape[0]) is 2", "1 or 5"}},
      {"WeightsKeyLengthMismatch", e, [](Env& x) { x.weights.t.shape[3] = 8; }, kInvalid,
       {"weights: key length (shape[3]) is 8", "9"}},
      {"WeightsHeadsBroadcast", e, [](Env& x) { x.weights.t.shape[1] = 1; }, kInvalid,
       {"weights: heads (shape[1]) is 1", "4"}},
      {"LseLengthMismatch", e, [](Env& x) { x.lse.t.shape[2] = 6; }, kInvalid,
       {"lse: length (shape[2]) is 6", "5"}},
      {"LseRank4", e,
       [](Env& x) {
         x.lse.t.rank = 4;
         x.lse.t.shape[3] = 1;
         x.lse.t.stride[3] = 1;
       },
       kInvalid, {"lse", "is 2", "needs 1"}},
      // kv_len.
      {"KvLenNegative", e, [](Env& x) { x.kv_len_storage[0] = -1; }, kInvalid,
       {"kv_len[0] is -1", "[0, 9]"}},
      {"KvLenAboveLk", e, [](Env& x) { x.kv_len_storage[1] = 10; }, kInvalid,
       {"kv_len[1] is 10", "[0, 9]"}},
      {"KvLenInt32Min", e, [](Env& x) { x.kv_len_storage[1] = INT32_MIN; }, kInvalid,
       {"kv_len[1] is -2147483648"}},
      {"KvLenInt32Max", e, [](Env& x) { x.kv_len_storage[0] = INT32_MAX; }, kInvalid,
       {"kv_len[0] is 2147483647"}},
      // Options.
      {"StructSizeZero", e, [](Env& x) { x.opts.struct_size = 0; }, kInvalid,
       {"opts: struct_size is 0", "hwyattn_sdpa_options_init"}},
      {"StructSizeSmaller", e,
       [](Env& x) { x.opts.struct_size = sizeof(hwyattn_sdpa_options) - 8; }, kInvalid,
       {"opts: struct_size is " + std::to_string(sizeof(hwyattn_sdpa_options) - 8)}},
      {"StructSizeHuge", e, [](Env& x) { x.opts.struct_size = UINT32_MAX; }, kInvalid,
       {"opts: struct_size is 4294967295"}},
      {"ScaleNaN", e, [](Env& x) { x.opts.scale = kNaN; }, kInvalid, {"opts: scale is nan"}},
      {"ScaleInf", e, [](Env& x) { x.opts.scale = -kInf; }, kInvalid, {"opts: scale is -inf"}},
      {"ScalePlusInf", e, [](Env& x) { x.opts.scale = kInf; }, kInvalid, {"opts: scale is inf"}},
      {"Causal3", e, [](Env& x) { x.opts.causal = EnumFromInt<hwyattn_causal>(3); }, kInvalid,
       {"opts: causal is 3"}},
      {"CausalNegative", e, [](Env& x) { x.opts.causal = EnumFromInt<hwyattn_causal>(-7); },
       kInvalid, {"opts: causal is -7"}},
      {"StructSizeBetweenReleases", e, [](Env& x) { x.opts.struct_size = 56; }, kInvalid,
       {"opts: struct_size is 56", "not the size of any"}},
      {"Reserved0Set", e, [](Env& x) { x.opts.reserved0 = 3; }, kUnsupported,
       {"opts: reserved0 is 3"}},
      // Score modifiers.
      {"WindowLeftNegative", e, [](Env& x) { x.opts.window_left = -1; }, kInvalid,
       {"opts: window_left is -1"}},
      {"WindowRightInt64Min", e, [](Env& x) { x.opts.window_right = INT64_MIN; }, kInvalid,
       {"opts: window_right is -9223372036854775808"}},
      {"SoftcapNaN", e, [](Env& x) { x.opts.softcap = kNaN; }, kInvalid, {"opts: softcap is nan"}},
      {"SoftcapNegative", e, [](Env& x) { x.opts.softcap = -30.0f; }, kInvalid,
       {"opts: softcap is -30"}},
      {"SoftcapInf", e, [](Env& x) { x.opts.softcap = kInf; }, kInvalid, {"opts: softcap is inf"}},
      {"AlibiSlopeNaN", e,
       [](Env& x) {
         x.head_values[2] = kNaN;
         x.opts.alibi_slopes = x.head_values.data();
       },
       kInvalid, {"opts: alibi_slopes[2] is nan"}},
      {"AlibiSlopeInf", e,
       [](Env& x) {
         x.head_values[3] = -kInf;
         x.opts.alibi_slopes = x.head_values.data();
       },
       kInvalid, {"opts: alibi_slopes[3] is -inf"}},
      {"AlibiMisaligned", e,
       [=](Env& x) { x.opts.alibi_slopes = misaligned(x.head_values.data()); }, kInvalid,
       {"opts: alibi_slopes", "not aligned"}},
      {"SinkNaN", e,
       [](Env& x) {
         x.head_values[0] = kNaN;
         x.opts.sinks = x.head_values.data();
       },
       kInvalid, {"opts: sinks[0] is nan"}},
      {"SinkPlusInf", e,
       [](Env& x) {
         x.head_values[1] = kInf;
         x.opts.sinks = x.head_values.data();
       },
       kInvalid, {"opts: sinks[1] is inf"}},
      {"ParallelNoFunction", e,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.opts.parallel = &x.pool;
       },
       kInvalid, {"opts: parallel: parallel_for is NULL"}},
      {"ParallelZeroWorkers", e,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.pool.num_workers = 0;
         x.opts.parallel = &x.pool;
       },
       kInvalid, {"opts: parallel: num_workers is 0"}},
      {"ParallelStructSizeZero", e,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.pool.struct_size = 0;
         x.opts.parallel = &x.pool;
       },
       kInvalid, {"opts: parallel: struct_size is 0", "hwyattn_parallel_init"}},
      {"Precision3", e, [](Env& x) { x.opts.precision = EnumFromInt<hwyattn_precision>(3); },
       kInvalid, {"opts: precision is 3"}},
      {"PrecisionNegative", e,
       [](Env& x) { x.opts.precision = EnumFromInt<hwyattn_precision>(-1); }, kInvalid,
       {"opts: precision is -1"}},
      // Sizes whose products overflow 64-bit arithmetic.
      {"QCountOverflows2e40x2e40", e,
       [](Env& x) {
         x.q.t.shape[0] = k2e40, x.q.t.shape[1] = k2e40;
         x.q.t.stride[0] = 0, x.q.t.stride[1] = 0;
       },
       kInvalid, {"q", "element count", "1099511627776, 1099511627776", "overflows"}},
      {"KOffsetOverflows", e,
       [](Env& x) {
         x.k.t.shape[2] = k2e40;
         x.k.t.stride[2] = k2e40;
       },
       kInvalid, {"k", "shape[2] = 1099511627776", "stride 1099511627776", "overflows"}},
      {"KBytesOverflow", e,
       [](Env& x) {
         x.k.t.rank = 1;
         x.k.t.shape[0] = INT64_MAX;
         x.k.t.stride[0] = 1;
       },
       kInvalid, {"k", "memory span", "overflows"}},
      {"OutCountOverflows", e,
       [](Env& x) {
         x.out.t.shape[2] = k2e40, x.out.t.shape[3] = k2e40;
         x.out.t.stride[2] = 0, x.out.t.stride[3] = 0;
       },
       kInvalid, {"out", "element count", "overflows"}},
      {"WeightsCountOverflows", e,
       [](Env& x) {
         x.weights.t.shape[2] = k2e40, x.weights.t.shape[3] = k2e40;
       },
       kInvalid, {"weights", "overflows"}},
      // A valid description that this version cannot run.
      {"QLengthAbove2e31", e,
       [](Env& x) {
         // q broadcast over a length of 2^31; out described over 2^31 rows
         // (never touched: the call stops at validation).
         const int64_t n = int64_t{1} << 31;
         x.q.t.shape[2] = n;
         x.q.t.stride[2] = 0;
         x.out.t.shape[2] = n;
         x.out.t.stride[1] = 6 * n, x.out.t.stride[0] = 4 * 6 * n;
         x.opts_arg = nullptr;
       },
       kUnsupported, {"q: length is 2147483648", "2^31-1"}},
  };
  return c;
}

std::vector<BadCase> MhaCreateCases() {
  const Entry e = Entry::kMhaCreate;
  auto misaligned = [](const float* p) {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + 2);
  };
  std::vector<BadCase> c = {
      {"CfgNull", e, [](Env& x) { x.cfg_arg = nullptr; }, kInvalid, {"cfg is NULL"}},
      {"WeightsNull", e, [](Env& x) { x.w_arg = nullptr; }, kInvalid, {"w is NULL"}},
      {"OutNull", e, [](Env& x) { x.created_arg = nullptr; }, kInvalid, {"out is NULL"}},
      {"WqNull", e, [](Env& x) { x.w.w_q = nullptr; }, kInvalid, {"w: w_q is NULL"}},
      {"WoNull", e, [](Env& x) { x.w.w_o = nullptr; }, kInvalid, {"w: w_o is NULL"}},
      {"BiasNullWithHasBias",
       e,
       [](Env& x) { x.w.b_v = nullptr; },
       kInvalid,
       {"w: b_v is NULL", "has_bias"}},
      {"BiasWithoutHasBias",
       e,
       [](Env& x) { x.cfg.has_bias = 0; },
       kInvalid,
       {"w: b_q is given", "has_bias is 0"}},
      {"WkMisaligned",
       e,
       [=](Env& x) { x.w.w_k = misaligned(x.w.w_k); },
       kInvalid,
       {"w: w_k", "not aligned"}},
      {"BoMisaligned",
       e,
       [=](Env& x) { x.w.b_o = misaligned(x.w.b_o); },
       kInvalid,
       {"w: b_o", "not aligned"}},
      {"StructSizeZero",
       e,
       [](Env& x) { x.cfg.struct_size = 0; },
       kInvalid,
       {"cfg: struct_size is 0", "hwyattn_mha_config_init"}},
      {"StructSizeSmaller",
       e,
       [](Env& x) { x.cfg.struct_size = 8; },
       kInvalid,
       {"cfg: struct_size is 8"}},
      {"StructSizeHuge",
       e,
       [](Env& x) { x.cfg.struct_size = 1u << 20; },
       kInvalid,
       {"cfg: struct_size is 1048576"}},
      {"Reserved0Set",
       e,
       [](Env& x) { x.cfg.reserved0 = 1; },
       kUnsupported,
       {"cfg: reserved0 is 1"}},
      {"Reserved1Set",
       e,
       [](Env& x) { x.cfg.reserved1 = 2; },
       kUnsupported,
       {"cfg: reserved1 is 2"}},
      {"WeightDtypeF16",
       e,
       [](Env& x) { x.cfg.weight_dtype = HWYATTN_F16; },
       kInvalid,
       {"cfg: weight_dtype is 1", "HWYATTN_BF16"}},
      {"WeightDtypeOutsideEnum",
       e,
       [](Env& x) { x.cfg.weight_dtype = static_cast<hwyattn_dtype>(-7); },
       kInvalid,
       {"cfg: weight_dtype is -7"}},
      {"WeightDtypeI8",
       e,
       [](Env& x) { x.cfg.weight_dtype = HWYATTN_I8; },
       kInvalid,
       {"cfg: weight_dtype is 4"}},
      {"EmbedDimZero", e, [](Env& x) { x.cfg.embed_dim = 0; }, kInvalid, {"cfg: embed_dim is 0"}},
      {"EmbedDimNegative",
       e,
       [](Env& x) { x.cfg.embed_dim = -16; },
       kInvalid,
       {"cfg: embed_dim is -16"}},
      {"NumHeadsZero", e, [](Env& x) { x.cfg.num_heads = 0; }, kInvalid, {"cfg: num_heads is 0"}},
      {"NumHeadsNegative",
       e,
       [](Env& x) { x.cfg.num_heads = INT64_MIN; },
       kInvalid,
       {"cfg: num_heads is -9223372036854775808"}},
      {"HeadDimNegative",
       e,
       [](Env& x) { x.cfg.head_dim = -4; },
       kInvalid,
       {"cfg: head_dim is -4"}},
      {"EmbedDimNotDivisible",
       e,
       [](Env& x) {
         x.cfg.num_heads = 3;
         x.cfg.num_kv_heads = 0;
       },
       kInvalid,
       {"embed_dim 16", "num_heads 3"}},
      {"KvHeadsNegative",
       e,
       [](Env& x) { x.cfg.num_kv_heads = -2; },
       kInvalid,
       {"cfg: num_kv_heads is -2"}},
      {"KvHeadsDoNotDivide",
       e,
       [](Env& x) { x.cfg.num_kv_heads = 3; },
       kInvalid,
       {"num_kv_heads 3", "num_heads 4"}},
      {"KdimNegative", e, [](Env& x) { x.cfg.kdim = -12; }, kInvalid, {"cfg: kdim is -12"}},
      {"VdimNegative", e, [](Env& x) { x.cfg.vdim = -1; }, kInvalid, {"cfg: vdim is -1"}},
      {"InnerWidthOverflows",
       e,
       [](Env& x) {
         x.cfg.num_heads = k2e40;
         x.cfg.num_kv_heads = 1;
         x.cfg.head_dim = k2e40;
       },
       kInvalid,
       {"num_heads * head_dim", "1099511627776", "overflows"}},
      {"ProjectionTooLarge",
       e,
       [](Env& x) {
         x.cfg.embed_dim = int64_t{1} << 31;
         x.cfg.num_heads = 1;
         x.cfg.num_kv_heads = 1;
         x.cfg.head_dim = int64_t{1} << 31;
       },
       kInvalid,
       {"projection of 2147483648 x 2147483648", "too large"}},
  };
  return c;
}

std::vector<BadCase> MhaForwardCases() {
  const Entry e = Entry::kMhaForward;
  std::vector<BadCase> c = {
      {"ModuleNull", e, [](Env& x) { x.m_arg = nullptr; }, kInvalid, {"m is NULL"}},
      {"QueryNull", e, [](Env& x) { x.query_arg = nullptr; }, kInvalid, {"query is NULL"}},
      {"OutNull", e, [](Env& x) { x.mha_out_arg = nullptr; }, kInvalid, {"out is NULL"}},
      {"KeyNullValueNot",
       e,
       [](Env& x) { x.key_arg = nullptr; },
       kInvalid,
       {"key is NULL but value is not"}},
      {"ValueNullKeyNot",
       e,
       [](Env& x) { x.value_arg = nullptr; },
       kInvalid,
       {"value is NULL but key is not"}},
      {"SelfAttentionWithKdim",
       e,
       [](Env& x) {
         x.key_arg = nullptr;
         x.value_arg = nullptr;
       },
       kInvalid,
       {"self-attention", "kdim 12", "vdim 10", "embed_dim 16"}},
      {"QueryDataNull",
       e,
       [](Env& x) { x.query.t.data = nullptr; },
       kInvalid,
       {"query: data is NULL"}},
      {"ValueDataNull",
       e,
       [](Env& x) { x.value.t.data = nullptr; },
       kInvalid,
       {"value: data is NULL"}},
      {"MaskDataNull",
       e,
       [](Env& x) { x.tbool_mask.data = nullptr; },
       kInvalid,
       {"mask: data is NULL"}},
      {"LseDataNull",
       e,
       [](Env& x) { x.mha_lse.t.data = nullptr; },
       kInvalid,
       {"lse: data is NULL"}},
      {"QueryRank0", e, [](Env& x) { x.query.t.rank = 0; }, kInvalid, {"query", "rank is 0"}},
      {"KeyRank5", e, [](Env& x) { x.key.t.rank = 5; }, kInvalid, {"key", "rank is 5"}},
      {"QueryRank4",
       e,
       [](Env& x) {
         x.query.t.rank = 4;
         x.query.t.shape[3] = 16, x.query.t.shape[2] = 5, x.query.t.shape[1] = 1,
         x.query.t.shape[0] = 2;
         x.query.t.stride[3] = 1, x.query.t.stride[2] = 16, x.query.t.stride[1] = 80,
         x.query.t.stride[0] = 80;
       },
       kInvalid,
       {"query: leading (shape[0]) is 2", "needs 1"}},
      {"QuerySizeZero",
       e,
       [](Env& x) { x.query.t.shape[1] = 0; },
       kInvalid,
       {"query", "shape[1] is 0"}},
      {"OutSizeNegative",
       e,
       [](Env& x) { x.mha_out.t.shape[0] = -5; },
       kInvalid,
       {"out", "shape[0] is -5"}},
      {"KeyStrideNegative",
       e,
       [](Env& x) { x.key.t.stride[1] = -12; },
       kInvalid,
       {"key", "stride[1] is -12"}},
      {"OutStrideZero",
       e,
       [](Env& x) { x.mha_out.t.stride[2] = 0; },
       kInvalid,
       {"out: width", "stride 0", "overlap"}},
      {"OutRowsOverlap",
       e,
       [](Env& x) { x.mha_out.t.stride[1] = 8; },
       kInvalid,
       {"out: length", "stride 8", "overlap"}},
      {"WeightsOverlap",
       e,
       [](Env& x) { x.mha_weights.t.stride[2] = 1; },
       kInvalid,
       {"weights", "overlap"}},
      {"OutAliasesQuery",
       e,
       [](Env& x) { x.mha_out.t.data = x.query.data.data(); },
       kInvalid,
       {"out overlaps query"}},
      {"OutAliasesValue",
       e,
       [](Env& x) { x.value.t.data = x.mha_out.data.data(); },
       kInvalid,
       {"out overlaps value"}},
      {"OutBf16AliasesQuery",
       e,
       [](Env& x) {
         x.mha_out.t.dtype = HWYATTN_BF16;
         x.mha_out.t.data = x.query.data.data();
       },
       kInvalid,
       {"out overlaps query"}},
      {"OutDtypeI8",
       e,
       [](Env& x) { x.mha_out.t.dtype = HWYATTN_I8; },
       kInvalid,
       {"out: dtype I8"}},
      {"LseAliasesWeights",
       e,
       [](Env& x) { x.mha_lse.t.data = x.mha_weights.data.data(); },
       kInvalid,
       {"overlaps", "weights", "lse"}},
      {"QueryMisaligned",
       e,
       [](Env& x) { x.query.t.data = Misalign(x.query.data.data()); },
       kInvalid,
       {"query: data", "not aligned"}},
      {"QueryDtypeF16",
       e,
       [](Env& x) { x.query.t.dtype = HWYATTN_F16; },
       kUnsupported,
       {"query", "dtype F16", "not supported"}},
      {"KeyDtypeBool",
       e,
       [](Env& x) { x.key.t.dtype = HWYATTN_BOOL; },
       kInvalid,
       {"key", "dtype BOOL"}},
      {"OutDtype99",
       e,
       [](Env& x) { x.mha_out.t.dtype = EnumFromInt<hwyattn_dtype>(99); },
       kInvalid,
       {"out", "dtype is 99"}},
      {"MaskDtypeBf16",
       e,
       [](Env& x) { x.tbool_mask.dtype = HWYATTN_BF16; },
       kUnsupported,
       {"mask", "dtype BF16"}},
      {"MaskF16Misaligned",
       e,
       [](Env& x) {
         x.tbool_mask.dtype = HWYATTN_F16;
         x.tbool_mask.data = x.bool_mask.data() + 1;
       },
       kInvalid,
       {"mask: data", "not aligned to its 2-byte elements"}},
      {"QueryWidthMismatch",
       e,
       [](Env& x) { x.query.t.shape[2] = 15; },
       kInvalid,
       {"query: width (shape[2]) is 15", "embed_dim is 16"}},
      {"KeyWidthMismatch",
       e,
       [](Env& x) { x.key.t.shape[2] = 11; },
       kInvalid,
       {"key: width (shape[2]) is 11", "kdim is 12"}},
      {"ValueWidthMismatch",
       e,
       [](Env& x) { x.value.t.shape[2] = 12; },
       kInvalid,
       {"value: width (shape[2]) is 12", "vdim is 10"}},
      {"KeyBatchMismatch",
       e,
       [](Env& x) { x.key.t.shape[0] = 1; },
       kInvalid,
       {"key: batch (shape[0]) is 1", "2"}},
      {"ValueLengthMismatch",
       e,
       [](Env& x) { x.value.t.shape[1] = 6; },
       kInvalid,
       {"value: length (shape[1]) is 6", "7"}},
      {"OutLengthMismatch",
       e,
       [](Env& x) { x.mha_out.t.shape[1] = 4; },
       kInvalid,
       {"out: length (shape[1]) is 4", "5"}},
      {"OutWidthMismatch",
       e,
       [](Env& x) { x.mha_out.t.shape[2] = 12; },
       kInvalid,
       {"out: width (shape[2]) is 12", "16"}},
      {"OutBatchMismatch",
       e,
       [](Env& x) { x.mha_out.t.shape[0] = 3; },
       kInvalid,
       {"out: batch (shape[0]) is 3", "2"}},
      {"MaskKeyLengthMismatch",
       e,
       [](Env& x) { x.tbool_mask.shape[1] = 6; },
       kInvalid,
       {"mask: key length (shape[1]) is 6", "1 or 7"}},
      {"WeightsHeadsMismatch",
       e,
       [](Env& x) { x.mha_weights.t.shape[1] = 2; },
       kInvalid,
       {"weights: heads (shape[1]) is 2", "4"}},
      {"LseLengthMismatch",
       e,
       [](Env& x) { x.mha_lse.t.shape[2] = 7; },
       kInvalid,
       {"lse: length (shape[2]) is 7", "5"}},
      {"KvLenAboveLk",
       e,
       [](Env& x) { x.mha_kv_len[1] = 8; },
       kInvalid,
       {"kv_len[1] is 8", "[0, 7]"}},
      {"KvLenNegative", e, [](Env& x) { x.mha_kv_len[0] = -3; }, kInvalid, {"kv_len[0] is -3"}},
      {"StructSizeZero",
       e,
       [](Env& x) { x.mha_opts.struct_size = 0; },
       kInvalid,
       {"opts: struct_size is 0"}},
      {"ScaleNaN", e, [](Env& x) { x.mha_opts.scale = kNaN; }, kInvalid, {"opts: scale is nan"}},
      {"Causal9",
       e,
       [](Env& x) { x.mha_opts.causal = EnumFromInt<hwyattn_causal>(9); },
       kInvalid,
       {"opts: causal is 9"}},
      {"WindowLeftNegative",
       e,
       [](Env& x) { x.mha_opts.window_left = -5; },
       kInvalid,
       {"opts: window_left is -5"}},
      {"SinkNaN",
       e,
       [](Env& x) {
         x.head_values[3] = kNaN;
         x.mha_opts.sinks = x.head_values.data();
       },
       kInvalid,
       {"opts: sinks[3] is nan"}},
      // The caller's pool runs the projections too: checked on this entry.
      {"ParallelNoFunction",
       e,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.mha_opts.parallel = &x.pool;
       },
       kInvalid,
       {"opts: parallel: parallel_for is NULL"}},
      {"ParallelWorkersInt32Min",
       e,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.pool.num_workers = INT32_MIN;
         x.mha_opts.parallel = &x.pool;
       },
       kInvalid,
       {"opts: parallel: num_workers is -2147483648", ">= 1"}},
      {"QueryCountOverflows",
       e,
       [](Env& x) {
         x.query.t.shape[0] = k2e40, x.query.t.shape[1] = k2e40;
         x.query.t.stride[0] = 0, x.query.t.stride[1] = 0;
       },
       kInvalid,
       {"query", "element count", "overflows"}},
      {"KeyLengthAbove2e31",
       e,
       [](Env& x) {
         const int64_t n = int64_t{1} << 31;
         x.key.t.shape[1] = n, x.key.t.stride[1] = 0;
         x.value.t.shape[1] = n, x.value.t.stride[1] = 0;
         x.mha_opts_arg = nullptr;
       },
       kUnsupported,
       {"key: length is 2147483648"}},
  };
  return c;
}

std::vector<BadCase> OtherCases() {
  const Entry c = Entry::kContiguous, t = Entry::kSetThreads;
  return {
      {"TensorNull", c, [](Env& x) { x.described_arg = nullptr; }, kInvalid, {"t is NULL"}},
      {"ShapeNull", c, [](Env& x) { x.shape_arg = nullptr; }, kInvalid, {"shape is NULL"}},
      {"Rank0", c, [](Env& x) { x.c_rank = 0; }, kInvalid, {"rank is 0"}},
      {"Rank5", c, [](Env& x) { x.c_rank = 5; }, kInvalid, {"rank is 5"}},
      {"SizeZero", c, [](Env& x) { x.shape3[1] = 0; }, kInvalid, {"shape[1] is 0"}},
      {"SizeNegative", c, [](Env& x) { x.shape3[2] = -4; }, kInvalid, {"shape[2] is -4"}},
      {"CountOverflows",
       c,
       [](Env& x) {
         x.shape3[0] = k2e40;
         x.shape3[1] = k2e40;
       },
       kInvalid,
       {"overflows", "shape[1] = 1099511627776"}},
      {"Dtype14",
       c,
       [](Env& x) { x.c_dtype = EnumFromInt<hwyattn_dtype>(14); },
       kInvalid,
       {"dtype is 14"}},
      {"Negative", t, [](Env& x) { x.n_threads = -1; }, kInvalid, {"n: -1 threads"}},
      {"IntMin", t, [](Env& x) { x.n_threads = INT_MIN; }, kInvalid, {"n: -2147483648 threads"}},
      {"TooMany",
       t,
       [](Env& x) { x.n_threads = 4097; },
       kUnsupported,
       {"n: 4097 threads", "at most 4096"}},
      {"IntMax", t, [](Env& x) { x.n_threads = INT_MAX; }, kUnsupported, {"n: 2147483647 threads"}},
  };
}

// hwyattn_merge_states: every rule of its validation (see hwyattn.h).
std::vector<BadCase> MergeCases() {
  const Entry e = Entry::kMerge;
  // out's floats as a place to put other arguments (aliasing rows).
  auto in_out = [](Env& x, size_t at) { return x.m_out.data.data() + at; };
  std::vector<BadCase> c = {
      {"NZero", e, [](Env& x) { x.m_n = 0; }, kInvalid, {"n is 0", ">= 1"}},
      {"NNegative", e, [](Env& x) { x.m_n = INT32_MIN; }, kInvalid, {"n is -2147483648"}},
      {"OutsNull", e, [](Env& x) { x.m_outs_arg = nullptr; }, kInvalid, {"outs is NULL"}},
      {"LsesNull", e, [](Env& x) { x.m_lses_arg = nullptr; }, kInvalid, {"lses is NULL"}},
      {"OutsElementNull",
       e,
       [](Env& x) { x.m_out_ptrs[2] = nullptr; },
       kInvalid,
       {"outs[2] is NULL"}},
      {"LsesElementNull",
       e,
       [](Env& x) { x.m_lse_ptrs[1] = nullptr; },
       kInvalid,
       {"lses[1] is NULL"}},
      {"OutNull", e, [](Env& x) { x.m_out_arg = nullptr; }, kInvalid, {"out is NULL"}},
      {"PartialDataNull",
       e,
       [](Env& x) { x.m_outs[1].t.data = nullptr; },
       kInvalid,
       {"outs[1]: data is NULL"}},
      {"LseDataNull",
       e,
       [](Env& x) { x.m_lses[2].t.data = nullptr; },
       kInvalid,
       {"lses[2]: data is NULL"}},
      {"LseOutDataNull",
       e,
       [](Env& x) { x.m_lse.t.data = nullptr; },
       kInvalid,
       {"lse_out: data is NULL"}},
      {"PartialRank5",
       e,
       [](Env& x) { x.m_outs[2].t.rank = 5; },
       kInvalid,
       {"outs[2]", "rank is 5"}},
      {"LseRank0", e, [](Env& x) { x.m_lses[0].t.rank = 0; }, kInvalid, {"lses[0]", "rank is 0"}},
      {"PartialSizeZero",
       e,
       [](Env& x) { x.m_outs[1].t.shape[3] = 0; },
       kInvalid,
       {"outs[1]", "shape[3] is 0"}},
      {"PartialStrideNegative",
       e,
       [](Env& x) { x.m_outs[2].t.stride[2] = -6; },
       kInvalid,
       {"outs[2]", "stride[2] is -6"}},
      {"PartialMisaligned",
       e,
       [](Env& x) { x.m_outs[1].t.data = Misalign(x.m_outs[1].data.data()); },
       kInvalid,
       {"outs[1]: data", "not aligned"}},
      {"PartialCountOverflows",
       e,
       [](Env& x) {
         x.m_outs[1].t.shape[0] = k2e40, x.m_outs[1].t.shape[1] = k2e40;
         x.m_outs[1].t.stride[0] = 0, x.m_outs[1].t.stride[1] = 0;
       },
       kInvalid,
       {"outs[1]", "element count", "overflows"}},
      // Dtypes: F32 only (F16/BF16 are valid dtypes this call does not take).
      {"PartialDtypeF16",
       e,
       [](Env& x) { x.m_outs[1].t.dtype = HWYATTN_F16; },
       kUnsupported,
       {"outs[1]", "dtype F16", "not supported"}},
      {"LseDtypeBool",
       e,
       [](Env& x) { x.m_lses[2].t.dtype = HWYATTN_BOOL; },
       kInvalid,
       {"lses[2]", "dtype BOOL", "not valid"}},
      {"OutDtypeBf16",
       e,
       [](Env& x) { x.m_out.t.dtype = HWYATTN_BF16; },
       kUnsupported,
       {"out", "dtype BF16"}},
      {"LseOutDtype77",
       e,
       [](Env& x) { x.m_lse.t.dtype = EnumFromInt<hwyattn_dtype>(77); },
       kInvalid,
       {"lse_out", "dtype is 77"}},
      // Shapes: every partial and out as outs[0]; every lse as its [B, H, L].
      {"PartialValueDimMismatch",
       e,
       [](Env& x) { x.m_outs[2].t.shape[3] = 5; },
       kInvalid,
       {"outs[2]: value_dim (shape[3]) is 5 but outs[0] has 6"}},
      {"PartialHeadsMismatch",
       e,
       [](Env& x) { x.m_outs[1].t.shape[1] = 3; },
       kInvalid,
       {"outs[1]: heads (shape[1]) is 3 but outs[0] has 4"}},
      {"PartialBatchBroadcastBySize",
       e,
       [](Env& x) { x.m_outs[1].t.shape[0] = 1; },
       kInvalid,
       {"outs[1]: batch (shape[0]) is 1 but outs[0] has 2"}},
      {"LseLengthMismatch",
       e,
       [](Env& x) { x.m_lses[1].t.shape[2] = 4; },
       kInvalid,
       {"lses[1]: length (shape[2]) is 4 but outs[0] has 5"}},
      {"LseBatchMismatch",
       e,
       [](Env& x) { x.m_lses[0].t.shape[0] = 1; },
       kInvalid,
       {"lses[0]: batch (shape[0]) is 1 but outs[0] has 2"}},
      {"LseRank4",
       e,
       [](Env& x) {
         x.m_lses[2].t.rank = 4;
         x.m_lses[2].t.shape[3] = 1;
         x.m_lses[2].t.stride[3] = 1;
       },
       kInvalid,
       {"lses[2]: leading (shape[0]) is 2 but [B, H, L] needs 1"}},
      {"LseRank2",
       e,
       [](Env& x) {
         x.m_lses[2].t.rank = 2;
         x.m_lses[2].t.shape[0] = 4, x.m_lses[2].t.shape[1] = 5;
         x.m_lses[2].t.stride[0] = 5, x.m_lses[2].t.stride[1] = 1;
       },
       kInvalid,
       {"lses[2]: batch (implicit, rank 2) is 1 but outs[0] has 2"}},
      {"OutLengthMismatch",
       e,
       [](Env& x) { x.m_out.t.shape[2] = 4; },
       kInvalid,
       {"out: length (shape[2]) is 4 but outs[0] has 5"}},
      {"LseOutHeadsMismatch",
       e,
       [](Env& x) { x.m_lse.t.shape[1] = 2; },
       kInvalid,
       {"lse_out: heads (shape[1]) is 2 but outs[0] has 4"}},
      // Outputs that write an element twice.
      {"OutStrideZeroOverlaps",
       e,
       [](Env& x) { x.m_out.t.stride[3] = 0; },
       kInvalid,
       {"out", "value_dim", "stride 0", "overlap"}},
      {"LseOutRowsOverlap",
       e,
       [](Env& x) { x.m_lse.t.stride[1] = 2; },
       kInvalid,
       {"lse_out", "stride 2", "overlap"}},
      // Sinks.
      {"SinkNaN",
       e,
       [](Env& x) { x.m_sinks[2] = kNaN; },
       kInvalid,
       {"sinks[2] is nan", "finite or -INFINITY"}},
      {"SinkPlusInf", e, [](Env& x) { x.m_sinks[0] = kInf; }, kInvalid, {"sinks[0] is inf"}},
      {"SinksMisaligned",
       e,
       [](Env& x) {
         x.m_sinks_arg =
             reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.m_sinks.data()) + 2);
       },
       kInvalid,
       {"sinks", "not aligned"}},
      // Aliasing: only out == outs[0] and lse_out == lses[0], element for
      // element, are allowed.
      {"OutPartlyOverOuts0",
       e,
       [](Env& x) { x.m_out.t.data = x.m_outs[0].data.data() + 1; },
       kInvalid,
       {"out overlaps outs[0]", "same elements"}},
      {"OutOverOuts0WithOtherStrides",
       e,
       [](Env& x) {
         x.m_out.t = x.m_outs[0].t;  // same memory, [B, L, H, Dv] order
         x.m_out.t.stride[1] = 6, x.m_out.t.stride[2] = 24;
       },
       kInvalid,
       {"out overlaps outs[0]", "same elements"}},
      {"OutIsOuts1",
       e,
       [](Env& x) { x.m_out_arg = &x.m_outs[1].t; },
       kInvalid,
       {"out overlaps outs[1]"}},
      {"OutOverLses0",
       e,
       [=](Env& x) { x.m_lses[0].t.data = in_out(x, 8); },
       kInvalid,
       {"out overlaps lses[0]"}},
      {"LseOutIsLses2",
       e,
       [](Env& x) { x.m_lse_arg = &x.m_lses[2].t; },
       kInvalid,
       {"lse_out overlaps lses[2]"}},
      {"LseOutPartlyOverLses0",
       e,
       [](Env& x) { x.m_lse.t.data = x.m_lses[0].data.data() + 3; },
       kInvalid,
       {"lse_out overlaps lses[0]", "same elements"}},
      {"LseOutOverOuts1",
       e,
       [](Env& x) { x.m_lse.t.data = x.m_outs[1].data.data() + 10; },
       kInvalid,
       {"lse_out overlaps outs[1]"}},
      {"LseOutOverOut",
       e,
       [](Env& x) { x.m_lse.t.data = x.m_out.data.data() + 30; },
       kInvalid,
       {"out overlaps lse_out"}},
      {"SinksInsideOut",
       e,
       [=](Env& x) {
         std::fill(in_out(x, 4), in_out(x, 8), 0.5f);  // valid values
         x.m_sinks_arg = in_out(x, 4);
       },
       kInvalid,
       {"out overlaps sinks"}},
      {"DescriptorInsideOut",
       e,
       [=](Env& x) {
         hwyattn_tensor* d = reinterpret_cast<hwyattn_tensor*>(in_out(x, 8));  // 8-byte aligned
         std::memcpy(static_cast<void*>(d), &x.m_outs[1].t, sizeof(*d));
         x.m_out_ptrs[1] = d;
       },
       kInvalid,
       {"out overlaps outs[1] (the descriptor)"}},
      {"ArrayInsideLseOut",
       e,
       [](Env& x) {
         const hwyattn_tensor** a =
             reinterpret_cast<const hwyattn_tensor**>(x.m_lse.data.data() + 2);
         std::memcpy(static_cast<void*>(a), x.m_lse_ptrs, sizeof(x.m_lse_ptrs));
         x.m_lses_arg = a;
       },
       kInvalid,
       {"lse_out overlaps lses (the array)"}},
  };
  return c;
}

// hwyattn_kv_attention and hwyattn_kv_cache_write: every rule of their
// validation (see hwyattn.h), and I8 where the other entry points refuse it.
std::vector<BadCase> KvCases() {
  const Entry a = Entry::kKvAttention, w = Entry::kKvWrite;
  return {
      // I8 outside a cache.
      {"SdpaQI8",
       Entry::kSdpa,
       [](Env& x) { x.q.t.dtype = HWYATTN_I8; },
       kInvalid,
       {"q: dtype I8", "hwyattn_kv_cache"}},
      {"SdpaKI8",
       Entry::kSdpa,
       [](Env& x) { x.k.t.dtype = HWYATTN_I8; },
       kInvalid,
       {"k: dtype I8", "hwyattn_kv_cache"}},
      {"MhaQueryI8",
       Entry::kMhaForward,
       [](Env& x) { x.query.t.dtype = HWYATTN_I8; },
       kInvalid,
       {"query: dtype I8"}},
      {"MergeOutsI8",
       Entry::kMerge,
       [](Env& x) { x.m_outs[1].t.dtype = HWYATTN_I8; },
       kInvalid,
       {"outs[1]: dtype I8"}},
      {"QI8", a, [](Env& x) { x.kq.t.dtype = HWYATTN_I8; }, kInvalid, {"q: dtype I8"}},
      {"QF8E4M3",
       a,
       [](Env& x) { x.kq.t.dtype = HWYATTN_F8E4M3; },
       kInvalid,
       {"q: dtype F8E4M3 is accepted only for the K/V pages"}},
      {"KNewF8E5M2",
       w,
       [](Env& x) { x.knew.t.dtype = HWYATTN_F8E5M2; },
       kInvalid,
       {"k_new: dtype F8E5M2"}},
      {"SdpaVF8E5M2",
       Entry::kSdpa,
       [](Env& x) { x.v.t.dtype = HWYATTN_F8E5M2; },
       kInvalid,
       {"v: dtype F8E5M2", "hwyattn_kv_cache"}},
      {"KNewI8", w, [](Env& x) { x.knew.t.dtype = HWYATTN_I8; }, kInvalid, {"k_new: dtype I8"}},
      // ggml's block formats: k and v of hwyattn_sdpa and caches only, and
      // rows of whole blocks of 32 (the other block rules: blocks_test).
      {"SdpaKQ4_0HeadDim8",
       Entry::kSdpa,
       [](Env& x) { x.k.t.dtype = HWYATTN_Q4_0; },
       kInvalid,
       {"k: head_dim (shape[3]) is 8", "dtype Q4_0 stores blocks of 32", "multiple of 32"}},
      {"SdpaOutIQ4_NL",
       Entry::kSdpa,
       [](Env& x) { x.out.t.dtype = HWYATTN_IQ4_NL; },
       kInvalid,
       {"out: dtype IQ4_NL is a K/V cache format"}},
      {"QQ8_0",
       a,
       [](Env& x) { x.kq.t.dtype = HWYATTN_Q8_0; },
       kInvalid,
       {"q: dtype Q8_0 is a K/V cache format"}},
      {"KNewQ5_1",
       w,
       [](Env& x) { x.knew.t.dtype = HWYATTN_Q5_1; },
       kInvalid,
       {"k_new: dtype Q5_1 is a K/V cache format"}},
      {"CacheQ8_0HeadDim8",
       w,
       [](Env& x) { x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_Q8_0; },
       kInvalid,
       {"cache: k: head_dim (shape[3]) is 8", "dtype Q8_0"}},
      {"MhaKeyQ4_1",
       Entry::kMhaForward,
       [](Env& x) { x.key.t.dtype = HWYATTN_Q4_1; },
       kInvalid,
       {"key: dtype Q4_1 is a K/V cache format"}},
      // I4: cache pages only, K and V both I4, rows starting on a byte.
      {"SdpaKI4",
       Entry::kSdpa,
       [](Env& x) { x.k.t.dtype = HWYATTN_I4; },
       kInvalid,
       {"k: dtype I4 is accepted only for the K/V pages", "hwyattn_kv_cache"}},
      {"CacheI4OddSlotStride",
       w,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_I4;
         x.kcache.k.stride[2] = 9;
       },
       kInvalid,
       {"cache: k:", "has stride 9, which splits a byte of dtype I4", "must be even"}},
      {"CacheI4HeadDimStride2",
       a,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_I4;
         x.kcache.v.stride[3] = 2;
       },
       kInvalid,
       {"cache: v:", "has stride 2; dtype I4 needs stride 1 there"}},
      {"CacheI4KI8V",
       a,
       [](Env& x) { x.kcache.k.dtype = HWYATTN_I4; },
       kInvalid,
       {"cache: v has dtype I8 but k has I4"}},
      {"CacheI4NoKScale",
       w,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_I4;
         x.kcache.k_scale = nullptr;
       },
       kInvalid,
       {"cache: k_scale is NULL but the cache is I4"}},
      // NULL arguments.
      {"QNull", a, [](Env& x) { x.kq_arg = nullptr; }, kInvalid, {"q is NULL"}},
      {"CacheNull", a, [](Env& x) { x.kcache_arg = nullptr; }, kInvalid, {"cache is NULL"}},
      {"BatchNull", a, [](Env& x) { x.kbatch_arg = nullptr; }, kInvalid, {"batch is NULL"}},
      {"OutNull", a, [](Env& x) { x.kout_arg = nullptr; }, kInvalid, {"out is NULL"}},
      {"QStartNull",
       a,
       [](Env& x) { x.kbatch.q_start = nullptr; },
       kInvalid,
       {"batch: q_start is NULL"}},
      {"KvLenNull",
       a,
       [](Env& x) { x.kbatch.kv_len = nullptr; },
       kInvalid,
       {"batch: kv_len is NULL"}},
      {"WriteCacheNull", w, [](Env& x) { x.kcache_arg = nullptr; }, kInvalid, {"cache is NULL"}},
      {"KNewNull", w, [](Env& x) { x.knew_arg = nullptr; }, kInvalid, {"k_new is NULL"}},
      {"VNewNull", w, [](Env& x) { x.vnew_arg = nullptr; }, kInvalid, {"v_new is NULL"}},
      {"SlotNull", w, [](Env& x) { x.kslot_arg = nullptr; }, kInvalid, {"slot is NULL"}},
      // Structs.
      {"CacheStructSize",
       a,
       [](Env& x) { x.kcache.struct_size = 3; },
       kInvalid,
       {"cache: struct_size is 3", "hwyattn_kv_cache_init"}},
      {"CacheReserved",
       a,
       [](Env& x) { x.kcache.reserved0 = 1; },
       kUnsupported,
       {"cache: reserved0 is 1"}},
      {"BatchStructSize",
       a,
       [](Env& x) { x.kbatch.struct_size = 12; },
       kInvalid,
       {"batch: struct_size is 12"}},
      {"NumSeqsZero", a, [](Env& x) { x.kbatch.num_seqs = 0; }, kInvalid, {"batch: num_seqs is 0"}},
      // The cache's tensors.
      {"KDtypeBool",
       a,
       [](Env& x) { x.kcache.k.dtype = HWYATTN_BOOL; },
       kInvalid,
       {"cache: k: dtype BOOL"}},
      {"VDtypeDiffers",
       a,
       [](Env& x) { x.kcache.v.dtype = HWYATTN_F16; },
       kInvalid,
       {"cache: v has dtype F16 but k has I8"}},
      {"VPagesMismatch",
       a,
       [](Env& x) { x.kcache.v.shape[0] = 3; },
       kInvalid,
       {"cache: v: num_pages (shape[0]) is 3", "4"}},
      {"VPageSizeMismatch",
       w,
       [](Env& x) { x.kcache.v.shape[2] = 2; },
       kInvalid,
       {"cache: v: page_size (shape[2]) is 2", "4"}},
      {"I8WithoutKScale",
       a,
       [](Env& x) { x.kcache.k_scale = nullptr; },
       kInvalid,
       {"cache: k_scale is NULL", "I8"}},
      {"I8WithoutVScale",
       w,
       [](Env& x) { x.kcache.v_scale = nullptr; },
       kInvalid,
       {"cache: v_scale is NULL"}},
      {"F32WithScales",
       a,
       [](Env& x) { x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F32; },
       kInvalid,
       {"k_scale is given but the cache is F32"}},
      {"KScaleLayout",
       a,
       [](Env& x) { x.kscale.t.shape[3] = 2; },
       kInvalid,
       {"cache: k_scale: shape [4, 2, 4, 2]", "none of per token [4, 2, 4, 1]",
        "per channel [1, 2, 1, 8]", "per kv head [1, 2, 1, 1]", "per tensor [1, 1, 1, 1]"}},
      {"VScaleChannels",
       w,
       [](Env& x) { x.vscale.t.shape[3] = 8; },
       kInvalid,
       {"cache: v_scale", "per channel [1, 2, 1, 6]"}},
      {"F8WithoutKScale",
       a,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F8E4M3;
         x.kcache.k_scale = nullptr;
       },
       kInvalid,
       {"cache: k_scale is NULL but v_scale is not", "FP8", "both", "or neither"}},
      {"F8E5M2WithoutVScale",
       w,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F8E5M2;
         x.kcache.v_scale = nullptr;
       },
       kInvalid,
       {"cache: v_scale is NULL but k_scale is not"}},
      {"F8ScaleLayout",
       w,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F8E4M3;
         x.kscale.t.shape[0] = 2;
       },
       kInvalid,
       {"cache: k_scale: shape [2, 2, 4, 1]", "none of per token"}},
      {"F8PageIdTooLarge",
       a,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F8E5M2;
         x.ktable[3] = 4;
       },
       kInvalid,
       {"block_table", "4"}},
      {"F8VDtypeDiffers",
       a,
       [](Env& x) { x.kcache.k.dtype = HWYATTN_F8E4M3; },
       kInvalid,
       {"cache: v has dtype I8 but k has F8E4M3"}},
      {"ChannelScaleNaNAttention",
       a,
       [](Env& x) { x.vscale.data[2] = kNaN; },
       kInvalid,
       {"cache: v_scale[0, 0, 0, 2] is nan", "finite and > 0"}},
      {"ChannelScaleNegative",
       a,
       [](Env& x) { x.vscale.data[8] = -0.5f; },
       kInvalid,
       {"cache: v_scale[0, 1, 0, 2] is -0.5"}},
      {"HeadScaleZero",
       a,
       [](Env& x) {
         x.vscale.t.shape[3] = 1;
         x.vscale.data[6] = 0.0f;
       },
       kInvalid,
       {"cache: v_scale[0, 1, 0, 0] is 0"}},
      {"TensorScaleInf",
       w,
       [](Env& x) {
         x.kcache.k.dtype = x.kcache.v.dtype = HWYATTN_F8E4M3;
         x.vscale.t.rank = 1;
         x.vscale.t.shape[0] = 1;
         x.vscale.data[0] = kInf;
       },
       kInvalid,
       {"cache: v_scale[0, 0, 0, 0] is inf"}},
      {"KScaleDtype",
       a,
       [](Env& x) { x.kscale.t.dtype = HWYATTN_BF16; },
       kInvalid,
       {"cache: k_scale: dtype BF16"}},
      // Block table and batch: every index before memory is touched.
      {"PageIdTooLarge",
       a,
       [](Env& x) { x.ktable[3] = 4; },
       kInvalid,
       {"block_table[1][0] (sequence 1, keys from 0) is page 4", "[0, 4)"}},
      {"PageIdNegative",
       a,
       [](Env& x) { x.ktable[1] = -1; },
       kInvalid,
       {"block_table[0][1] (sequence 0, keys from 4) is page -1"}},
      {"TableTooShort",
       a,
       [](Env& x) { x.kcache.block_table_stride = 1; },
       kInvalid,
       {"kv_len[0] (sequence 0) is 6", "needs 2 pages", "block_table_stride is 1"}},
      {"TableStrideNegative",
       a,
       [](Env& x) { x.kcache.block_table_stride = -3; },
       kInvalid,
       {"block_table_stride is -3"}},
      {"TableStrideOverflows",
       a,
       [](Env& x) { x.kcache.block_table_stride = INT64_MAX / 2; },
       kInvalid,
       {"block_table_stride", "overflows"}},
      {"NoTableKvLenPastPage",
       a,
       [](Env& x) { x.kcache.block_table = nullptr; },
       kInvalid,
       {"kv_len[0] (sequence 0) is 6", "no block_table", "page_size 4"}},
      {"QStartFirstNotZero",
       a,
       [](Env& x) { x.kq_start[0] = 1; },
       kInvalid,
       {"q_start[0] is 1; must be 0"}},
      {"QStartDecreases",
       a,
       [](Env& x) { x.kq_start[1] = -1; },
       kInvalid,
       {"q_start[1] is -1 but q_start[0] is 0", "must not decrease"}},
      {"QStartPastT",
       a,
       [](Env& x) { x.kq_start[1] = 6; },
       kInvalid,
       {"q_start[1] is 6, past q's 5 tokens"}},
      {"QStartEndsBeforeT",
       a,
       [](Env& x) { x.kq_start[2] = 4; },
       kInvalid,
       {"q_start[2] is 4 but q has 5 tokens"}},
      {"KvLenNegative",
       a,
       [](Env& x) { x.kkv_len[1] = -3; },
       kInvalid,
       {"kv_len[1] (sequence 1) is -3"}},
      {"QPosNegative",
       a,
       [](Env& x) {
         x.kq_pos[1] = -1;
         x.kbatch.q_pos = x.kq_pos.data();
       },
       kInvalid,
       {"q_pos[1] (sequence 1) is -1"}},
      {"QPosPastKvLenCausal",
       a,
       [](Env& x) {
         x.kq_pos[1] = 4;
         x.kbatch.q_pos = x.kq_pos.data();
       },
       kInvalid,
       {"sequence 1 has queries at positions [4, 8) but kv_len 7"}},
      {"DecodeWithoutItsKey",
       a,
       [](Env& x) { x.kkv_len[0] = 0; },
       kInvalid,
       {"sequence 0 has queries at positions [-1, 0) but kv_len 0"}},
      {"KvLenMisaligned",
       a,
       [](Env& x) {
         x.kbatch.kv_len =
             reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(x.kkv_len.data()) + 1);
       },
       kInvalid,
       {"batch: kv_len", "not aligned"}},
      // Shapes and options.
      {"HqNotMultipleOfHkv",
       a,
       [](Env& x) {
         x.kq.t.shape[1] = 3;
         x.kout.t.shape[1] = 3;
       },
       kInvalid,
       {"2 kv heads", "does not divide q's 3 heads"}},
      {"QHeadDimMismatch",
       a,
       [](Env& x) { x.kq.t.shape[2] = 7; },
       kInvalid,
       {"cache: k: head_dim (shape[3]) is 8 but q's head_dim is 7"}},
      {"OutValueDimMismatch",
       a,
       [](Env& x) { x.kout.t.shape[2] = 5; },
       kInvalid,
       {"out: value_dim (shape[2]) is 5", "6"}},
      {"OutTokensMismatch",
       a,
       [](Env& x) { x.kout.t.shape[0] = 4; },
       kInvalid,
       {"out: tokens (shape[0]) is 4", "5"}},
      {"OutF8E4M3",
       a,
       [](Env& x) { x.kout.t.dtype = HWYATTN_F8E4M3; },
       kInvalid,
       {"out: dtype F8E4M3 is accepted only for the K/V pages"}},
      {"OutBf16OverlapsCache",
       a,
       [](Env& x) {
         x.kout.t.dtype = HWYATTN_BF16;
         x.kout.t.data = x.kcache.k.data;
       },
       kInvalid,
       {"out overlaps cache: k"}},
      {"LseHeadsMismatch",
       a,
       [](Env& x) { x.klse.t.shape[1] = 2; },
       kInvalid,
       {"lse: heads (shape[1]) is 2", "4"}},
      {"MaskGiven", a, [](Env& x) { x.kopts.mask = &x.mask.t; }, kInvalid, {"opts: mask is given"}},
      {"KvLenGiven",
       a,
       [](Env& x) { x.kopts.kv_len = x.kkv_len.data(); },
       kInvalid,
       {"opts: kv_len is given", "batch->kv_len"}},
      {"WeightsGiven",
       a,
       [](Env& x) { x.kopts.weights = &x.weights.t; },
       kInvalid,
       {"opts: weights is given"}},
      {"SinkNaN",
       a,
       [](Env& x) {
         x.head_values[1] = kNaN;
         x.kopts.sinks = x.head_values.data();
       },
       kInvalid,
       {"opts: sinks[1] is nan"}},
      {"CausalOutOfRange",
       a,
       [](Env& x) { x.kopts.causal = EnumFromInt<hwyattn_causal>(3); },
       kInvalid,
       {"opts: causal is 3"}},
      // Aliasing.
      {"OutAliasesQ",
       a,
       [](Env& x) { x.kout.t.data = x.kq.data.data(); },
       kInvalid,
       {"out overlaps q"}},
      {"LseOverKScale",
       a,
       [](Env& x) { x.klse.t.data = x.kscale.data.data(); },
       kInvalid,
       {"lse overlaps cache: k_scale"}},
      {"OutOverBlockTable",
       a,
       [](Env& x) {
         std::memcpy(x.kout.data.data() + 4, x.ktable.data(), 6 * sizeof(int32_t));
         x.kcache.block_table = reinterpret_cast<const int32_t*>(x.kout.data.data() + 4);
       },
       kInvalid,
       {"out overlaps cache: block_table"}},
      {"OutOverLse",
       a,
       [](Env& x) { x.klse.t.data = x.kout.data.data() + 8; },
       kInvalid,
       {"out overlaps lse"}},
      // hwyattn_kv_cache_write.
      {"SlotPastPool",
       w,
       [](Env& x) { x.kslot[2] = 16; },
       kInvalid,
       {"slot[2] is 16", "num_pages * page_size = 16"}},
      {"SlotDuplicate",
       w,
       [](Env& x) { x.kslot[2] = 5; },
       kInvalid,
       {"slot[0] and slot[2] are both 5"}},
      {"SlotMisaligned",
       w,
       [](Env& x) {
         x.kslot_arg =
             reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(x.kslot.data()) + 4);
       },
       kInvalid,
       {"slot", "not aligned"}},
      {"KNewHeadsMismatch",
       w,
       [](Env& x) { x.knew.t.shape[1] = 1; },
       kInvalid,
       {"k_new: heads (shape[1]) is 1", "2"}},
      {"KNewDimMismatch",
       w,
       [](Env& x) { x.knew.t.shape[2] = 6; },
       kInvalid,
       {"k_new: head_dim (shape[2]) is 6", "8"}},
      {"VNewTokensMismatch",
       w,
       [](Env& x) { x.vnew.t.shape[0] = 2; },
       kInvalid,
       {"v_new: tokens (shape[0]) is 2", "3"}},
      {"VNewDimMismatch",
       w,
       [](Env& x) { x.vnew.t.shape[2] = 8; },
       kInvalid,
       {"v_new: value_dim (shape[2]) is 8", "6"}},
      {"ChannelScaleZero",
       w,
       [](Env& x) { x.vscale.data[3] = 0.0f; },
       kInvalid,
       {"cache: v_scale[0, 0, 0, 3] is 0", "finite and > 0"}},
      {"ChannelScaleInf",
       w,
       [](Env& x) { x.vscale.data[7] = kInf; },
       kInvalid,
       {"cache: v_scale[0, 1, 0, 1] is inf"}},
      {"KNewInsideCache",
       w,
       [](Env& x) { x.knew.t.data = reinterpret_cast<float*>(x.kscale.data.data()); },
       kInvalid,
       {"cache: k_scale overlaps k_new"}},
      {"TokenScalesOverlap",
       w,
       [](Env& x) { x.kscale.t.stride[2] = 0; },
       kInvalid,
       {"cache: k_scale", "overlap"}},
      {"PoolSlotsOverlap",
       w,
       [](Env& x) { x.kcache.k.stride[2] = 1; },
       kInvalid,
       {"cache: k", "overlap"}},
      {"PoolNumWorkersZero",
       w,
       [](Env& x) {
         hwyattn_parallel_init(&x.pool);
         x.pool.num_workers = 0;
         x.wopts.parallel = &x.pool;
       },
       kInvalid,
       {"parallel: num_workers is 0"}},
  };
}

// hwyattn_sdpa_options_copy: the extensible-struct rule of every entry point.
std::vector<BadCase> OptionsCopyCases() {
  const Entry o = Entry::kOptionsCopy;
  return {
      {"DstNull", o, [](Env& x) { x.copied_arg = nullptr; }, kInvalid, {"dst is NULL"}},
      {"SrcNull", o, [](Env& x) { x.copy_src_arg = nullptr; }, kInvalid, {"src is NULL"}},
      {"StructSize4",
       o,
       [](Env& x) { x.copy_src.opts.struct_size = 4; },
       kInvalid,
       {"src: struct_size is 4", "hwyattn_sdpa_options_init"}},
      {"StructSizeNoHeaders",
       o,
       [](Env& x) { x.copy_src.opts.struct_size = 52; },
       kInvalid,
       {"src: struct_size is 52, which is not the size of any hwyattn_sdpa_options"}},
      {"NewerFieldSet",
       o,
       [](Env& x) {
         x.copy_src.opts.struct_size = sizeof(x.copy_src);
         x.copy_src.tail[5] = 1;
       },
       kUnsupported,
       {"src: struct_size is", "is set"}},
  };
}

std::vector<BadCase> AllBadCases() {
  std::vector<BadCase> all;
  for (auto* f : {&SdpaCases, &MhaCreateCases, &MhaForwardCases, &OtherCases, &MergeCases, &KvCases,
                  &OptionsCopyCases}) {
    for (BadCase& c : f()) all.push_back(std::move(c));
  }
  return all;
}

// The unmutated arguments are valid: every row's failure is its mutation's.
TEST(BadInputBaseline, EveryEntryPointAcceptsTheBase) {
  for (Entry e :
       {Entry::kSdpa, Entry::kMhaCreate, Entry::kMhaForward, Entry::kContiguous, Entry::kSetThreads,
        Entry::kMerge, Entry::kKvAttention, Entry::kKvWrite, Entry::kOptionsCopy}) {
    Env env;
    const int saved = hwyattn_get_num_threads();
    EXPECT_EQ(Invoke(e, env), HWYATTN_OK) << EntryName(e) << ": " << hwyattn_last_error();
    hwyattn_set_num_threads(saved);
    if (e == Entry::kMhaCreate) hwyattn_mha_destroy(env.created);
  }
}

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, RejectedWithMessageAndNothingWritten) {
  const BadCase& bad = GetParam();
  Env env;
  const int saved_threads = hwyattn_get_num_threads();
  bad.mutate(env);
  const std::vector<unsigned char> before = env.Outputs();
  // A fresh thread starts with an empty last error, so the message checked
  // below can only come from this call.
  hwyattn_status status = HWYATTN_OK;
  std::string message = "(not set)", fresh = "(not set)";
  std::thread([&] {
    fresh = hwyattn_last_error();
    status = Invoke(bad.entry, env);
    message = hwyattn_last_error();
  }).join();
  if (status == HWYATTN_OK && bad.entry == Entry::kMhaCreate) hwyattn_mha_destroy(env.created);
  if (status == HWYATTN_OK && bad.entry == Entry::kSetThreads) {
    hwyattn_set_num_threads(saved_threads);
  }
  EXPECT_EQ(fresh, "");
  EXPECT_EQ(status, bad.want) << "got " << hwyattn_status_string(status) << ": " << message;
  EXPECT_NE(message, "");
  for (const std::string& part : bad.message) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "the message \"" << message << "\" lacks \"" << part << "\"";
  }
  RecordProperty("last_error", message);
  EXPECT_TRUE(env.Outputs() == before) << "an output was written";
}

INSTANTIATE_TEST_SUITE_P(Hardening, BadInputTest, ::testing::ValuesIn(AllBadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(EntryName(info.param.entry)) + "_" + info.param.name;
                         });

// A struct from a newer header: accepted when the fields this library does
// not know are zero, HWYATTN_UNSUPPORTED (nothing written) when one is set.
TEST(StructSize, NewerOptionsAndConfig) {
  Env env;
  struct NewerOptions {
    hwyattn_sdpa_options base;
    uint64_t unknown[3];
  } newer{};
  newer.base = env.opts;
  newer.base.struct_size = sizeof(newer);
  env.opts_arg = &newer.base;
  EXPECT_EQ(Invoke(Entry::kSdpa, env), HWYATTN_OK) << hwyattn_last_error();
  env.out.FillSentinel();
  const std::vector<unsigned char> before = env.Outputs();
  newer.unknown[1] = 1;
  EXPECT_EQ(Invoke(Entry::kSdpa, env), HWYATTN_UNSUPPORTED);
  EXPECT_NE(std::string(hwyattn_last_error()).find("byte"), std::string::npos)
      << hwyattn_last_error();
  EXPECT_TRUE(env.Outputs() == before);

  struct NewerConfig {
    hwyattn_mha_config base;
    int64_t unknown[2];
  } cfg{};
  cfg.base = env.cfg;
  cfg.base.struct_size = sizeof(cfg);
  env.cfg_arg = &cfg.base;
  hwyattn_mha* m = nullptr;
  env.created_arg = &m;
  EXPECT_EQ(Invoke(Entry::kMhaCreate, env), HWYATTN_OK) << hwyattn_last_error();
  hwyattn_mha_destroy(m);
  m = nullptr;
  cfg.unknown[0] = -1;
  EXPECT_EQ(Invoke(Entry::kMhaCreate, env), HWYATTN_UNSUPPORTED);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(hwyattn_last_error()).find("cfg: struct_size"), std::string::npos)
      << hwyattn_last_error();
}

// A valid module too large for any memory: OUT_OF_MEMORY, *out untouched.
// (The caller's weight arrays are tiny: the library must fail allocating its
// packed copy before it reads them.)
TEST(OutOfMemory, MhaCreateWithHugeDims) {
  Env env;
  env.cfg.embed_dim = int64_t{1} << 28;
  env.cfg.num_heads = 1;
  env.cfg.num_kv_heads = 1;
  env.cfg.head_dim = int64_t{1} << 20;  // W_q and W_o: 2^48 floats each
  env.cfg.kdim = 1;
  env.cfg.vdim = 1;
  const std::vector<unsigned char> before = env.Outputs();
  EXPECT_EQ(Invoke(Entry::kMhaCreate, env), HWYATTN_OUT_OF_MEMORY) << hwyattn_last_error();
  EXPECT_NE(std::string(hwyattn_last_error()), "");
  EXPECT_TRUE(env.Outputs() == before);
}

// Valid calls whose work buffers exceed any address space, with inputs
// broadcast by stride 0 so that the caller's memory is small.
TEST(OutOfMemory, SdpaWithHugePackedKeys) {
  // 9 query rows (the prefill kernel packs K and V), Lk = 2^31 - 1, D = Dv = 2^15:
  // the packed K and V of one head are 2^47 floats.
  const int64_t lk = INT32_MAX, d = int64_t{1} << 15;
  std::vector<float> small(64, 0.5f), out(9 * d);
  hwyattn_tensor q{}, k{}, v{}, o{};
  const int64_t qs[4] = {1, 1, 9, d}, ks[4] = {1, 1, lk, d};
  ASSERT_EQ(hwyattn_tensor_contiguous(&q, small.data(), HWYATTN_F32, 4, qs), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&k, small.data(), HWYATTN_F32, 4, ks), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&o, out.data(), HWYATTN_F32, 4, qs), HWYATTN_OK);
  for (hwyattn_tensor* t : {&q, &k}) t->stride[2] = t->stride[3] = 0;
  v = k;
  std::fill(out.begin(), out.end(), 7.0f);
  EXPECT_EQ(hwyattn_sdpa(&q, &k, &v, &o, nullptr), HWYATTN_OUT_OF_MEMORY) << hwyattn_last_error();
  EXPECT_NE(std::string(hwyattn_last_error()).find("allocate"), std::string::npos)
      << hwyattn_last_error();
  for (float f : out) ASSERT_EQ(f, 7.0f) << "out was written";
}

TEST(OutOfMemory, MhaForwardWithHugeActivations) {
  Env env;
  // Self-attention module E = 16; query [2^20, 2^31 - 1, 16] broadcast by
  // stride 0: its Q/K/V projections would be 2^55 floats each.
  hwyattn_mha_config cfg;
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = 16;
  cfg.num_heads = 2;
  hwyattn_mha_weights w = {env.w_q.data(), env.w_q.data(), env.w_q.data(), env.w_o.data(),
                           nullptr,        nullptr,        nullptr,        nullptr};
  hwyattn_mha* m = nullptr;
  ASSERT_EQ(hwyattn_mha_create(&cfg, &w, &m), HWYATTN_OK) << hwyattn_last_error();
  const int64_t b = int64_t{1} << 20, l = INT32_MAX;
  // One buffer: query's 16 floats first, then out's. out must not overlap
  // itself, so it is described over a huge address range that is never
  // touched; it starts after query's span, so it cannot overlap query
  // whatever the allocator returns (two separate vectors made that depend on
  // their heap order). Validation passes and allocation fails first.
  std::vector<float> buffer(32, 1.0f);
  std::fill(buffer.begin() + 16, buffer.end(), 3.0f);
  hwyattn_tensor query{}, out{};
  const int64_t s[3] = {b, l, 16};
  ASSERT_EQ(hwyattn_tensor_contiguous(&query, buffer.data(), HWYATTN_F32, 3, s), HWYATTN_OK);
  query.stride[0] = query.stride[1] = 0;
  ASSERT_EQ(hwyattn_tensor_contiguous(&out, buffer.data() + 16, HWYATTN_F32, 3, s), HWYATTN_OK);
  EXPECT_EQ(hwyattn_mha_forward(m, &query, nullptr, nullptr, &out, nullptr), HWYATTN_OUT_OF_MEMORY)
      << hwyattn_last_error();
  for (size_t i = 16; i < buffer.size(); ++i) EXPECT_EQ(buffer[i], 3.0f);
  hwyattn_mha_destroy(m);
}

// ---------------------------------------------------------------------------
// Part 2: numbers at the edges.
// ---------------------------------------------------------------------------

// Which kernel a problem takes: small is at most 2048 FLOPs in all (row by
// row); decode is <= 8 query rows per kv head, no weights output;
// everything else is the prefill kernel.
enum class Path { kPrefill, kDecode, kSmall };

const char* PathName(Path path) {
  return path == Path::kPrefill ? "Prefill" : path == Path::kDecode ? "Decode" : "Small";
}
enum class Poison { kQ, kK, kV, kMask };
enum class Blocking { kNone, kCausal, kBoolMask, kKvLen };

struct PoisonCase {
  Path path;
  Poison where;
  float value;  // NaN, +Inf or -Inf
  Blocking blocking;
  hwyattn_dtype dtype = HWYATTN_F32;  // of the poisoned K, V or mask
};

std::string PoisonName(const PoisonCase& c) {
  std::string s = PathName(c.path);
  s += c.where == Poison::kQ   ? "Q"
       : c.where == Poison::kK ? "K"
       : c.where == Poison::kV ? "V"
                               : "Mask";
  s += std::isnan(c.value) ? "NaN" : c.value > 0 ? "PlusInf" : "MinusInf";
  const char* b[] = {"", "Causal", "BoolMask", "KvLen"};
  s += b[static_cast<int>(c.blocking)];
  return s + (c.dtype == HWYATTN_F16 ? "F16" : c.dtype == HWYATTN_BF16 ? "BF16" : "");
}

// One problem of `path` with the chosen blocking; GQA so that a poisoned
// K/V head reaches two query heads and leaves two others clean.
Problem PoisonProblem(const PoisonCase& c) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.dim = 19;  // not a multiple of any vector width
  p.v_dim = 13;
  p.seed = 7;
  if (c.path == Path::kDecode) {
    p.q_len = 3;     // 6 rows per kv head
    p.k_len = 1100;  // three decode chunks
  } else if (c.path == Path::kSmall) {
    p.dim = 6;  // 16 * Lq * Lk * (D + Dv) = 1920 FLOPs
    p.v_dim = 4;
    p.q_len = 3;
    p.k_len = 4;
    p.want_weights = true;
  } else {
    p.q_len = 70;   // several query tiles
    p.k_len = 150;  // several key tiles
    p.want_weights = true;
  }
  p.want_lse = true;
  if (c.where == Poison::kK || c.where == Poison::kV) p.k_dtype = p.v_dtype = c.dtype;
  if (c.blocking == Blocking::kCausal) p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  if (c.blocking == Blocking::kBoolMask || c.where == Poison::kMask) {
    p.has_mask = true;
    p.mask.dtype = c.where == Poison::kMask ? c.dtype : HWYATTN_BOOL;
    p.mask.shape = {1, 1, p.q_len, p.k_len};
    p.mask.block_prob = 0.3;
  }
  return p;
}

bool RowSeesKey(const Call& call, const Problem& p, int64_t b, int64_t i, int64_t j) {
  if (!p.kv_len.empty() && j >= p.kv_len[static_cast<size_t>(b)]) return false;
  if (p.causal == HWYATTN_CAUSAL_TOP_LEFT && j > i) return false;
  if (p.causal == HWYATTN_CAUSAL_BOTTOM_RIGHT && j > i + p.k_len - p.q_len) return false;
  if (p.has_mask) {
    const int64_t m[4] = {0, 0, i, j};
    const double x = ReadElement(call.mask.tensor(), m);
    if (p.mask.dtype == HWYATTN_BOOL ? x == 0.0 : (std::isinf(x) && x < 0)) return false;
  }
  return true;
}

// Element by element against the reference computed on the same (poisoned)
// inputs: non-finite exactly where the reference is non-finite (NaN and Inf
// are not told apart), finite elements within 1e-5 of the largest finite
// reference magnitude. `row_len` elements per row of `rows`; only rows with
// check[row] are compared.
// blocked_may_be_nan: in a row that is NaN anyway, a blocked key's weight
// (0 in the reference) may be NaN too (the prefill kernel normalises every
// weight of the row by the row's NaN max and sum); tolerated, not required.
::testing::AssertionResult MatchesWithNonFinite(const char* what, const TensorBuf& got,
                                                const std::vector<double>& want, int64_t row_len,
                                                const std::vector<bool>& check,
                                                bool blocked_may_be_nan = false) {
  double scale = 1.0;
  for (double w : want) {
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  }
  int64_t bad = 0;
  std::string first;
  got.ForEach([&](const int64_t* idx, int64_t linear) {
    if (!check[static_cast<size_t>(linear / row_len)]) return;
    const float g = got.GetF32(idx);
    const double w = want[static_cast<size_t>(linear)];
    bool ok =
        std::isfinite(w) ? std::isfinite(g) && std::fabs(g - w) <= 1e-5 * scale : !std::isfinite(g);
    if (blocked_may_be_nan && w == 0.0 && std::isnan(g)) ok = true;
    if (!ok && bad++ == 0) {
      first = std::string(what) + "[" + std::to_string(idx[0]) + "," + std::to_string(idx[1]) +
              "," + std::to_string(idx[2]) + "," + std::to_string(idx[3]) + "] is " +
              std::to_string(g) + ", reference " + std::to_string(w);
    }
  });
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " elements differ; first: " << first;
}

class PoisonTest : public ::testing::TestWithParam<PoisonCase> {};

// Runs the problem twice, clean and with one element set to NaN or +-Inf.
// Rows that cannot reach the element (other batches and heads, rows whose
// mask, causal diagonal or kv_len blocks its key) must be bit-identical to
// the clean run (out, lse, weights). Rows that reach it must agree with the
// double reference on the poisoned inputs: non-finite where it is (a NaN
// score makes the whole row NaN, never finite garbage), close where it is
// finite (e.g. a -Inf key whose score is -inf is simply never chosen).
void CheckPoisonConfinement(const PoisonCase& c) {
  Problem p = PoisonProblem(c);
  // The poisoned key: in the last decode chunk, near the causal diagonal (so
  // that causal blocks it for some rows only); kv_len blocks it for batch 1.
  const int64_t key = c.path == Path::kPrefill ? 100 : p.k_len - 2;
  if (c.blocking == Blocking::kKvLen)
    p.kv_len = {static_cast<int32_t>(p.k_len), static_cast<int32_t>(key)};
  Call clean(p), dirty(p);
  ASSERT_EQ(clean.Run(), HWYATTN_OK) << hwyattn_last_error();
  CheckAgainstReference(clean);

  const int64_t b = 1, kvh = 1, row = 1;
  const size_t rows = static_cast<size_t>(p.batch * p.q_heads * p.q_len);
  std::vector<bool> touched(rows, false);
  auto row_index = [&](int64_t bb, int64_t h, int64_t i) {
    return static_cast<size_t>((bb * p.q_heads + h) * p.q_len + i);
  };
  switch (c.where) {
    case Poison::kQ: {
      const int64_t idx[4] = {b, 2, row, 5};
      dirty.q.SetF32(idx, c.value);
      touched[row_index(b, 2, row)] = true;
      break;
    }
    case Poison::kK:
    case Poison::kV: {
      const int64_t idx[4] = {b, kvh, key, 3};
      (c.where == Poison::kK ? dirty.k : dirty.v).SetValue(idx, c.value);
      for (int64_t h = kvh * 2; h < kvh * 2 + 2; ++h) {
        for (int64_t i = 0; i < p.q_len; ++i)
          touched[row_index(b, h, i)] = RowSeesKey(dirty, p, b, i, key);
      }
      break;
    }
    case Poison::kMask: {
      const int64_t idx[4] = {0, 0, row, key};
      dirty.mask.SetValue(idx, c.value);
      for (int64_t bb = 0; bb < p.batch; ++bb) {
        for (int64_t h = 0; h < p.q_heads; ++h)
          touched[row_index(bb, h, row)] = RowSeesKey(dirty, p, bb, row, key);
      }
      break;
    }
  }
  ASSERT_EQ(dirty.Run(), HWYATTN_OK) << hwyattn_last_error();
  RefResult ref;
  std::string error;
  ASSERT_TRUE(ReferenceSdpa(dirty.q.tensor(), dirty.k.tensor(), dirty.v.tensor(), &dirty.opts, &ref,
                            &error))
      << error;

  int64_t touched_rows = 0, leaked = 0;
  std::string first_leak;
  for (size_t r = 0; r < rows; ++r) {
    const int64_t bb = static_cast<int64_t>(r) / (p.q_heads * p.q_len);
    const int64_t h = static_cast<int64_t>(r) / p.q_len % p.q_heads;
    const int64_t i = static_cast<int64_t>(r) % p.q_len;
    if (touched[r]) {
      ++touched_rows;
      continue;
    }
    bool identical = true;
    auto same = [&](const TensorBuf& x, const TensorBuf& y, const int64_t* idx) {
      const float a = x.GetF32(idx), z = y.GetF32(idx);
      identical &= std::memcmp(&a, &z, sizeof(a)) == 0;
    };
    for (int64_t d = 0; d < p.v_dim; ++d) {
      const int64_t idx[4] = {bb, h, i, d};
      same(dirty.out, clean.out, idx);
    }
    const int64_t li[4] = {0, bb, h, i};
    same(dirty.lse, clean.lse, li);
    if (p.want_weights) {
      for (int64_t j = 0; j < p.k_len; ++j) {
        const int64_t wi[4] = {bb, h, i, j};
        same(dirty.weights, clean.weights, wi);
      }
    }
    if (!identical && leaked++ == 0) {
      first_leak =
          "[" + std::to_string(bb) + "," + std::to_string(h) + "," + std::to_string(i) + "]";
    }
  }
  // Under kv_len the poison sits past a batch's key end, and a poisoned mask
  // element under causal sits above the diagonal: there it must reach no row
  // (only `leaked` below can fail). Everywhere else some row must see it.
  const bool reaches_no_row_by_design =
      c.where != Poison::kQ && (c.blocking == Blocking::kKvLen ||
                                (c.where == Poison::kMask && c.blocking == Blocking::kCausal));
  if (!reaches_no_row_by_design) {
    EXPECT_GT(touched_rows, 0) << "the poison reaches no row: the test would be vacuous";
  }
  EXPECT_EQ(leaked, 0) << leaked << " rows that never see the poisoned element changed; first "
                       << first_leak;
  EXPECT_TRUE(MatchesWithNonFinite("out", dirty.out, ref.out, p.v_dim, touched));
  EXPECT_TRUE(MatchesWithNonFinite("lse", dirty.lse, ref.lse, 1, touched));
  if (p.want_weights) {
    EXPECT_TRUE(MatchesWithNonFinite("weights", dirty.weights, ref.weights, p.k_len, touched,
                                     /*blocked_may_be_nan=*/true));
  }
}

TEST_P(PoisonTest, ConfinedToTheRowsItReaches) { CheckPoisonConfinement(GetParam()); }

std::vector<PoisonCase> PoisonCases() {
  std::vector<PoisonCase> cases;
  for (Path path : {Path::kPrefill, Path::kDecode, Path::kSmall}) {
    for (Poison where : {Poison::kQ, Poison::kK, Poison::kV, Poison::kMask}) {
      for (float value : {kNaN, kInf, -kInf}) {
        for (Blocking bl :
             {Blocking::kNone, Blocking::kCausal, Blocking::kBoolMask, Blocking::kKvLen}) {
          // The F32 mask is the poisoned tensor itself: no second mask, and
          // only NaN (-inf in a mask blocks; +inf is clamped to FLT_MAX).
          if (where == Poison::kMask && (bl == Blocking::kBoolMask || !std::isnan(value))) continue;
          cases.push_back({path, where, value, bl});
          // Half-precision K, V (F16, BF16) and masks (F16) too: their
          // NaN and infinities must widen to the same (portable targets
          // widen F16 in software).
          if (bl != Blocking::kNone && bl != Blocking::kCausal) continue;
          if (where == Poison::kK || where == Poison::kV) {
            cases.push_back({path, where, value, bl, HWYATTN_F16});
            cases.push_back({path, where, value, bl, HWYATTN_BF16});
          } else if (where == Poison::kMask) {
            cases.push_back({path, where, value, bl, HWYATTN_F16});
          }
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Hardening, PoisonTest, ::testing::ValuesIn(PoisonCases()),
                         [](const ::testing::TestParamInfo<PoisonCase>& info) {
                           return PoisonName(info.param);
                         });

// Scores up to 1e30 (q and k of 1e15, scale 1): finite and as the reference.
TEST(Edges, ScoresUpTo1e30) {
  for (Path path : {Path::kPrefill, Path::kDecode, Path::kSmall}) {
    Problem p;
    p.batch = 1;
    p.q_heads = 2;
    p.kv_heads = 1;
    p.q_len = path == Path::kPrefill ? 40 : 2;
    p.k_len = path == Path::kSmall ? 20 : 600;
    p.dim = 1;
    p.v_dim = 5;
    p.scale = 1.0f;
    p.q_amp = 1e15f;
    p.k_amp = 1e15f;
    p.want_lse = true;
    p.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    SCOPED_TRACE(PathName(path));
    RunAndCheck(p);
  }
}

// An F32 mask of -INFINITY and -FLT_MAX entries, and an F16 one of -INFINITY
// and -65504 (its largest finite magnitude): rows with an allowed key are
// finite and match the reference; rows blocked only by the finite extreme
// still get a finite softmax (weights summing to 1); rows of -INFINITY only
// get zeros and lse = -inf.
TEST(Edges, InfiniteAndMaxMasks) {
  for (const hwyattn_dtype dtype : {HWYATTN_F32, HWYATTN_F16}) {
    for (Path path : {Path::kPrefill, Path::kDecode, Path::kSmall}) {
      SCOPED_TRACE(PathName(path));
      SCOPED_TRACE(dtype == HWYATTN_F16 ? "F16 mask" : "F32 mask");
      Problem p;
      p.batch = 1;
      p.q_heads = 2;
      p.kv_heads = 2;
      p.q_len = path == Path::kPrefill ? 30 : 4;
      p.k_len = path == Path::kSmall ? 8 : 700;  // small: 2048 FLOPs
      p.dim = 8;
      p.v_dim = 8;
      p.want_lse = true;
      p.has_mask = true;
      p.mask.dtype = dtype;
      p.mask.shape = {1, 1, p.q_len, p.k_len};
      Call call(p);
      // Row 0: all -max. Row 1: all -inf. Other rows: -inf, -max and a few
      // zeros (max: FLT_MAX, or 65504 = F16 0x7BFF).
      const float max = dtype == HWYATTN_F16 ? 65504.0f : FLT_MAX;
      for (int64_t i = 0; i < p.q_len; ++i) {
        for (int64_t j = 0; j < p.k_len; ++j) {
          const int64_t idx[4] = {0, 0, i, j};
          float m = (j % 3 == 0) ? -kInf : -max;
          if (i == 0) m = -max;
          if (i == 1) m = -kInf;
          if (i >= 2 && j % 97 == static_cast<int64_t>(i % 97)) m = 0.0f;
          if (dtype == HWYATTN_F16) {
            call.mask.SetF16Bits(idx, FloatToF16(m));
          } else {
            call.mask.SetF32(idx, m);
          }
        }
      }
      ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
      RefResult ref;
      std::string error;
      ASSERT_TRUE(ReferenceSdpa(call.q.tensor(), call.k.tensor(), call.v.tensor(), &call.opts, &ref,
                                &error))
          << error;
      for (int64_t h = 0; h < p.q_heads; ++h) {
        for (int64_t i = 0; i < p.q_len; ++i) {
          const int64_t li[4] = {0, 0, h, i};
          const float lse = call.lse.GetF32(li);
          for (int64_t d = 0; d < p.v_dim; ++d) {
            const int64_t idx[4] = {0, h, i, d};
            const float got = call.out.GetF32(idx);
            const double want = ref.out[static_cast<size_t>((h * p.q_len + i) * p.v_dim + d)];
            if (i == 1) {
              EXPECT_EQ(got, 0.0f) << "row of -inf only, h " << h;
            } else if (i == 0) {
              // Finite, inside the convex hull of V.
              EXPECT_TRUE(std::isfinite(got) && std::fabs(got) <= 1.0f) << got;
            } else {
              EXPECT_TRUE(std::isfinite(got));
              EXPECT_NEAR(got, want, 1e-5) << "h " << h << " row " << i << " d " << d;
            }
          }
          if (i == 1) {
            EXPECT_TRUE(std::isinf(lse) && lse < 0) << lse;
          } else {
            EXPECT_TRUE(std::isfinite(lse)) << "row " << i << ": " << lse;
          }
        }
      }
    }
  }
}

// With weights (prefill only): a row blocked by -FLT_MAX everywhere still sums to 1.
TEST(Edges, MaxMaskWeightsSumToOne) {
  Problem p;
  p.q_len = 3;
  p.k_len = 50;
  p.dim = 4;
  p.v_dim = 4;
  p.want_weights = true;
  p.has_mask = true;
  p.mask.dtype = HWYATTN_F32;
  p.mask.shape = {1, 1, p.q_len, p.k_len};
  Call call(p);
  call.mask.ForEachStored([&](const int64_t* idx) { call.mask.SetF32(idx, -FLT_MAX); });
  ASSERT_EQ(call.Run(), HWYATTN_OK) << hwyattn_last_error();
  for (int64_t i = 0; i < p.q_len; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < p.k_len; ++j) {
      const int64_t idx[4] = {0, 0, i, j};
      const float w = call.weights.GetF32(idx);
      ASSERT_TRUE(std::isfinite(w) && w >= 0) << w;
      sum += w;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << i;
  }
}

// Small and odd sizes on both kernels, with every tensor misaligned from the
// vector size (by one element) or not, against the reference.
struct ShapeCase {
  int64_t q_len, k_len, dim, v_dim;
  bool misaligned;
  bool weights;
};

class EdgeShapeTest : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(EdgeShapeTest, MatchesReference) {
  const ShapeCase& s = GetParam();
  Problem p;
  p.batch = 2;
  p.q_heads = 2;
  p.kv_heads = 1;
  p.q_len = s.q_len;
  p.k_len = s.k_len;
  p.dim = s.dim;
  p.v_dim = s.v_dim;
  p.want_lse = true;
  p.want_weights = s.weights;
  p.causal = s.q_len <= s.k_len ? HWYATTN_CAUSAL_BOTTOM_RIGHT : HWYATTN_CAUSAL_NONE;
  p.seed = static_cast<uint32_t>(s.dim * 131 + s.q_len);
  if (s.misaligned) {
    for (Layout* l :
         {&p.q_layout, &p.k_layout, &p.v_layout, &p.out_layout, &p.weights_layout, &p.lse_layout}) {
      l->offset = 1;
    }
    p.has_mask = true;
    p.mask.dtype = HWYATTN_BOOL;
    p.mask.shape = {1, 1, p.q_len, p.k_len};
    p.mask.layout.offset = 1;
  }
  RunAndCheck(p);
}

std::vector<ShapeCase> EdgeShapes() {
  std::vector<ShapeCase> v;
  for (bool mis : {false, true}) {
    v.push_back({1, 1, 1, 1, mis, true});     // L = 1, D = 1
    v.push_back({1, 1, 1, 1, mis, false});    // decode, L = 1
    v.push_back({1, 37, 1, 1, mis, false});   // D = 1 decode
    v.push_back({50, 50, 1, 1, mis, false});  // D = 1 prefill
    for (int64_t d : {3, 5, 7, 9, 15, 17, 31, 33, 63, 65, 129}) {
      v.push_back({2, 70, d, d + 2, mis, false});               // decode
      v.push_back({20, 70, d, d == 3 ? 1 : d - 2, mis, true});  // prefill
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Hardening, EdgeShapeTest, ::testing::ValuesIn(EdgeShapes()),
                         [](const ::testing::TestParamInfo<ShapeCase>& info) {
                           const ShapeCase& s = info.param;
                           return "Lq" + std::to_string(s.q_len) + "_Lk" + std::to_string(s.k_len) +
                                  "_D" + std::to_string(s.dim) + "_Dv" + std::to_string(s.v_dim) +
                                  (s.misaligned ? "_Misaligned" : "_Aligned") +
                                  (s.weights ? "_Weights" : "");
                         });

}  // namespace
}  // namespace hwyattn_test
