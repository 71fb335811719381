// SPDX-License-Identifier: Apache-2.0
//
// The KV-cache entry points through the C ABI: hwyattn_kv_cache_write
// against a scalar reference written here (conversion, I8 quantization,
// slots), and hwyattn_kv_attention against the double oracle
// (ReferenceKvAttention in tests/reference.h) for decode rows, chunked and
// full prefill, GQA, every score modifier, lse, F32/F16/BF16/I8 caches (both
// scale layouts), page sizes 1, 16 and 17, vLLM's and FlashAttention's page
// layouts, and no block table; batch invariance and determinism (a sequence
// alone, first, last, among 31 others, pages shuffled, 1/2/3 threads) bit
// for bit. Run once per SIMD target by ctest (HWYATTN_TARGET).

#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"

namespace hwyattn_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// A cache and a batch built from per-sequence float keys and values.
// ---------------------------------------------------------------------------

struct Seq {
  int32_t q_len, kv_len;
  int32_t q_pos = -1;  // -1: default (kv_len - q_len)
  uint32_t seed = 0;   // of the sequence's keys, values and queries (0: its index + 1)
};

// Scale tensors of a quantized cache: per token [P, Hkv, S, 1], per channel
// [1, Hkv, 1, dim], per kv head [1, Hkv, 1, 1], per tensor [1] (rank 1), or
// none (FP8 only: scale 1).
enum class Scales { kToken, kChannel, kHead, kTensor, kNone };
const char* ScalesName(Scales s) {
  switch (s) {
    case Scales::kToken: return "Token";
    case Scales::kChannel: return "Channel";
    case Scales::kHead: return "Head";
    case Scales::kTensor: return "Tensor";
    case Scales::kNone: return "None";
  }
  return "?";
}
bool IsQuantized(hwyattn_dtype d) {
  return d == HWYATTN_I8 || d == HWYATTN_I4 || d == HWYATTN_F8E4M3 || d == HWYATTN_F8E5M2;
}
// The magnitude a calibrated scale maps a tensor's largest |x| to.
float QuantizedMax(hwyattn_dtype d) {
  return d == HWYATTN_F8E4M3   ? 448.0f
         : d == HWYATTN_F8E5M2 ? 57344.0f
         : d == HWYATTN_I4     ? 7.0f
                               : 127.0f;
}

struct KvSpec {
  int64_t Hq = 4, Hkv = 2, D = 16, Dv = 16, page_size = 16;
  hwyattn_dtype dtype = HWYATTN_F32;  // the cache's
  int v_dtype = -1;                   // V's when it differs (block formats and float ones mix)
  Scales k_scales = Scales::kToken, v_scales = Scales::kToken;  // quantized caches'
  bool table = true;  // false: no block table (sequence s is page s)
  bool nhd = false;   // pages [P, S, Hkv, D] (FlashAttention) instead of [P, Hkv, S, D]
  hwyattn_dtype q_dtype = HWYATTN_F32;
  bool causal = true;
  int64_t window_left = 0, window_right = 0;
  float softcap = 0.0f;
  bool alibi = false, sinks = false, lse = true;
  uint32_t page_seed = 7;  // of the page placement
  int spare_pages = 3;
  bool bf16 = false;  // precision = HWYATTN_PRECISION_BF16
  bool int8 = false;  // precision = HWYATTN_PRECISION_INT8
  // A reference setup for a bf16 run (BF16Reference): the raw values are
  // first stored as `stored` (keys, values) and `stored_q` (queries) would
  // hold them, then rounded to bf16 (I8 caches: the raw values as they are,
  // quantized as the run's).
  bool bf16_operands = false;
  hwyattn_dtype stored = HWYATTN_F32, stored_q = HWYATTN_F32;
};

// x as `dtype` storage holds it (F32, F16, BF16).
float StoredValue(hwyattn_dtype dtype, float x) {
  if (dtype == HWYATTN_F16) return static_cast<float>(F16ToDouble(FloatToF16(x)));
  if (dtype == HWYATTN_BF16) return static_cast<float>(Bf16ToDouble(FloatToBf16(x)));
  return x;
}

// The bf16 operand of a value stored as `dtype`: its stored value rounded to
// the nearest bf16 (the test's own rounding: reference.h's FloatToBf16).
float Bf16OperandOf(hwyattn_dtype dtype, float x) {
  return static_cast<float>(Bf16ToDouble(FloatToBf16(StoredValue(dtype, x))));
}

// Rounds a float into `dtype` storage at p (F32, F16, BF16).
void StoreAs(hwyattn_dtype dtype, float x, unsigned char* p) {
  if (dtype == HWYATTN_F32) {
    std::memcpy(p, &x, 4);
  } else {
    const uint16_t h = dtype == HWYATTN_F16 ? FloatToF16(x) : FloatToBf16(x);
    std::memcpy(p, &h, 2);
  }
}

struct KvSetup {
  KvSpec spec;
  std::vector<Seq> seqs;
  int64_t P = 0, S = 0, T = 0, stride = 0;
  // Raw (unquantized) values per sequence: [len][Hkv][D] and [len][Hkv][Dv].
  std::vector<std::vector<float>> keys, values;
  std::vector<unsigned char> kpool, vpool;
  std::vector<float> kscale, vscale;
  hwyattn_tensor tk{}, tv{}, tks{}, tvs{};
  std::vector<int32_t> table, q_start, kv_len, q_pos;
  std::vector<unsigned char> q;
  std::vector<float> out, lse, alibi, sinks;
  hwyattn_tensor tq{}, tout{}, tlse{};
  hwyattn_kv_cache cache{};
  hwyattn_kv_batch batch{};
  hwyattn_sdpa_options opts{};

  KvSetup(const KvSpec& s, std::vector<Seq> sq) : spec(s), seqs(std::move(sq)) { Build(); }

  void Build() {
    const int64_t n = static_cast<int64_t>(seqs.size());
    const int64_t Hkv = spec.Hkv, D = spec.D, Dv = spec.Dv;
    int64_t max_len = 1, pages = 0, max_pages = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (seqs[i].seed == 0) seqs[i].seed = static_cast<uint32_t>(i + 1);
      max_len = std::max<int64_t>(max_len, seqs[i].kv_len);
    }
    S = spec.table ? spec.page_size : max_len;
    for (const Seq& q : seqs) {
      const int64_t need = (q.kv_len + S - 1) / S;
      pages += need;
      max_pages = std::max(max_pages, need);
    }
    P = spec.table ? pages + spec.spare_pages : n + 1;
    stride = max_pages + 2;
    // Page placement: a shuffled permutation of the pool.
    std::vector<int32_t> perm(static_cast<size_t>(P));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 prng(spec.page_seed);
    std::shuffle(perm.begin(), perm.end(), prng);
    table.assign(static_cast<size_t>(n * stride), -1);
    int64_t next = 0;
    for (int64_t i = 0; i < n && spec.table; ++i) {
      for (int64_t j = 0; j < (seqs[i].kv_len + S - 1) / S; ++j) {
        table[static_cast<size_t>(i * stride + j)] = perm[static_cast<size_t>(next++)];
      }
    }
    // Raw values.
    keys.resize(static_cast<size_t>(n));
    values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      std::mt19937 rng(seqs[i].seed * 7919u + 13u);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      keys[i].resize(static_cast<size_t>(seqs[i].kv_len * Hkv * D));
      values[i].resize(static_cast<size_t>(seqs[i].kv_len * Hkv * Dv));
      for (float& x : keys[i]) x = dist(rng);
      for (float& x : values[i]) x = dist(rng);
      if (spec.bf16_operands && !IsQuantized(spec.dtype)) {
        for (float& x : keys[i]) x = Bf16OperandOf(spec.stored, x);
        for (float& x : values[i]) x = Bf16OperandOf(spec.stored, x);
      }
    }
    // The pool, filled with garbage that must never be read: NaN for float
    // caches, NaN scales for I8.
    kpool.assign(StorageBytes(spec.dtype, P * Hkv * S * RowElems(spec.dtype, D)), 0xFF);
    vpool.assign(StorageBytes(VDtype(), P * Hkv * S * RowElems(VDtype(), Dv)), 0xFF);
    Describe(&tk, kpool.data(), spec.dtype, D);
    Describe(&tv, vpool.data(), VDtype(), Dv);
    hwyattn_kv_cache_init(&cache);
    cache.k = tk;
    cache.v = tv;
    if (IsQuantized(spec.dtype) && spec.k_scales != Scales::kNone) {
      MakeScales(spec.k_scales, D, false, &kscale, &tks);
      MakeScales(spec.v_scales, Dv, true, &vscale, &tvs);
      cache.k_scale = &tks;
      cache.v_scale = &tvs;
    }
    if (spec.table) {
      cache.block_table = table.data();
      cache.block_table_stride = stride;
    }
    WriteAll();
    // The batch.
    q_start.assign(1, 0);
    for (const Seq& q : seqs) {
      q_start.push_back(q_start.back() + q.q_len);
      kv_len.push_back(q.kv_len);
      q_pos.push_back(q.q_pos < 0 ? q.kv_len - q.q_len : q.q_pos);
    }
    T = q_start.back();
    hwyattn_kv_batch_init(&batch);
    batch.num_seqs = static_cast<int32_t>(n);
    batch.q_start = q_start.data();
    batch.kv_len = kv_len.data();
    bool explicit_pos = false;
    for (const Seq& q : seqs) explicit_pos = explicit_pos || q.q_pos >= 0;
    batch.q_pos = explicit_pos ? q_pos.data() : nullptr;
    // Queries: each sequence's from its own seed.
    const size_t qs = DtypeSize(spec.q_dtype);
    q.assign(static_cast<size_t>(std::max<int64_t>(T, 1) * spec.Hq * D) * qs, 0);
    for (int64_t i = 0; i < n; ++i) {
      std::mt19937 rng(seqs[i].seed * 31u + 5u);
      std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
      for (int64_t e = q_start[i] * spec.Hq * D; e < q_start[i + 1] * spec.Hq * D; ++e) {
        const float x = dist(rng);
        StoreAs(spec.q_dtype, spec.bf16_operands ? Bf16OperandOf(spec.stored_q, x) : x,
                q.data() + static_cast<size_t>(e) * qs);
      }
    }
    const int64_t tt = std::max<int64_t>(T, 1);
    const int64_t qshape[3] = {tt, spec.Hq, D}, oshape[3] = {tt, spec.Hq, Dv};
    const int64_t lshape[2] = {tt, spec.Hq};
    out.assign(static_cast<size_t>(tt * spec.Hq * Dv), kNaN);
    lse.assign(static_cast<size_t>(tt * spec.Hq), kNaN);
    EXPECT_EQ(hwyattn_tensor_contiguous(&tq, q.data(), spec.q_dtype, 3, qshape), HWYATTN_OK);
    EXPECT_EQ(hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 3, oshape), HWYATTN_OK);
    EXPECT_EQ(hwyattn_tensor_contiguous(&tlse, lse.data(), HWYATTN_F32, 2, lshape), HWYATTN_OK);
    hwyattn_sdpa_options_init(&opts);
    opts.causal = spec.causal ? HWYATTN_CAUSAL_BOTTOM_RIGHT : HWYATTN_CAUSAL_NONE;
    opts.window_left = spec.window_left;
    opts.window_right = spec.window_right;
    opts.softcap = spec.softcap;
    if (spec.alibi) {
      for (int64_t h = 0; h < spec.Hq; ++h) alibi.push_back(0.05f / static_cast<float>(h + 1));
      opts.alibi_slopes = alibi.data();
    }
    if (spec.sinks) {
      for (int64_t h = 0; h < spec.Hq; ++h) sinks.push_back(0.5f * static_cast<float>(h) - 1.0f);
      sinks.back() = -std::numeric_limits<float>::infinity();
      opts.sinks = sinks.data();
    }
    if (spec.lse) opts.lse = &tlse;
    if (spec.bf16) opts.precision = HWYATTN_PRECISION_BF16;
    if (spec.int8) opts.precision = HWYATTN_PRECISION_INT8;
  }

  hwyattn_dtype VDtype() const {
    return spec.v_dtype < 0 ? spec.dtype : static_cast<hwyattn_dtype>(spec.v_dtype);
  }

  // Elements between rows of `dim`: dim, or for I4 with an odd dim one
  // more (its rows start on a byte).
  static int64_t RowElems(hwyattn_dtype dtype, int64_t dim) {
    return dtype == HWYATTN_I4 ? (dim + 1) / 2 * 2 : dim;
  }

  // A [P, Hkv, S, dim] pool tensor, dense (rows RowElems apart) in vLLM's
  // order or FlashAttention's.
  void Describe(hwyattn_tensor* t, void* data, hwyattn_dtype dtype, int64_t dim) const {
    std::memset(t, 0, sizeof(*t));
    t->data = data;
    t->dtype = dtype;
    t->rank = 4;
    const int64_t shape[4] = {P, spec.Hkv, S, dim};
    std::copy(shape, shape + 4, t->shape);
    const int64_t ld = RowElems(dtype, dim);
    if (spec.nhd) {
      const int64_t st[4] = {S * spec.Hkv * ld, ld, spec.Hkv * ld, 1};
      std::copy(st, st + 4, t->stride);
    } else {
      const int64_t st[4] = {spec.Hkv * S * ld, S * ld, ld, 1};
      std::copy(st, st + 4, t->stride);
    }
  }

  // Scale tensors: per token [P, Hkv, S, 1] (NaN until written; with the
  // NHD layout stored [P, S, Hkv] as the pool, so a page's scales of one
  // head are Hkv apart), or per channel, per kv head or per tensor,
  // calibrated on every sequence's values (max |x| / the format's largest).
  void MakeScales(Scales layout, int64_t dim, bool of_values, std::vector<float>* data,
                  hwyattn_tensor* t) {
    if (layout == Scales::kToken) {
      data->assign(static_cast<size_t>(P * spec.Hkv * S), kNaN);
      const int64_t shape[4] = {P, spec.Hkv, S, 1};
      EXPECT_EQ(hwyattn_tensor_contiguous(t, data->data(), HWYATTN_F32, 4, shape), HWYATTN_OK);
      if (spec.nhd) {
        const int64_t st[4] = {S * spec.Hkv, 1, spec.Hkv, 1};
        std::copy(st, st + 4, t->stride);
      }
      return;
    }
    const int64_t heads = layout == Scales::kTensor ? 1 : spec.Hkv;
    const int64_t channels = layout == Scales::kChannel ? dim : 1;
    data->assign(static_cast<size_t>(heads * channels), 0.0f);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<float>& x = of_values ? values[i] : keys[i];
      for (size_t e = 0; e < x.size(); ++e) {  // x is [len][Hkv][dim]
        const int64_t h = static_cast<int64_t>(e) / dim % spec.Hkv,
                      d = static_cast<int64_t>(e) % dim;
        float& m =
            (*data)[static_cast<size_t>((heads == 1 ? 0 : h) * channels + (channels == 1 ? 0 : d))];
        m = std::max(m, std::fabs(x[e]));
      }
    }
    for (float& m : *data) m = m > 0.0f ? m / QuantizedMax(spec.dtype) : 1.0f;
    if (layout == Scales::kTensor) {
      const int64_t shape[1] = {1};
      EXPECT_EQ(hwyattn_tensor_contiguous(t, data->data(), HWYATTN_F32, 1, shape), HWYATTN_OK);
    } else {
      const int64_t shape[4] = {1, spec.Hkv, 1, channels};
      EXPECT_EQ(hwyattn_tensor_contiguous(t, data->data(), HWYATTN_F32, 4, shape), HWYATTN_OK);
    }
  }

  // Every sequence's keys and values into their slots, one write call.
  void WriteAll() {
    std::vector<float> kn, vn;
    std::vector<int64_t> slots;
    for (size_t i = 0; i < seqs.size(); ++i) {
      kn.insert(kn.end(), keys[i].begin(), keys[i].end());
      vn.insert(vn.end(), values[i].begin(), values[i].end());
      for (int64_t t = 0; t < seqs[i].kv_len; ++t) {
        const int64_t page = spec.table ? table[i * stride + t / S] : static_cast<int64_t>(i);
        slots.push_back(page * S + t % S);
      }
    }
    if (slots.empty()) return;
    const int64_t N = static_cast<int64_t>(slots.size());
    const int64_t ks[3] = {N, spec.Hkv, spec.D}, vs[3] = {N, spec.Hkv, spec.Dv};
    hwyattn_tensor tkn, tvn;
    ASSERT_EQ(hwyattn_tensor_contiguous(&tkn, kn.data(), HWYATTN_F32, 3, ks), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&tvn, vn.data(), HWYATTN_F32, 3, vs), HWYATTN_OK);
    ASSERT_EQ(hwyattn_kv_cache_write(&cache, &tkn, &tvn, slots.data(), nullptr), HWYATTN_OK)
        << hwyattn_last_error();
  }

  hwyattn_status Run() { return hwyattn_kv_attention(&tq, &cache, &batch, &tout, &opts); }

  // The output rows [T, Hq, Dv] and lse [T, Hq] of sequence i, as bytes.
  std::vector<unsigned char> RowsOf(size_t i) const {
    const int64_t q0 = q_start[i], q1 = q_start[i + 1];
    const size_t row = static_cast<size_t>(spec.Hq * spec.Dv) * 4,
                 lrow = static_cast<size_t>(spec.Hq) * 4;
    std::vector<unsigned char> b(static_cast<size_t>(q1 - q0) * (row + lrow));
    std::memcpy(b.data(), out.data() + q0 * spec.Hq * spec.Dv, static_cast<size_t>(q1 - q0) * row);
    std::memcpy(b.data() + static_cast<size_t>(q1 - q0) * row, lse.data() + q0 * spec.Hq,
                static_cast<size_t>(q1 - q0) * lrow);
    return b;
  }
};

// max |got - want| / max |want|, NaN counting as infinite.
double RelativeError(const std::vector<float>& got, const std::vector<double>& want, size_t n) {
  double max_want = 0.0, max_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    max_want = std::max(max_want, std::fabs(want[i]));
    const double g = got[i];
    if (std::isnan(g)) return std::numeric_limits<double>::infinity();
    max_err = std::max(max_err, std::fabs(g - want[i]));
  }
  return max_want > 0 ? max_err / max_want : max_err;
}

// The oracle on the cache as stored (dequantized) vs the call: fp32-small.
// For quantized caches, also the error against the unquantized values (an F32 cache
// built from the same raw values), printed, not asserted.
void CheckAgainstOracle(KvSetup& s) {
  ASSERT_EQ(s.Run(), HWYATTN_OK) << hwyattn_last_error();
  KvRefResult ref;
  std::string error;
  ASSERT_TRUE(ReferenceKvAttention(s.tq, s.cache, s.batch, &s.opts, &ref, &error)) << error;
  const size_t n_out = static_cast<size_t>(s.T * s.spec.Hq * s.spec.Dv);
  // fp32 accumulation over up to ~1000 keys: 1e-5 of the largest output (as
  // the hwyattn_sdpa suites).
  EXPECT_LE(RelativeError(s.out, ref.out, n_out), 1e-5);
  if (s.spec.lse) {
    for (size_t r = 0; r < static_cast<size_t>(s.T * s.spec.Hq); ++r) {
      const double want = ref.lse[r];
      if (std::isinf(want)) {
        EXPECT_EQ(static_cast<double>(s.lse[r]), want) << "lse row " << r;
      } else {
        EXPECT_NEAR(s.lse[r], want, 1e-5 * std::max(1.0, std::fabs(want))) << "lse row " << r;
      }
    }
  }
  if (IsQuantized(s.spec.dtype) || BlockBytes(s.spec.dtype) != 0 || s.spec.v_dtype >= 0) {
    KvSpec raw_spec = s.spec;
    raw_spec.dtype = HWYATTN_F32;
    raw_spec.v_dtype = -1;
    KvSetup raw(raw_spec, s.seqs);
    KvRefResult exact;
    ASSERT_TRUE(ReferenceKvAttention(raw.tq, raw.cache, raw.batch, &raw.opts, &exact, &error));
    std::printf(
        "  %s (K scales %s, V %s): error vs the unquantized values %.3g (max|out| "
        "relative); vs the dequantized cache %.3g\n",
        DtypeName(s.spec.dtype), ScalesName(s.spec.k_scales), ScalesName(s.spec.v_scales),
        RelativeError(s.out, exact.out, n_out), RelativeError(s.out, ref.out, n_out));
  }
}

// A mixed batch: decodes of several lengths, a chunked prefill, a full
// prefill, an empty-query sequence.
std::vector<Seq> MixedBatch() {
  return {{1, 37}, {5, 70}, {1, 1}, {24, 24}, {0, 9}, {1, 600}, {3, 20}};
}

struct CaseSpec {
  std::string name;
  KvSpec spec;
  std::vector<Seq> seqs;
};

std::vector<CaseSpec> OracleCases() {
  std::vector<CaseSpec> c;
  auto add = [&](const std::string& name, KvSpec s, std::vector<Seq> seqs = MixedBatch()) {
    c.push_back({name, s, std::move(seqs)});
  };
  KvSpec base;
  add("F32Paged16", base);
  for (int64_t ps : {1, 17}) {
    KvSpec s = base;
    s.page_size = ps;
    add("F32Page" + std::to_string(ps), s);
  }
  {
    KvSpec s = base;
    s.table = false;
    add("F32NoTable", s);
  }
  {
    KvSpec s = base;
    s.nhd = true;
    add("F32NhdLayout", s);
  }
  for (hwyattn_dtype d : {HWYATTN_F16, HWYATTN_BF16}) {
    KvSpec s = base;
    s.dtype = d;
    add(d == HWYATTN_F16 ? "F16" : "BF16", s);
  }
  {
    // V rows of several slices over pages: the P V sums go on across short
    // batches of pages (kSliceBatchKeys), as in V1.
    KvSpec s = base;
    s.dtype = HWYATTN_BF16;
    s.D = s.Dv = 128;
    add("BF16D128Paged16", s);
  }
  // Quantized caches: each scale layout for K and for V.
  struct Quantized {
    hwyattn_dtype dtype;
    Scales k, v;
  };
  const Quantized quantized[] = {
      {HWYATTN_I8, Scales::kToken, Scales::kToken},
      {HWYATTN_I8, Scales::kChannel, Scales::kToken},
      {HWYATTN_I8, Scales::kToken, Scales::kChannel},
      {HWYATTN_I8, Scales::kChannel, Scales::kChannel},
      {HWYATTN_I8, Scales::kTensor, Scales::kHead},
      {HWYATTN_F8E4M3, Scales::kNone, Scales::kNone},
      {HWYATTN_F8E4M3, Scales::kTensor, Scales::kTensor},
      {HWYATTN_F8E4M3, Scales::kToken, Scales::kChannel},
      {HWYATTN_F8E5M2, Scales::kNone, Scales::kNone},
      {HWYATTN_F8E5M2, Scales::kHead, Scales::kToken},
      {HWYATTN_I4, Scales::kToken, Scales::kToken},
      {HWYATTN_I4, Scales::kChannel, Scales::kToken},  // KIVI's
      {HWYATTN_I4, Scales::kHead, Scales::kChannel},
  };
  for (const Quantized& qc : quantized) {
    KvSpec s = base;
    s.dtype = qc.dtype;
    s.k_scales = qc.k;
    s.v_scales = qc.v;
    add(std::string(DtypeName(qc.dtype)) + "K" + ScalesName(qc.k) + "V" + ScalesName(qc.v), s);
  }
  {
    KvSpec s = base;
    s.dtype = HWYATTN_F8E4M3;
    s.page_size = 17;
    s.nhd = true;
    add("F8E4M3Page17Nhd", s);
    // Pages of one token: a 512-key chunk is 512 runs, whose P V sums go on
    // over batches of runs (E4M3's sums are held over its 2^8 in between);
    // D 64: the loops widen fp8 a pair of vectors at a time.
    s.page_size = 1;
    s.nhd = false;
    s.D = s.Dv = 64;
    s.k_scales = s.v_scales = Scales::kTensor;
    add("F8E4M3Page1", s);
  }
  // ggml's block formats (D a multiple of 32), written by
  // hwyattn_kv_cache_write; K and V of different formats, as llama.cpp's
  // -ctk / -ctv.
  for (hwyattn_dtype d :
       {HWYATTN_Q8_0, HWYATTN_Q4_0, HWYATTN_Q4_1, HWYATTN_Q5_0, HWYATTN_Q5_1, HWYATTN_IQ4_NL}) {
    KvSpec s = base;
    s.dtype = d;
    s.D = 64;
    s.Dv = 32;
    add(DtypeName(d), s);
  }
  {
    KvSpec s = base;
    s.dtype = HWYATTN_Q8_0;
    s.v_dtype = HWYATTN_Q4_0;
    s.D = s.Dv = 32;
    s.page_size = 17;
    s.nhd = true;
    add("Q8_0KQ4_0VPage17Nhd", s);
    s.dtype = HWYATTN_Q5_1;
    s.v_dtype = HWYATTN_F16;
    s.bf16 = false;
    s.window_left = 9;
    s.softcap = 0.75f;
    s.sinks = true;
    add("Q5_1KF16VModifiers", s);
    s.dtype = HWYATTN_BF16;
    s.v_dtype = HWYATTN_IQ4_NL;
    s.Hq = 8;
    s.Hkv = 1;
    add("BF16KIQ4_NLVMqa", s);
  }
  {
    KvSpec s = base;
    s.dtype = HWYATTN_I8;
    s.page_size = 17;
    s.nhd = true;
    add("I8Page17Nhd", s);
  }
  {
    // I4 with odd head dims (rows padded to a byte, the pad nibble never
    // read), NHD pages, and a long head dim past one 32-element span.
    KvSpec s = base;
    s.dtype = HWYATTN_I4;
    s.k_scales = Scales::kChannel;
    s.D = 15;
    s.Dv = 7;
    s.page_size = 17;
    s.nhd = true;
    add("I4OddDimsPage17Nhd", s);
    s.D = 72;
    s.Dv = 40;
    s.nhd = false;
    s.window_left = 9;
    s.softcap = 0.75f;
    s.sinks = true;
    add("I4D72Modifiers", s);
  }
  {
    KvSpec s = base;
    s.Hq = 8;
    s.Hkv = 1;
    s.D = 64;
    s.Dv = 40;
    add("MqaD64Dv40", s);
  }
  {
    KvSpec s = base;
    s.q_dtype = HWYATTN_BF16;
    s.dtype = HWYATTN_BF16;
    add("BF16Queries", s);
  }
  {
    KvSpec s = base;
    s.causal = false;
    add("NonCausal", s, {{1, 37}, {5, 70}, {3, 0}, {4, 2}, {2, 600}});
  }
  {
    KvSpec s = base;
    add("ExplicitPositions", s, {{1, 37, 10}, {5, 70, 0}, {4, 64, 60}, {3, 600, 300}});
  }
  // Modifiers, one at a time and all together.
  {
    KvSpec s = base;
    s.window_left = 5;
    add("WindowLeft", s);
    s.window_right = 2;
    s.causal = false;
    add("WindowBoth", s);
  }
  {
    KvSpec s = base;
    s.softcap = 0.75f;
    add("Softcap", s);
  }
  {
    KvSpec s = base;
    s.alibi = true;
    add("Alibi", s);
  }
  {
    KvSpec s = base;
    s.sinks = true;
    add("Sinks", s);
    s.causal = false;  // a sequence without keys: its rows get lse = the sink
    add("SinksNoKeys", s, {{1, 37}, {5, 70}, {2, 0}, {24, 24}});
  }
  {
    KvSpec s = base;
    s.window_left = 9;
    s.softcap = 0.75f;
    s.alibi = true;
    s.sinks = true;
    s.dtype = HWYATTN_I8;
    add("AllModifiersI8", s);
    s.dtype = HWYATTN_F8E5M2;
    s.k_scales = Scales::kChannel;
    add("AllModifiersF8E5M2", s);
  }
  {
    KvSpec s = base;
    s.lse = false;
    add("NoLse", s);
  }
  // A long prefill chunk (the prefill kernel over several key panels).
  {
    KvSpec s = base;
    s.D = 32;
    s.Dv = 32;
    add("LongChunk", s, {{130, 400}, {1, 1000}, {200, 200}});
  }
  return c;
}

void PrintTo(const CaseSpec& c, std::ostream* os) { *os << c.name; }

class KvOracleTest : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(KvOracleTest, MatchesReference) {
  KvSetup s(GetParam().spec, GetParam().seqs);
  CheckAgainstOracle(s);
}

INSTANTIATE_TEST_SUITE_P(Kv, KvOracleTest, ::testing::ValuesIn(OracleCases()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// precision = BF16 against the oracle on the bf16 operands (an F32 cache,
// F32 queries, of the run's stored values rounded to bf16; an I8 cache as
// it is, its integers being bf16 values and its scales fp32 factors): the
// bounds of bf16_test.cc (out within 2^-9 max|v| for P's rounding, 2^-8
// with per-token V scales, lse
// fp32-small), and the lse visibly away from the unrounded oracle (the
// rounding happened). Only decode rows (the prefill kernel rounds an I8
// cache's dequantized values, which this oracle does not).
void CheckBf16AgainstOracle(KvSetup& s) {
  ASSERT_TRUE(s.spec.bf16);
  ASSERT_EQ(s.Run(), HWYATTN_OK) << hwyattn_last_error();
  KvSpec rs = s.spec;
  rs.bf16 = false;
  rs.bf16_operands = true;
  rs.stored = s.spec.dtype;
  rs.stored_q = s.spec.q_dtype;
  rs.q_dtype = HWYATTN_F32;
  if (!IsQuantized(rs.dtype)) rs.dtype = HWYATTN_F32;
  KvSetup r(rs, s.seqs);
  KvRefResult ref, plain;
  std::string error;
  ASSERT_TRUE(ReferenceKvAttention(r.tq, r.cache, r.batch, &r.opts, &ref, &error)) << error;
  ASSERT_TRUE(ReferenceKvAttention(s.tq, s.cache, s.batch, &s.opts, &plain, &error)) << error;
  double v_max = 0.0, out_max = 0.0, err = 0.0;
  for (const auto& seq : r.values) {
    for (float x : seq) v_max = std::max(v_max, static_cast<double>(std::fabs(x)));
  }
  if (IsQuantized(s.spec.dtype)) {  // the dequantized values
    for (size_t i = 0; i < s.seqs.size(); ++i) {
      for (int64_t t = 0; t < s.seqs[i].kv_len; ++t) {
        const int64_t page =
            s.spec.table ? s.table[i * s.stride + t / s.S] : static_cast<int64_t>(i);
        for (int64_t h = 0; h < s.spec.Hkv; ++h) {
          for (int64_t d = 0; d < s.spec.Dv; ++d) {
            v_max = std::max(v_max, std::fabs(ReadCacheValue(s.cache, true, page, h, t % s.S, d)));
          }
        }
      }
    }
  }
  const size_t n_out = static_cast<size_t>(s.T * s.spec.Hq * s.spec.Dv);
  for (size_t i = 0; i < n_out; ++i) {
    out_max = std::max(out_max, std::fabs(ref.out[i]));
    err = std::max(err, std::isnan(s.out[i]) ? INFINITY : std::fabs(s.out[i] - ref.out[i]));
  }
  // With per-token V scales P's operand is p_j s_j rounded (the header):
  // each weight within 2^-8 relative, so out within 2^-8 of the largest
  // dequantized value (a row of one key reaches it: p = 1, s_j rounded).
  const int v_bound_exponent =
      IsQuantized(s.spec.dtype) && s.spec.v_scales == Scales::kToken ? -8 : -9;
  EXPECT_LE(err, std::ldexp(v_max, v_bound_exponent) * 1.01 + 2e-5 * out_max)
      << "out against the oracle on the bf16 operands";
  if (!s.spec.lse) return;
  double l_err = 0.0, l_plain = 0.0;
  for (size_t r0 = 0; r0 < static_cast<size_t>(s.T * s.spec.Hq); ++r0) {
    if (std::isinf(ref.lse[r0])) {
      EXPECT_EQ(static_cast<double>(s.lse[r0]), ref.lse[r0]) << "lse row " << r0;
      continue;
    }
    const double scale = 1.0 + std::fabs(ref.lse[r0]);
    l_err = std::max(l_err, std::fabs(s.lse[r0] - ref.lse[r0]) / scale);
    l_plain = std::max(l_plain, std::fabs(s.lse[r0] - plain.lse[r0]) / scale);
  }
  EXPECT_LE(l_err, 2e-6) << "lse against the oracle on the bf16 operands";
  if (s.spec.q_dtype != HWYATTN_BF16) {
    EXPECT_GT(l_plain, 20 * l_err + 1e-7) << "lse does not look rounded";
  }
  std::printf("  bf16: max|out - ref| / max|ref| = %.3g, lse rel %.3g (unrounded oracle %.3g)\n",
              err / out_max, l_err, l_plain);
}

// Decode batches under precision = BF16: q_len 1 and a few rows, GQA groups
// 1, 4 and 8, head dims 64, 128, 80 and 17, kv_len 0, 1, odd and over
// several 512-key chunks, every cache dtype (I8 in both scale layouts),
// pages of 1, 16 and 33 and none, the score modifiers with lse.
std::vector<CaseSpec> Bf16Cases() {
  std::vector<CaseSpec> c;
  const std::vector<Seq> decodes = {{1, 37},   {2, 70},   {1, 1},  {0, 9},
                                    {1, 1100}, {2, 5, 0}, {1, 513}};
  auto add = [&](const std::string& name, KvSpec s, std::vector<Seq> seqs) {
    s.bf16 = true;
    c.push_back({name, s, std::move(seqs)});
  };
  const hwyattn_dtype dtypes[] = {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16, HWYATTN_I8};
  const char* names[] = {"F32", "F16", "BF16", "I8"};
  for (int i = 0; i < 4; ++i) {
    for (int64_t ps : {1, 16, 33}) {
      KvSpec s;
      s.dtype = dtypes[i];
      s.page_size = ps;
      s.D = ps == 1 ? 17 : 64;
      s.Dv = ps == 33 ? 80 : s.D;
      s.Hq = ps == 16 ? 8 : 2;
      s.Hkv = ps == 16 ? 2 : 2;  // groups 4 and 1
      add(std::string(names[i]) + "Page" + std::to_string(ps), s, decodes);
    }
    KvSpec s;
    s.dtype = dtypes[i];
    s.table = false;
    s.Hq = 8;
    s.Hkv = 1;  // group 8
    s.D = 128;
    s.Dv = 128;
    add(std::string(names[i]) + "NoTableGqa8D128", s, {{1, 600}, {1, 3}, {1, 1025}});
  }
  // FP8 under the dot products' lookups: GQA 8 (a key's 32 numbers at a
  // time) and D 128 in pages of 16; GQA 4, D 64 in one-token pages (64 at a
  // time, P . V's 64-dim pairs continued across batches).
  {
    KvSpec s;
    s.dtype = HWYATTN_F8E4M3;
    s.k_scales = s.v_scales = Scales::kTensor;
    s.Hq = 16;
    s.Hkv = 2;
    s.D = s.Dv = 128;
    add("F8E4M3Gqa8D128", s, decodes);
    s.dtype = HWYATTN_F8E5M2;
    s.k_scales = s.v_scales = Scales::kToken;
    s.Hq = 8;
    s.D = s.Dv = 64;
    s.page_size = 1;
    add("F8E5M2Page1D64", s, decodes);
  }
  // Other scale layouts (the loop above: both per token), FP8 caches.
  const std::tuple<hwyattn_dtype, Scales, Scales> layouts[] = {
      {HWYATTN_I8, Scales::kChannel, Scales::kToken},
      {HWYATTN_I8, Scales::kToken, Scales::kChannel},
      {HWYATTN_I8, Scales::kChannel, Scales::kChannel},
      {HWYATTN_F8E4M3, Scales::kToken, Scales::kToken},
      {HWYATTN_F8E4M3, Scales::kNone, Scales::kNone},
      {HWYATTN_F8E4M3, Scales::kChannel, Scales::kTensor},  // (the portable loops)
      {HWYATTN_F8E5M2, Scales::kTensor, Scales::kHead},
      {HWYATTN_F8E5M2, Scales::kHead, Scales::kToken}};
  for (const auto& [dtype, k, v] : layouts) {
    KvSpec s;
    s.dtype = dtype;
    s.k_scales = k;
    s.v_scales = v;
    s.D = 80;
    s.Dv = 80;
    add(std::string(DtypeName(dtype)) + "K" + ScalesName(k) + "V" + ScalesName(v), s, decodes);
  }
  {
    KvSpec s;
    s.q_dtype = HWYATTN_BF16;
    s.dtype = HWYATTN_BF16;
    s.nhd = true;
    add("BF16QueriesNhd", s, decodes);
  }
  for (hwyattn_dtype d : {HWYATTN_F16, HWYATTN_BF16, HWYATTN_I8}) {
    KvSpec s;
    s.dtype = d;
    s.D = 80;
    s.Dv = 80;
    s.page_size = 33;
    s.window_left = 300;
    s.softcap = 0.75f;
    s.alibi = true;
    s.sinks = true;
    add(std::string("AllModifiers") + (d == HWYATTN_F16    ? "F16"
                                       : d == HWYATTN_BF16 ? "BF16"
                                                           : "I8"),
        s, decodes);
    s.causal = false;
    s.window_left = 0;
    s.window_right = 0;
    add(std::string("NonCausalSinks") + (d == HWYATTN_F16    ? "F16"
                                         : d == HWYATTN_BF16 ? "BF16"
                                                             : "I8"),
        s, {{1, 37}, {4, 70}, {2, 0}, {1, 1100}});
  }
  return c;
}

class KvBf16Test : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(KvBf16Test, MatchesReferenceOnBf16Operands) {
  KvSetup s(GetParam().spec, GetParam().seqs);
  CheckBf16AgainstOracle(s);
}

INSTANTIATE_TEST_SUITE_P(Kv, KvBf16Test, ::testing::ValuesIn(Bf16Cases()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------
// precision = INT8 (integer products on I8, I4 and block-format K).
// ---------------------------------------------------------------------------

// K's scale of channel d of kv head h where K has per-channel (per head, per
// tensor) scales, else 1: the factor the header multiplies the query by
// before quantizing it.
float ChannelScaleOf(const KvSetup& s, int64_t h, int64_t d) {
  if (!IsQuantized(s.spec.dtype) || s.spec.k_scales == Scales::kToken ||
      s.spec.k_scales == Scales::kNone) {
    return 1.0f;
  }
  const int64_t channels = s.spec.k_scales == Scales::kChannel ? s.spec.D : 1;
  const int64_t head = s.spec.k_scales == Scales::kTensor ? 0 : h;
  return s.kscale[static_cast<size_t>(head * channels + (channels == 1 ? 0 : d))];
}

// The query the header's INT8 rule multiplies, written out here on its own:
// each row times K's channel scales, per block of 32 dims d = max|x| / 127,
// q = roundf(x * (1 / d)), then d * q divided by the channel scale again
// (so that the oracle's products with the dequantized cache are the integer
// products). Also each row's blocks' max|x| (for the accuracy bound).
std::vector<float> Int8Queries(const KvSetup& s, std::vector<float>* block_max) {
  const int64_t rows = s.T * s.spec.Hq, D = s.spec.D, blocks = (D + 31) / 32;
  const float* q = reinterpret_cast<const float*>(s.q.data());
  std::vector<float> out(static_cast<size_t>(rows * D));
  block_max->assign(static_cast<size_t>(rows * blocks), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r % s.spec.Hq / (s.spec.Hq / s.spec.Hkv);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t d0 = 32 * b, n = std::min<int64_t>(32, D - d0);
      float x[32], amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        x[i] = q[r * D + d0 + i] * ChannelScaleOf(s, h, d0 + i);
        amax = std::max(amax, std::fabs(x[i]));
      }
      (*block_max)[static_cast<size_t>(r * blocks + b)] = amax;
      const float d = amax / 127.0f;
      const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        const double dq = static_cast<double>(d) * std::round(x[i] * inverse);
        const double scale = ChannelScaleOf(s, h, d0 + i);
        out[static_cast<size_t>(r * D + d0 + i)] =
            scale != 0.0 ? static_cast<float>(dq / scale) : 0.0f;
      }
    }
  }
  return out;
}

// INT8 against the oracle on the rule's query over the cache as stored
// (decode rows run the integer products, prefill rows fp32 on the same
// query: both within fp32 rounding of it); and against the unquantized query,
// lse within the header's bound on each row's scores (a score error e moves
// lse by at most e), and visibly moved (the query was quantized).
void CheckInt8AgainstOracle(KvSetup& s) {
  ASSERT_TRUE(s.spec.int8 && s.spec.q_dtype == HWYATTN_F32);
  ASSERT_EQ(s.Run(), HWYATTN_OK) << hwyattn_last_error();
  const bool integers =
      s.spec.dtype == HWYATTN_I8 || s.spec.dtype == HWYATTN_I4 || BlockBytes(s.spec.dtype) != 0;
  std::vector<float> block_max;
  std::vector<float> rule_q = integers
                                  ? Int8Queries(s, &block_max)
                                  : std::vector<float>(reinterpret_cast<const float*>(s.q.data()),
                                                       reinterpret_cast<const float*>(s.q.data()) +
                                                           s.T * s.spec.Hq * s.spec.D);
  hwyattn_tensor tq = s.tq;
  tq.data = rule_q.data();
  KvRefResult ref, exact;
  std::string error;
  ASSERT_TRUE(ReferenceKvAttention(tq, s.cache, s.batch, &s.opts, &ref, &error)) << error;
  ASSERT_TRUE(ReferenceKvAttention(s.tq, s.cache, s.batch, &s.opts, &exact, &error)) << error;
  const size_t n_out = static_cast<size_t>(s.T * s.spec.Hq * s.spec.Dv);
  EXPECT_LE(RelativeError(s.out, ref.out, n_out), 1e-5) << "out against the rule's query";
  if (!s.spec.lse) return;
  const int64_t D = s.spec.D, blocks = (D + 31) / 32, group = s.spec.Hq / s.spec.Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  double moved = 0.0;
  for (size_t i = 0; i < s.seqs.size(); ++i) {
    for (int64_t t = s.q_start[i]; t < s.q_start[i + 1]; ++t) {
      for (int64_t hq = 0; hq < s.spec.Hq; ++hq) {
        const size_t r = static_cast<size_t>(t * s.spec.Hq + hq);
        if (std::isinf(ref.lse[r])) {
          EXPECT_EQ(static_cast<double>(s.lse[r]), ref.lse[r]) << "lse row " << r;
          continue;
        }
        EXPECT_NEAR(s.lse[r], ref.lse[r], 1e-5 * std::max(1.0, std::fabs(ref.lse[r])))
            << "lse row " << r;
        if (!integers) continue;
        // The bound over every key of the sequence (an upper bound of the
        // visible ones'): scale * sum_b max_b|x| / 254 * sum_i |k_i| / s_i,
        // k the dequantized key, s its channel scale.
        double bound = 0.0;
        for (int64_t j = 0; j < s.seqs[i].kv_len; ++j) {
          const int64_t page =
              s.spec.table ? s.table[i * s.stride + j / s.S] : static_cast<int64_t>(i);
          double e = 0.0;
          for (int64_t b = 0; b < blocks; ++b) {
            double sum = 0.0;
            for (int64_t d = 32 * b; d < std::min(D, 32 * b + 32); ++d) {
              sum += std::fabs(ReadCacheValue(s.cache, false, page, hq / group, j % s.S, d) /
                               ChannelScaleOf(s, hq / group, d));
            }
            e += block_max[r * static_cast<size_t>(blocks) + static_cast<size_t>(b)] / 254.0 * sum;
          }
          bound = std::max(bound, scale * e);
        }
        const double err = std::fabs(s.lse[r] - exact.lse[r]);
        EXPECT_LE(err, bound * 1.001 + 1e-5 * std::max(1.0, std::fabs(exact.lse[r])))
            << "lse row " << r << " against the unquantized query";
        moved = std::max(moved, err);
      }
    }
  }
  if (integers) {
    EXPECT_GT(moved, 1e-6) << "lse does not look quantized";
  }
  std::printf("  int8: out vs the rule's query %.3g; lse vs the unquantized query up to %.3g\n",
              RelativeError(s.out, ref.out, n_out), moved);
}

std::vector<CaseSpec> Int8Cases() {
  std::vector<CaseSpec> c;
  auto add = [&](const std::string& name, KvSpec s, std::vector<Seq> seqs = MixedBatch()) {
    s.int8 = true;
    c.push_back({name, s, std::move(seqs)});
  };
  KvSpec base;
  // I8: head dims of whole blocks (read in place) and not (staged), every
  // scale layout of K.
  for (int64_t D : {16, 64, 40}) {
    for (Scales k : {Scales::kToken, Scales::kChannel, Scales::kHead, Scales::kTensor}) {
      KvSpec s = base;
      s.dtype = HWYATTN_I8;
      s.D = D;
      s.k_scales = k;
      add("I8D" + std::to_string(D) + "K" + ScalesName(k), s);
    }
  }
  {
    KvSpec s = base;
    s.dtype = HWYATTN_I4;
    s.k_scales = Scales::kChannel;  // KIVI's
    add("I4KChannel", s);
    s.k_scales = Scales::kToken;
    s.D = 15;
    s.Dv = 7;
    s.page_size = 17;
    s.nhd = true;
    add("I4OddDimsPage17Nhd", s);
  }
  for (hwyattn_dtype d :
       {HWYATTN_Q8_0, HWYATTN_Q4_0, HWYATTN_Q4_1, HWYATTN_Q5_0, HWYATTN_Q5_1, HWYATTN_IQ4_NL}) {
    KvSpec s = base;
    s.dtype = d;
    s.D = 64;
    s.Dv = 32;
    add(DtypeName(d), s);
  }
  {
    KvSpec s = base;
    s.dtype = HWYATTN_Q8_0;
    s.v_dtype = HWYATTN_Q4_0;
    s.D = s.Dv = 32;
    s.page_size = 17;
    s.nhd = true;
    s.window_left = 9;
    s.softcap = 0.75f;
    s.sinks = true;
    add("Q8_0KQ4_0VModifiersNhd", s);
  }
  {
    // GQA groups of 8 rows (one decode step: the 8-row kernel), of 3 (a
    // group padded to 4), and MQA prefill.
    KvSpec s = base;
    s.dtype = HWYATTN_Q4_1;
    s.D = s.Dv = 64;
    s.Hq = 16;
    s.Hkv = 2;
    add("Q4_1Gqa8", s, {{1, 700}, {1, 33}, {2, 80}});
    s.dtype = HWYATTN_I8;
    s.Hq = 6;
    add("I8Gqa3", s, {{1, 700}, {2, 70}});
    s.dtype = HWYATTN_Q5_0;
    s.Hq = 8;
    s.Hkv = 1;
    add("Q5_0MqaPrefill", s, {{24, 200}, {1, 600}});
  }
  {
    // The head dim in 64-byte steps of two blocks (x86's vpdpbusd kernel):
    // an odd block count (a last half step) at every group size, and
    // longer rows in groups of steps.
    KvSpec s = base;
    s.dtype = HWYATTN_I8;
    s.D = s.Dv = 96;
    s.Hq = s.Hkv = 2;
    add("I8D96Mha", s, {{1, 300}, {3, 40}});
    s.dtype = HWYATTN_Q5_1;
    add("Q5_1D96Mha", s, {{1, 300}, {3, 40}});
    s.dtype = HWYATTN_I8;
    s.D = s.Dv = 160;
    s.Hq = 4;
    add("I8D160Gqa2", s, {{1, 300}, {2, 40}});
    s.dtype = HWYATTN_Q8_0;
    s.D = s.Dv = 256;
    s.Hq = 8;
    add("Q8_0D256Gqa4", s, {{1, 300}, {2, 40}});
    // The formats the integer kernels read in place (Q8_0: two blocks a step,
    // each after its scale; Q4_0: nibbles unpacked in registers): odd block
    // counts in groups of 8 and 1 rows, whole steps in groups of 4.
    for (const auto& [dtype, name] : {std::pair{HWYATTN_Q8_0, "Q8_0"}, {HWYATTN_Q4_0, "Q4_0"}}) {
      s.dtype = dtype;
      const struct {
        int64_t D, Hq;
        const char* shape;
      } shapes[] = {{96, 16, "D96Gqa8"}, {160, 2, "D160Mha"}, {128, 8, "D128Gqa4"}};
      for (const auto& shape : shapes) {
        s.D = s.Dv = shape.D;
        s.Hq = shape.Hq;
        add(std::string(name) + shape.shape, s, {{1, 300}, {3, 40}});
      }
    }
    s.dtype = HWYATTN_Q4_0;
    s.D = s.Dv = 224;
    s.Hq = 16;
    add("Q4_0D224Gqa8", s, {{1, 300}});
  }
  {
    KvSpec s = base;  // a float K: INT8 is F32
    s.dtype = HWYATTN_F16;
    add("F16IsF32", s);
  }
  return c;
}

class KvInt8Test : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(KvInt8Test, MatchesReferenceOnTheRulesQuery) {
  KvSetup s(GetParam().spec, GetParam().seqs);
  CheckInt8AgainstOracle(s);
}

INSTANTIATE_TEST_SUITE_P(Kv, KvInt8Test, ::testing::ValuesIn(Int8Cases()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------
// Batch invariance and determinism.
// ---------------------------------------------------------------------------

// The target sequences: a decode over two 512-key chunks and a prefill chunk.
const Seq kDecodeTarget = {1, 700, -1, 1001};
const Seq kChunkTarget = {40, 300, -1, 1002};

std::vector<Seq> Others(int count, uint32_t seed) {
  std::vector<Seq> o;
  std::mt19937 rng(seed);
  for (int i = 0; i < count; ++i) {
    const int32_t len = 1 + static_cast<int32_t>(rng() % 300);
    const int32_t q_len = rng() % 4 == 0 ? 1 + static_cast<int32_t>(rng() % std::min(len, 20)) : 1;
    o.push_back({q_len, len, -1, 5000 + seed * 100 + static_cast<uint32_t>(i)});
  }
  return o;
}

void CheckInvariance(KvSpec spec) {
  for (const Seq& target : {kDecodeTarget, kChunkTarget}) {
    KvSetup alone(spec, {target});
    ASSERT_EQ(alone.Run(), HWYATTN_OK) << hwyattn_last_error();
    const std::vector<unsigned char> want = alone.RowsOf(0);
    struct Variant {
      const char* name;
      std::vector<Seq> seqs;
      size_t index;
      uint32_t page_seed;
    };
    std::vector<Variant> variants;
    {
      std::vector<Seq> v = {target};
      for (const Seq& o : Others(3, 1)) v.push_back(o);
      variants.push_back({"first", v, 0, 11});
    }
    {
      std::vector<Seq> v = Others(4, 2);
      v.push_back(target);
      variants.push_back({"last", v, 4, 12});
    }
    {
      std::vector<Seq> v = Others(31, 3);
      v.insert(v.begin() + 17, target);
      variants.push_back({"among31", v, 17, 13});
    }
    for (Variant& var : variants) {
      KvSpec s = spec;
      s.page_seed = var.page_seed;
      s.spare_pages = 9;
      KvSetup batch(s, var.seqs);
      ASSERT_EQ(batch.Run(), HWYATTN_OK) << hwyattn_last_error();
      EXPECT_TRUE(batch.RowsOf(var.index) == want)
          << var.name << ": q_len " << target.q_len << " differs from the sequence alone";
    }
    // Thread counts, and the same batch again (determinism).
    const int saved = hwyattn_get_num_threads();
    for (int threads : {1, 2, 3}) {
      ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
      KvSpec s = spec;
      s.page_seed = 99;
      std::vector<Seq> v = Others(5, 4);
      v.insert(v.begin() + 2, target);
      KvSetup batch(s, v);
      ASSERT_EQ(batch.Run(), HWYATTN_OK) << hwyattn_last_error();
      EXPECT_TRUE(batch.RowsOf(2) == want) << threads << " threads";
    }
    hwyattn_set_num_threads(saved);
  }
}

TEST(KvInvariance, F32) { CheckInvariance(KvSpec{}); }

TEST(KvInvariance, BF16Modifiers) {
  KvSpec s;
  s.dtype = HWYATTN_BF16;
  s.window_left = 100;
  s.softcap = 1.5f;
  s.alibi = true;
  s.sinks = true;
  CheckInvariance(s);
}

TEST(KvInvariance, Bf16ProductsF16Page33) {
  KvSpec s;
  s.bf16 = true;
  s.dtype = HWYATTN_F16;
  s.page_size = 33;
  s.D = 80;
  s.Dv = 80;
  s.softcap = 1.5f;
  s.sinks = true;
  CheckInvariance(s);
}

TEST(KvInvariance, Bf16ProductsBF16Gqa8) {
  KvSpec s;
  s.bf16 = true;
  s.dtype = HWYATTN_BF16;
  s.Hq = 8;
  s.Hkv = 1;
  s.D = 128;
  s.Dv = 128;
  s.window_left = 100;
  s.alibi = true;
  CheckInvariance(s);
}

TEST(KvInvariance, Bf16ProductsI8Page17) {
  KvSpec s;
  s.bf16 = true;
  s.dtype = HWYATTN_I8;
  s.page_size = 17;
  CheckInvariance(s);
}

TEST(KvInvariance, Int8ProductsQ4_0Page17) {
  KvSpec s;
  s.dtype = HWYATTN_Q4_0;
  s.D = s.Dv = 32;
  s.page_size = 17;
  s.int8 = true;
  CheckInvariance(s);
}

// The header's rule for a query block holding a NaN or an infinity: d =
// NaN, so the row's scores and output are NaN, as under fp32 products
// (where NaN * k and inf * 0 or inf - inf make them NaN too); the other
// rows are untouched. A decode step (the integer kernels) and a prefill.
TEST(KvInt8, NonFiniteQueryBlocksAsF32) {
  for (const float bad : {kNaN, std::numeric_limits<float>::infinity()}) {
    KvSpec spec;
    spec.dtype = HWYATTN_I8;
    spec.D = spec.Dv = 64;
    KvSetup f32(spec, {{1, 300}, {3, 40}});
    spec.int8 = true;
    KvSetup int8(spec, {{1, 300}, {3, 40}});
    // Token 0 (the decode), head 1, dim 40 (the second block); token 2
    // (a prefill row), head 3, dim 3.
    for (KvSetup* s : {&f32, &int8}) {
      float* q = reinterpret_cast<float*>(s->q.data());
      q[(0 * spec.Hq + 1) * spec.D + 40] = bad;
      q[(2 * spec.Hq + 3) * spec.D + 3] = bad;
      ASSERT_EQ(s->Run(), HWYATTN_OK) << hwyattn_last_error();
    }
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t h = 0; h < spec.Hq; ++h) {
        const size_t at = static_cast<size_t>((t * spec.Hq + h) * spec.Dv);
        const bool poisoned = (t == 0 && h == 1) || (t == 2 && h == 3);
        EXPECT_EQ(std::isnan(f32.out[at]), poisoned) << "F32 token " << t << " head " << h;
        for (int64_t d = 0; d < spec.Dv; ++d) {
          EXPECT_EQ(std::isnan(int8.out[at + static_cast<size_t>(d)]), poisoned)
              << "INT8 token " << t << " head " << h << " dim " << d << " (" << bad << ")";
        }
      }
    }
  }
}

TEST(KvInvariance, I8PerTokenPage17) {
  KvSpec s;
  s.dtype = HWYATTN_I8;
  s.page_size = 17;
  CheckInvariance(s);
}

// With positions as hwyattn_sdpa's bottom-right causal, a sequence's rows
// are hwyattn_sdpa's bits on its own keys (the header promises it).
TEST(KvInvariance, SameBitsAsSdpaOnTheSequence) {
  for (const Seq& target : {kDecodeTarget, kChunkTarget}) {
    KvSpec spec;
    KvSetup kv(spec, {{1, 50}, target});
    ASSERT_EQ(kv.Run(), HWYATTN_OK) << hwyattn_last_error();
    const int64_t len = target.kv_len, Hkv = spec.Hkv, D = spec.D;
    std::vector<float> k(static_cast<size_t>(Hkv * len * D)), v(k.size());
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t h = 0; h < Hkv; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          const size_t raw = static_cast<size_t>((t * Hkv + h) * D + d);
          k[static_cast<size_t>((h * len + t) * D + d)] = kv.keys[1][raw];
          v[static_cast<size_t>((h * len + t) * D + d)] = kv.values[1][raw];
        }
      }
    }
    hwyattn_tensor tq = kv.tq, tk, tv, to;
    // q [T, Hq, D] rows of sequence 1 as [1, Hq, q_len, D].
    tq.rank = 4;
    tq.data = reinterpret_cast<float*>(kv.q.data()) + kv.q_start[1] * spec.Hq * D;
    const int64_t qshape[4] = {1, spec.Hq, target.q_len, D};
    const int64_t qstride[4] = {0, D, spec.Hq * D, 1};
    std::copy(qshape, qshape + 4, tq.shape);
    std::copy(qstride, qstride + 4, tq.stride);
    const int64_t kshape[4] = {1, Hkv, len, D};
    ASSERT_EQ(hwyattn_tensor_contiguous(&tk, k.data(), HWYATTN_F32, 4, kshape), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&tv, v.data(), HWYATTN_F32, 4, kshape), HWYATTN_OK);
    std::vector<float> o(static_cast<size_t>(spec.Hq * target.q_len * D));
    const int64_t oshape[4] = {1, spec.Hq, target.q_len, D};
    ASSERT_EQ(hwyattn_tensor_contiguous(&to, o.data(), HWYATTN_F32, 4, oshape), HWYATTN_OK);
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
    ASSERT_EQ(hwyattn_sdpa(&tq, &tk, &tv, &to, &opts), HWYATTN_OK) << hwyattn_last_error();
    for (int64_t i = 0; i < target.q_len; ++i) {
      for (int64_t h = 0; h < spec.Hq; ++h) {
        EXPECT_EQ(0,
                  std::memcmp(&kv.out[static_cast<size_t>(((kv.q_start[1] + i) * spec.Hq + h) * D)],
                              &o[static_cast<size_t>((h * target.q_len + i) * D)], D * 4))
            << "row " << i << " head " << h;
      }
    }
  }
}

// Every one of the 256 codes of each fp8 format, read by the decode kernel
// as K and as V (the vector widening of every target), against the format's
// definition (Fp8ToDouble): 256 one-token sequences, sequence s's key
// holding code s in its first element (zeros elsewhere) and its value every
// code, element d code d; the query picks the first element (scale 1), so
// lse = the key's code exactly up to the log2 round trip, and the output row
// (p = 1) is the 256 values exactly. A NaN key code makes its row NaN;
// E5M2's infinite key codes are left out (inf - inf in the softmax).
// Also under precision = BF16 (every fp8 number and 1 are bf16 numbers: the
// same exact results; the AVX512_BF16 loops' lookups where the CPU has them).
TEST(KvFp8, EveryCodeAsKeyAndValue) {
  constexpr int kCodes = 256, kDim = 256;
  for (const hwyattn_precision precision : {HWYATTN_PRECISION_F32, HWYATTN_PRECISION_BF16})
    for (const hwyattn_dtype dtype : {HWYATTN_F8E4M3, HWYATTN_F8E5M2}) {
      SCOPED_TRACE(DtypeName(dtype));
      SCOPED_TRACE(precision == HWYATTN_PRECISION_BF16 ? "bf16 products" : "fp32 products");
      std::vector<uint8_t> kpool(kCodes * kDim, 0), vpool(kCodes * kDim);
      for (int s = 0; s < kCodes; ++s) {
        kpool[s * kDim] = static_cast<uint8_t>(s);
        for (int d = 0; d < kDim; ++d) vpool[s * kDim + d] = static_cast<uint8_t>(d);
      }
      const int64_t pool_shape[4] = {kCodes, 1, 1, kDim};
      hwyattn_kv_cache cache;
      hwyattn_kv_cache_init(&cache);
      hwyattn_tensor_contiguous(&cache.k, kpool.data(), dtype, 4, pool_shape);
      hwyattn_tensor_contiguous(&cache.v, vpool.data(), dtype, 4, pool_shape);
      std::vector<int32_t> q_start(kCodes + 1), kv_len(kCodes, 1);
      std::iota(q_start.begin(), q_start.end(), 0);
      hwyattn_kv_batch batch;
      hwyattn_kv_batch_init(&batch);
      batch.num_seqs = kCodes;
      batch.q_start = q_start.data();
      batch.kv_len = kv_len.data();
      std::vector<float> q(kCodes * kDim, 0.0f), out(kCodes * kDim, 0.0f), lse(kCodes, 0.0f);
      for (int s = 0; s < kCodes; ++s) q[s * kDim] = 1.0f;
      const int64_t q_shape[3] = {kCodes, 1, kDim}, lse_shape[2] = {kCodes, 1};
      hwyattn_tensor tq, to, tl;
      hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 3, q_shape);
      hwyattn_tensor_contiguous(&to, out.data(), HWYATTN_F32, 3, q_shape);
      hwyattn_tensor_contiguous(&tl, lse.data(), HWYATTN_F32, 2, lse_shape);
      hwyattn_sdpa_options opts;
      hwyattn_sdpa_options_init(&opts);
      opts.scale = 1.0f;
      opts.lse = &tl;
      opts.precision = precision;
      ASSERT_EQ(hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts), HWYATTN_OK)
          << hwyattn_last_error();
      for (int s = 0; s < kCodes; ++s) {
        const double key = Fp8ToDouble(dtype, static_cast<uint8_t>(s));
        if (std::isinf(key)) continue;
        if (std::isnan(key)) {
          EXPECT_TRUE(std::isnan(lse[s])) << "key code " << s << ": lse " << lse[s];
          for (int d = 0; d < kDim; ++d) {
            ASSERT_TRUE(std::isnan(out[s * kDim + d])) << "key code " << s << ", element " << d;
          }
          continue;
        }
        EXPECT_NEAR(lse[s], key, 1e-6 * std::max(1.0, std::fabs(key))) << "key code " << s;
        for (int d = 0; d < kDim; ++d) {
          const double want = Fp8ToDouble(dtype, static_cast<uint8_t>(d));
          const float got = out[s * kDim + d];
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << "key code " << s << ", value code " << d;
          } else {
            ASSERT_EQ(static_cast<double>(got), want) << "key code " << s << ", value code " << d;
          }
        }
      }
    }
}

// Outputs in F16 and BF16: the bits of the F32 output of the same call
// rounded to nearest even (the test's own rounding), over a mixed batch
// (decodes, chunks, an empty sequence whose rows are zeros) of an fp8 cache
// with every modifier; lse stays F32 and equal.
TEST(KvOutputDtype, F16AndBf16RoundTheF32Result) {
  KvSpec spec;
  spec.dtype = HWYATTN_F8E4M3;
  spec.k_scales = Scales::kTensor;
  spec.v_scales = Scales::kChannel;
  spec.window_left = 9;
  spec.softcap = 0.75f;
  spec.alibi = true;
  spec.sinks = true;
  KvSetup s(spec, MixedBatch());
  ASSERT_EQ(s.Run(), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<float> out32 = s.out, lse32 = s.lse;
  for (hwyattn_dtype dtype : {HWYATTN_F16, HWYATTN_BF16}) {
    std::vector<uint16_t> out(out32.size(), 0xCDCD);
    hwyattn_tensor to = s.tout;
    to.data = out.data();
    to.dtype = dtype;
    std::fill(s.lse.begin(), s.lse.end(), kNaN);
    ASSERT_EQ(hwyattn_kv_attention(&s.tq, &s.cache, &s.batch, &to, &s.opts), HWYATTN_OK)
        << hwyattn_last_error();
    for (size_t e = 0; e < out.size(); ++e) {
      ASSERT_EQ(out[e], dtype == HWYATTN_F16 ? FloatToF16(out32[e]) : FloatToBf16(out32[e]))
          << DtypeName(dtype) << " element " << e << ": F32 out " << out32[e];
    }
    EXPECT_EQ(std::memcmp(s.lse.data(), lse32.data(), lse32.size() * 4), 0);
  }
}

// ---------------------------------------------------------------------------
// hwyattn_kv_cache_write against a scalar reference.
// ---------------------------------------------------------------------------

// The header's I8 rule, plainly: q = round-half-even(x / scale) clamped to
// [-127, 127] (NaN -> 0).
int8_t QuantizeRef(float x, float scale) {
  const float y = x / scale;
  if (std::isnan(y)) return 0;
  const float c = std::min(127.0f, std::max(-127.0f, y));
  return static_cast<int8_t>(std::nearbyint(c));  // default rounding: to nearest even
}

TEST(KvCacheWrite, ConversionsAndSlots) {
  for (hwyattn_dtype dtype : {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16}) {
    for (hwyattn_dtype in_dtype : {HWYATTN_F32, HWYATTN_BF16}) {
      const int64_t P = 5, Hkv = 3, S = 7, D = 19, Dv = 5, T = 11;
      const size_t es = DtypeSize(dtype), is = DtypeSize(in_dtype);
      std::vector<unsigned char> kp(static_cast<size_t>(P * Hkv * S * D) * es, 0xAB);
      std::vector<unsigned char> vp(static_cast<size_t>(P * Hkv * S * Dv) * es, 0xAB);
      const std::vector<unsigned char> k0 = kp, v0 = vp;
      hwyattn_kv_cache c;
      hwyattn_kv_cache_init(&c);
      const int64_t ks[4] = {P, Hkv, S, D}, vs[4] = {P, Hkv, S, Dv};
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.k, kp.data(), dtype, 4, ks), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.v, vp.data(), dtype, 4, vs), HWYATTN_OK);
      // Values over a wide range: F16 overflow and subnormals, ties.
      std::mt19937 rng(3);
      std::vector<unsigned char> kn(static_cast<size_t>(T * Hkv * D) * is);
      std::vector<unsigned char> vn(static_cast<size_t>(T * Hkv * Dv) * is);
      auto fill = [&](std::vector<unsigned char>* b) {
        for (size_t e = 0; e < b->size() / is; ++e) {
          const float mag = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f,
                                       static_cast<int>(rng() % 50) - 30);
          StoreAs(in_dtype, rng() % 2 ? mag : -mag, b->data() + e * is);
        }
      };
      fill(&kn);
      fill(&vn);
      hwyattn_tensor tkn, tvn;
      const int64_t kns[3] = {T, Hkv, D}, vns[3] = {T, Hkv, Dv};
      ASSERT_EQ(hwyattn_tensor_contiguous(&tkn, kn.data(), in_dtype, 3, kns), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&tvn, vn.data(), in_dtype, 3, vns), HWYATTN_OK);
      const std::vector<int64_t> slot = {3, -1, 34, 0, 20, -7, 9, 33, 15, 1, 27};
      ASSERT_EQ(hwyattn_kv_cache_write(&c, &tkn, &tvn, slot.data(), nullptr), HWYATTN_OK)
          << hwyattn_last_error();
      // Expected: the untouched pools with the written rows converted.
      std::vector<unsigned char> kw = k0, vw = v0;
      for (int64_t t = 0; t < T; ++t) {
        if (slot[t] < 0) continue;
        const int64_t page = slot[t] / S, off = slot[t] % S;
        for (int64_t h = 0; h < Hkv; ++h) {
          for (int64_t d = 0; d < D; ++d) {
            const int64_t in[4] = {0, t, h, d};
            const float x = static_cast<float>(ReadElement(tkn, in));
            StoreAs(dtype, x,
                    kw.data() + static_cast<size_t>(((page * Hkv + h) * S + off) * D + d) * es);
          }
          for (int64_t d = 0; d < Dv; ++d) {
            const int64_t in[4] = {0, t, h, d};
            const float x = static_cast<float>(ReadElement(tvn, in));
            StoreAs(dtype, x,
                    vw.data() + static_cast<size_t>(((page * Hkv + h) * S + off) * Dv + d) * es);
          }
        }
      }
      EXPECT_TRUE(kp == kw) << "k, cache dtype " << dtype << ", input " << in_dtype;
      EXPECT_TRUE(vp == vw) << "v, cache dtype " << dtype << ", input " << in_dtype;
    }
  }
}

// FP8 writes against the header's rule computed here: the row's scale
// (per token max |x| / the format's largest, fp32; per tensor given; none:
// 1), x / scale in fp32, then the nearest fp8 number by search over the
// format (NearestFp8, tests/reference.h): ties to even, saturation, NaN,
// infinities, subnormals, -0. K per token or not, V per tensor or not.
TEST(KvCacheWrite, Fp8NearestEvenEveryLayout) {
  const int64_t P = 3, Hkv = 2, S = 8, D = 21, T = 12;
  // Token 0's rows: the edge cases (scale 1 without scale tensors).
  const float specials[] = {kNaN,
                            -kNaN,
                            INFINITY,
                            -INFINITY,
                            1e30f,
                            -500.0f,
                            448.0f,
                            464.0f,  // 448 and the next E4M3 (NaN) tie: saturates
                            57344.0f,
                            61440.0f,  // E5M2's tie above its largest: saturates
                            std::ldexp(1.0f, -10),
                            std::ldexp(3.0f, -10),
                            std::ldexp(1.0f, -17),
                            std::ldexp(3.0f, -17),
                            1.0625f,
                            1.1875f,
                            -0.0f,
                            0.0f,
                            std::ldexp(1.0f, -6) * 0.9999f,
                            240.0f,
                            3.0e-5f};
  static_assert(sizeof(specials) / sizeof(specials[0]) == D, "one row of specials");
  std::mt19937 rng(11);
  std::vector<float> x(static_cast<size_t>(T * Hkv * D));
  for (size_t e = 0; e < x.size(); ++e) {
    const float mag = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f,
                                 static_cast<int>(rng() % 40) - 24);
    x[e] = rng() % 2 ? mag : -mag;
  }
  for (int64_t h = 0; h < Hkv; ++h)
    std::copy(specials, specials + D, x.begin() + static_cast<ptrdiff_t>(h * D));
  for (int64_t d = 0; d < D; ++d) x[static_cast<size_t>((5 * Hkv + 1) * D + d)] = 0.0f;  // zero row
  const int saved = hwyattn_get_num_threads();
  for (hwyattn_dtype dtype : {HWYATTN_F8E4M3, HWYATTN_F8E5M2}) {
    for (int layout = 0; layout < 3; ++layout) {  // none, K per token + V per tensor, ...
      const bool scaled = layout != 0, k_token = layout == 1;
      const float tensor_scale = 0.375f;
      std::vector<uint8_t> kp(static_cast<size_t>(P * Hkv * S * D), 0x5A),
          vp(static_cast<size_t>(P * Hkv * S * D), 0x5A);
      std::vector<float> kst(static_cast<size_t>(P * Hkv * S), -1.0f), vst = {tensor_scale};
      hwyattn_kv_cache c;
      hwyattn_kv_cache_init(&c);
      const int64_t ps[4] = {P, Hkv, S, D}, tok[4] = {P, Hkv, S, 1}, one[1] = {1};
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.k, kp.data(), dtype, 4, ps), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.v, vp.data(), dtype, 4, ps), HWYATTN_OK);
      hwyattn_tensor tks, tvs;
      ASSERT_EQ(hwyattn_tensor_contiguous(&tks, k_token ? kst.data() : vst.data(), HWYATTN_F32,
                                          k_token ? 4 : 1, k_token ? tok : one),
                HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&tvs, vst.data(), HWYATTN_F32, 1, one), HWYATTN_OK);
      if (scaled) {
        c.k_scale = &tks;
        c.v_scale = &tvs;
      }
      std::vector<int64_t> slot(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) slot[t] = (t * 5 + 3) % (P * S);
      // Per-token scales of a row with an infinity are infinite: token 0's
      // specials go to V only (scale 1 or per tensor) then.
      std::vector<float> kx = x;
      if (k_token) std::fill(kx.begin(), kx.begin() + Hkv * D, 1.0f);
      hwyattn_tensor tkn, tvn;
      const int64_t ns[3] = {T, Hkv, D};
      ASSERT_EQ(hwyattn_tensor_contiguous(&tkn, kx.data(), HWYATTN_F32, 3, ns), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&tvn, x.data(), HWYATTN_F32, 3, ns), HWYATTN_OK);
      ASSERT_EQ(hwyattn_set_num_threads(layout + 1), HWYATTN_OK);
      ASSERT_EQ(hwyattn_kv_cache_write(&c, &tkn, &tvn, slot.data(), nullptr), HWYATTN_OK)
          << hwyattn_last_error();
      const float fmax = QuantizedMax(dtype);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < Hkv; ++h) {
          const size_t row = static_cast<size_t>((t * Hkv + h) * D);
          const size_t at = static_cast<size_t>(((slot[t] / S * Hkv + h) * S + slot[t] % S) * D);
          float ks = scaled ? tensor_scale : 1.0f;
          if (k_token) {
            float m = 0.0f;
            for (int64_t d = 0; d < D; ++d) m = std::max(m, std::fabs(kx[row + d]));
            ks = m / fmax;
            ASSERT_EQ(kst[at / D], ks) << "k scale, token " << t;
          }
          const float vs = scaled ? tensor_scale : 1.0f;
          for (int64_t d = 0; d < D; ++d) {
            const float kq = ks == 0.0f ? 0.0f : kx[row + d] / ks;
            ASSERT_EQ(kp[at + d], NearestFp8(dtype, kq))
                << DtypeName(dtype) << " k, layout " << layout << ", token " << t << " d " << d
                << ": x " << kx[row + d];
            ASSERT_EQ(vp[at + d], NearestFp8(dtype, x[row + d] / vs))
                << DtypeName(dtype) << " v, layout " << layout << ", token " << t << " d " << d
                << ": x " << x[row + d];
          }
        }
      }
    }
  }
  hwyattn_set_num_threads(saved);
}

TEST(KvCacheWrite, Int8BothLayoutsAnyThreads) {
  const int64_t P = 4, Hkv = 2, S = 16, D = 37, Dv = 8, T = 40;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> kn(static_cast<size_t>(T * Hkv * D)), vn(static_cast<size_t>(T * Hkv * Dv));
  for (float& x : kn) x = dist(rng);
  for (float& x : vn) x = dist(rng);
  // A zero row, a row with a NaN, ties at .5 after division.
  for (int64_t d = 0; d < D; ++d) kn[static_cast<size_t>(3 * Hkv * D + d)] = 0.0f;
  kn[static_cast<size_t>(5 * Hkv * D + 2)] = kNaN;
  for (int64_t d = 0; d < D; ++d)
    kn[static_cast<size_t>(7 * Hkv * D + d)] = 0.5f * static_cast<float>(d % 5);
  kn[static_cast<size_t>(7 * Hkv * D)] = 127.0f;  // scale exactly 1: x.5 ties
  for (int k_token = 0; k_token < 2; ++k_token) {
    std::vector<float> vch(static_cast<size_t>(Hkv * Dv));
    for (size_t i = 0; i < vch.size(); ++i) vch[i] = 0.01f + 0.003f * static_cast<float>(i);
    std::vector<float> kch(static_cast<size_t>(Hkv * D));
    for (size_t i = 0; i < kch.size(); ++i) kch[i] = 0.02f * static_cast<float>(1 + i % 7);
    std::vector<std::vector<unsigned char>> results;
    for (int threads : {1, 2, 3}) {
      ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
      std::vector<int8_t> kp(static_cast<size_t>(P * Hkv * S * D), 99),
          vp(static_cast<size_t>(P * Hkv * S * Dv), 99);
      std::vector<float> kst(static_cast<size_t>(P * Hkv * S), -1.0f);
      hwyattn_kv_cache c;
      hwyattn_kv_cache_init(&c);
      const int64_t ks[4] = {P, Hkv, S, D}, vs[4] = {P, Hkv, S, Dv};
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.k, kp.data(), HWYATTN_I8, 4, ks), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&c.v, vp.data(), HWYATTN_I8, 4, vs), HWYATTN_OK);
      hwyattn_tensor tks, tvs;
      const int64_t tok[4] = {P, Hkv, S, 1}, kchs[4] = {1, Hkv, 1, D}, vchs[4] = {1, Hkv, 1, Dv};
      if (k_token) {
        ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kst.data(), HWYATTN_F32, 4, tok), HWYATTN_OK);
      } else {
        ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kch.data(), HWYATTN_F32, 4, kchs), HWYATTN_OK);
      }
      ASSERT_EQ(hwyattn_tensor_contiguous(&tvs, vch.data(), HWYATTN_F32, 4, vchs), HWYATTN_OK);
      c.k_scale = &tks;
      c.v_scale = &tvs;
      std::vector<int64_t> slot(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) slot[t] = (t * 37 + 5) % (P * S);
      hwyattn_tensor tkn, tvn;
      const int64_t kns[3] = {T, Hkv, D}, vns[3] = {T, Hkv, Dv};
      ASSERT_EQ(hwyattn_tensor_contiguous(&tkn, kn.data(), HWYATTN_F32, 3, kns), HWYATTN_OK);
      ASSERT_EQ(hwyattn_tensor_contiguous(&tvn, vn.data(), HWYATTN_F32, 3, vns), HWYATTN_OK);
      ASSERT_EQ(hwyattn_kv_cache_write(&c, &tkn, &tvn, slot.data(), nullptr), HWYATTN_OK)
          << hwyattn_last_error();
      for (int64_t t = 0; t < T; ++t) {
        const int64_t page = slot[t] / S, off = slot[t] % S;
        for (int64_t h = 0; h < Hkv; ++h) {
          const float* x = &kn[static_cast<size_t>((t * Hkv + h) * D)];
          float scale = 0.0f;
          if (k_token) {
            float m = 0.0f;
            for (int64_t d = 0; d < D; ++d)
              if (!std::isnan(x[d])) m = std::max(m, std::fabs(x[d]));
            scale = m / 127.0f;
            ASSERT_EQ(kst[static_cast<size_t>((page * Hkv + h) * S + off)], scale) << "token " << t;
          }
          for (int64_t d = 0; d < D; ++d) {
            const float sc = k_token ? scale : kch[static_cast<size_t>(h * D + d)];
            const int8_t want = sc == 0.0f ? 0 : QuantizeRef(x[d], sc);
            ASSERT_EQ(kp[static_cast<size_t>(((page * Hkv + h) * S + off) * D + d)], want)
                << "k token " << t << " head " << h << " d " << d << " x " << x[d];
          }
          const float* y = &vn[static_cast<size_t>((t * Hkv + h) * Dv)];
          for (int64_t d = 0; d < Dv; ++d) {
            ASSERT_EQ(vp[static_cast<size_t>(((page * Hkv + h) * S + off) * Dv + d)],
                      QuantizeRef(y[d], vch[static_cast<size_t>(h * Dv + d)]));
          }
        }
      }
      std::vector<unsigned char> all(reinterpret_cast<unsigned char*>(kp.data()),
                                     reinterpret_cast<unsigned char*>(kp.data()) + kp.size());
      results.push_back(all);
    }
    hwyattn_set_num_threads(0);
    EXPECT_TRUE(results[0] == results[1] && results[0] == results[2]);
  }
}

// I4 writes against the header's rule computed here: I8's with 7 for 127
// (per token scale = max |x| / 7; x / scale to nearest even, saturated to
// [-8, 7], NaN -> 0), two's complement nibbles, element 2i low; odd head dims
// (rows padded to a byte: the pad nibble is the row's own), K per token or
// per channel (with values past -8 and 7 scales), V per channel, NHD pages.
TEST(KvCacheWrite, Int4NibblesBothLayouts) {
  const int64_t P = 3, Hkv = 2, S = 8, D = 37, Dv = 6, T = 20, ldk = D + 1;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> kn(static_cast<size_t>(T * Hkv * D)), vn(static_cast<size_t>(T * Hkv * Dv));
  for (float& x : kn) x = dist(rng);
  for (float& x : vn) x = dist(rng);
  for (int64_t d = 0; d < D; ++d) kn[static_cast<size_t>(3 * Hkv * D + d)] = 0.0f;  // scale 0
  kn[static_cast<size_t>(5 * Hkv * D + 2)] = kNaN;
  for (int64_t d = 0; d < D; ++d)  // scale exactly 1 (max 7): ties at .5
    kn[static_cast<size_t>(7 * Hkv * D + d)] = 0.5f * static_cast<float>(d % 15) - 3.5f;
  kn[static_cast<size_t>(7 * Hkv * D)] = 7.0f;
  auto nibble = [](const std::vector<unsigned char>& bytes, int64_t e) {
    const int n = e % 2 == 0 ? bytes[static_cast<size_t>(e / 2)] & 0xF
                             : bytes[static_cast<size_t>(e / 2)] >> 4;
    return n >= 8 ? n - 16 : n;
  };
  auto want = [](float x, float scale) {
    if (scale == 0.0f) return 0;
    const float y = x / scale;
    if (std::isnan(y)) return 0;
    return static_cast<int>(std::nearbyint(std::min(7.0f, std::max(-8.0f, y))));
  };
  for (int k_token = 0; k_token < 2; ++k_token) {
    std::vector<float> vch(static_cast<size_t>(Hkv * Dv)), kch(static_cast<size_t>(Hkv * D));
    for (size_t i = 0; i < vch.size(); ++i) vch[i] = 0.2f + 0.05f * static_cast<float>(i);
    for (size_t i = 0; i < kch.size(); ++i) kch[i] = 0.1f * static_cast<float>(1 + i % 7);
    // NHD pages [P, S, Hkv, ld]: K rows padded to 38 elements, V's 6.
    std::vector<unsigned char> kp(static_cast<size_t>(P * S * Hkv * ldk / 2), 0x99),
        vp(static_cast<size_t>(P * S * Hkv * Dv / 2), 0x99);
    std::vector<float> kst(static_cast<size_t>(P * S * Hkv), -1.0f);
    hwyattn_kv_cache c;
    hwyattn_kv_cache_init(&c);
    const int64_t ks[4] = {P, Hkv, S, D}, vs[4] = {P, Hkv, S, Dv};
    ASSERT_EQ(hwyattn_tensor_contiguous(&c.k, kp.data(), HWYATTN_I4, 4, ks), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&c.v, vp.data(), HWYATTN_I4, 4, vs), HWYATTN_OK);
    const int64_t kst4[4] = {S * Hkv * ldk, ldk, Hkv * ldk, 1},
                  vst4[4] = {S * Hkv * Dv, Dv, Hkv * Dv, 1};
    std::copy(kst4, kst4 + 4, c.k.stride);
    std::copy(vst4, vst4 + 4, c.v.stride);
    hwyattn_tensor tks, tvs;
    const int64_t tok[4] = {P, Hkv, S, 1}, kchs[4] = {1, Hkv, 1, D}, vchs[4] = {1, Hkv, 1, Dv};
    if (k_token) {
      ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kst.data(), HWYATTN_F32, 4, tok), HWYATTN_OK);
      const int64_t st[4] = {S * Hkv, 1, Hkv, 1};
      std::copy(st, st + 4, tks.stride);
    } else {
      ASSERT_EQ(hwyattn_tensor_contiguous(&tks, kch.data(), HWYATTN_F32, 4, kchs), HWYATTN_OK);
    }
    ASSERT_EQ(hwyattn_tensor_contiguous(&tvs, vch.data(), HWYATTN_F32, 4, vchs), HWYATTN_OK);
    c.k_scale = &tks;
    c.v_scale = &tvs;
    std::vector<int64_t> slot(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) slot[t] = (t * 7 + 3) % (P * S);
    hwyattn_tensor tkn, tvn;
    const int64_t kns[3] = {T, Hkv, D}, vns[3] = {T, Hkv, Dv};
    ASSERT_EQ(hwyattn_tensor_contiguous(&tkn, kn.data(), HWYATTN_F32, 3, kns), HWYATTN_OK);
    ASSERT_EQ(hwyattn_tensor_contiguous(&tvn, vn.data(), HWYATTN_F32, 3, vns), HWYATTN_OK);
    ASSERT_EQ(hwyattn_kv_cache_write(&c, &tkn, &tvn, slot.data(), nullptr), HWYATTN_OK)
        << hwyattn_last_error();
    std::vector<bool> written(static_cast<size_t>(P * S), false);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t page = slot[t] / S, off = slot[t] % S;
      written[static_cast<size_t>(slot[t])] = true;
      for (int64_t h = 0; h < Hkv; ++h) {
        const float* x = &kn[static_cast<size_t>((t * Hkv + h) * D)];
        float scale = 0.0f;
        if (k_token) {
          float m = 0.0f;
          for (int64_t d = 0; d < D; ++d)
            if (!std::isnan(x[d])) m = std::max(m, std::fabs(x[d]));
          scale = m / 7.0f;
          ASSERT_EQ(kst[static_cast<size_t>((page * S + off) * Hkv + h)], scale) << "token " << t;
        }
        const int64_t krow = page * kst4[0] + off * kst4[2] + h * kst4[1];
        for (int64_t d = 0; d < D; ++d) {
          const float sc = k_token ? scale : kch[static_cast<size_t>(h * D + d)];
          ASSERT_EQ(nibble(kp, krow + d), want(x[d], sc))
              << "k token " << t << " head " << h << " d " << d << " x " << x[d];
        }
        const float* y = &vn[static_cast<size_t>((t * Hkv + h) * Dv)];
        const int64_t vrow = page * vst4[0] + off * vst4[2] + h * vst4[1];
        for (int64_t d = 0; d < Dv; ++d) {
          ASSERT_EQ(nibble(vp, vrow + d), want(y[d], vch[static_cast<size_t>(h * Dv + d)]))
              << "v token " << t << " head " << h << " d " << d;
        }
      }
    }
    // Slots never written keep their bytes.
    for (int64_t slot_i = 0; slot_i < P * S; ++slot_i) {
      if (written[static_cast<size_t>(slot_i)]) continue;
      const int64_t page = slot_i / S, off = slot_i % S;
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t krow = page * kst4[0] + off * kst4[2] + h * kst4[1];
        for (int64_t e = 0; e < ldk / 2; ++e)
          ASSERT_EQ(kp[static_cast<size_t>(krow / 2 + e)], 0x99);
      }
    }
  }
}

}  // namespace
}  // namespace hwyattn_test
